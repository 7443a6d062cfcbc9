//! A `#[kernel]` of every parameter kind compiles, and its launcher has the expected types.
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::{kernel, KernelArg};

#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
pub struct P {
    pub k: f32,
}

/// Every parameter kind.
#[kernel]
pub fn all_kinds<T: Float>(a: T, n: usize, p: P, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < n && i < y.len() {
        y[i] = a * x[i] + T::from_f64(p.k as f64);
    }
}

async fn _typed(d: &Device, x: &GpuRef<f32>, y: &mut GpuRef<f32>) -> Result<(), GpuError> {
    all_kinds::launch::<f32>(d, LaunchConfig::for_elements(8, 32), 2.0, 8, P { k: 1.0 }, x, y).await
}

fn main() {
    assert!(all_kinds::cuda_source::<f32>().contains("typedef float T;"));
}
