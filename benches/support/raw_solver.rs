//! The raw cuSOLVER baseline of the solver benches: Cholesky (potrf) and LU (getrf) of one
//! dtype on a prepared handle, through cudarc's sys layer, and the SPD matrix they factor.
#![allow(dead_code)]

use std::ffi::c_int;

use atomr_accel_cuda::device::SolverScalar;
use cudarc::cusolver::{sys, DnHandle};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};

/// A random SPD matrix, column-major: symmetric, uniform in [-1, 1) off the diagonal and
/// n on it (strictly diagonally dominant, hence positive definite).
pub fn spd(n: usize) -> Vec<f64> {
    let mut s = 0x2545_F491_4F6C_DD1Du64 ^ n as u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut a = vec![0.0; n * n];
    for j in 0..n {
        a[j + j * n] = n as f64;
        for i in j + 1..n {
            let v = next();
            a[i + j * n] = v;
            a[j + i * n] = v;
        }
    }
    a
}

/// The raw baseline: one cuSOLVER routine of one dtype on a prepared handle.
pub trait Raw: SolverScalar + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {
    fn potrf(
        h: &DnHandle,
        s: &CudaStream,
        n: usize,
        a: &mut CudaSlice<Self>,
        w: &mut CudaSlice<Self>,
        info: &mut CudaSlice<i32>,
    );
    fn potrf_lwork(h: &DnHandle, s: &CudaStream, n: usize, a: &mut CudaSlice<Self>) -> usize;
    fn getrf(
        h: &DnHandle,
        s: &CudaStream,
        n: usize,
        a: &mut CudaSlice<Self>,
        w: &mut CudaSlice<Self>,
        p: &mut CudaSlice<i32>,
        info: &mut CudaSlice<i32>,
    );
    fn getrf_lwork(h: &DnHandle, s: &CudaStream, n: usize, a: &mut CudaSlice<Self>) -> usize;
}

macro_rules! raw {
    ($t:ty, $potrf_bs:ident, $potrf:ident, $getrf_bs:ident, $getrf:ident) => {
        impl Raw for $t {
            fn potrf(
                h: &DnHandle,
                s: &CudaStream,
                n: usize,
                a: &mut CudaSlice<$t>,
                w: &mut CudaSlice<$t>,
                info: &mut CudaSlice<i32>,
            ) {
                let lw = w.len() as c_int;
                let (pa, _ga) = a.device_ptr_mut(s);
                let (pw, _gw) = w.device_ptr_mut(s);
                let (pi, _gi) = info.device_ptr_mut(s);
                // SAFETY: n·n matrix, workspace of the queried size, one info.
                unsafe {
                    sys::$potrf(
                        h.cu(),
                        sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
                        n as c_int,
                        pa as *mut $t,
                        n as c_int,
                        pw as *mut $t,
                        lw,
                        pi as *mut c_int,
                    )
                }
                .result()
                .unwrap();
            }
            fn potrf_lwork(h: &DnHandle, s: &CudaStream, n: usize, a: &mut CudaSlice<$t>) -> usize {
                let (pa, _ga) = a.device_ptr_mut(s);
                let mut lw: c_int = 0;
                // SAFETY: a size query.
                unsafe {
                    sys::$potrf_bs(
                        h.cu(),
                        sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
                        n as c_int,
                        pa as *mut $t,
                        n as c_int,
                        &mut lw,
                    )
                }
                .result()
                .unwrap();
                lw.max(1) as usize
            }
            fn getrf(
                h: &DnHandle,
                s: &CudaStream,
                n: usize,
                a: &mut CudaSlice<$t>,
                w: &mut CudaSlice<$t>,
                p: &mut CudaSlice<i32>,
                info: &mut CudaSlice<i32>,
            ) {
                let (pa, _ga) = a.device_ptr_mut(s);
                let (pw, _gw) = w.device_ptr_mut(s);
                let (pp, _gp) = p.device_ptr_mut(s);
                let (pi, _gi) = info.device_ptr_mut(s);
                // SAFETY: n·n matrix, n pivots, workspace of the queried size, one info.
                unsafe {
                    sys::$getrf(
                        h.cu(),
                        n as c_int,
                        n as c_int,
                        pa as *mut $t,
                        n as c_int,
                        pw as *mut $t,
                        pp as *mut c_int,
                        pi as *mut c_int,
                    )
                }
                .result()
                .unwrap();
            }
            fn getrf_lwork(h: &DnHandle, s: &CudaStream, n: usize, a: &mut CudaSlice<$t>) -> usize {
                let (pa, _ga) = a.device_ptr_mut(s);
                let mut lw: c_int = 0;
                // SAFETY: a size query.
                unsafe { sys::$getrf_bs(h.cu(), n as c_int, n as c_int, pa as *mut $t, n as c_int, &mut lw) }
                    .result()
                    .unwrap();
                lw.max(1) as usize
            }
        }
    };
}
raw!(
    f32,
    cusolverDnSpotrf_bufferSize,
    cusolverDnSpotrf,
    cusolverDnSgetrf_bufferSize,
    cusolverDnSgetrf
);
raw!(
    f64,
    cusolverDnDpotrf_bufferSize,
    cusolverDnDpotrf,
    cusolverDnDgetrf_bufferSize,
    cusolverDnDgetrf
);
