//! Kernels this extension brings, launchable by name from Python (`Device.launch`) like
//! any `#[kernel]` linked into the extension — a program's own extension module adds its
//! kernels the same way, by defining them in its crate.

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::kernel::dsl::prelude::*;

/// `y = a·x + y`.
#[kernel]
pub fn axpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// `y = a·y + b`, in place.
#[kernel]
pub fn scale_shift<T: Float>(a: T, b: T, y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * y[i] + b;
    }
}
