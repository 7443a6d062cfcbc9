//! Batched Cholesky, LU and singular values of many small matrices (default 10 000 ×
//! 16×16, f32 and f64) through the device (`cholesky_batched`, `lu_factor_batched`,
//! `svd_values_batched`) vs raw cudarc calls of the same routines (cuSOLVER
//! `potrfBatched`, cuBLAS `getrfBatched`, cuSOLVER `gesvdjBatched`: pointer array,
//! parameters and workspace made once, the routine + synchronize + read the infos back), calls alternated in both orders of
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
    /// `gesvdjBatched`'s workspace size, singular values only.
    ///
    /// # Safety
    /// `a` holds count n×n matrices, `s` count·n values; `params` is alive.
    unsafe fn gesvdj_lwork(h: &DnHandle, n: i32, a: u64, s: u64, params: GesvdjParams, count: i32) -> i32;
    /// `gesvdjBatched`, singular values only (A destroyed).
    ///
    /// # Safety
    /// As above; `work` holds `lwork` elements, `info` count ints.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gesvdj_batched(
        h: &DnHandle,
        n: i32,
        a: u64,
        s: u64,
        work: u64,
        lwork: i32,
        info: u64,
        params: GesvdjParams,
        count: i32,
    );
}

type GesvdjParams = cudarc::cusolver::sys::gesvdjInfo_t;

macro_rules! raw_batched {
    ($($t:ty: $potrf:ident $getrf:ident $gesvdj_bs:ident $gesvdj:ident),*) => {$(
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
            unsafe fn gesvdj_lwork(h: &DnHandle, n: i32, a: u64, s: u64, params: GesvdjParams, count: i32) -> i32 {
                use cudarc::cusolver::sys;
                let mut lwork = 0;
                let null = std::ptr::null::<$t>();
                // SAFETY: per this function's contract; U and V untouched (NOVECTOR).
                unsafe {
                    sys::$gesvdj_bs(h.cu(), sys::cusolverEigMode_t::CUSOLVER_EIG_MODE_NOVECTOR, n, n, a as *const $t, n, s as *const $t, null, n, null, n, &mut lwork, params, count)
                }
                .result()
                .unwrap();
                lwork
            }
            unsafe fn gesvdj_batched(h: &DnHandle, n: i32, a: u64, s: u64, work: u64, lwork: i32, info: u64, params: GesvdjParams, count: i32) {
                use cudarc::cusolver::sys;
                let null = std::ptr::null_mut::<$t>();
                // SAFETY: per this function's contract.
                unsafe {
                    sys::$gesvdj(h.cu(), sys::cusolverEigMode_t::CUSOLVER_EIG_MODE_NOVECTOR, n, n, a as *mut $t, n, s as *mut $t, null, n, null, n, work as *mut $t, lwork, info as *mut i32, params, count)
                }
                .result()
                .unwrap();
            }
        }
    )*};
}

raw_batched!(
    f32: cusolverDnSpotrfBatched cublasSgetrfBatched cusolverDnSgesvdjBatched_bufferSize cusolverDnSgesvdjBatched,
    f64: cusolverDnDpotrfBatched cublasDgetrfBatched cusolverDnDgesvdjBatched_bufferSize cusolverDnDgesvdjBatched
);

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
    let ds = dev.alloc::<T>(n * count).await.unwrap();
    let rs = stream.alloc_zeros::<T>(n * count).unwrap();
    let mut params: GesvdjParams = std::ptr::null_mut();
    // SAFETY: writes one handle into `params` (destroyed at the end).
    unsafe { cudarc::cusolver::sys::cusolverDnCreateGesvdjInfo(&mut params) }
        .result()
        .unwrap();
    let ps = address(&rs, stream);
    // SAFETY: A holds count n×n matrices, S count·n values; the parameters are alive.
    let lwork = unsafe { <T as RawBatched>::gesvdj_lwork(&h, n as i32, base, ps, params, count as i32) };
    let work = stream.alloc_zeros::<T>(lwork.max(1) as usize).unwrap();
    let pw = address(&work, stream);
    for op in ["cholesky_batched", "lu_factor_batched", "svd_values_batched"] {
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
                            match op {
                                "cholesky_batched" => {
                                    <T as RawBatched>::potrf_batched(&h, n as i32, pp, pi, count as i32)
                                }
                                "lu_factor_batched" => {
                                    <T as RawBatched>::getrf_batched(&blas, n as i32, pp, pv, pi, count as i32)
                                }
                                _ => <T as RawBatched>::gesvdj_batched(
                                    &h,
                                    n as i32,
                                    base,
                                    ps,
                                    pw,
                                    lwork,
                                    pi,
                                    params,
                                    count as i32,
                                ),
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
                        match op {
                            "cholesky_batched" => dev.cholesky_batched(&da, n, count).await.unwrap(),
                            "lu_factor_batched" => dev.lu_factor_batched(&da, &dpiv, n, count).await.unwrap(),
                            // Ours copies A first (A is left intact); raw destroys it.
                            _ => dev.svd_values_batched(&da, &ds, n, n, count).await.unwrap(),
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
    // SAFETY: made above, destroyed once; no work pending (every call synchronized).
    unsafe { cudarc::cusolver::sys::cusolverDnDestroyGesvdjInfo(params) }
        .result()
        .unwrap();
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
