//! Completion: turning "work enqueued on a stream" into a future that resolves when the
//! GPU is done — or with an error when the stream failed, or `Timeout` at the deadline.
//!
//! Three strategies behind one type, chosen in `DeviceConfig` (the default was picked by
//! the round-trip figures of `benches/sgemm.rs`, see BENCHMARKS.md):
//! - `HostFn`: `cuLaunchHostFunc` completes a channel. A host function never fires after
//!   a device fault, so the wait also queries an event every few milliseconds.
//! - `Polled`: one poller thread per device spins `cuEventQuery` over the pending events.
//! - `Blocking`: the caller spins `cuEventQuery` itself (on the actor's own thread).
//! - `Spin`: a task on the actor's own thread queries the event between the actor's other
//!   work, so the reply leaves from that thread as soon as the GPU is done (no hand-off
//!   through a poller) and the actor keeps taking — and enqueuing — requests meanwhile.
//!
//! Every strategy reports a failed stream as the classified `GpuError` and every wait has
//! a deadline, so no reply hangs.

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::oneshot;

use crate::error::GpuError;

/// How completions are observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum CompletionStrategy {
    /// `cuLaunchHostFunc` callback, with a periodic fault check.
    HostFn,
    /// A poller thread spinning `cuEventQuery`; the waiting actor is free meanwhile.
    Polled,
    /// Spin on `cuEventQuery` in the waiting actor's own thread, inside the request: a
    /// core spins while the GPU works and the actor takes no new request meanwhile.
    Blocking,
    /// A task on the waiting actor's own thread queries the event, yielding to the
    /// actor's other work between queries. The default: as fast a round trip as
    /// `Blocking` on the H200 (BENCHMARKS.md, `benches/sgemm.rs`) — the completion is seen
    /// on the thread that replies — while the actor keeps enqueuing further requests, so
    /// several asks in flight keep the GPU busy. A core spins while work is pending.
    #[default]
    Spin,
}

/// The pause between two event queries of a spinning wait, after `waited`: about a
/// microsecond at first, then a 64th of the time waited so far, at most 20 µs. Each
/// query takes driver locks, and a tight query loop measurably slows long GPU work
/// (BENCHMARKS.md: SGEMM 4096, the solver); backing off keeps short waits as fast as
/// before and adds at most ~1.6% to long ones.
fn query_pause(waited: Duration) -> Duration {
    (waited / 64).clamp(Duration::from_micros(1), Duration::from_micros(20))
}

/// Spins (without calling the driver) for `d`.
fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// How often a host-function wait checks for a device fault.
const FAULT_CHECK: Duration = Duration::from_millis(5);

type PollReq = (CudaEvent, oneshot::Sender<Result<(), GpuError>>, Instant);

/// Waits for stream work with the configured strategy.
#[derive(Clone)]
pub(crate) struct Completer {
    strategy: CompletionStrategy,
    poller: Option<std_mpsc::Sender<PollReq>>,
    deadline: Duration,
}

fn query(event: &CudaEvent) -> Result<bool, GpuError> {
    event.try_is_complete().map_err(GpuError::from)
}

impl Completer {
    /// A completer for `ctx`; the polled strategy starts its poller thread here.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        strategy: CompletionStrategy,
        deadline: Duration,
    ) -> Result<Self, GpuError> {
        let poller = match strategy {
            CompletionStrategy::Polled => Some(start_poller(ctx.clone())?),
            _ => None,
        };
        Ok(Completer {
            strategy,
            poller,
            deadline,
        })
    }

    /// True if waits spin on the caller's thread (`Blocking`).
    pub(crate) fn blocks_caller(&self) -> bool {
        self.strategy == CompletionStrategy::Blocking
    }

    /// The deadline of every wait.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Marks the current end of `stream` and returns a future resolving when the GPU has
    /// reached it. Call on the thread that enqueued the work.
    pub(crate) fn done(&self, stream: &Arc<CudaStream>) -> BoxFuture<'static, Result<(), GpuError>> {
        let event = match stream.record_event(None) {
            Ok(e) => e,
            Err(e) => return futures::future::ready(Err(e.into())).boxed(),
        };
        let deadline = self.deadline;
        match self.strategy {
            CompletionStrategy::Blocking => {
                let start = Instant::now();
                let r = loop {
                    match query(&event) {
                        Ok(true) => break Ok(()),
                        Ok(false) if start.elapsed() > deadline => break Err(GpuError::Timeout(deadline)),
                        // Query about once a microsecond: a tight cuEventQuery loop
                        // measurably slows long kernels (BENCHMARKS.md, SGEMM 4096).
                        Ok(false) => spin_for(query_pause(start.elapsed())),
                        Err(e) => break Err(e),
                    }
                };
                futures::future::ready(r).boxed()
            }
            CompletionStrategy::Spin => spin_task(event, deadline).boxed(),
            CompletionStrategy::Polled => {
                let (tx, rx) = oneshot::channel();
                let poller = self.poller.as_ref().expect("polled completer has a poller");
                if poller.send((event, tx, Instant::now())).is_err() {
                    return futures::future::ready(Err(GpuError::DeviceLost("completion poller stopped".into())))
                        .boxed();
                }
                async move {
                    match tokio::time::timeout(deadline, rx).await {
                        Ok(Ok(r)) => r,
                        Ok(Err(_)) => Err(GpuError::DeviceLost("completion poller stopped".into())),
                        Err(_) => Err(GpuError::Timeout(deadline)),
                    }
                }
                .boxed()
            }
            CompletionStrategy::HostFn => {
                let (tx, mut rx) = oneshot::channel::<()>();
                if let Err(e) = crate::sys::launch_host_fn(
                    stream,
                    Box::new(move || {
                        let _ = tx.send(());
                    }),
                ) {
                    return futures::future::ready(Err(e)).boxed();
                }
                async move {
                    let start = Instant::now();
                    loop {
                        match tokio::time::timeout(FAULT_CHECK, &mut rx).await {
                            Ok(Ok(())) => return Ok(()),
                            Ok(Err(_)) => return Err(GpuError::DeviceLost("host function dropped".into())),
                            Err(_) => {
                                // The callback has not fired: a device fault would stop it
                                // for ever, so ask the event.
                                query(&event)?;
                                if start.elapsed() > deadline {
                                    return Err(GpuError::Timeout(deadline));
                                }
                            }
                        }
                    }
                }
                .boxed()
            }
        }
    }
}

thread_local! {
    /// `Spin` waits pending on this thread: they share one query rate between them.
    static SPINNING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts a `Spin` wait on its thread while it lives.
struct SpinSlot;

impl SpinSlot {
    fn new() -> Self {
        SPINNING.with(|c| c.set(c.get() + 1));
        SpinSlot
    }
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        SPINNING.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// The `Spin` wait: each poll queries the event; if the GPU is not there yet, it pauses
/// briefly (the pause of a spinning wait, shared among the waits of this thread, and cut
/// short when another thread schedules work here) and wakes itself, so the executor
/// runs the thread's other tasks — the actor's next messages — in between.
async fn spin_task(event: CudaEvent, deadline: Duration) -> Result<(), GpuError> {
    let start = Instant::now();
    let mut slot: Option<SpinSlot> = None;
    let runtime = tokio::runtime::Handle::try_current().ok();
    futures::future::poll_fn(move |cx| match query(&event) {
        Ok(true) => std::task::Poll::Ready(Ok(())),
        Err(e) => std::task::Poll::Ready(Err(e)),
        Ok(false) if start.elapsed() > deadline => std::task::Poll::Ready(Err(GpuError::Timeout(deadline))),
        Ok(false) => {
            slot.get_or_insert_with(SpinSlot::new);
            let waiting = SPINNING.with(|c| c.get()).max(1);
            let pause = query_pause(start.elapsed()) / waiting;
            match &runtime {
                Some(h) => crate::dispatcher::spin_until_work(h, pause),
                None => spin_for(pause),
            }
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// A sticky error the stream reports, if any (probed with an event query, which reports
/// it where cudarc's `check_err` does not — see DESIGN.md).
pub(crate) fn stream_fault(stream: &Arc<CudaStream>) -> Option<GpuError> {
    let err = match stream.record_event(None) {
        Err(e) => GpuError::from(e),
        Ok(ev) => match query(&ev) {
            Err(e) => e,
            Ok(_) => return None,
        },
    };
    err.is_sticky().then_some(err)
}

/// The poller thread: spins over pending events while any are pending, parks on its
/// channel otherwise. It ends when every sender is gone.
fn start_poller(ctx: Arc<CudaContext>) -> Result<std_mpsc::Sender<PollReq>, GpuError> {
    let (tx, rx) = std_mpsc::channel::<PollReq>();
    std::thread::Builder::new()
        .name(format!("cuda-poller-{}", ctx.ordinal()))
        .spawn(move || {
            let _ = ctx.bind_to_thread();
            let mut pending: Vec<PollReq> = Vec::new();
            loop {
                if pending.is_empty() {
                    match rx.recv() {
                        Ok(req) => pending.push(req),
                        Err(_) => return,
                    }
                }
                while let Ok(req) = rx.try_recv() {
                    pending.push(req);
                }
                // Paced by the newest wait, so a short one is not slowed by a long one.
                let newest = pending.iter().map(|p| p.2.elapsed()).min().unwrap_or_default();
                spin_for(query_pause(newest));
                pending.retain_mut(|(event, reply, _)| match query(event) {
                    Ok(false) => !reply.is_closed(),
                    Ok(true) => {
                        let _ = std::mem::replace(reply, oneshot::channel().0).send(Ok(()));
                        false
                    }
                    Err(e) => {
                        let _ = std::mem::replace(reply, oneshot::channel().0).send(Err(e));
                        false
                    }
                });
            }
        })
        .map_err(|e| GpuError::Other(format!("could not start the completion poller: {e}")))?;
    Ok(tx)
}
