use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

const N: usize = 4;

#[kernel]
fn expressions<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let f = |v: f32| v * 2.0;
    let r = &x[0];
    let t: (f32, f32) = (1.0, 2.0);
    let m: i32 = match 1 { _ => 0 };
    let s = "text";
    let n = N;
    let p: f32 = core::f32::consts::NOT_A_CONST;
    let w = a as T;
    let q: f32 = if true { 1.0 };
    let sl = x[0..2];
    y[0] = x[0] + x[1][0];
}

fn main() {}
