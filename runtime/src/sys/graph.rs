//! What CUDA graphs need beyond cudarc's safe layer: a `Send` owner for an instantiated
//! graph, a cuBLAS workspace fixed before capture, and captures kept apart from the
//! context-wide synchronisation that would break them.
//!
//! Why the last: CUDA forbids synchronising a context while any of its streams is
//! capturing — the synchronising call fails and the capture is invalidated (its next
//! library call reports `CUBLAS_STATUS_EXECUTION_FAILED`). cudarc synchronises the
//! context when a `CudaContext` makes its first stream (turning its event tracking on),
//! and every `Device` has a `CudaContext` of its own over the GPU's one primary context,
//! so a device starting while another captured broke both (found on an H100 with tests
//! running in parallel, 2026-12-05); `cublasDestroy`'s synchronisation beside a capture
//! even crashed inside the driver. Captures hold [`GATE`] shared — several may run at
//! once, each thread-local — and what synchronises the context holds it exclusively:
//! making a stream, destroying a library actor's core, freeing or unregistering
//! page-locked memory ([`apart_from_captures`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(feature = "blas")]
use cudarc::cublas::CudaBlas;
use cudarc::driver::{sys as ds, CudaContext, CudaGraph, CudaSlice, CudaStream, DevicePtrMut};

use crate::error::GpuError;

/// An instantiated graph owned by one actor.
pub(crate) struct GraphExec(CudaGraph);

// SAFETY: CUDA forbids concurrent use of one graph from several threads, which is why
// cudarc's `CudaGraph` is not `Send`. A `GraphExec` lives inside one `GraphActor`,
// whose handlers run one at a time on the actor's own thread: every use is serialised,
// and moving it between threads (the actor's start) is allowed by CUDA.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Enqueues one replay on the stream it was captured on.
    pub(crate) fn launch(&self) -> Result<(), GpuError> {
        Ok(self.0.launch()?)
    }
}

/// Held shared by every capture in the process, exclusively while a stream is made.
static GATE: RwLock<()> = RwLock::new(());

/// Captures made again after another thread invalidated them, in this process.
static RECAPTURES: AtomicU64 = AtomicU64::new(0);

/// How many graph captures of this process were invalidated by another thread's CUDA
/// call and made again (also counted as the `atomr_graph_recaptures_total` metric).
pub fn recaptures() -> u64 {
    RECAPTURES.load(Ordering::Relaxed)
}

/// Captures tried before an invalidated capture is reported, each retried after a pause
/// twice the last (0.5 ms, then up to [`CAPTURE_PAUSE_MAX`]): about 80 ms in all, longer
/// than another device's shutdown freeing its libraries' workspaces.
const CAPTURE_TRIES: u32 = 10;

/// The longest pause between two tries of a capture.
const CAPTURE_PAUSE_MAX: std::time::Duration = std::time::Duration::from_millis(16);

/// Captures what `enqueue` puts on `stream` into an instantiated, uploaded graph. The
/// capture is thread-local (other threads' CUDA calls are not affected) and holds
/// [`GATE`], so nothing of ours synchronises the context meanwhile. Context-wide calls
/// we do not own (a program's own CUDA calls beside ours) can still invalidate it: CUDA then
/// fails the capture's calls and ends it with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`,
/// and the capture — which ran nothing — is made again, [`CAPTURE_TRIES`] times at
/// most. Whatever fails, the stream leaves capture mode before this returns.
pub(crate) fn capture(
    stream: &Arc<CudaStream>,
    enqueue: impl Fn() -> Result<(), GpuError>,
) -> Result<GraphExec, GpuError> {
    let mut pause = std::time::Duration::from_micros(500);
    let mut tries = 1;
    loop {
        let (enqueued, ended) = {
            let _captures = Holding::shared();
            stream.begin_capture(ds::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let enqueued = enqueue();
            // Always ended, even when the enqueue failed: the stream must not stay capturing.
            (enqueued, stream.end_capture(ds::CUgraphInstantiate_flags(0)))
        };
        match ended {
            Err(e) if e.0 == ds::cudaError_enum::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && tries < CAPTURE_TRIES => {
                tracing::debug!(
                    tries,
                    "a graph capture was invalidated by another thread's CUDA call; capturing again"
                );
                RECAPTURES.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("atomr_graph_recaptures_total").increment(1);
                std::thread::sleep(pause);
                pause = (pause * 2).min(CAPTURE_PAUSE_MAX);
                tries += 1;
            }
            ended => {
                enqueued?;
                let g = ended?.ok_or_else(|| GpuError::invalid("a graph needs at least one operation"))?;
                g.upload()?;
                return Ok(GraphExec(g));
            }
        }
    }
}

/// A new stream of `ctx` (cudarc's non-blocking one), made while no capture runs: the
/// first stream of a `CudaContext` synchronises the whole context.
pub(crate) fn new_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>, GpuError> {
    apart_from_captures(|| Ok(ctx.new_stream()?))
}

/// Runs `f` — a call that synchronises the whole context — while no capture runs. Worse
/// than invalidating a capture: `cublasDestroy`'s `cuCtxSynchronize` crashed inside the
/// driver (SIGSEGV in libcuda) while another thread captured (H100, driver 580.159.04,
/// found under cuda-gdb, 2026-12-05). Library handles are destroyed here
/// (`library::shell`), page-locked memory freed and unregistered (`sys::pinned`).
/// A thread that holds the gate already (a core dropped while another core is dropped;
/// a call from inside a capture, which no path of ours makes) runs `f` as it is rather
/// than wait for itself.
pub(crate) fn apart_from_captures<R>(f: impl FnOnce() -> R) -> R {
    let _alone = Holding::exclusive();
    f()
}

thread_local! {
    /// Whether this thread holds [`GATE`] (either way): `std`'s lock is not re-entrant.
    static HOLDS_GATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This thread's hold on [`GATE`], released when dropped — or nothing, when the thread
/// held it already.
enum Holding {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
    Already,
}

impl Holding {
    /// The gate shared (a capture).
    fn shared() -> Holding {
        Self::enter(|| Holding::Shared(GATE.read().unwrap_or_else(|p| p.into_inner())))
    }

    /// The gate alone (what synchronises the context).
    fn exclusive() -> Holding {
        Self::enter(|| Holding::Exclusive(GATE.write().unwrap_or_else(|p| p.into_inner())))
    }

    /// `take`s the gate unless this thread holds it.
    fn enter(take: impl FnOnce() -> Holding) -> Holding {
        if HOLDS_GATE.with(|h| h.replace(true)) {
            Holding::Already
        } else {
            take()
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if !matches!(self, Holding::Already) {
            HOLDS_GATE.with(|h| h.set(false));
        }
    }
}

#[cfg(feature = "blas")]
/// Gives `blas` a workspace of its own, so a captured cuBLAS call allocates nothing
/// during capture (NVIDIA's advice for graph capture). `workspace` must outlive `blas`'s
/// use.
pub(crate) fn set_cublas_workspace(blas: &CudaBlas, workspace: &mut CudaSlice<u8>) -> Result<(), GpuError> {
    let bytes = workspace.len();
    let stream = workspace.stream().clone();
    let (ptr, _guard) = workspace.device_ptr_mut(&stream);
    // SAFETY: `ptr` is a live device allocation of `bytes` bytes in the handle's context;
    // the caller keeps it alive as long as the handle is used.
    unsafe { cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ptr as *mut std::ffi::c_void, bytes) }
        .result()
        .map_err(GpuError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nested holds on one thread run rather than wait for themselves, and the gate is
    /// free again afterwards (checked from another thread, with a deadline: a regression
    /// fails instead of hanging).
    #[test]
    fn a_thread_holding_the_gate_is_not_stopped_by_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let inner = apart_from_captures(|| apart_from_captures(|| 1) + 1);
            let shared = {
                let _captures = Holding::shared();
                apart_from_captures(|| 3)
            };
            tx.send(inner + shared).unwrap();
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(got, Ok(5), "nested holds waited for themselves");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(apart_from_captures(|| 7)).unwrap());
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(10)),
            Ok(7),
            "the gate stayed held"
        );
    }
}
