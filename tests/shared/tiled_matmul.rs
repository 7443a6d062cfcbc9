//! A tiled `C = A·B` kernel over 2-D views, shared by `tests/kernels.rs` (checked against
//! a float64 reference on the CPU device and the GPU) and `benches/kernels.rs` (timed
//! against the same algorithm hand-written in CUDA C), so the bench measures the kernel
//! the tests check.

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

/// 2-D views: `C = A·B` with row strides (each matrix a panel of a wider buffer), 16×16
/// shared-memory tiles, CUDA's u32 indexing throughout.
#[kernel]
pub fn tiled_matmul<T: Float>(a: &[T], b: &[T], c: &mut [T], m: u32, n: u32, k: u32, lda: u32, ldb: u32, ldc: u32) {
    const TILE: u32 = 16;
    let mut ta = shared_array::<T, 256>();
    let mut tb = shared_array::<T, 256>();
    let a = a.rows(lda);
    let b = b.rows(ldb);
    let mut c = c.rows(ldc);
    let tx = thread_idx_x();
    let ty = thread_idx_y();
    let row = block_idx_y() * TILE + ty;
    let col = block_idx_x() * TILE + tx;
    let mut acc = T::zero();
    let mut t0: u32 = 0;
    while t0 < k {
        ta[ty * TILE + tx] = if row < m && t0 + tx < k {
            a[(row, t0 + tx)]
        } else {
            T::zero()
        };
        tb[ty * TILE + tx] = if t0 + ty < k && col < n {
            b[(t0 + ty, col)]
        } else {
            T::zero()
        };
        sync_threads();
        for q in 0..TILE {
            acc += ta[ty * TILE + q] * tb[q * TILE + tx];
        }
        sync_threads();
        t0 += TILE;
    }
    if row < m && col < n {
        c[(row, col)] = acc;
    }
}
