//! cuBLASLt's handle, its plans and the calls (the `blas` feature): what the matmul
//! description in `mod.rs` is run with.

use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::{LtEpilogue, LtKey, LtType};
use crate::error::{GpuError, Lib};

impl LtType {
    fn cuda(self) -> sys::cudaDataType {
        use sys::cudaDataType_t as D;
        match self {
            LtType::F32 => D::CUDA_R_32F,
            LtType::F16 => D::CUDA_R_16F,
            LtType::Bf16 => D::CUDA_R_16BF,
            LtType::E4m3 => D::CUDA_R_8F_E4M3,
            LtType::E5m2 => D::CUDA_R_8F_E5M2,
        }
    }
}

impl LtEpilogue {
    fn cuda(self) -> sys::cublasLtEpilogue_t {
        use sys::cublasLtEpilogue_t as E;
        match self {
            LtEpilogue::None => E::CUBLASLT_EPILOGUE_DEFAULT,
            LtEpilogue::Relu => E::CUBLASLT_EPILOGUE_RELU,
            LtEpilogue::Gelu => E::CUBLASLT_EPILOGUE_GELU,
            LtEpilogue::Bias => E::CUBLASLT_EPILOGUE_BIAS,
            LtEpilogue::BiasRelu => E::CUBLASLT_EPILOGUE_RELU_BIAS,
            LtEpilogue::BiasGelu => E::CUBLASLT_EPILOGUE_GELU_BIAS,
        }
    }
}

fn failed(what: &str, e: lt::CublasError) -> GpuError {
    GpuError::Library {
        lib: Lib::Cublas,
        code: e.0 as i32,
        msg: format!("cuBLASLt {what}: {:?}", e.0),
    }
}

/// A cuBLASLt handle, its workspace on the owner's stream, and the plans made so far.
pub(crate) struct LtHandle {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    /// `workspace`'s address: used only on `stream`, whose order covers every use, so it
    /// is taken once.
    workspace_address: u64,
    stream: Arc<CudaStream>,
    plans: HashMap<LtKey, LtPlan>,
}

// SAFETY: the handle is used by one owner at a time (`&mut self` for every call); cuBLASLt
// handles may move between threads (they are not bound to one).
unsafe impl Send for LtHandle {}

/// cuBLASLt's recommended workspace: 32 MiB from Hopper on, 4 MiB before.
fn workspace_bytes(stream: &CudaStream) -> Result<usize, GpuError> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let major = stream
        .context()
        .attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    Ok(if major >= 9 { 32 << 20 } else { 4 << 20 })
}

impl LtHandle {
    /// A handle whose matmuls run on `stream`.
    pub(crate) fn new(stream: Arc<CudaStream>) -> Result<Self, GpuError> {
        stream.context().bind_to_thread()?;
        let bytes = workspace_bytes(&stream)?;
        let workspace = stream.alloc_zeros::<u8>(bytes)?;
        let (workspace_address, guard) = workspace.device_ptr(&stream);
        drop(guard);
        let handle = lt::create_handle().map_err(|e| failed("create", e))?;
        Ok(LtHandle {
            handle,
            workspace,
            workspace_address,
            stream,
            plans: HashMap::new(),
        })
    }

    /// Enqueues one matmul on the handle's stream.
    ///
    /// # Safety
    /// `a`, `b`, `d` (and `bias` when the epilogue has one) are device addresses of this
    /// context, ordered for use on the handle's stream (waits queued, the uses recorded
    /// after), each spanning every element `key` reaches: the caller validated shapes,
    /// leading dimensions, strides and lengths, and that D overlaps no input.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn matmul(
        &mut self,
        key: &LtKey,
        alpha: f32,
        beta: f32,
        a: u64,
        b: u64,
        d: u64,
        bias: Option<u64>,
    ) -> Result<(), GpuError> {
        if !self.plans.contains_key(key) {
            let plan = LtPlan::new(self.handle, key, self.workspace.len())?;
            self.plans.insert(*key, plan);
        }
        let plan = &self.plans[key];
        if let Some(bias) = bias {
            // SAFETY: the descriptor is this plan's own and lives while the plan does; the
            // attribute is a device pointer, passed by address with its size.
            unsafe {
                lt::set_matmul_desc_attribute(
                    plan.desc,
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    (&bias) as *const u64 as *const c_void,
                    size_of::<u64>(),
                )
            }
            .map_err(|e| failed("bias pointer", e))?;
        }
        // SAFETY: the plan's descriptors and algorithm were made for `key`, which the
        // caller's addresses satisfy; alpha and beta are host f32 values (the scale type);
        // C is D (same layout, read before written by cuBLASLt); the workspace is this
        // handle's, used only on its stream.
        unsafe {
            lt::matmul(
                self.handle,
                plan.desc,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                a as *const c_void,
                plan.a,
                b as *const c_void,
                plan.b,
                d as *const c_void,
                plan.d,
                d as *mut c_void,
                plan.d,
                &plan.algo,
                self.workspace_address as *mut c_void,
                self.workspace.len(),
                self.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| failed("matmul", e))
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: the handle was created by `new`, every plan made with it is gone, and it
        // is destroyed once. Work it enqueued stays valid: cuBLASLt's destroy does not
        // touch the stream, and the workspace is freed stream-ordered by cudarc after.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// The descriptors of one [`LtKey`] and the algorithm the heuristic chose for them.
struct LtPlan {
    desc: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatrixLayout_t,
    b: sys::cublasLtMatrixLayout_t,
    d: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
}

impl LtPlan {
    fn new(handle: sys::cublasLtHandle_t, key: &LtKey, workspace: usize) -> Result<Self, GpuError> {
        let (ar, ac) = if key.transa { (key.k, key.m) } else { (key.m, key.k) };
        let (br, bc) = if key.transb { (key.n, key.k) } else { (key.k, key.n) };
        let compute = if key.tf32 {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let desc =
            lt::create_matmul_desc(compute, sys::cudaDataType_t::CUDA_R_32F).map_err(|e| failed("descriptor", e))?;
        // The plan owns each handle as soon as it exists, so an error below frees them.
        let mut plan = LtPlan {
            desc,
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            d: std::ptr::null_mut(),
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        };
        plan.a = layout(key.a, ar, ac, key.lda, key.batch, key.stride_a)?;
        plan.b = layout(key.b, br, bc, key.ldb, key.batch, key.stride_b)?;
        plan.d = layout(key.c, key.m, key.n, key.ldc, key.batch, key.stride_c)?;
        use sys::cublasLtMatmulDescAttributes_t as A;
        let transa = key.transa as i32;
        let transb = key.transb as i32;
        let epilogue = key.epilogue.cuda();
        // SAFETY: each value is passed by address with its exact size, as cuBLASLt's
        // attribute table gives the type (int32 transposes, the epilogue enum, the bias
        // data type as a cudaDataType).
        unsafe {
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_TRANSA, &transa)?;
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_TRANSB, &transb)?;
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue)?;
            if let (true, Some(bias)) = (key.epilogue.has_bias(), key.bias) {
                set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias.cuda())?;
            }
        }
        let pref = lt::create_matmul_pref().map_err(|e| failed("preference", e))?;
        let chosen = (|| {
            use sys::cublasLtMatmulPreferenceAttributes_t as P;
            // SAFETY: as above: each attribute by address with its size (uint64 workspace
            // bytes, uint32 alignments).
            unsafe {
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &(workspace as u64))?;
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align[0])?;
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align[1])?;
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align[2])?;
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align[2])?;
                // SAFETY: every descriptor was made above and is alive; C's layout is D's.
                lt::get_matmul_algo_heuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref)
            }
        })()
        .map_err(|e| no_algorithm(key, e));
        // SAFETY: made above, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        plan.algo = chosen?.algo;
        Ok(plan)
    }
}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each handle was made for this plan (or is null, never made) and is
        // destroyed once; no matmul is being enqueued with it (the owner holds `&mut`).
        unsafe {
            for l in [self.a, self.b, self.d] {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

/// cuBLASLt found no algorithm: a combination it does not run (a type pair, an
/// alignment, an epilogue with these types) — `Unsupported`, with what was asked.
fn no_algorithm(key: &LtKey, e: lt::CublasError) -> GpuError {
    if e.0 == sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED {
        return GpuError::Unsupported(format!(
            "cuBLASLt has no algorithm for this matmul on this GPU: A {:?}, B {:?}, C {:?}, bias {:?}, \
             epilogue {:?}, transposes ({}, {}), m={} n={} k={}, leading dimensions ({}, {}, {}), \
             alignments {:?} bytes",
            key.a,
            key.b,
            key.c,
            key.bias,
            key.epilogue,
            key.transa,
            key.transb,
            key.m,
            key.n,
            key.k,
            key.lda,
            key.ldb,
            key.ldc,
            key.align
        ));
    }
    failed("heuristic", e)
}

/// A matrix layout, batched when `batch > 1`.
fn layout(
    t: LtType,
    rows: u64,
    cols: u64,
    ld: i64,
    batch: i32,
    stride: i64,
) -> Result<sys::cublasLtMatrixLayout_t, GpuError> {
    let l = lt::create_matrix_layout(t.cuda(), rows, cols, ld).map_err(|e| failed("layout", e))?;
    if batch > 1 {
        use sys::cublasLtMatrixLayoutAttribute_t as L;
        // SAFETY: `l` was just made; int32 count and int64 stride by address and size.
        let r = unsafe {
            set_layout(l, L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch)
                .and_then(|()| set_layout(l, L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride))
        };
        if let Err(e) = r {
            // SAFETY: made above, not yet handed out.
            let _ = unsafe { lt::destroy_matrix_layout(l) };
            return Err(e);
        }
    }
    Ok(l)
}

/// Sets a descriptor attribute from a plain value.
///
/// # Safety
/// `desc` is alive and `V` is the attribute's type in cuBLASLt's table.
unsafe fn set_desc<V>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    v: &V,
) -> Result<(), GpuError> {
    // SAFETY: per this function's contract.
    unsafe { lt::set_matmul_desc_attribute(desc, attr, v as *const V as *const c_void, size_of::<V>()) }
        .map_err(|e| failed("descriptor attribute", e))
}

/// Sets a preference attribute from a plain value.
///
/// # Safety
/// `pref` is alive and `V` is the attribute's type in cuBLASLt's table.
unsafe fn set_pref<V>(
    pref: sys::cublasLtMatmulPreference_t,
    attr: sys::cublasLtMatmulPreferenceAttributes_t,
    v: &V,
) -> Result<(), lt::CublasError> {
    // SAFETY: per this function's contract.
    unsafe { lt::set_matmul_pref_attribute(pref, attr, v as *const V as *const c_void, size_of::<V>()) }
}

/// Sets a layout attribute from a plain value.
///
/// # Safety
/// `l` is alive and `V` is the attribute's type in cuBLASLt's table.
unsafe fn set_layout<V>(
    l: sys::cublasLtMatrixLayout_t,
    attr: sys::cublasLtMatrixLayoutAttribute_t,
    v: &V,
) -> Result<(), GpuError> {
    // SAFETY: per this function's contract.
    unsafe { lt::set_matrix_layout_attribute(l, attr, v as *const V as *const c_void, size_of::<V>()) }
        .map_err(|e| failed("layout attribute", e))
}
