// A struct missing `#[repr(C)]`, used as a kernel parameter: the one error at the struct,
// no trait errors at the uses.
use atomr_accel_cuda::prelude::*;

#[derive(Clone, Copy, KernelArg)]
pub struct Affine {
    pub scale: f32,
    pub shift: f32,
}

#[kernel]
pub fn affine(p: Affine, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] = p.scale * x[i] + p.shift;
    }
}

fn main() {}
