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

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::oneshot;

use crate::dispatcher::idle::{self, WaitGuard};
use crate::dispatcher::spin::spin_for;
use crate::error::GpuError;

mod event_pool;
mod stream_waits;

use event_pool::{EventPool, PooledEvent};
use stream_waits::{Step, StreamWaits};

/// How completions are observed.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// use atomr_accel_cuda_runtime::CompletionStrategy;
/// let config = DeviceConfig { completion: CompletionStrategy::Polled, ..DeviceConfig::cpu() };
/// let dev = Device::open(&system, config).await?;
/// let x = dev.upload(vec![2u32; 100]).await?;
/// assert_eq!(dev.sum(&x).await?, 200);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum CompletionStrategy {
    /// `cuLaunchHostFunc` callback, with a periodic fault check. The GPU signals each
    /// host function by interrupt, which in a virtual machine holds the CPU taking it
    /// for tens of microseconds (BENCHMARKS.md, "GPU interrupts"); the other strategies
    /// raise none.
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

/// How long a wait queries its event back to back before it starts to pace itself.
const TIGHT_QUERIES: Duration = Duration::from_micros(50);

/// The pause between two event queries of a spinning wait, after `waited`: none for the
/// first 50 µs (a query costs ~0.15 µs on the H200, and a pause is latency added to every
/// short call: `benches/completion_probe.cu`), then a 512th of the time waited so far,
/// 0.25–20 µs. Each query takes driver locks, and a query loop without pauses measurably
/// slows long GPU work (BENCHMARKS.md: SGEMM 4096, the solver); backing off this way adds
/// at most ~0.2% to a wait, ~0.1% on average. A 128th cost ~0.5 µs on average on a
/// 0.13 ms call, a measurable share of an awaited f16 einsum's gap to raw cuBLAS, and a
/// 512th left SGEMM 4096 as fast as raw (BENCHMARKS.md).
fn query_pause(waited: Duration) -> Duration {
    if waited < TIGHT_QUERIES {
        return Duration::ZERO;
    }
    (waited / 512).clamp(Duration::from_nanos(250), Duration::from_micros(20))
}

/// How often a host-function wait checks for a device fault.
const FAULT_CHECK: Duration = Duration::from_millis(5);

type PollReq = (PooledEvent, oneshot::Sender<Result<(), GpuError>>, Instant);

/// Waits for stream work with the configured strategy.
#[derive(Clone)]
pub(crate) struct Completer {
    strategy: CompletionStrategy,
    poller: Option<std_mpsc::Sender<PollReq>>,
    deadline: Duration,
    /// The completion events, reused once complete.
    events: EventPool,
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
            events: EventPool::default(),
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
    pub(crate) fn done(&self, stream: &Arc<CudaStream>) -> Completion {
        // Every strategy but `Spin` waits on an event of its own.
        type PerEvent = fn(&Completer, &Arc<CudaStream>, PooledEvent) -> BoxFuture<'static, Result<(), GpuError>>;
        let wait: PerEvent = match self.strategy {
            CompletionStrategy::Spin => return self.spin(stream),
            CompletionStrategy::Blocking => Completer::blocking,
            CompletionStrategy::Polled => Completer::polled,
            CompletionStrategy::HostFn => Completer::host_fn,
        };
        match self.events.record(stream) {
            Ok(event) => Completion::Boxed(wait(self, stream, event)),
            Err(e) => Completion::Failed(Some(e)),
        }
    }

    /// The `Spin` wait: waits in flight on one stream share their events
    /// (`stream_waits`).
    fn spin(&self, stream: &Arc<CudaStream>) -> Completion {
        let waits = waits_of(stream);
        let (events, stream) = (self.events.clone(), stream.clone());
        match waits.join(|| events.record(&stream)) {
            Ok(seq) => Completion::Spin(SpinWait {
                joined: Some(Joined { waits, seq }),
                stream,
                events,
                deadline: self.deadline,
                start: Instant::now(),
                querying: None,
                _wait: idle::wait_started(),
            }),
            Err(e) => Completion::Failed(Some(e)),
        }
    }

    /// `Blocking`: spins on the event right here, in the caller.
    fn blocking(&self, _stream: &Arc<CudaStream>, mut event: PooledEvent) -> BoxFuture<'static, Result<(), GpuError>> {
        let deadline = self.deadline;
        let start = Instant::now();
        let r = loop {
            match event.query() {
                Ok(true) => break Ok(()),
                Ok(false) if start.elapsed() > deadline => break Err(GpuError::Timeout(deadline)),
                // Paced (`query_pause`): a query loop without pauses measurably
                // slows long kernels (BENCHMARKS.md, SGEMM 4096).
                Ok(false) => spin_for(query_pause(start.elapsed())),
                Err(e) => break Err(e),
            }
        };
        futures::future::ready(r).boxed()
    }

    /// `Polled`: the device's poller thread watches the event.
    fn polled(&self, _stream: &Arc<CudaStream>, event: PooledEvent) -> BoxFuture<'static, Result<(), GpuError>> {
        let deadline = self.deadline;
        let (tx, rx) = oneshot::channel();
        let poller = self.poller.as_ref().expect("polled completer has a poller");
        if poller.send((event, tx, Instant::now())).is_err() {
            return futures::future::ready(Err(GpuError::DeviceLost("completion poller stopped".into()))).boxed();
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

    /// `HostFn`: a host function enqueued after the event signals it.
    fn host_fn(&self, stream: &Arc<CudaStream>, mut event: PooledEvent) -> BoxFuture<'static, Result<(), GpuError>> {
        let deadline = self.deadline;
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
                    Ok(Ok(())) => {
                        // The host function runs after the event's work.
                        event.mark_complete();
                        return Ok(());
                    }
                    Ok(Err(_)) => return Err(GpuError::DeviceLost("host function dropped".into())),
                    Err(_) => {
                        // The callback has not fired: a device fault would stop it
                        // for ever, so ask the event.
                        event.query()?;
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

thread_local! {
    /// The stream this thread waited on last, and its queue: a caller waiting on one
    /// stream again and again skips the process-wide map. (Were the stream destroyed and
    /// its address reused, this thread's queue and the map's could differ for a while:
    /// harmless, a mark covers what was enqueued on the stream before it whatever the
    /// queue.)
    static LAST: std::cell::RefCell<Option<(usize, StreamWaits<PooledEvent>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The `Spin` waits of every stream of the process, by stream (see [`stream_waits`]).
fn waits_of(stream: &Arc<CudaStream>) -> StreamWaits<PooledEvent> {
    let key = stream.cu_stream() as usize;
    let cached = LAST.with(|l| l.borrow().as_ref().filter(|(k, _)| *k == key).map(|(_, w)| w.clone()));
    if let Some(w) = cached {
        return w;
    }
    let w = waits_of_stream(key);
    LAST.with(|l| *l.borrow_mut() = Some((key, w.clone())));
    w
}

/// The process-wide map behind [`waits_of`].
fn waits_of_stream(key: usize) -> StreamWaits<PooledEvent> {
    static WAITS: OnceLock<Mutex<HashMap<usize, StreamWaits<PooledEvent>>>> = OnceLock::new();
    let mut all = WAITS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    // Idle queues of gone streams (rebuilt contexts) go once there are many.
    if all.len() > KEPT_QUEUES {
        all.retain(|_, w| !w.is_idle());
    }
    all.entry(key).or_default().clone()
}

/// Stream queues kept when idle: one per live stream of the process, so that a wait
/// does not allocate one.
const KEPT_QUEUES: usize = 64;

impl stream_waits::Mark for PooledEvent {
    fn query(&mut self) -> Result<bool, GpuError> {
        PooledEvent::query(self)
    }
}

/// A `Spin` wait's place in its stream's queue, left when dropped (resolved, or the
/// future dropped), which wakes the wait behind it.
struct Joined {
    waits: StreamWaits<PooledEvent>,
    seq: u64,
}

impl Drop for Joined {
    fn drop(&mut self) {
        self.waits.leave(self.seq);
    }
}

/// A completion: the future [`Completer::done`] returns (one allocation fewer per
/// request than a boxed future for the default `Spin` strategy).
pub(crate) enum Completion {
    /// The wait could not start (the mark was not recorded); taken by the first poll.
    Failed(Option<GpuError>),
    /// A `Spin` wait.
    Spin(SpinWait),
    /// Any other strategy's wait.
    Boxed(BoxFuture<'static, Result<(), GpuError>>),
}

impl std::future::Future for Completion {
    type Output = Result<(), GpuError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Completion::Failed(e) => Poll::Ready(Err(e
                .take()
                .unwrap_or_else(|| GpuError::Internal("a failed completion polled again".into())))),
            Completion::Spin(w) => w.poll(cx),
            Completion::Boxed(f) => f.as_mut().poll(cx),
        }
    }
}

/// The `Spin` wait. The oldest wait of its stream queries the stream's marks at each
/// poll; if the GPU is not there yet, it pauses briefly (the pause of a spinning wait,
/// cut short when another thread schedules work here) and wakes itself, so the executor
/// runs the thread's other tasks — the actor's next messages — in between. Younger waits
/// of the stream sleep until it is their turn; the deadline still holds for each.
///
/// `_wait` counts it on its GPU thread until it ends, so the thread's actors do not spin
/// for mail meanwhile (`dispatcher::idle`).
pub(crate) struct SpinWait {
    /// Its place in the stream's queue, left as soon as it resolves.
    joined: Option<Joined>,
    stream: Arc<CudaStream>,
    events: EventPool,
    deadline: Duration,
    start: Instant,
    /// When it first found itself the oldest wait, not yet done: its query pauses are
    /// paced from there. Paced from `start`, a wait that queued behind 64 others for
    /// ~300 µs paused ~5 µs at its first miss, for GPU work a few µs from done.
    querying: Option<Instant>,
    _wait: WaitGuard,
}

impl SpinWait {
    fn poll(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), GpuError>> {
        let Some(joined) = &self.joined else {
            return Poll::Ready(Err(GpuError::Internal("a completion polled after it resolved".into())));
        };
        let late = self.start.elapsed() > self.deadline;
        let (stream, events) = (&self.stream, &self.events);
        let r = match joined.waits.poll(joined.seq, cx.waker(), || events.record(stream)) {
            Step::Done(r) => r,
            Step::Park | Step::Spin if late => Err(GpuError::Timeout(self.deadline)),
            Step::Park => return Poll::Pending,
            Step::Spin => {
                let since = *self.querying.get_or_insert_with(Instant::now);
                idle::pause(query_pause(since.elapsed()));
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        };
        // Leaving wakes the wait behind it now, not when this future is dropped.
        self.joined = None;
        Poll::Ready(r)
    }
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
                pending.retain_mut(|(event, reply, _)| match event.query() {
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
        .map_err(|e| GpuError::io("starting the completion poller thread", e))?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Back to back for the first 50 µs, then a 512th of the wait, within 0.25–20 µs.
    #[test]
    fn query_pauses_grow_with_the_wait_within_bounds() {
        let us = Duration::from_micros;
        assert_eq!(query_pause(us(0)), Duration::ZERO);
        assert_eq!(query_pause(us(49)), Duration::ZERO);
        assert_eq!(query_pause(us(50)), Duration::from_nanos(250));
        assert_eq!(query_pause(us(512)), us(1));
        assert_eq!(query_pause(us(5120)), us(10));
        assert_eq!(query_pause(Duration::from_secs(1)), us(20));
    }
}
