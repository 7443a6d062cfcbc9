//! Where actors run: the shared tokio runtime, or a dedicated GPU thread.
//!
//! A CUDA context is current per OS thread, and library handles (cuBLAS, cuFFT) are
//! cheapest and safest when always used from one thread. `GpuDispatcher` gives an actor a
//! thread of its own for its whole life — across restarts — by running a current-thread
//! tokio runtime on a dedicated OS thread.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::error::GpuError;

pub(crate) mod idle;
pub(crate) mod spin;

use idle::Idle;

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
    /// The idle spin, read by the thread's actors and by its park hook.
    idle: Arc<Idle>,
}

impl Drop for GpuThread {
    fn drop(&mut self) {
        // End an idle spin in progress first: the shutdown below wakes the thread's main
        // future, which the spin (watching the queue of tasks) would not notice.
        self.idle.set_spin(Duration::ZERO);
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
    /// Starts the thread, named `name` (visible in debuggers and `top -H`). It parks as
    /// soon as it has nothing to do, until [`GpuDispatcher::set_idle_spin`] says
    /// otherwise.
    pub fn new(name: &str) -> Result<GpuDispatcher, GpuError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let idle = Idle::new();
        let thread_idle = idle.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let (hook_idle, unpark_idle) = (thread_idle.clone(), thread_idle.clone());
                // Timers only, no I/O driver: nothing on a GPU thread does tokio I/O, and
                // without one a wake-up from another thread is an atomic flag (the I/O
                // driver's is an eventfd write, then an epoll turn here) — both ends of
                // every request's two thread hops.
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    // Take work scheduled from other threads (an actor's next message)
                    // before the next local task: a `Spin` completion keeps waking itself
                    // and must not make the actor's mailbox wait behind it.
                    .global_queue_interval(1)
                    // Ends early when work arrives or the spin is turned off (a shutdown).
                    .on_thread_park(move || hook_idle.spin_at_park())
                    // The thread woke for work: the idle spin counts from here at the
                    // latest (actors and completion waits mark their own ends of work;
                    // plain tasks spawned on the thread have only this).
                    .on_thread_unpark(move || unpark_idle.worked())
                    .build();
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                thread_idle.install(rt.handle().metrics());
                let _ = ready_tx.send(Ok((rt.handle().clone(), std::thread::current().id())));
                rt.block_on(async {
                    let _ = shutdown_rx.await;
                });
            })
            .map_err(|e| GpuError::io(format!("starting dispatcher thread {name}"), e))?;
        let (handle, thread_id) = ready_rx
            .recv()
            .map_err(|_| GpuError::Internal(format!("dispatcher thread {name} died at start")))?
            .map_err(|e| GpuError::io(format!("starting the runtime of dispatcher thread {name}"), e))?;
        Ok(GpuDispatcher {
            handle,
            thread: Arc::new(GpuThread {
                thread_id,
                name: name.to_string(),
                shutdown: Mutex::new(Some(shutdown_tx)),
                idle,
            }),
        })
    }

    /// How long the thread spins for new work after its last work, before it parks
    /// (zero: park at once, and end a spin in progress). A thread parked for the length
    /// of a GPU operation takes tens of microseconds to wake — more in a virtual
    /// machine, whose idle CPU must be woken too — and that is added to the next
    /// request's round trip; spinning keeps it ready at the price of a busy core
    /// meanwhile. An actor of the thread spins on its own mailbox, the thread's park hook
    /// on its queue of tasks woken from other threads (see `dispatcher::idle`).
    pub fn set_idle_spin(&self, spin: Duration) {
        self.thread.idle.set_spin(spin);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A spinning thread still takes every task sent from other threads, one after the
    /// other (each arriving while it spins or after it parked), and still runs timers.
    #[test]
    fn an_idle_spinning_thread_takes_every_task_and_runs_timers() {
        let d = GpuDispatcher::new("spin-test").unwrap();
        d.set_idle_spin(Duration::from_millis(2));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for i in 0..200u64 {
                let on = d.thread_id();
                let got = Dispatcher::from(d.clone()).spawn(async move { (std::thread::current().id() == on, i * 2) });
                let (same_thread, v) = tokio::time::timeout(Duration::from_secs(10), got)
                    .await
                    .expect("a task sent to a spinning thread runs")
                    .unwrap();
                assert!(same_thread);
                assert_eq!(v, i * 2);
                if i % 50 == 0 {
                    // Let the spin run out, so the next task finds the thread parked.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let slept = Dispatcher::from(d.clone()).spawn(async {
                tokio::time::sleep(Duration::from_millis(3)).await;
                7
            });
            assert_eq!(
                tokio::time::timeout(Duration::from_secs(10), slept)
                    .await
                    .unwrap()
                    .unwrap(),
                7
            );
        });
    }

    /// A thread that serves plain tasks (no actor marks its work) stays hot after each
    /// one, also once the spin's length has passed since the thread started.
    #[test]
    fn the_idle_spin_counts_from_the_last_task_not_from_the_start() {
        let d = GpuDispatcher::new("spin-restart-test").unwrap();
        d.set_idle_spin(Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(2500));
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(Dispatcher::from(d.clone()).spawn(async {})).unwrap();
        assert!(d.thread.idle.spin_left().is_some(), "the thread spins after the task");
    }

    /// Dropping the last handle ends the thread even while it spins for work: the spin
    /// ends with the shutdown, not when its (here 60 s) limit runs out.
    #[test]
    fn dropping_a_spinning_dispatcher_ends_its_thread_at_once() {
        struct SignalOnDrop(std::sync::mpsc::Sender<()>);
        impl Drop for SignalOnDrop {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let d = GpuDispatcher::new("spin-stop-test").unwrap();
        d.set_idle_spin(Duration::from_secs(60));
        let (tx, rx) = std::sync::mpsc::channel();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        // A task that never finishes: it is dropped when the thread's runtime shuts down.
        Dispatcher::from(d.clone()).spawn(async move {
            let _guard = SignalOnDrop(tx);
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        });
        started_rx.recv_timeout(Duration::from_secs(10)).expect("the task ran");
        // Let the thread run out of work and start its idle spin.
        std::thread::sleep(Duration::from_millis(50));
        drop(d);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the thread shut down well before its 60 s spin ran out");
    }
}
