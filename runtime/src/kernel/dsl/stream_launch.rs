//! The lower-level launch of a `#[kernel]`: on a cudarc stream of the caller's, without
//! the kernel actor — for code that already drives its own streams (overlapping with its
//! own copies, capturing into its own CUDA graph).
//!
//! Each instantiation is compiled (or read from the disk cache) once per process and
//! context and kept here; a launch validates its arguments and the launch dimensions,
//! enqueues, and returns without waiting. Ordering against other streams is cudarc's:
//! every buffer's last writer is waited for and this launch recorded as its reader or
//! writer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaFunction, CudaStream};

use super::launch::KernelCall;
use crate::error::GpuError;
use crate::kernel::cache::KernelCache;
use crate::launch::LaunchLimits;

/// What a context has loaded for direct launches.
struct ContextKernels {
    limits: LaunchLimits,
    /// Holds the context, so the key below is not reused while it is cached.
    kernels: Arc<KernelCache>,
}

/// Per context (by address; the entry holds the context, so the address is not reused).
fn registry() -> &'static Mutex<HashMap<usize, ContextKernels>> {
    static LOADED: OnceLock<Mutex<HashMap<usize, ContextKernels>>> = OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(HashMap::new()))
}

impl KernelCall {
    /// Enqueues this launch on `stream` (compiling the instantiation for the stream's
    /// device on first use, through the disk cache) and returns once it is enqueued;
    /// synchronize the stream, or order later work after it, to see the results. The
    /// buffers must be GPU buffers in the stream's context.
    pub fn enqueue_on(self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        self.args.check_buffers()?;
        let f = self.function_for(stream)?;
        // SAFETY: the call was built by a `#[kernel]` launcher, whose signature generated
        // both this argument list and the kernel's parameter list; no written buffer
        // window overlaps another (`check_buffers`) and the launch dimensions fit the
        // device (checked by `function_for`).
        unsafe { crate::launch::enqueue(stream, &f, self.cfg, &self.args) }
    }

    /// This instantiation's function in `stream`'s context — compiled (or read from the
    /// disk cache) and loaded on first use — after checking the launch dimensions
    /// against the device. A graph calls it before capturing, so no compile or module
    /// load happens inside a capture.
    pub(crate) fn function_for(&self, stream: &Arc<CudaStream>) -> Result<CudaFunction, GpuError> {
        let ctx = stream.context().clone();
        // The registry's lock is held to find the context's cache, never across a
        // compile: that runs on a thread of its own and is shared by concurrent callers.
        let kernels = {
            let mut all = registry().lock().unwrap_or_else(|p| p.into_inner());
            let key = Arc::as_ptr(&ctx) as usize;
            let entry = match all.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let arch = crate::nvrtc_cache::sm_arch(ctx.compute_capability()?);
                    v.insert(ContextKernels {
                        limits: LaunchLimits::of(&ctx)?,
                        kernels: Arc::new(KernelCache::new(ctx.clone(), arch, None)),
                    })
                }
            };
            self.check_launch(&entry.limits)?;
            entry.kernels.clone()
        };
        let f = kernels.lookup(self.id, self.name, self.source)?.wait()?.function;
        Ok(f)
    }
}
