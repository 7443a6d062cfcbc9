//! Batched Cholesky and LU of many small matrices (default 10 000 × 16×16, f32 and f64)
//! through the device (`cholesky_batched`, `lu_factor_batched`) vs raw cudarc calls of
//! the same routines (cuSOLVER `potrfBatched`, cuBLAS `getrfBatched`: pointer array made
//! once, factor + synchronize + read the infos back), calls alternated in both orders of
//! `support/alternate.rs`. Every factorization starts from the same pristine SPD
//! matrices, restored (untimed) before each call. Arguments: `n count` (default 16 10000).

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::prelude::*;
use cudarc::cublas::CudaBlas;
use cudarc::cusolver::DnHandle;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/raw_solver.rs"]
mod raw_solver;

use alternate::{Order, Samples, Side};
use gpu_bench::run_gpu;
use raw_solver::spd;

/// The raw batched entry points of one precision.
trait RawBatched: SolverScalar + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {
    /// `potrfBatched`, lower.
    ///
    /// # Safety
    /// `ptrs` holds `count` device pointers to n×n matrices; `info` holds `count` ints.
    unsafe fn potrf_batched(h: &DnHandle, n: i32, ptrs: u64, info: u64, count: i32);
    /// `getrfBatched`.
    ///
    /// # Safety
    /// As above; `piv` holds count·n ints.
    unsafe fn getrf_batched(b: &CudaBlas, n: i32, ptrs: u64, piv: u64, info: u64, count: i32);
}

macro_rules! raw_batched {
    ($($t:ty: $potrf:ident $getrf:ident),*) => {$(
        impl RawBatched for $t {
            unsafe fn potrf_batched(h: &DnHandle, n: i32, ptrs: u64, info: u64, count: i32) {
                use cudarc::cusolver::sys;
                // SAFETY: per this function's contract.
                unsafe {
                    sys::$potrf(h.cu(), sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER, n, ptrs as *mut *mut $t, n, info as *mut i32, count)
                }
                .result()
                .unwrap();
            }
            unsafe fn getrf_batched(b: &CudaBlas, n: i32, ptrs: u64, piv: u64, info: u64, count: i32) {
                // SAFETY: per this function's contract.
                unsafe { cudarc::cublas::sys::$getrf(*b.handle(), n, ptrs as *const *mut $t, n, piv as *mut i32, info as *mut i32, count) }
                    .result()
                    .unwrap();
            }
        }
    )*};
}

raw_batched!(f32: cusolverDnSpotrfBatched cublasSgetrfBatched, f64: cusolverDnDpotrfBatched cublasDgetrfBatched);

fn address<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _guard) = s.device_ptr(stream);
    p
}

async fn measure<T: RawBatched>(dev: &Device, stream: &Arc<CudaStream>, n: usize, count: usize) {
    let one: Vec<f64> = spd(n);
    let a: Vec<T> = (0..count).flat_map(|_| one.iter().map(|v| T::from_f64(*v))).collect();
    let h = DnHandle::new(stream.clone()).unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let pristine_raw = stream.clone_htod(&a).unwrap();
    let mut ra = stream.clone_htod(&a).unwrap();
    let base = {
        let (p, _g) = ra.device_ptr_mut(stream);
        p
    };
    let ptrs: Vec<u64> = (0..count as u64)
        .map(|i| base + i * (n * n * std::mem::size_of::<T>()) as u64)
        .collect();
    let dptrs = stream.clone_htod(&ptrs).unwrap();
    let info = stream.alloc_zeros::<i32>(count).unwrap();
    let piv = stream.alloc_zeros::<i32>(n * count).unwrap();
    let (pp, pi, pv) = (address(&dptrs, stream), address(&info, stream), address(&piv, stream));
    let pristine = dev.upload(a.clone()).await.unwrap();
    let da = dev.upload(a).await.unwrap();
    let dpiv = dev.alloc::<i32>(n * count).await.unwrap();
    for op in ["cholesky_batched", "lu_factor_batched"] {
        for order in Order::ALL {
            let mut samples = Samples::new(1);
            for side in [Side::Raw, Side::Ours].into_iter().chain(order.schedule(20)) {
                let secs = match side {
                    Side::Raw => {
                        stream.memcpy_dtod(&pristine_raw, &mut ra).unwrap();
                        stream.synchronize().unwrap();
                        let t = Instant::now();
                        // SAFETY: the pointer array names `count` n×n matrices of `ra`;
                        // info and pivots hold count and count·n ints.
                        unsafe {
                            if op == "cholesky_batched" {
                                <T as RawBatched>::potrf_batched(&h, n as i32, pp, pi, count as i32);
                            } else {
                                <T as RawBatched>::getrf_batched(&blas, n as i32, pp, pv, pi, count as i32);
                            }
                        }
                        stream.synchronize().unwrap();
                        let infos = stream.clone_dtoh(&info).unwrap();
                        assert!(infos.iter().all(|&i| i == 0));
                        t.elapsed().as_secs_f64()
                    }
                    Side::Ours => {
                        dev.copy(&pristine, &da).await.unwrap();
                        let t = Instant::now();
                        if op == "cholesky_batched" {
                            dev.cholesky_batched(&da, n, count).await.unwrap();
                        } else {
                            dev.lu_factor_batched(&da, &dpiv, n, count).await.unwrap();
                        }
                        t.elapsed().as_secs_f64()
                    }
                };
                samples.record(side, secs);
            }
            let (raw, ours) = samples.medians();
            println!(
                "RESULT | {op}<{}> {count} × {n}×{n} ({order:?}, median of 20) | ours {:.1} µs, raw {:.1} µs, ratio {:.3}",
                T::NAME,
                ours * 1e6,
                raw * 1e6,
                raw / ours
            );
        }
    }
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (n, count) = (
        args.first().copied().unwrap_or(16),
        args.get(1).copied().unwrap_or(10_000),
    );
    run_gpu(
        "batched_solver",
        DeviceConfig::cuda(0),
        |dev, _ctx, stream| async move {
            measure::<f32>(&dev, &stream, n, count).await;
            measure::<f64>(&dev, &stream, n, count).await;
        },
    );
}
