//! Isolated devices: the inner tier of a device in a GPU worker process of its own.
//!
//! A sticky CUDA fault (an illegal address, a `trap`) kills every context of the process
//! it happens in — measured on the H200, nothing recovers short of a new process. So an
//! isolated device runs its context, streams and library actors in a worker: this same
//! executable, started again in worker mode (`main` calls [`enter_worker_if_requested`]
//! first, or carries `#[gpu_main]`). The `DeviceActor` in the user's process stays the
//! stable address; a `WorkerActor` under it owns the worker. When the worker reports a
//! sticky fault (or dies any other way) every request in flight gets an error, the
//! supervisor respawns the worker within its restart budget, the generation goes up
//! (older `GpuRef`s fail `Stale`) and requests queued meanwhile are delivered to the new
//! worker.
//!
//! What crosses: the messages of every inner actor of the device — `ContextActor`,
//! `BlasActor`, `RngActor`, `FftActor`, `SolverActor`, `KernelActor`, `ModuleActor`,
//! `EventActor` and `GraphActor` (`#[gpu_actor(wire)]` generates their encoding);
//! `GpuRef`s, `GpuEvent`s, `GraphRef`s and `ModuleRef`s as ids; element data through two
//! shared-memory arenas; pinned buffers as ranges of a third, the device's, which every
//! worker maps and page-locks (`wire/pinned.rs`); the worker's timeline when asked. Host
//! access to managed memory, TMA descriptors and raw scalars other than plain numbers
//! answer `Unsupported` on an isolated device (README lists them).
//!
//! Security: the channel is a socket pair and the arenas are `memfd`s inherited by the
//! child at fixed descriptors; nothing listens on a path or a port. A frame that does
//! not decode is an error for its request, never a crash of either side.

#[cfg(isolation)]
pub(crate) mod link;
#[cfg(not(isolation))]
#[path = "absent.rs"]
pub(crate) mod link;
#[cfg(isolation)]
pub(crate) mod standby;
#[cfg(isolation)]
mod worker;
#[cfg(isolation)]
pub(crate) mod worker_actor;

pub use crate::backend::config::IsolationConfig;
#[cfg(isolation)]
pub use worker::enter_worker_if_requested;

/// Runs this process as an isolated device's GPU worker if it was started as one. This
/// build has no isolated devices (the `isolation` feature is off, or the platform is not
/// Linux), so no process is ever started as one: it returns at once. Kept so that
/// `#[gpu_main]` and programs calling it compile in every build.
#[cfg(not(isolation))]
pub fn enter_worker_if_requested() {}

/// Whether this build has isolated devices (the `isolation` feature, on Linux); without,
/// an isolated `DeviceConfig` answers `Unsupported` at `Device::open`.
pub(crate) fn unavailable() -> Option<crate::error::GpuError> {
    if cfg!(isolation) {
        None
    } else if cfg!(target_os = "linux") {
        Some(crate::error::GpuError::without_feature(
            "an isolated device",
            "isolation",
            crate::CRATE,
        ))
    } else {
        Some(crate::error::GpuError::Unsupported(
            "isolated devices need Linux (a worker process reached through memfd shared memory and a Unix socket)"
                .into(),
        ))
    }
}

pub use crate::process_role::WORKER_ENV;

/// Descriptors the worker inherits: the socket, the request arena, the reply arena, the
/// pinned arena.
#[cfg(isolation)]
const WORKER_FDS: [i32; 4] = [3, 4, 5, 6];
