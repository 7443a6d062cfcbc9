//! Where actors run: the shared tokio runtime, or a dedicated GPU thread.
//!
//! A CUDA context is current per OS thread, and library handles (cuBLAS, cuFFT) are
//! cheapest and safest when always used from one thread. `GpuDispatcher` gives an actor a
//! thread of its own for its whole life — across restarts — by running a current-thread
//! tokio runtime on a dedicated OS thread.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::error::GpuError;

/// An executor for actor tasks.
#[derive(Clone, Debug)]
pub enum Dispatcher {
    /// The runtime the `ActorSystem` was created in (a work-stealing pool, usually).
    Shared(Handle),
    /// A dedicated OS thread.
    Gpu(GpuDispatcher),
}

impl Dispatcher {
    /// Spawns a task on this dispatcher.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Dispatcher::Shared(h) => h.spawn(fut),
            Dispatcher::Gpu(g) => g.handle.spawn(fut),
        }
    }
}

struct GpuThread {
    thread_id: ThreadId,
    name: String,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
}

impl Drop for GpuThread {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(());
        }
    }
}

/// One dedicated OS thread running a current-thread tokio runtime. Cloning shares the
/// thread; it ends when the last clone is dropped (tasks still on it are cancelled).
#[derive(Clone)]
pub struct GpuDispatcher {
    handle: Handle,
    thread: Arc<GpuThread>,
}

impl std::fmt::Debug for GpuDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuDispatcher({})", self.thread.name)
    }
}

impl GpuDispatcher {
    /// Starts the thread, named `name` (visible in debuggers and `top -H`).
    pub fn new(name: &str) -> Result<GpuDispatcher, GpuError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((rt.handle().clone(), std::thread::current().id())));
                rt.block_on(async {
                    let _ = shutdown_rx.await;
                });
            })
            .map_err(|e| GpuError::Other(format!("could not start dispatcher thread {name}: {e}")))?;
        let (handle, thread_id) = ready_rx
            .recv()
            .map_err(|_| GpuError::Other(format!("dispatcher thread {name} died at start")))?
            .map_err(|e| GpuError::Other(format!("dispatcher thread {name}: {e}")))?;
        Ok(GpuDispatcher {
            handle,
            thread: Arc::new(GpuThread {
                thread_id,
                name: name.to_string(),
                shutdown: Mutex::new(Some(shutdown_tx)),
            }),
        })
    }

    /// The id of the dedicated thread: every actor on this dispatcher runs there.
    pub fn thread_id(&self) -> ThreadId {
        self.thread.thread_id
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.thread.name
    }
}

impl From<GpuDispatcher> for Dispatcher {
    fn from(g: GpuDispatcher) -> Self {
        Dispatcher::Gpu(g)
    }
}
