//! `interop`: buffers that cross to other libraries and back without a copy — cudarc,
//! raw device pointers, and DLPack (PyTorch, CuPy, JAX, NumPy).
//!
//! Why: real programs mix libraries (a model in PyTorch, a custom kernel here, a reduction
//! in CuPy); a GPU library whose buffers can only leave through the host is an island.
//!
//! Everything goes through an [`Interop`] — the device's context, a stream of its own and
//! the generation it was made in — from [`Device::interop`](crate::Device::interop):
//! - **cudarc**: [`GpuRef::with_cuda_view`] / [`GpuRef::with_cuda_view_mut`] lend a
//!   buffer as a cudarc view, ordered by the buffer's own events (cudarc's launches and
//!   copies wait for its last writer and record the use); [`Interop::adopt`] makes a
//!   cudarc `CudaSlice` a `GpuRef`.
//! - **raw pointers**: [`GpuRef::with_device_ptr`] hands out the address for work the
//!   caller enqueues on a stream, ordered the same way; [`Interop::from_raw_parts`] wraps
//!   memory someone else allocated, its owner kept alive until the buffer's last use.
//! - **DLPack**: [`GpuRef::to_dlpack`] exports, [`Interop::from_dlpack`] imports
//!   ([`dlpack`]).
//! - **another process**: [`GpuRef::export_ipc`] gives an [`IpcHandle`] that
//!   [`Interop::open_ipc`] opens in another process of the machine (CUDA IPC; a shared
//!   memory file on the CPU device), for memory from [`Interop::alloc_shareable`].
//!
//! The generation check holds across all of it: a buffer adopted or imported through an
//! `Interop` made before a context rebuild is `Stale` afterwards, like any other.
//! An isolated device's memory lives in its worker process, so it has no `Interop`
//! (`Unsupported`).

mod adopt;
mod cuda_views;
pub mod dlpack;
mod ipc;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

pub use cuda_views::Access;
pub use ipc::IpcHandle;

/// A device's context as other libraries see it: the CUDA context and a stream of it
/// (none on the CPU device), and the generation its buffers belong to.
///
/// Made by [`Device::interop`](crate::Device::interop); cheap to clone. The stream is
/// this handle's own — not one an actor of the device enqueues on — so work a program
/// puts there queues behind nothing of ours except the buffers it uses (their events).
#[derive(Clone)]
pub struct Interop {
    device_id: usize,
    generation: u64,
    stream: Option<Arc<CudaStream>>,
}

impl std::fmt::Debug for Interop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = if self.stream.is_some() { "CUDA" } else { "CPU" };
        write!(
            f,
            "Interop(device {} gen {} {backend})",
            self.device_id, self.generation
        )
    }
}

impl Interop {
    /// The handle of generation `generation` of device `device_id`; `stream` a stream of
    /// its CUDA context (`None` for the CPU device).
    pub(crate) fn new(device_id: usize, generation: u64, stream: Option<Arc<CudaStream>>) -> Self {
        Interop {
            device_id,
            generation,
            stream,
        }
    }

    /// The device this handle is of.
    pub fn device_id(&self) -> usize {
        self.device_id
    }

    /// The context generation whose buffers it lends and makes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True on a GPU (false on the CPU device, whose buffers are host memory).
    pub fn is_cuda(&self) -> bool {
        self.stream.is_some()
    }

    /// The stream of this handle: for cudarc work beside the device's own. `Unsupported`
    /// on the CPU device.
    pub fn stream(&self) -> Result<&Arc<CudaStream>, GpuError> {
        self.stream.as_ref().ok_or_else(cpu_has_no_cuda)
    }

    /// The device's CUDA context (cudarc's handle). `Unsupported` on the CPU device.
    pub fn context(&self) -> Result<&Arc<CudaContext>, GpuError> {
        Ok(self.stream()?.context())
    }

    /// Checks that `r` is a buffer of this device and generation.
    pub(crate) fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.device_id, self.generation)
    }
}

/// What the CPU device answers for CUDA handles and device addresses.
fn cpu_has_no_cuda() -> GpuError {
    GpuError::Unsupported(
        "the CPU device has no CUDA context or stream: its buffers are host memory (GpuRef::with_host, DLPack \
         with kDLCPU)"
            .into(),
    )
}

/// A context and its streams live in their process: an isolated device's stay in its
/// worker, so it makes no `Interop`.
impl crate::wire::Wire for Interop {
    fn put(&self, _: &mut crate::wire::Writer<'_>) -> Result<(), GpuError> {
        Err(isolated_unsupported())
    }
    fn take(_: &mut crate::wire::Reader<'_>) -> Result<Self, GpuError> {
        Err(isolated_unsupported())
    }
}

fn isolated_unsupported() -> GpuError {
    GpuError::Unsupported(
        "interop with an isolated device (its memory and streams live in the worker process): use an in-process \
         device, or download"
            .into(),
    )
}
