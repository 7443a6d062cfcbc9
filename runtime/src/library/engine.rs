//! The backend shape of a library whose work is our own `#[kernel]`s (with, for some, a
//! CUDA library handle beside them on the same stream): on a GPU the kernels are enqueued
//! on the actor's stream and the reply comes when the stream has finished; on the CPU
//! device they are emulated at once. Written once here so each such library is its plan
//! and its kernels.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::actor::Deferred;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Storage};
use crate::kernel::dsl::KernelCall;
use crate::launch::with_host_buffers;
use crate::library::seed::LibrarySeed;
use crate::observability::{cpu_op, gpu_timed};

/// Where a kernel library's work runs.
pub(crate) enum KernelEngine {
    /// The CPU device: kernels emulated when launched.
    Cpu,
    /// A GPU: the actor's stream and how its completion is awaited.
    Cuda {
        stream: Arc<CudaStream>,
        completer: Completer,
    },
}

/// A kernel library's engine with the device it serves.
pub(crate) struct Kernels {
    pub(crate) shared: Arc<DeviceShared>,
    pub(crate) generation: u64,
    pub(crate) engine: KernelEngine,
}

impl Kernels {
    /// The engine of `seed`'s generation: its stream on a GPU.
    pub(crate) fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match seed.cuda_stream()? {
            None => KernelEngine::Cpu,
            Some((stream, completer)) => KernelEngine::Cuda { stream, completer },
        };
        Ok(Kernels {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }

    /// The GPU stream, if this is one.
    pub(crate) fn stream(&self) -> Option<&Arc<CudaStream>> {
        match &self.engine {
            KernelEngine::Cpu => None,
            KernelEngine::Cuda { stream, .. } => Some(stream),
        }
    }

    /// Checks that `r` is a live buffer of this device and generation.
    pub(crate) fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.shared.config.device_id, self.generation)
    }

    /// Runs a kernel: enqueued on the stream, or emulated now.
    pub(crate) fn launch(&self, call: KernelCall) -> Result<(), GpuError> {
        match &self.engine {
            KernelEngine::Cpu => {
                call.check_launch(&crate::kernel::dsl::grid::LIMITS)?;
                with_host_buffers(&call.args, |bufs| (call.emulate)(&bufs))
            }
            KernelEngine::Cuda { stream, .. } => call.enqueue_on(stream),
        }
    }

    /// A tight temporary of `len` zeroed elements, freed (stream-ordered on a GPU) when
    /// its last handle drops.
    pub(crate) fn temp<T: DTypeBase>(&self, len: usize) -> Result<GpuRef<T>, GpuError> {
        let storage = match &self.engine {
            KernelEngine::Cpu => Storage::Cpu(vec![T::default(); len].into()),
            KernelEngine::Cuda { stream, .. } => Storage::Cuda(stream.alloc_zeros::<T>(len)?),
        };
        Ok(self.own(len, storage))
    }

    /// A handle of this device and generation on `storage` of `len` elements.
    fn own<T: DTypeBase>(&self, len: usize, storage: Storage<T>) -> GpuRef<T> {
        GpuRef::new(self.shared.config.device_id, self.generation, len, storage, None)
    }

    /// A temporary of `len` elements left uninitialized on a GPU where every bit pattern
    /// of `T` is a value (`sys::uninit`; zeroed otherwise and on the CPU device), for one
    /// whose every element the first kernel writes: clearing the scores of an attention
    /// would cost a pass over hundreds of MiB.
    pub(crate) fn uninit<T: DTypeBase>(&self, len: usize) -> Result<GpuRef<T>, GpuError> {
        let KernelEngine::Cuda { stream, .. } = &self.engine else {
            return self.temp(len);
        };
        match crate::sys::uninit::alloc_uninit::<T>(stream, len) {
            Some(slice) => Ok(self.own(len, Storage::Cuda(slice?))),
            None => self.temp(len),
        }
    }

    /// Runs `work` (enqueues, or on the CPU device the work itself), timed on the
    /// timeline as `lib`/`op`; the reply resolves when the GPU has finished. A failed
    /// enqueue is classified: after a sticky fault the stream knows the real error.
    pub(crate) fn run(
        &self,
        lib: &'static str,
        op: &'static str,
        work: impl FnOnce() -> Result<(), GpuError>,
    ) -> Result<Deferred<()>, GpuError> {
        let device = self.shared.config.device_id;
        match &self.engine {
            KernelEngine::Cpu => {
                let _timed = cpu_op(device, lib, op);
                work()?;
                Ok(Deferred::Now(()))
            }
            KernelEngine::Cuda { stream, completer } => {
                gpu_timed(stream, device, lib, op, work).map_err(|e| {
                    match crate::completion::stream_fault(stream) {
                        Some(sticky) => self.shared.observe(sticky),
                        None => self.shared.observe(e),
                    }
                })?;
                Ok(self.shared.deferred(completer.done(stream)))
            }
        }
    }
}
