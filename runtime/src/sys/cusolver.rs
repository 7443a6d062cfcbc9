//! cuSOLVER's dense LAPACK routines as safe calls on whole device slices.
//!
//! cudarc's safe layer stops at the handle (`DnHandle`); the routines themselves are raw
//! FFI. Each dtype contributes only a table of its entry points ([`LapackFns`], filled by
//! `cusolver_float!`); the logic — checking that every slice holds what the routine
//! touches, querying and allocating the workspace, taking stream-ordered device
//! addresses — is written once, generically, in `Dense`.
//!
//! Every routine writes LAPACK's `info` straight into a host-mapped cell the caller owns
//! (`MappedCell`: no copy back) and reads after completion: negative means a bad
//! parameter (a bug here), positive is the matrix's own verdict (singular, not positive
//! definite, no convergence).

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_schar};
use std::sync::Arc;

use cudarc::cusolver::sys::{
    cublasFillMode_t as Fill, cublasOperation_t as Op, cusolverDnHandle_t as H, cusolverEigMode_t as Eig,
    cusolverStatus_t as Status,
};
use cudarc::cusolver::{sys, DnHandle};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};

use crate::error::{GpuError, Lib};
use crate::sys::mapped::MappedCell;
use crate::sys::matrix_pointers::MatrixPointers;

/// The entry points of one precision (`S…` for f32, `D…` for f64). The pointers are
/// cudarc's dynamically loaded wrappers.
#[allow(clippy::type_complexity)]
#[doc(hidden)]
pub struct LapackFns<T> {
    getrf_bs: unsafe fn(H, c_int, c_int, *mut T, c_int, *mut c_int) -> Status,
    getrf: unsafe fn(H, c_int, c_int, *mut T, c_int, *mut T, *mut c_int, *mut c_int) -> Status,
    getrs: unsafe fn(H, Op, c_int, c_int, *const T, c_int, *const c_int, *mut T, c_int, *mut c_int) -> Status,
    potrf_bs: unsafe fn(H, Fill, c_int, *mut T, c_int, *mut c_int) -> Status,
    potrf: unsafe fn(H, Fill, c_int, *mut T, c_int, *mut T, c_int, *mut c_int) -> Status,
    potrs: unsafe fn(H, Fill, c_int, c_int, *const T, c_int, *mut T, c_int, *mut c_int) -> Status,
    potrf_batched: unsafe fn(H, Fill, c_int, *mut *mut T, c_int, *mut c_int, c_int) -> Status,
    potrs_batched:
        unsafe fn(H, Fill, c_int, c_int, *mut *mut T, c_int, *mut *mut T, c_int, *mut c_int, c_int) -> Status,
    gesvdj_batched_bs: unsafe fn(
        H,
        Eig,
        c_int,
        c_int,
        *const T,
        c_int,
        *const T,
        *const T,
        c_int,
        *const T,
        c_int,
        *mut c_int,
        sys::gesvdjInfo_t,
        c_int,
    ) -> Status,
    gesvdj_batched: unsafe fn(
        H,
        Eig,
        c_int,
        c_int,
        *mut T,
        c_int,
        *mut T,
        *mut T,
        c_int,
        *mut T,
        c_int,
        *mut T,
        c_int,
        *mut c_int,
        sys::gesvdjInfo_t,
        c_int,
    ) -> Status,
    geqrf_bs: unsafe fn(H, c_int, c_int, *mut T, c_int, *mut c_int) -> Status,
    geqrf: unsafe fn(H, c_int, c_int, *mut T, c_int, *mut T, *mut T, c_int, *mut c_int) -> Status,
    orgqr_bs: unsafe fn(H, c_int, c_int, c_int, *const T, c_int, *const T, *mut c_int) -> Status,
    orgqr: unsafe fn(H, c_int, c_int, c_int, *mut T, c_int, *const T, *mut T, c_int, *mut c_int) -> Status,
    gesvd_bs: unsafe fn(H, c_int, c_int, *mut c_int) -> Status,
    gesvd: unsafe fn(
        H,
        c_schar,
        c_schar,
        c_int,
        c_int,
        *mut T,
        c_int,
        *mut T,
        *mut T,
        c_int,
        *mut T,
        c_int,
        *mut T,
        c_int,
        *mut T,
        *mut c_int,
    ) -> Status,
    syevd_bs: unsafe fn(H, Eig, Fill, c_int, *const T, c_int, *const T, *mut c_int) -> Status,
    syevd: unsafe fn(H, Eig, Fill, c_int, *mut T, c_int, *mut T, *mut T, c_int, *mut c_int) -> Status,
}

/// A float type cuSOLVER's dense routines take (f32, f64).
#[doc(hidden)]
pub trait CusolverFloat: DeviceRepr + ValidAsZeroBits + Copy + Sized + 'static {
    /// This precision's entry points.
    const FNS: LapackFns<Self>;
}

macro_rules! cusolver_float {
    ($($t:ty: $getrf_bs:ident $getrf:ident $getrs:ident $potrf_bs:ident $potrf:ident $potrs:ident $potrf_batched:ident
        $potrs_batched:ident
        $gesvdj_batched_bs:ident $gesvdj_batched:ident
        $geqrf_bs:ident $geqrf:ident $orgqr_bs:ident $orgqr:ident $gesvd_bs:ident $gesvd:ident
        $syevd_bs:ident $syevd:ident;)*) => {$(
        impl CusolverFloat for $t {
            const FNS: LapackFns<$t> = LapackFns {
                getrf_bs: sys::$getrf_bs,
                getrf: sys::$getrf,
                getrs: sys::$getrs,
                potrf_bs: sys::$potrf_bs,
                potrf: sys::$potrf,
                potrs: sys::$potrs,
                potrf_batched: sys::$potrf_batched,
                potrs_batched: sys::$potrs_batched,
                gesvdj_batched_bs: sys::$gesvdj_batched_bs,
                gesvdj_batched: sys::$gesvdj_batched,
                geqrf_bs: sys::$geqrf_bs,
                geqrf: sys::$geqrf,
                orgqr_bs: sys::$orgqr_bs,
                orgqr: sys::$orgqr,
                gesvd_bs: sys::$gesvd_bs,
                gesvd: sys::$gesvd,
                syevd_bs: sys::$syevd_bs,
                syevd: sys::$syevd,
            };
        }
    )*};
}

cusolver_float! {
    f32: cusolverDnSgetrf_bufferSize cusolverDnSgetrf cusolverDnSgetrs cusolverDnSpotrf_bufferSize
        cusolverDnSpotrf cusolverDnSpotrs cusolverDnSpotrfBatched cusolverDnSpotrsBatched
        cusolverDnSgesvdjBatched_bufferSize
        cusolverDnSgesvdjBatched cusolverDnSgeqrf_bufferSize cusolverDnSgeqrf
        cusolverDnSorgqr_bufferSize cusolverDnSorgqr cusolverDnSgesvd_bufferSize cusolverDnSgesvd
        cusolverDnSsyevd_bufferSize cusolverDnSsyevd;
    f64: cusolverDnDgetrf_bufferSize cusolverDnDgetrf cusolverDnDgetrs cusolverDnDpotrf_bufferSize
        cusolverDnDpotrf cusolverDnDpotrs cusolverDnDpotrfBatched cusolverDnDpotrsBatched
        cusolverDnDgesvdjBatched_bufferSize
        cusolverDnDgesvdjBatched cusolverDnDgeqrf_bufferSize cusolverDnDgeqrf
        cusolverDnDorgqr_bufferSize cusolverDnDorgqr cusolverDnDgesvd_bufferSize cusolverDnDgesvd
        cusolverDnDsyevd_bufferSize cusolverDnDsyevd;
}

/// A device pointer and its guard as `(address, Some(guard))`, beside `(0, None)` for an
/// argument a routine is told not to touch.
fn ptr<G>((p, g): (CUdeviceptr, G)) -> (CUdeviceptr, Option<G>) {
    (p, Some(g))
}

fn check(s: Status) -> Result<(), GpuError> {
    s.result().map_err(|e| GpuError::Library {
        lib: Lib::Cusolver,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    })
}

/// A dimension as cuSOLVER's `int`.
fn int(v: usize, what: &str) -> Result<c_int, GpuError> {
    c_int::try_from(v).map_err(|_| GpuError::invalid(format!("{what} = {v} exceeds cuSOLVER's 32-bit limit")))
}

/// Refuses a slice shorter than the routine touches — the invariant every `SAFETY`
/// comment below rests on (callers validate first; this is the last line).
fn fits<T>(s: &impl cudarc::driver::DeviceSlice<T>, need: usize, what: &str) -> Result<(), GpuError> {
    if s.len() < need {
        return Err(GpuError::invalid(format!(
            "{what} holds {} elements, the routine touches {need}",
            s.len()
        )));
    }
    Ok(())
}

/// A cuSOLVER dense handle bound to one stream; every routine is enqueued there.
pub(crate) struct Dense {
    handle: DnHandle,
    stream: Arc<CudaStream>,
    /// One workspace for every routine, grown on demand: reuse is safe because every
    /// routine runs on the one stream, in order.
    work: RefCell<Option<Workspace>>,
    /// Workspace sizes already asked of cuSOLVER, by routine, dtype and dimensions.
    lworks: RefCell<HashMap<LworkKey, c_int>>,
    /// The Jacobi SVD's parameters (cuSOLVER's defaults: tolerance, sweeps, sorted
    /// values), made on first use and kept (the routine reads them when enqueued).
    gesvdj: RefCell<Option<GesvdjParams>>,
    /// The batched routines' pointer arrays, kept per batch layout.
    pointers: MatrixPointers,
}

/// A `gesvdjInfo_t`, destroyed once.
struct GesvdjParams(sys::gesvdjInfo_t);

// SAFETY: the parameters are a plain cuSOLVER object of host memory, used only through
// the `Dense` that owns them, by one thread at a time (the solver core is `&mut`-owned,
// like the cuSOLVER handle beside it).
unsafe impl Send for GesvdjParams {}

impl Drop for GesvdjParams {
    fn drop(&mut self) {
        // SAFETY: made by `cusolverDnCreateGesvdjInfo`, destroyed once, here.
        let _ = unsafe { sys::cusolverDnDestroyGesvdjInfo(self.0) };
    }
}

/// The workspace and its device address, taken once: it is only ever used on the handle's
/// stream, in order, so cudarc's per-use event waits and records (three driver calls per
/// routine on the actor's thread) would order nothing.
struct Workspace {
    /// Owns the memory; its drop frees it on the handle's stream, after every routine
    /// enqueued before.
    slice: CudaSlice<u8>,
    ptr: CUdeviceptr,
}

/// What a workspace size depends on: the routine, the dtype and the dimensions (the
/// routines' other arguments are fixed here: lower triangles, jobs).
type LworkKey = (&'static str, TypeId, [c_int; 3]);

impl Dense {
    /// A handle on `stream`.
    pub(crate) fn new(stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        stream.context().bind_to_thread()?;
        let handle = DnHandle::new(stream.clone()).map_err(|e| GpuError::Library {
            lib: Lib::Cusolver,
            code: e.0 as i32,
            msg: format!("{:?}", e.0),
        })?;
        Ok(Dense {
            handle,
            work: RefCell::new(None),
            lworks: RefCell::new(HashMap::new()),
            gesvdj: RefCell::new(None),
            pointers: MatrixPointers::new(stream.clone()),
            stream,
        })
    }

    /// The pointer arrays of batched routines on this handle's stream — cuBLAS's batched
    /// LU, run by the same solver on the same stream, shares them.
    pub(crate) fn pointers(&self) -> &MatrixPointers {
        &self.pointers
    }

    /// The address of the shared workspace, at least `lwork` elements of `T` (and one
    /// byte, so that it is a real allocation), for a routine enqueued on the handle's
    /// stream.
    fn workspace<T: CusolverFloat>(&self, lwork: c_int) -> Result<CUdeviceptr, GpuError> {
        let bytes = (lwork.max(1) as usize) * std::mem::size_of::<T>();
        let mut w = self.work.borrow_mut();
        match w.as_ref() {
            Some(w) if w.slice.len() >= bytes => Ok(w.ptr),
            _ => {
                // Drop the old one first (its free is stream-ordered after its users).
                *w = None;
                let mut slice = self.stream.alloc_zeros::<u8>(bytes)?;
                // (The guard records the allocation's zeroing as its last write.)
                let ptr = slice.device_ptr_mut(&self.stream).0;
                *w = Some(Workspace { slice, ptr });
                Ok(ptr)
            }
        }
    }

    /// The workspace size (elements of `T`) `routine` needs for `dims`: asked of cuSOLVER
    /// (`query`) once per routine, dtype and dimensions, then remembered — the query costs
    /// host time on every call otherwise, which a small factorization notices
    /// (BENCHMARKS.md, dense solvers at n = 16).
    fn lwork<T: CusolverFloat>(
        &self,
        routine: &'static str,
        dims: [c_int; 3],
        query: impl FnOnce(&mut c_int) -> Status,
    ) -> Result<c_int, GpuError> {
        let key = (routine, TypeId::of::<T>(), dims);
        if let Some(l) = self.lworks.borrow().get(&key) {
            return Ok(*l);
        }
        let mut lwork: c_int = 0;
        check(query(&mut lwork))?;
        self.lworks.borrow_mut().insert(key, lwork);
        Ok(lwork)
    }

    /// A scratch buffer of `n` elements for this call only (gesvd's rwork).
    fn scratch<T: CusolverFloat>(&self, n: usize) -> Result<CudaSlice<T>, GpuError> {
        Ok(self.stream.alloc_zeros::<T>(n.max(1))?)
    }

    /// LU with partial pivoting of the n×n matrix `a`, in place (`getrf`).
    pub(crate) fn getrf<T: CusolverFloat>(
        &self,
        n: usize,
        a: &mut impl DevicePtrMut<T>,
        ipiv: &mut impl DevicePtrMut<i32>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, n * n, "A")?;
        fits(ipiv, n, "the pivots")?;
        let ni = int(n, "n")?;
        let s = &self.stream;
        let (pa, _ga) = a.device_ptr_mut(s);
        let lwork = self.lwork::<T>("getrf", [ni, ni, 0], |lw| {
            // SAFETY: the handle is live; `pa` addresses at least n·n elements (checked),
            // and the query only reads the sizes.
            unsafe { (T::FNS.getrf_bs)(self.handle.cu(), ni, ni, pa as *mut T, ni, lw) }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let (pp, _gp) = ipiv.device_ptr_mut(s);
        let pi = info.device_ptr();
        // SAFETY: A holds n·n elements (lda = n), the pivots n, info 1, the workspace
        // lwork; all are device memory of this stream's context, ordered on this stream
        // by the guards, and outlive the enqueue (the workspace's free is stream-ordered;
        // the info cell, mapped host memory, waits for its stream before it is freed).
        check(unsafe {
            (T::FNS.getrf)(
                self.handle.cu(),
                ni,
                ni,
                pa as *mut T,
                ni,
                pw as *mut T,
                pp as *mut c_int,
                pi as *mut c_int,
            )
        })
    }

    /// Solves `A·X = B` from `getrf`'s factors; `b` (n×nrhs) becomes X (`getrs`).
    pub(crate) fn getrs<T: CusolverFloat>(
        &self,
        n: usize,
        nrhs: usize,
        lu: &impl DevicePtr<T>,
        ipiv: &impl DevicePtr<i32>,
        b: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(lu, n * n, "the LU factors")?;
        fits(ipiv, n, "the pivots")?;
        fits(b, n * nrhs, "B")?;
        let (ni, ri) = (int(n, "n")?, int(nrhs, "nrhs")?);
        let s = &self.stream;
        let (pa, _ga) = lu.device_ptr(s);
        let (pp, _gp) = ipiv.device_ptr(s);
        let (pb, _gb) = b.device_ptr_mut(s);
        let pi = info.device_ptr();
        // SAFETY: the factors hold n·n elements, the pivots n, B n·nrhs (ldb = n), info 1
        // (checked); stream-ordered device memory of this context.
        check(unsafe {
            (T::FNS.getrs)(
                self.handle.cu(),
                Op::CUBLAS_OP_N,
                ni,
                ri,
                pa as *const T,
                ni,
                pp as *const c_int,
                pb as *mut T,
                ni,
                pi as *mut c_int,
            )
        })
    }

    /// Cholesky `A = L·Lᵀ` of the n×n matrix `a` from its lower triangle, in place
    /// (`potrf`, lower); the strictly upper triangle is not touched.
    pub(crate) fn potrf<T: CusolverFloat>(
        &self,
        n: usize,
        a: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, n * n, "A")?;
        let ni = int(n, "n")?;
        let s = &self.stream;
        let lower = Fill::CUBLAS_FILL_MODE_LOWER;
        let (pa, _ga) = a.device_ptr_mut(s);
        let lwork = self.lwork::<T>("potrf", [ni, ni, 0], |lw| {
            // SAFETY: live handle; A holds n·n elements; a size query.
            unsafe { (T::FNS.potrf_bs)(self.handle.cu(), lower, ni, pa as *mut T, ni, lw) }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let pi = info.device_ptr();
        // SAFETY: as for `getrf`: every buffer holds what the routine touches.
        check(unsafe {
            (T::FNS.potrf)(
                self.handle.cu(),
                lower,
                ni,
                pa as *mut T,
                ni,
                pw as *mut T,
                lwork,
                pi as *mut c_int,
            )
        })
    }

    /// Cholesky of `count` n×n matrices stored one after another in `a`, each from its
    /// lower triangle, in place (`potrfBatched`); `info` (mapped, at least `count`
    /// values) gets matrix i's `info` at i.
    pub(crate) fn potrf_batched<T: CusolverFloat>(
        &self,
        (n, count): (usize, usize),
        a: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, n * n * count, "A")?;
        if info.len() < count {
            return Err(GpuError::Internal(format!(
                "{} infos for a batch of {count}",
                info.len()
            )));
        }
        let (ni, ci) = (int(n, "n")?, int(count, "count")?);
        let s = &self.stream;
        let (pa, _ga) = a.device_ptr_mut(s);
        let pp = self
            .pointers
            .get(pa, (n * n * std::mem::size_of::<T>()) as u64, count)?;
        let pi = info.device_ptr();
        // SAFETY: `pp` holds `count` device pointers, matrix i at `pa + i·n·n` elements,
        // each inside A (checked: A holds count·n·n), kept until a later routine of this
        // stream (freed stream-ordered); lda = n; `info` holds at least count mapped ints
        // (checked); all on this handle's stream, A ordered by its guard.
        check(unsafe {
            (T::FNS.potrf_batched)(
                self.handle.cu(),
                Fill::CUBLAS_FILL_MODE_LOWER,
                ni,
                pp as *mut *mut T,
                ni,
                pi as *mut c_int,
                ci,
            )
        })
    }

    /// Solves `A_i·x_i = b_i` for `count` Cholesky factors L (n×n, lower, one after
    /// another in `l`) and right-hand sides (n each, one after another in `b`, replaced
    /// by the solutions) — `potrsBatched`, which takes one right-hand side per matrix;
    /// `info` (one mapped int) reports a bad parameter only.
    pub(crate) fn potrs_batched<T: CusolverFloat>(
        &self,
        (n, count): (usize, usize),
        l: &impl DevicePtr<T>,
        b: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(l, n * n * count, "L")?;
        fits(b, n * count, "B")?;
        let (ni, ci) = (int(n, "n")?, int(count, "count")?);
        let s = &self.stream;
        let (pl, _gl) = l.device_ptr(s);
        let (pb, _gb) = b.device_ptr_mut(s);
        let size = std::mem::size_of::<T>() as u64;
        let pls = self.pointers.get(pl, n as u64 * n as u64 * size, count)?;
        let pbs = self.pointers.get(pb, n as u64 * size, count)?;
        let pi = info.device_ptr();
        // SAFETY: `pls` holds `count` pointers to the n×n factors inside L, `pbs` count
        // pointers to the n-vectors inside B (both checked to hold them all), both kept
        // past this routine (freed stream-ordered); lda = ldb = n, one right-hand side;
        // `info` one mapped int; all on this handle's stream, ordered by the guards. The
        // routine reads L and writes B.
        check(unsafe {
            (T::FNS.potrs_batched)(
                self.handle.cu(),
                Fill::CUBLAS_FILL_MODE_LOWER,
                ni,
                1,
                pls as *mut *mut T,
                ni,
                pbs as *mut *mut T,
                ni,
                pi as *mut c_int,
                ci,
            )
        })
    }

    /// The SVD of `count` m×n matrices one after another in `a` (destroyed), m, n ≤ 32,
    /// by Jacobi rotations (`gesvdjBatched`): `s` (min(m, n) per matrix, descending) and,
    /// when `vectors` is given, `u` (m·m per matrix) and `v` (n·n: V, not Vᵀ); `info[i]`
    /// is matrix i's.
    pub(crate) fn gesvdj_batched<T: CusolverFloat, U: DevicePtrMut<T>, V: DevicePtrMut<T>>(
        &self,
        (m, n, count): (usize, usize, usize),
        a: &mut impl DevicePtrMut<T>,
        s_out: &mut impl DevicePtrMut<T>,
        vectors: Option<(&mut U, &mut V)>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, m * n * count, "A")?;
        fits(s_out, m.min(n) * count, "S")?;
        if info.len() < count {
            return Err(GpuError::Internal(format!(
                "{} infos for a batch of {count}",
                info.len()
            )));
        }
        if let Some((u, v)) = &vectors {
            fits(*u, m * m * count, "U")?;
            fits(*v, n * n * count, "V")?;
        }
        let (mi, ni, ci) = (int(m, "m")?, int(n, "n")?, int(count, "count")?);
        let params = {
            let mut p = self.gesvdj.borrow_mut();
            match p.as_ref() {
                Some(p) => p.0,
                None => {
                    let mut made: sys::gesvdjInfo_t = std::ptr::null_mut();
                    // SAFETY: writes one handle into `made`.
                    check(unsafe { sys::cusolverDnCreateGesvdjInfo(&mut made) })?;
                    *p = Some(GesvdjParams(made));
                    made
                }
            }
        };
        let st = &self.stream;
        let mode = if vectors.is_some() {
            Eig::CUSOLVER_EIG_MODE_VECTOR
        } else {
            Eig::CUSOLVER_EIG_MODE_NOVECTOR
        };
        let (pa, _ga) = a.device_ptr_mut(st);
        let (ps, _gs) = s_out.device_ptr_mut(st);
        let ((pu, _gu), (pv, _gv)) = match vectors {
            Some((u, v)) => (ptr(u.device_ptr_mut(st)), ptr(v.device_ptr_mut(st))),
            None => ((0, None), (0, None)),
        };
        let routine = if pu == 0 {
            "gesvdjBatched values"
        } else {
            "gesvdjBatched"
        };
        let lwork = self.lwork::<T>(routine, [mi, ni, ci], |lw| {
            // SAFETY: live handle and parameters; the pointers name buffers of the sizes
            // checked above (U, V null without vectors); a size query.
            unsafe {
                (T::FNS.gesvdj_batched_bs)(
                    self.handle.cu(),
                    mode,
                    mi,
                    ni,
                    pa as *const T,
                    mi,
                    ps as *const T,
                    pu as *const T,
                    mi,
                    pv as *const T,
                    ni,
                    lw,
                    params,
                    ci,
                )
            }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let pi = info.device_ptr();
        // SAFETY: A count·m·n (lda = m), S count·min(m, n), U count·m·m (ldu = m) and V
        // count·n·n (ldv = n) or untouched (null, NOVECTOR), workspace lwork, info count
        // mapped ints;
        // all on the handle's stream, ordered by the guards; the parameters live while
        // the handle does.
        check(unsafe {
            (T::FNS.gesvdj_batched)(
                self.handle.cu(),
                mode,
                mi,
                ni,
                pa as *mut T,
                mi,
                ps as *mut T,
                pu as *mut T,
                mi,
                pv as *mut T,
                ni,
                pw as *mut T,
                lwork,
                pi as *mut c_int,
                params,
                ci,
            )
        })
    }

    /// Solves `A·X = B` from `potrf`'s lower factor; `b` (n×nrhs) becomes X (`potrs`).
    pub(crate) fn potrs<T: CusolverFloat>(
        &self,
        n: usize,
        nrhs: usize,
        l: &impl DevicePtr<T>,
        b: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(l, n * n, "the Cholesky factor")?;
        fits(b, n * nrhs, "B")?;
        let (ni, ri) = (int(n, "n")?, int(nrhs, "nrhs")?);
        let s = &self.stream;
        let (pl, _gl) = l.device_ptr(s);
        let (pb, _gb) = b.device_ptr_mut(s);
        let pi = info.device_ptr();
        // SAFETY: L holds n·n elements, B n·nrhs, info 1 (checked).
        check(unsafe {
            (T::FNS.potrs)(
                self.handle.cu(),
                Fill::CUBLAS_FILL_MODE_LOWER,
                ni,
                ri,
                pl as *const T,
                ni,
                pb as *mut T,
                ni,
                pi as *mut c_int,
            )
        })
    }

    /// Householder QR of the m×n matrix `a` (m ≥ n), in place: R in the upper triangle,
    /// the reflectors below it and their scales in `tau` (`geqrf`).
    pub(crate) fn geqrf<T: CusolverFloat>(
        &self,
        m: usize,
        n: usize,
        a: &mut impl DevicePtrMut<T>,
        tau: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, m * n, "A")?;
        fits(tau, n, "tau")?;
        let (mi, ni) = (int(m, "m")?, int(n, "n")?);
        let s = &self.stream;
        let (pa, _ga) = a.device_ptr_mut(s);
        let lwork = self.lwork::<T>("geqrf", [mi, ni, 0], |lw| {
            // SAFETY: live handle; A holds m·n elements (lda = m); a size query.
            unsafe { (T::FNS.geqrf_bs)(self.handle.cu(), mi, ni, pa as *mut T, mi, lw) }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let (pt, _gt) = tau.device_ptr_mut(s);
        let pi = info.device_ptr();
        // SAFETY: A m·n, tau n = min(m, n), workspace lwork, info 1 (checked).
        check(unsafe {
            (T::FNS.geqrf)(
                self.handle.cu(),
                mi,
                ni,
                pa as *mut T,
                mi,
                pt as *mut T,
                pw as *mut T,
                lwork,
                pi as *mut c_int,
            )
        })
    }

    /// Forms the m×n Q of `geqrf`'s reflectors in place (`orgqr`, k = n).
    pub(crate) fn orgqr<T: CusolverFloat>(
        &self,
        m: usize,
        n: usize,
        a: &mut impl DevicePtrMut<T>,
        tau: &impl DevicePtr<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, m * n, "A")?;
        fits(tau, n, "tau")?;
        let (mi, ni) = (int(m, "m")?, int(n, "n")?);
        let s = &self.stream;
        let (pa, _ga) = a.device_ptr_mut(s);
        let (pt, _gt) = tau.device_ptr(s);
        let lwork = self.lwork::<T>("orgqr", [mi, ni, 0], |lw| {
            // SAFETY: live handle; A m·n, tau n; a size query.
            unsafe { (T::FNS.orgqr_bs)(self.handle.cu(), mi, ni, ni, pa as *const T, mi, pt as *const T, lw) }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let pi = info.device_ptr();
        // SAFETY: A m·n, tau n, workspace lwork, info 1 (checked).
        check(unsafe {
            (T::FNS.orgqr)(
                self.handle.cu(),
                mi,
                ni,
                ni,
                pa as *mut T,
                mi,
                pt as *const T,
                pw as *mut T,
                lwork,
                pi as *mut c_int,
            )
        })
    }

    /// Thin SVD of the m×n matrix `a` (m ≥ n; destroyed): `s` (n, descending) and, when
    /// `vectors` is given, `u` (m×n) and `vt` (n×n) (`gesvd`, jobu = 'S', jobvt = 'A';
    /// without them 'N', 'N': the singular values only).
    pub(crate) fn gesvd<T: CusolverFloat, U: DevicePtrMut<T>, V: DevicePtrMut<T>>(
        &self,
        (m, n): (usize, usize),
        a: &mut impl DevicePtrMut<T>,
        s_out: &mut impl DevicePtrMut<T>,
        vectors: Option<(&mut U, &mut V)>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, m * n, "A")?;
        fits(s_out, n, "S")?;
        if let Some((u, vt)) = &vectors {
            fits(*u, m * n, "U")?;
            fits(*vt, n * n, "Vᵀ")?;
        }
        let (mi, ni) = (int(m, "m")?, int(n, "n")?);
        let s = &self.stream;
        let lwork = self.lwork::<T>("gesvd", [mi, ni, 0], |lw| {
            // SAFETY: live handle; a size query of plain integers.
            unsafe { (T::FNS.gesvd_bs)(self.handle.cu(), mi, ni, lw) }
        })?;
        let pw = self.workspace::<T>(lwork)?;
        let mut rwork = self.scratch::<T>(n)?;
        let (pa, _ga) = a.device_ptr_mut(s);
        let (ps, _gs) = s_out.device_ptr_mut(s);
        let (jobs, (pu, _gu), (pv, _gv)) = match vectors {
            Some((u, vt)) => ((b'S', b'A'), ptr(u.device_ptr_mut(s)), ptr(vt.device_ptr_mut(s))),
            None => ((b'N', b'N'), (0, None), (0, None)),
        };
        let (pr, _gr) = rwork.device_ptr_mut(s);
        let pi = info.device_ptr();
        // SAFETY: A m·n (lda = m), S n, U m·n (ldu = m, jobu 'S' writes n columns) and Vᵀ
        // n·n (ldvt = n) when asked for — with jobu = jobvt = 'N' cuSOLVER touches neither
        // (null, valid leading dimensions) —, workspace lwork, rwork n ≥ min(m, n) − 1 (the
        // unconverged superdiagonal when info > 0), info 1 (checked).
        check(unsafe {
            (T::FNS.gesvd)(
                self.handle.cu(),
                jobs.0 as c_schar,
                jobs.1 as c_schar,
                mi,
                ni,
                pa as *mut T,
                mi,
                ps as *mut T,
                pu as *mut T,
                mi,
                pv as *mut T,
                ni,
                pw as *mut T,
                lwork,
                pr as *mut T,
                pi as *mut c_int,
            )
        })
    }

    /// Eigenvalues (ascending, into `w`) and, with `vectors`, eigenvectors (the columns
    /// of `a`, in place; without, `a` is overwritten) of the symmetric n×n matrix `a`,
    /// read from its `upper` or lower triangle (`syevd`).
    pub(crate) fn syevd<T: CusolverFloat>(
        &self,
        (n, vectors, upper): (usize, bool, bool),
        a: &mut impl DevicePtrMut<T>,
        w: &mut impl DevicePtrMut<T>,
        info: &mut MappedCell<i32>,
    ) -> Result<(), GpuError> {
        fits(a, n * n, "A")?;
        fits(w, n, "W")?;
        let ni = int(n, "n")?;
        let s = &self.stream;
        let mode = if vectors {
            Eig::CUSOLVER_EIG_MODE_VECTOR
        } else {
            Eig::CUSOLVER_EIG_MODE_NOVECTOR
        };
        let lower = if upper {
            Fill::CUBLAS_FILL_MODE_UPPER
        } else {
            Fill::CUBLAS_FILL_MODE_LOWER
        };
        let (pa, _ga) = a.device_ptr_mut(s);
        let (pw, _gw) = w.device_ptr_mut(s);
        let lwork = self.lwork::<T>("syevd", [ni, ni, 0], |lw| {
            // SAFETY: live handle; A n·n, W n; a size query.
            unsafe {
                (T::FNS.syevd_bs)(
                    self.handle.cu(),
                    mode,
                    lower,
                    ni,
                    pa as *const T,
                    ni,
                    pw as *const T,
                    lw,
                )
            }
        })?;
        let pk = self.workspace::<T>(lwork)?;
        let pi = info.device_ptr();
        // SAFETY: A n·n, W n, workspace lwork, info 1 (checked).
        check(unsafe {
            (T::FNS.syevd)(
                self.handle.cu(),
                mode,
                lower,
                ni,
                pa as *mut T,
                ni,
                pw as *mut T,
                pk as *mut T,
                lwork,
                pi as *mut c_int,
            )
        })
    }
}
