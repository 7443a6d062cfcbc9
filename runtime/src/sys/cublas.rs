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

/// cuBLAS's batched LU (`getrfBatched`) of one dtype (f32, f64): the solver's batched
/// factorization of many small matrices. The pointer arrays the routines read come from
/// the solver's [`MatrixPointers`](crate::sys::matrix_pointers::MatrixPointers), kept per
/// batch layout.
#[doc(hidden)]
pub trait CublasBatchedLu: cudarc::driver::DeviceRepr + Sized {
    /// LU with partial pivoting of `count` n×n matrices one after another in `a`, in
    /// place: `pivots` (count·n, 1-based, per matrix) and `info` (mapped, at least count
    /// values: matrix i's at i).
    #[allow(private_interfaces)]
    fn getrf_batched(
        blas: &cudarc::cublas::CudaBlas,
        pointers: &crate::sys::matrix_pointers::MatrixPointers,
        stream: &std::sync::Arc<CudaStream>,
        n_count: (usize, usize),
        a: &mut impl cudarc::driver::DevicePtrMut<Self>,
        pivots: &mut impl cudarc::driver::DevicePtrMut<i32>,
        info: &mut crate::sys::mapped::MappedCell<i32>,
    ) -> Result<(), GpuError>;

    /// Solves `A_i·X_i = B_i` for `count` LU factorizations (n×n, one after another in
    /// `lu`, with `getrf_batched`'s pivots) and right-hand sides (n×nrhs each, one after
    /// another in `b`, replaced by the solutions).
    #[allow(private_interfaces)]
    fn getrs_batched(
        blas: &cudarc::cublas::CudaBlas,
        pointers: &crate::sys::matrix_pointers::MatrixPointers,
        stream: &std::sync::Arc<CudaStream>,
        n_nrhs_count: (usize, usize, usize),
        lu: &impl cudarc::driver::DevicePtr<Self>,
        pivots: &impl cudarc::driver::DevicePtr<i32>,
        b: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
}

macro_rules! cublas_batched_lu {
    ($($t:ty => $f:ident $rs:ident),*) => {$(
        impl CublasBatchedLu for $t {
            #[allow(private_interfaces)]
            fn getrf_batched(
                blas: &cudarc::cublas::CudaBlas,
                pointers: &crate::sys::matrix_pointers::MatrixPointers,
                stream: &std::sync::Arc<CudaStream>,
                (n, count): (usize, usize),
                a: &mut impl cudarc::driver::DevicePtrMut<$t>,
                pivots: &mut impl cudarc::driver::DevicePtrMut<i32>,
                info: &mut crate::sys::mapped::MappedCell<i32>,
            ) -> Result<(), GpuError> {
                assert!(
                    a.len() >= n * n * count && pivots.len() >= n * count && info.len() >= count,
                    "batched LU lengths are checked by the caller"
                );
                let int = |v: usize| i32::try_from(v).map_err(|_| GpuError::invalid(format!("{v} exceeds cuBLAS's 32-bit sizes")));
                let (ni, ci) = (int(n)?, int(count)?);
                let (pa, _ga) = a.device_ptr_mut(stream);
                let (pp, _gp) = pivots.device_ptr_mut(stream);
                let pm = pointers.get(pa, (n * n * std::mem::size_of::<$t>()) as u64, count)?;
                let pi = info.device_ptr();
                // SAFETY: `pm` holds `count` device pointers to the n×n matrices of A
                // (asserted to hold them all), kept past this routine (freed
                // stream-ordered); lda = n; pivots count·n and info count (mapped) ints;
                // the handle enqueues on `stream`, which A and the pivots were ordered for
                // by their guards.
                unsafe {
                    cudarc::cublas::sys::$f(*blas.handle(), ni, pm as *const *mut $t, ni, pp as *mut i32, pi as *mut i32, ci)
                }
                .result()?;
                Ok(())
            }

            #[allow(private_interfaces)]
            fn getrs_batched(
                blas: &cudarc::cublas::CudaBlas,
                pointers: &crate::sys::matrix_pointers::MatrixPointers,
                stream: &std::sync::Arc<CudaStream>,
                (n, nrhs, count): (usize, usize, usize),
                lu: &impl cudarc::driver::DevicePtr<$t>,
                pivots: &impl cudarc::driver::DevicePtr<i32>,
                b: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert!(
                    lu.len() >= n * n * count && pivots.len() >= n * count && b.len() >= n * nrhs * count,
                    "batched solve lengths are checked by the caller"
                );
                let int = |v: usize| i32::try_from(v).map_err(|_| GpuError::invalid(format!("{v} exceeds cuBLAS's 32-bit sizes")));
                let (ni, ri, ci) = (int(n)?, int(nrhs)?, int(count)?);
                let size = std::mem::size_of::<$t>() as u64;
                let (pa, _ga) = lu.device_ptr(stream);
                let (pp, _gp) = pivots.device_ptr(stream);
                let (pb, _gb) = b.device_ptr_mut(stream);
                let pl = pointers.get(pa, n as u64 * n as u64 * size, count)?;
                let pbs = pointers.get(pb, n as u64 * nrhs as u64 * size, count)?;
                let mut info: i32 = 0;
                // SAFETY: `pl` holds `count` pointers to the n×n factors inside LU, `pbs`
                // count pointers to the n×nrhs blocks inside B (asserted to hold them
                // all), both kept past this routine; lda = ldb = n; the pivots count·n
                // ints (`getrf_batched`'s, 1-based, in range: the caller checks they are);
                // `info` a host int; all on `stream`, ordered by the guards.
                unsafe {
                    cudarc::cublas::sys::$rs(
                        *blas.handle(),
                        cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
                        ni,
                        ri,
                        pl as *const *const $t,
                        ni,
                        pp as *const i32,
                        pbs as *const *mut $t,
                        ni,
                        &mut info,
                        ci,
                    )
                }
                .result()?;
                if info != 0 {
                    return Err(GpuError::Internal(format!("getrsBatched refused parameter {}", -info)));
                }
                Ok(())
            }
        }
    )*};
}

cublas_batched_lu!(f32 => cublasSgetrfBatched cublasSgetrsBatched, f64 => cublasDgetrfBatched cublasDgetrsBatched);

/// A vector of a level-1 call as cuBLAS reads it: `n` elements, `inc` apart, from the
/// start of `data`.
pub struct Vector<'a, P> {
    /// The device memory (its start is element 0).
    pub data: &'a P,
    /// Elements between consecutive entries (≥ 1).
    pub inc: usize,
}

/// As [`Vector`], written.
pub struct VectorMut<'a, P> {
    /// The device memory (its start is element 0).
    pub data: &'a mut P,
    /// Elements between consecutive entries (≥ 1).
    pub inc: usize,
}

/// Elements `n` entries `inc` apart span: checked against every slice before cuBLAS
/// reads it (the caller checked them too, with errors that name the argument).
fn span(n: usize, inc: usize) -> usize {
    1 + (n - 1) * inc
}

/// cuBLAS level-1 entry points (64-bit sizes, strides) of one dtype, as safe calls over
/// device slices: `n` entries of each vector, its `inc` apart. Implemented for f32 and
/// f64 by [`cublas_level1!`]; the lengths are checked by the caller (`BlasCore`) and
/// again here.
#[doc(hidden)]
pub trait CublasLevel1: cudarc::driver::DeviceRepr + Sized {
    /// `y += alpha · x`.
    fn axpy<X: cudarc::driver::DevicePtr<Self>, Y: cudarc::driver::DevicePtrMut<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n_alpha: (usize, Self),
        x: Vector<'_, X>,
        y: VectorMut<'_, Y>,
    ) -> Result<(), GpuError>;
    /// `y += alpha · x` where `x` and `y` are two interleaved vectors of one span of
    /// device memory (`(offset, inc)` each, in elements from the span's start) that
    /// share no element: a row operation between two rows of a column-major matrix.
    fn axpy_within<S: cudarc::driver::DevicePtrMut<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n_alpha: (usize, Self),
        span: &mut S,
        x: (usize, usize),
        y: (usize, usize),
    ) -> Result<(), GpuError>;
    /// `x *= alpha`.
    fn scal<X: cudarc::driver::DevicePtrMut<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n_alpha: (usize, Self),
        x: VectorMut<'_, X>,
    ) -> Result<(), GpuError>;
    /// `out[0] = x · y`, written on the device (device pointer mode).
    fn dot<X: cudarc::driver::DevicePtr<Self>, Y: cudarc::driver::DevicePtr<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n: usize,
        xy: (Vector<'_, X>, Vector<'_, Y>),
        out: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0] = ‖x‖₂`, written on the device (device pointer mode).
    fn nrm2<X: cudarc::driver::DevicePtr<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n: usize,
        x: Vector<'_, X>,
        out: &mut impl cudarc::driver::DevicePtrMut<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0]` = the 1-based position (among the `n` entries) of the first one of
    /// largest `|x|`, written on the device (device pointer mode).
    fn iamax<X: cudarc::driver::DevicePtr<Self>>(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        n: usize,
        x: Vector<'_, X>,
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

/// cuBLAS's `?axpy_v2_64` for element type `T`.
type AxpyFn<T> = unsafe fn(
    cudarc::cublas::sys::cublasHandle_t,
    i64,
    *const T,
    *const T,
    i64,
    *mut T,
    i64,
) -> cudarc::cublas::sys::cublasStatus_t;

/// `y += alpha·x` by cuBLAS's `f` over device addresses `(x, incx)` and `(y, incy)`:
/// the one FFI call behind [`CublasLevel1::axpy`] and [`CublasLevel1::axpy_within`].
fn raw_axpy<T>(
    f: AxpyFn<T>,
    blas: &cudarc::cublas::CudaBlas,
    (n, alpha): (usize, T),
    (xp, incx): (u64, usize),
    (yp, incy): (u64, usize),
) -> Result<(), GpuError> {
    // SAFETY: the callers pass addresses obtained for the handle's stream (which `blas`
    // enqueues on), each with its `n` entries `inc` apart inside its allocation (they
    // assert it); `alpha` is a host scalar in the handle's host pointer mode.
    unsafe {
        f(
            *blas.handle(),
            n as i64,
            &alpha,
            xp as *const T,
            incx as i64,
            yp as *mut T,
            incy as i64,
        )
    }
    .result()?;
    Ok(())
}

macro_rules! cublas_level1 {
    ($t:ty, $axpy:ident, $scal:ident, $dot:ident, $nrm2:ident, $iamax:ident) => {
        impl CublasLevel1 for $t {
            fn axpy<X: cudarc::driver::DevicePtr<$t>, Y: cudarc::driver::DevicePtrMut<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                (n, alpha): (usize, $t),
                x: Vector<'_, X>,
                y: VectorMut<'_, Y>,
            ) -> Result<(), GpuError> {
                assert!(
                    x.data.len() >= span(n, x.inc) && y.data.len() >= span(n, y.inc),
                    "axpy spans are checked by the caller"
                );
                let (xp, _rx) = x.data.device_ptr(stream);
                let (yp, _ry) = y.data.device_ptr_mut(stream);
                // Both pointers obtained for `stream` (their uses recorded by the guards),
                // each slice holding its `n` entries `inc` apart (asserted).
                raw_axpy(
                    cudarc::cublas::sys::$axpy,
                    blas,
                    (n, alpha),
                    (xp, x.inc),
                    (yp, y.inc),
                )
            }

            fn axpy_within<S: cudarc::driver::DevicePtrMut<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                (n, alpha): (usize, $t),
                span_of: &mut S,
                (ox, incx): (usize, usize),
                (oy, incy): (usize, usize),
            ) -> Result<(), GpuError> {
                assert!(
                    span_of.len() >= ox + span(n, incx) && span_of.len() >= oy + span(n, incy),
                    "axpy spans are checked by the caller"
                );
                let size = std::mem::size_of::<$t>() as u64;
                let (base, _r) = span_of.device_ptr_mut(stream);
                // One pointer into the span, obtained for `stream` (its use recorded by
                // the guard); both vectors lie in the span (asserted) and the caller
                // checked they share no element, so cuBLAS reads no entry it writes.
                let (xp, yp) = (base + ox as u64 * size, base + oy as u64 * size);
                raw_axpy(
                    cudarc::cublas::sys::$axpy,
                    blas,
                    (n, alpha),
                    (xp, incx),
                    (yp, incy),
                )
            }

            fn scal<X: cudarc::driver::DevicePtrMut<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                (n, alpha): (usize, $t),
                x: VectorMut<'_, X>,
            ) -> Result<(), GpuError> {
                assert!(
                    x.data.len() >= span(n, x.inc),
                    "scal's span is checked by the caller"
                );
                let (xp, _rx) = x.data.device_ptr_mut(stream);
                // SAFETY: as for axpy: the `n` entries lie in the slice, on the handle's
                // stream.
                unsafe { cudarc::cublas::sys::$scal(*blas.handle(), n as i64, &alpha, xp as *mut $t, x.inc as i64) }
                    .result()?;
                Ok(())
            }

            fn dot<X: cudarc::driver::DevicePtr<$t>, Y: cudarc::driver::DevicePtr<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                n: usize,
                (x, y): (Vector<'_, X>, Vector<'_, Y>),
                out: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert!(
                    x.data.len() >= span(n, x.inc) && y.data.len() >= span(n, y.inc),
                    "dot spans are checked by the caller"
                );
                assert!(!out.is_empty());
                let (xp, _rx) = x.data.device_ptr(stream);
                let (yp, _ry) = y.data.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: the `n` entries of both inputs lie in their slices, and a
                    // 1-element device result, on the handle's stream, in device pointer
                    // mode.
                    unsafe {
                        cudarc::cublas::sys::$dot(
                            *blas.handle(),
                            n as i64,
                            xp as *const $t,
                            x.inc as i64,
                            yp as *const $t,
                            y.inc as i64,
                            op as *mut $t,
                        )
                    }
                    .result()?;
                    Ok(())
                })
            }

            fn nrm2<X: cudarc::driver::DevicePtr<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                n: usize,
                x: Vector<'_, X>,
                out: &mut impl cudarc::driver::DevicePtrMut<$t>,
            ) -> Result<(), GpuError> {
                assert!(
                    x.data.len() >= span(n, x.inc),
                    "nrm2's span is checked by the caller"
                );
                assert!(!out.is_empty());
                let (xp, _rx) = x.data.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: the `n` entries lie in the slice, and a 1-element device
                    // result, on the handle's stream, in device pointer mode.
                    unsafe {
                        cudarc::cublas::sys::$nrm2(
                            *blas.handle(),
                            n as i64,
                            xp as *const $t,
                            x.inc as i64,
                            op as *mut $t,
                        )
                    }
                    .result()?;
                    Ok(())
                })
            }

            fn iamax<X: cudarc::driver::DevicePtr<$t>>(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                n: usize,
                x: Vector<'_, X>,
                out: &mut impl cudarc::driver::DevicePtrMut<i64>,
            ) -> Result<(), GpuError> {
                assert!(
                    x.data.len() >= span(n, x.inc),
                    "iamax's span is checked by the caller"
                );
                assert!(!out.is_empty());
                let (xp, _rx) = x.data.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: the `n` entries lie in the slice, and a 1-element 64-bit
                    // device result, on the handle's stream, in device pointer mode.
                    unsafe {
                        cudarc::cublas::sys::$iamax(
                            *blas.handle(),
                            n as i64,
                            xp as *const $t,
                            x.inc as i64,
                            op as *mut i64,
                        )
                    }
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
