//! cuSPARSE's generic API (CSR and COO matrices, dense vectors and matrices) as safe calls on
//! stream-ordered device addresses.
//!
//! cudarc's safe layer stops at the handle's creation; descriptors and routines are raw
//! FFI. Here each descriptor is a value destroyed once ([`SpMat`], [`DnVec`], [`DnMat`]),
//! the handle is bound to one stream, and each routine queries its workspace size and
//! runs with the handle's one workspace, grown on demand (reuse is safe: every routine
//! runs on the one stream, in order). Dimensions and buffer lengths are the caller's to
//! validate (the sparse actor does, and a `CsrMatrix` is valid by construction): the
//! routines trust them, as cuSPARSE does.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys::{
    self, cudaDataType, cusparseDnMatDescr_t, cusparseDnVecDescr_t, cusparseHandle_t, cusparseIndexBase_t,
    cusparseIndexType_t, cusparseOperation_t, cusparseOrder_t, cusparseSpMatDescr_t, cusparseStatus_t,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::{GpuError, Lib};

/// The element types cuSPARSE's generic routines take here, and their `cudaDataType`.
pub trait CusparseFloat: cudarc::driver::DeviceRepr + Copy + 'static {
    /// `CUDA_R_32F` / `CUDA_R_64F`.
    const DATA_TYPE: cudaDataType;
}

impl CusparseFloat for f32 {
    const DATA_TYPE: cudaDataType = cudaDataType::CUDA_R_32F;
}

impl CusparseFloat for f64 {
    const DATA_TYPE: cudaDataType = cudaDataType::CUDA_R_64F;
}

fn check(s: cusparseStatus_t) -> Result<(), GpuError> {
    s.result().map_err(|e| GpuError::Library {
        lib: Lib::Cusparse,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    })
}

/// A dimension as cuSPARSE's `int64_t`.
fn i64_of(v: usize) -> i64 {
    v as i64
}

/// `A` or `Aᵀ`.
pub(crate) fn operation(transpose: bool) -> cusparseOperation_t {
    if transpose {
        cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE
    } else {
        cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE
    }
}

/// The device addresses of a sparse matrix (its row structure — CSR row offsets or COO
/// row indices —, column indices and values: 32-bit indices, zero-based) and its shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SparsePtrs {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) nnz: usize,
    /// `rows + 1` CSR row offsets, or `nnz` COO row indices.
    pub(crate) row_structure: u64,
    pub(crate) indices: u64,
    pub(crate) values: u64,
}

/// A sparse-matrix descriptor, destroyed once.
pub(crate) struct SpMat(cusparseSpMatDescr_t);

impl SpMat {
    /// Describes the CSR matrix at `m` with elements of `T`.
    pub(crate) fn csr<T: CusparseFloat>(m: SparsePtrs) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: FFI edge: the descriptor only records the addresses and sizes (the
        // caller's buffers hold `rows + 1` offsets and `nnz` indices and values).
        check(unsafe {
            sys::cusparseCreateCsr(
                &mut d,
                i64_of(m.rows),
                i64_of(m.cols),
                i64_of(m.nnz),
                m.row_structure as *mut c_void,
                m.indices as *mut c_void,
                m.values as *mut c_void,
                cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                T::DATA_TYPE,
            )
        })?;
        Ok(SpMat(d))
    }

    /// Describes the COO matrix at `m` (row indices sorted, then column indices) with
    /// elements of `T`.
    pub(crate) fn coo<T: CusparseFloat>(m: SparsePtrs) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: FFI edge: the descriptor only records the addresses and sizes (the
        // caller's buffers hold `nnz` row indices, column indices and values).
        check(unsafe {
            sys::cusparseCreateCoo(
                &mut d,
                i64_of(m.rows),
                i64_of(m.cols),
                i64_of(m.nnz),
                m.row_structure as *mut c_void,
                m.indices as *mut c_void,
                m.values as *mut c_void,
                cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                T::DATA_TYPE,
            )
        })?;
        Ok(SpMat(d))
    }
}

impl Drop for SpMat {
    fn drop(&mut self) {
        // SAFETY: made by `cusparseCreateCsr` or `cusparseCreateCoo`, destroyed once, here.
        let _ = unsafe { sys::cusparseDestroySpMat(self.0) };
    }
}

/// A dense-vector descriptor, destroyed once.
pub(crate) struct DnVec(cusparseDnVecDescr_t);

impl DnVec {
    /// Describes `len` elements of `T` at `ptr`.
    pub(crate) fn new<T: CusparseFloat>(ptr: u64, len: usize) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: FFI edge: the descriptor records the address and length.
        check(unsafe { sys::cusparseCreateDnVec(&mut d, i64_of(len), ptr as *mut c_void, T::DATA_TYPE) })?;
        Ok(DnVec(d))
    }
}

impl Drop for DnVec {
    fn drop(&mut self) {
        // SAFETY: made by `cusparseCreateDnVec`, destroyed once, here.
        let _ = unsafe { sys::cusparseDestroyDnVec(self.0) };
    }
}

/// A dense column-major matrix descriptor, destroyed once.
pub(crate) struct DnMat(cusparseDnMatDescr_t);

impl DnMat {
    /// Describes the `rows × cols` column-major matrix of `T` at `ptr` (tight: `ld =
    /// rows`).
    pub(crate) fn col_major<T: CusparseFloat>(ptr: u64, rows: usize, cols: usize) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: FFI edge: the descriptor records the address and shape.
        check(unsafe {
            sys::cusparseCreateDnMat(
                &mut d,
                i64_of(rows),
                i64_of(cols),
                i64_of(rows.max(1)),
                ptr as *mut c_void,
                T::DATA_TYPE,
                cusparseOrder_t::CUSPARSE_ORDER_COL,
            )
        })?;
        Ok(DnMat(d))
    }
}

impl Drop for DnMat {
    fn drop(&mut self) {
        // SAFETY: made by `cusparseCreateDnMat`, destroyed once, here.
        let _ = unsafe { sys::cusparseDestroyDnMat(self.0) };
    }
}

/// A cuSPARSE handle bound to one stream, and its workspace.
pub(crate) struct Sparse {
    handle: cusparseHandle_t,
    stream: Arc<CudaStream>,
    /// Grown on demand; dropped (freed on the stream, after every routine enqueued
    /// before) when a larger one replaces it. Its address is taken once, when made: it
    /// is only ever used on this stream, in order, so cudarc's per-use events would
    /// order nothing.
    work: Option<(CudaSlice<u8>, u64)>,
}

// SAFETY: the handle is used by one thread at a time: the sparse actor owns its `Sparse`
// (`&mut` access only), as cudarc's own handles are `Send`.
unsafe impl Send for Sparse {}

impl Sparse {
    /// A handle whose routines run on `stream`.
    pub(crate) fn new(stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        stream.context().bind_to_thread()?;
        let handle = cudarc::cusparse::result::create().map_err(|e| GpuError::Library {
            lib: Lib::Cusparse,
            code: e.0 as i32,
            msg: format!("{:?}", e.0),
        })?;
        let sparse = Sparse {
            handle,
            stream,
            work: None,
        };
        // SAFETY: FFI edge: a live handle and the stream's own handle (kept alive by the
        // `Arc` beside it for the handle's life).
        check(unsafe { sys::cusparseSetStream(sparse.handle, sparse.stream.cu_stream() as sys::cudaStream_t) })?;
        Ok(sparse)
    }

    /// The stream its routines run on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The workspace's address, at least `bytes` long (one byte at least, so that it
    /// is a real allocation), for a routine enqueued on the handle's stream.
    fn workspace(&mut self, bytes: usize) -> Result<*mut c_void, GpuError> {
        if self.work.as_ref().is_none_or(|(w, _)| w.len() < bytes.max(1)) {
            let w = self.stream.alloc_zeros::<u8>(bytes.max(1))?;
            let ptr = w.device_ptr(&self.stream).0;
            self.work = Some((w, ptr));
        }
        Ok(self.work.as_ref().expect("just made").1 as *mut c_void)
    }

    /// Enqueues `y = alpha·op(A)·x + beta·y`.
    pub(crate) fn spmv<T: CusparseFloat>(
        &mut self,
        transpose: bool,
        (alpha, beta): (T, T),
        a: &SpMat,
        x: &DnVec,
        y: &DnVec,
    ) -> Result<(), GpuError> {
        let op = operation(transpose);
        let alg = sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT;
        let (pa, pb) = (&alpha as *const T as *const c_void, &beta as *const T as *const c_void);
        let mut bytes = 0usize;
        // SAFETY: FFI edge: live descriptors of buffers the caller validated against
        // each other's dimensions; `alpha`/`beta` are host scalars of the value type
        // (the handle's default host pointer mode), read during the call.
        check(unsafe {
            sys::cusparseSpMV_bufferSize(self.handle, op, pa, a.0, x.0, pb, y.0, T::DATA_TYPE, alg, &mut bytes)
        })?;
        let work = self.workspace(bytes)?;
        // SAFETY: as above; `work` holds at least the bytes asked for and is used only
        // on the handle's stream.
        check(unsafe { sys::cusparseSpMV(self.handle, op, pa, a.0, x.0, pb, y.0, T::DATA_TYPE, alg, work) })
    }

    /// Enqueues `C = alpha·op(A)·B + beta·C` (B and C dense, column-major).
    pub(crate) fn spmm<T: CusparseFloat>(
        &mut self,
        transpose: bool,
        (alpha, beta): (T, T),
        a: &SpMat,
        b: &DnMat,
        c: &DnMat,
    ) -> Result<(), GpuError> {
        let (op, nt) = (operation(transpose), operation(false));
        let alg = sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;
        let (pa, pb) = (&alpha as *const T as *const c_void, &beta as *const T as *const c_void);
        let mut bytes = 0usize;
        // SAFETY: FFI edge: as in `spmv`, with dense matrices.
        check(unsafe {
            sys::cusparseSpMM_bufferSize(
                self.handle,
                op,
                nt,
                pa,
                a.0,
                b.0,
                pb,
                c.0,
                T::DATA_TYPE,
                alg,
                &mut bytes,
            )
        })?;
        let work = self.workspace(bytes)?;
        // SAFETY: as above; `work` holds at least the bytes asked for.
        check(unsafe { sys::cusparseSpMM(self.handle, op, nt, pa, a.0, b.0, pb, c.0, T::DATA_TYPE, alg, work) })
    }

    /// Enqueues the dense column-major copy of `a` into `dense`.
    pub(crate) fn densify(&mut self, a: &SpMat, dense: &DnMat) -> Result<(), GpuError> {
        let alg = sys::cusparseSparseToDenseAlg_t::CUSPARSE_SPARSETODENSE_ALG_DEFAULT;
        let mut bytes = 0usize;
        // SAFETY: FFI edge: live descriptors of matching shapes (validated by the caller).
        check(unsafe { sys::cusparseSparseToDense_bufferSize(self.handle, a.0, dense.0, alg, &mut bytes) })?;
        let work = self.workspace(bytes)?;
        // SAFETY: as above; `work` holds at least the bytes asked for.
        check(unsafe { sys::cusparseSparseToDense(self.handle, a.0, dense.0, alg, work) })
    }
}

impl Drop for Sparse {
    fn drop(&mut self) {
        // SAFETY: made by `cusparseCreate`, destroyed once, here.
        let _ = unsafe { cudarc::cusparse::result::destroy(self.handle) };
    }
}
