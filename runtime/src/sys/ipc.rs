//! CUDA IPC: device memory another process of this machine opens (`cuIpcGetMemHandle` /
//! `cuIpcOpenMemHandle`), and the plain `cuMemAlloc` allocations it needs — memory from
//! the stream-ordered pool (what every other buffer comes from) cannot be exported.

use std::sync::Arc;

use cudarc::driver::sys::{self as ds, CUipcMem_flags as Flags};
use cudarc::driver::{result, CudaContext};

use crate::error::GpuError;

/// The bytes of a `CUipcMemHandle`.
pub(crate) const HANDLE_BYTES: usize = 64;

/// A `cuMemAlloc` allocation of `bytes`, zeroed, freed with `cuMemFree` on drop (after the
/// buffer that holds it has synchronised its last use: `gpu_ref::Buffer`).
pub(crate) struct Shareable {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) base: u64,
}

impl Shareable {
    /// Allocates and zeroes `bytes` (synchronously: a rare, setup-time call).
    pub(crate) fn alloc(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Shareable, GpuError> {
        ctx.bind_to_thread()?;
        // SAFETY: a fresh allocation of `bytes` bytes, owned by the value returned.
        let base = unsafe { result::malloc_sync(bytes) }
            .map_err(|e| GpuError::from_cuda_code(e.0 as i32, format!("{e:?}"), bytes as u64))?;
        let s = Shareable { ctx: ctx.clone(), base };
        // SAFETY: `bytes` bytes at `base`, just allocated; synchronous memset.
        unsafe { result::memset_d8_sync(base, 0, bytes) }?;
        Ok(s)
    }

    /// The handle another process opens this allocation with.
    pub(crate) fn handle(&self) -> Result<[u8; HANDLE_BYTES], GpuError> {
        self.ctx.bind_to_thread()?;
        let mut h = std::mem::MaybeUninit::<ds::CUipcMemHandle>::uninit();
        // SAFETY: a valid out-parameter; `base` is the start of a live cuMemAlloc allocation.
        let r = unsafe { ds::cuIpcGetMemHandle(h.as_mut_ptr(), self.base) };
        if r != ds::CUresult::CUDA_SUCCESS {
            return Err(GpuError::Unsupported(format!(
                "cuIpcGetMemHandle failed ({r:?}): this GPU or driver does not share memory between processes"
            )));
        }
        // SAFETY: initialised by the successful call.
        let h = unsafe { h.assume_init() };
        Ok(h.reserved.map(|c| c as u8))
    }
}

impl Drop for Shareable {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `alloc`, every use finished (the buffer synchronised it).
            if let Err(e) = unsafe { result::free_sync(self.base) } {
                tracing::warn!(error = ?e, "could not free a shareable allocation");
            }
        }
    }
}

/// Another process's allocation, opened here; closed on drop.
pub(crate) struct Opened {
    ctx: Arc<CudaContext>,
    pub(crate) base: u64,
}

impl Opened {
    /// Opens `handle`; a handle whose allocation is gone (freed, its process exited), or
    /// that this process exported itself, is an `InvalidArgument` naming the cause.
    pub(crate) fn open(ctx: &Arc<CudaContext>, handle: &[u8; HANDLE_BYTES]) -> Result<Opened, GpuError> {
        ctx.bind_to_thread()?;
        let h = ds::CUipcMemHandle {
            reserved: handle.map(|b| b as std::ffi::c_char),
        };
        let mut base: ds::CUdeviceptr = 0;
        // SAFETY: a valid out-parameter and a handle by value; the driver validates it.
        let r = unsafe { ds::cuIpcOpenMemHandle_v2(&mut base, h, Flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32) };
        if r != ds::CUresult::CUDA_SUCCESS {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "the IPC handle cannot be opened ({r:?}): stale (its buffer was freed or its process exited) \
                     or not a handle of this machine's GPUs"
                ))
                .arg("handle"),
            ));
        }
        Ok(Opened { ctx: ctx.clone(), base })
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: opened by `open`, every use finished (the buffer synchronised it).
            let r = unsafe { ds::cuIpcCloseMemHandle(self.base) };
            if r != ds::CUresult::CUDA_SUCCESS {
                tracing::warn!(result = ?r, "could not close an IPC mapping");
            }
        }
    }
}

/// The UUID of the context's GPU: what tells a handle of another GPU apart.
pub(crate) fn uuid(ctx: &Arc<CudaContext>) -> Result<[u8; 16], GpuError> {
    Ok(ctx.uuid()?.bytes.map(|c| c as u8))
}
