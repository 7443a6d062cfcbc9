//! A kernel that is slow on purpose, for tests of ordering and concurrency between
//! streams (a reader that did not wait for it would see the old output; a launch queued
//! behind it would finish after it).

use atomr_accel_cuda::kernel;

/// y[i] = x[i] scaled `rounds` times by (1 + 1e-7) and back, plus one.
#[kernel]
pub fn slow_copy(rounds: u32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        let mut v = x[i];
        let mut r = 0;
        while r < rounds {
            v = v * 1.0000001;
            v = v / 1.0000001;
            r += 1;
        }
        y[i] = v + 1.0;
    }
}
