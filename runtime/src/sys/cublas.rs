//! cuBLAS calls cudarc's safe layer lacks (level-1 BLAS in device pointer mode, GEMV) and
//! the GEMM calls of each dtype, as safe functions over checked slices.

use cudarc::cublas::result::CublasError;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use half::{bf16, f16};

use crate::error::GpuError;

/// cuBLAS GEMM of one dtype (cudarc's `Gemm` impl for it), implemented for f16, bf16,
/// f32 and f64: the `unsafe` calls the `BlasActor` and a graph's capture make.
#[doc(hidden)]
pub trait CublasGemm: cudarc::driver::DeviceRepr + Sized {
    /// One GEMM; the caller validated shapes, leading dimensions and lengths against `cfg`.
    fn gemm<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        blas: &CudaBlas,
        cfg: GemmConfig<Self>,
        a: &A,
        b: &B,
        c: &mut C,
    ) -> Result<(), CublasError>;

    /// One strided-batched GEMM; the caller validated every matrix of the batch.
    fn gemm_batched<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        blas: &CudaBlas,
        cfg: StridedBatchedConfig<Self>,
        a: &A,
        b: &B,
        c: &mut C,
    ) -> Result<(), CublasError>;
}

macro_rules! cublas_gemm {
    ($($t:ty),*) => {$(
        impl CublasGemm for $t {
            fn gemm<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(blas: &CudaBlas, cfg: GemmConfig<Self>, a: &A, b: &B, c: &mut C) -> Result<(), CublasError> {
                // SAFETY: callers (`BlasCore::gemm`, a graph's capture) validated shapes,
                // leading dimensions and buffer lengths against `cfg`, so cuBLAS reads and
                // writes only inside the three slices.
                unsafe { Gemm::gemm(blas, cfg, a, b, c) }
            }
            fn gemm_batched<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(blas: &CudaBlas, cfg: StridedBatchedConfig<Self>, a: &A, b: &B, c: &mut C) -> Result<(), CublasError> {
                // SAFETY: as above, including every matrix of the batch.
                unsafe { Gemm::gemm_strided_batched(blas, cfg, a, b, c) }
            }
        }
    )*};
}

cublas_gemm!(f16, bf16, f32, f64);

/// cuBLAS level-1 entry points (64-bit sizes, unit strides) of one dtype, as safe calls on
/// whole slices. Implemented for f32 and f64 by [`cublas_level1!`]; the lengths are
/// checked by the caller (`BlasCore`) and again here.
#[doc(hidden)]
pub trait CublasLevel1: cudarc::driver::DeviceRepr + Sized {
    /// `y += alpha · x` over `x.len()` elements.
    fn axpy(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        alpha: Self,
        x: &impl cudarc::driver::DevicePtr<Self>,
        y: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `x *= alpha`.
    fn scal(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        alpha: Self,
        x: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0] = x · y`, written on the device (device pointer mode).
    fn dot(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        x: &impl cudarc::driver::DevicePtr<Self>,
        y: &impl cudarc::driver::DevicePtr<Self>,
        out: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0] = ‖x‖₂`, written on the device (device pointer mode).
    fn nrm2(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        x: &impl cudarc::driver::DevicePtr<Self>,
        out: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0]` = the 1-based index of the first element of largest `|x|`, written on
    /// the device (device pointer mode).
    fn iamax(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        x: &impl cudarc::driver::DevicePtr<Self>,
        out: &mut impl cudarc::driver::DevicePtrMut<i64>,
    ) -> Result<(), GpuError>;
    /// `y = alpha·op(A)·x + beta·y` (cudarc's `Gemv`); shapes checked by the caller.
    fn gemv(
        blas: &cudarc::cublas::CudaBlas,
        cfg: cudarc::cublas::GemvConfig<Self>,
        a: &impl cudarc::driver::DevicePtr<Self>,
        x: &impl cudarc::driver::DevicePtr<Self>,
        y: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
}

/// Runs `f` with the handle in device pointer mode (scalar results stay on the GPU, so
/// the call does not block the host), restoring host mode afterwards.
fn with_device_pointers(
    blas: &cudarc::cublas::CudaBlas,
    f: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    use cudarc::cublas::sys::cublasPointerMode_t as Mode;
    blas.set_pointer_mode(Mode::CUBLAS_POINTER_MODE_DEVICE)?;
    let r = f();
    blas.set_pointer_mode(Mode::CUBLAS_POINTER_MODE_HOST)?;
    r
}

macro_rules! cublas_level1 {
    ($t:ty, $axpy:ident, $scal:ident, $dot:ident, $nrm2:ident, $iamax:ident) => {
        impl CublasLevel1 for $t {
            fn axpy(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                alpha: $t,
                x: &impl cudarc::driver::DevicePtr<$t>,
                y: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert_eq!(x.len(), y.len(), "axpy lengths are checked by the caller");
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (yp, _ry) = y.device_ptr_mut(stream);
                // SAFETY: `blas` enqueues on `stream`, for which both pointers were
                // obtained (and their events recorded by the guards); both slices hold
                // `n` elements; alpha is a host scalar in the handle's host pointer mode.
                unsafe { cudarc::cublas::sys::$axpy(*blas.handle(), n, &alpha, xp as *const $t, 1, yp as *mut $t, 1) }
                    .result()?;
                Ok(())
            }

            fn scal(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                alpha: $t,
                x: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr_mut(stream);
                // SAFETY: as for axpy: a valid `n`-element slice on the handle's stream.
                unsafe { cudarc::cublas::sys::$scal(*blas.handle(), n, &alpha, xp as *mut $t, 1) }.result()?;
                Ok(())
            }

            fn dot(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                x: &impl cudarc::driver::DevicePtr<$t>,
                y: &impl cudarc::driver::DevicePtr<$t>,
                out: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert_eq!(x.len(), y.len(), "dot lengths are checked by the caller");
                assert!(!out.is_empty());
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (yp, _ry) = y.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: `n`-element inputs and a 1-element device result on the
                    // handle's stream, in device pointer mode.
                    unsafe {
                        cudarc::cublas::sys::$dot(
                            *blas.handle(),
                            n,
                            xp as *const $t,
                            1,
                            yp as *const $t,
                            1,
                            op as *mut $t,
                        )
                    }
                    .result()?;
                    Ok(())
                })
            }

            fn nrm2(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                x: &impl cudarc::driver::DevicePtr<$t>,
                out: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert!(!out.is_empty());
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: an `n`-element input and a 1-element device result on the
                    // handle's stream, in device pointer mode.
                    unsafe { cudarc::cublas::sys::$nrm2(*blas.handle(), n, xp as *const $t, 1, op as *mut $t) }
                        .result()?;
                    Ok(())
                })
            }

            fn iamax(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                x: &impl cudarc::driver::DevicePtr<$t>,
                out: &mut impl cudarc::driver::DevicePtrMut<i64>,
            ) -> Result<(), GpuError> {
                assert!(!out.is_empty());
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: an `n`-element input and a 1-element 64-bit device result on
                    // the handle's stream, in device pointer mode.
                    unsafe { cudarc::cublas::sys::$iamax(*blas.handle(), n, xp as *const $t, 1, op as *mut i64) }
                        .result()?;
                    Ok(())
                })
            }

            fn gemv(
                blas: &cudarc::cublas::CudaBlas,
                cfg: cudarc::cublas::GemvConfig<$t>,
                a: &impl cudarc::driver::DevicePtr<$t>,
                x: &impl cudarc::driver::DevicePtr<$t>,
                y: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                // SAFETY: `BlasCore::gemv` checked m, n, lda, the strides (≥ 1) and the
                // lengths of A, x and y against `cfg`, so cuBLAS stays inside the three
                // slices.
                unsafe { cudarc::cublas::Gemv::gemv(blas, cfg, a, x, y) }?;
                Ok(())
            }
        }
    };
}

cublas_level1!(
    f32,
    cublasSaxpy_v2_64,
    cublasSscal_v2_64,
    cublasSdot_v2_64,
    cublasSnrm2_v2_64,
    cublasIsamax_v2_64
);
cublas_level1!(
    f64,
    cublasDaxpy_v2_64,
    cublasDscal_v2_64,
    cublasDdot_v2_64,
    cublasDnrm2_v2_64,
    cublasIdamax_v2_64
);
