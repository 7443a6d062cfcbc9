//! The process's timeline: GPU operations bracketed by CUDA events, CPU-device operations
//! timed on the host, resolved into [`TimelineEvent`]s when asked for — with the
//! operations of isolated devices' workers merged in ([`RemoteTimeline`]: each worker
//! times its own and hands them over, on the machine's monotonic clock, which every
//! process shares).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::histogram::LatencyHistogram;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Devices (ordinals below 64) timed on their own (`Device::enable_timeline`), one bit
/// each, beside the process-wide switch.
static DEVICES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether operations of device `device` are timed: the whole process is, or that
/// device is.
fn enabled_for(device: usize) -> bool {
    timeline_enabled() || (device < 64 && DEVICES.load(Ordering::Acquire) & (1 << device) != 0)
}

/// Times the operations of device `device` alone from now on (or stops): the per-device
/// switch behind `Device::enable_timeline`. Ordinals from 64 on are timed only with the
/// whole process (`InvalidArgument`).
pub(crate) fn enable_device(device: usize, on: bool) -> Result<(), crate::error::GpuError> {
    if device >= 64 {
        return Err(crate::error::GpuError::invalid(format!(
            "device {device}: a device's own timeline covers ordinals 0–63; use enable_timeline for the whole process"
        )));
    }
    if on {
        let mut s = lock();
        s.origin
            .get_or_insert_with(|| (Instant::now(), crate::sys::monotonic_us()));
        DEVICES.fetch_or(1 << device, Ordering::AcqRel);
    } else {
        DEVICES.fetch_and(!(1 << device), Ordering::AcqRel);
    }
    Ok(())
}

/// One timed operation.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEvent {
    /// What ran (`"gemm<f32>"`, a kernel's name, …).
    pub name: String,
    /// The device it ran on.
    pub device: usize,
    /// The actor that enqueued it (`"kernel"`, `"blas"`, `"solver"`, …).
    pub lane: &'static str,
    /// Start, in microseconds since the timeline was first enabled.
    pub start_us: f64,
    /// Duration in microseconds (GPU time between the bracketing events on a GPU).
    pub dur_us: f64,
}

/// A GPU operation whose end has been recorded, waiting to be resolved.
struct Pending {
    name: String,
    device: usize,
    lane: &'static str,
    epoch: Arc<Epoch>,
    start: CudaEvent,
    end: CudaEvent,
}

/// A context's time origin: an event recorded at a known host time.
struct Epoch {
    event: CudaEvent,
    host_us: f64,
}

#[derive(Default)]
struct State {
    /// Host time origin (the first enable), and the same moment on the machine's
    /// monotonic clock.
    origin: Option<(Instant, f64)>,
    /// Per CUDA context (by address).
    epochs: HashMap<usize, Arc<Epoch>>,
    pending: Vec<Pending>,
    done: Vec<TimelineEvent>,
    histograms: HashMap<usize, LatencyHistogram>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| Mutex::new(State::default()))
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    state().lock().unwrap_or_else(|p| p.into_inner())
}

/// Where timed operations of another process come from: an isolated device's worker.
pub(crate) trait RemoteTimeline: Send + Sync {
    /// Times operations from now on, or stops.
    fn set_enabled(&self, on: bool);
    /// The operations timed so far (and forgets them), starts on the machine's
    /// monotonic clock ([`crate::sys::monotonic_us`]).
    fn take(&self) -> Vec<TimelineEvent>;
}

/// The live remote sources.
fn remotes() -> &'static Mutex<Vec<std::sync::Weak<dyn RemoteTimeline>>> {
    static REMOTES: OnceLock<Mutex<Vec<std::sync::Weak<dyn RemoteTimeline>>>> = OnceLock::new();
    REMOTES.get_or_init(Default::default)
}

/// The remote sources still alive (the dead ones dropped).
fn live_remotes() -> Vec<Arc<dyn RemoteTimeline>> {
    let mut r = remotes().lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|w| w.strong_count() > 0);
    r.iter().filter_map(|w| w.upgrade()).collect()
}

/// Adds the timeline of a worker serving device `device` to this process's (told at
/// once whether to time).
pub(crate) fn register_remote(remote: std::sync::Weak<dyn RemoteTimeline>, device: usize) {
    if enabled_for(device) {
        if let Some(r) = remote.upgrade() {
            r.set_enabled(true);
        }
    }
    remotes().lock().unwrap_or_else(|p| p.into_inner()).push(remote);
}

/// Turns operation timing on or off for the whole process — and for the workers of its
/// isolated devices (off by default).
pub fn enable_timeline(on: bool) {
    if on {
        let mut s = lock();
        s.origin
            .get_or_insert_with(|| (Instant::now(), crate::sys::monotonic_us()));
    }
    ENABLED.store(on, Ordering::Release);
    for r in live_remotes() {
        r.set_enabled(on);
    }
}

/// True while operations are timed.
pub fn timeline_enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

fn since_origin(s: &mut State, t: Instant) -> f64 {
    let (origin, _) = *s
        .origin
        .get_or_insert_with(|| (t, crate::sys::monotonic_us() - t.elapsed().as_secs_f64() * 1e6));
    t.saturating_duration_since(origin).as_secs_f64() * 1e6
}

/// The origin on the machine's monotonic clock.
fn origin_monotonic(s: &mut State) -> f64 {
    since_origin(s, Instant::now());
    s.origin.expect("set just now").1
}

fn finish(s: &mut State, e: TimelineEvent) {
    s.histograms.entry(e.device).or_default().record(e.dur_us);
    s.done.push(e);
}

/// Resolves every pending GPU operation, waiting for the ones still running — without
/// holding the state's lock meanwhile, so actors timing new operations never wait on
/// the GPU.
fn resolve() -> std::sync::MutexGuard<'static, State> {
    let pending = std::mem::take(&mut lock().pending);
    let mut resolved = Vec::with_capacity(pending.len());
    for p in pending {
        let timed = p
            .end
            .synchronize()
            .and_then(|_| Ok((p.epoch.event.elapsed_ms(&p.start)?, p.start.elapsed_ms(&p.end)?)));
        match timed {
            Ok((offset_ms, dur_ms)) => resolved.push(TimelineEvent {
                name: p.name,
                device: p.device,
                lane: p.lane,
                start_us: p.epoch.host_us + offset_ms as f64 * 1e3,
                dur_us: dur_ms as f64 * 1e3,
            }),
            // A failed stream (the fault is reported to the operation's asker).
            Err(e) => tracing::debug!(error = %e, op = %p.name, "timeline: operation not timed"),
        }
    }
    // Workers' operations, each asked without holding the lock (it waits for them).
    let remote: Vec<TimelineEvent> = live_remotes().iter().flat_map(|r| r.take()).collect();
    let mut s = lock();
    resolved.into_iter().for_each(|e| finish(&mut s, e));
    let origin = origin_monotonic(&mut s);
    for mut e in remote {
        e.start_us -= origin;
        finish(&mut s, e);
    }
    s
}

/// The events timed so far (and clears them), in order of their start — this process's
/// and its isolated devices' workers' on one clock; pending GPU operations are waited
/// for.
pub fn take_timeline() -> Vec<TimelineEvent> {
    let mut events = std::mem::take(&mut resolve().done);
    events.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    events
}

/// The events of device `device` timed so far (and clears them; other devices' stay),
/// in order of their start: `Device::take_timeline`.
pub(crate) fn take_device_timeline(device: usize) -> Vec<TimelineEvent> {
    let mut s = resolve();
    let (mut mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut s.done)
        .into_iter()
        .partition(|e| e.device == device);
    s.done = rest;
    drop(s);
    mine.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    mine
}

/// As [`take_timeline`], with starts on the machine's monotonic clock: what a worker
/// hands its user process.
pub(crate) fn take_timeline_monotonic() -> Vec<TimelineEvent> {
    let mut s = resolve();
    let origin = origin_monotonic(&mut s);
    let mut events = std::mem::take(&mut s.done);
    events.iter_mut().for_each(|e| e.start_us += origin);
    events
}

/// An event as it crosses between processes (its lane by name).
#[derive(serde::Serialize, serde::Deserialize)]
struct EventOnWire {
    name: String,
    device: usize,
    lane: String,
    start_us: f64,
    dur_us: f64,
}

/// `events` as JSON, to cross to another process.
pub(crate) fn encode_events(events: &[TimelineEvent]) -> Vec<u8> {
    let wire: Vec<EventOnWire> = events
        .iter()
        .map(|e| EventOnWire {
            name: e.name.clone(),
            device: e.device,
            lane: e.lane.to_string(),
            start_us: e.start_us,
            dur_us: e.dur_us,
        })
        .collect();
    serde_json::to_vec(&wire).expect("timeline events serialise")
}

/// Events written by [`encode_events`] (in another process).
pub(crate) fn decode_events(bytes: &[u8]) -> Result<Vec<TimelineEvent>, String> {
    let wire: Vec<EventOnWire> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    Ok(wire
        .into_iter()
        .map(|e| TimelineEvent {
            name: e.name,
            device: e.device,
            lane: intern(&e.lane),
            start_us: e.start_us,
            dur_us: e.dur_us,
        })
        .collect())
}

/// A lane's name as `&'static str`: the runtime's lanes are a handful of names, each
/// leaked once at most.
fn intern(lane: &str) -> &'static str {
    static LANES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
    let mut lanes = LANES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(l) = lanes.iter().find(|l| **l == lane) {
        return l;
    }
    let l: &'static str = Box::leak(lane.to_string().into_boxed_str());
    lanes.push(l);
    l
}

/// The latency histogram of `device`'s timed operations.
pub(crate) fn histogram_of(device: usize) -> LatencyHistogram {
    resolve().histograms.get(&device).cloned().unwrap_or_default()
}

/// A GPU operation being enqueued: the start event is recorded.
struct GpuOp {
    name: String,
    device: usize,
    lane: &'static str,
    epoch: Arc<Epoch>,
    start: CudaEvent,
}

/// Starts timing an operation about to be enqueued on `stream`; `None` when the timeline
/// is off (or an event cannot be recorded: timing never fails an operation).
fn gpu_op(stream: &Arc<CudaStream>, device: usize, lane: &'static str, name: impl Into<String>) -> Option<GpuOp> {
    if !enabled_for(device) {
        return None;
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let epoch = {
        let key = Arc::as_ptr(stream.context()) as usize;
        let mut s = lock();
        match s.epochs.get(&key) {
            Some(e) => e.clone(),
            None => {
                // Recorded on an idle stream of its own, so waiting for it is immediate
                // (the operation's stream may have long work queued).
                let idle = crate::sys::graph::new_stream(stream.context()).ok()?;
                let event = idle.record_event(flags).ok()?;
                event.synchronize().ok()?;
                let host_us = since_origin(&mut s, Instant::now());
                let e = Arc::new(Epoch { event, host_us });
                s.epochs.insert(key, e.clone());
                e
            }
        }
    };
    let start = stream.record_event(flags).ok()?;
    Some(GpuOp {
        name: name.into(),
        device,
        lane,
        epoch,
        start,
    })
}

impl GpuOp {
    /// Records the end after the operation's work on `stream`.
    fn end(self, stream: &Arc<CudaStream>) {
        if let Ok(end) = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)) {
            lock().pending.push(Pending {
                name: self.name,
                device: self.device,
                lane: self.lane,
                epoch: self.epoch,
                start: self.start,
                end,
            });
        }
    }
}

/// Runs `enqueue` (work it puts on `stream`) and, with the timeline on, times that work
/// on the GPU as `name` on `lane` — the one way a GPU operation reaches the timeline, so
/// every actor brackets its work the same way (the end is recorded also when `enqueue`
/// fails part-way: what it did enqueue still runs).
pub(crate) fn gpu_timed<R>(
    stream: &Arc<CudaStream>,
    device: usize,
    lane: &'static str,
    name: impl Into<String>,
    enqueue: impl FnOnce() -> R,
) -> R {
    let profiling = super::nvtx::profiling();
    if !profiling && !enabled_for(device) {
        return enqueue();
    }
    let name: String = name.into();
    let _range = profiling.then(|| super::nvtx::Range::push(lane, &name));
    let timed = gpu_op(stream, device, lane, name);
    let r = enqueue();
    if let Some(t) = timed {
        t.end(stream);
    }
    r
}

/// A CPU-device operation: timed on the host until dropped (and an NVTX range while a
/// profiler is attached).
pub(crate) struct CpuOp {
    name: String,
    device: usize,
    lane: &'static str,
    start: Instant,
    /// Whether the timeline records it (else only the range).
    timed: bool,
    _range: Option<super::nvtx::Range>,
}

/// Starts timing an operation the CPU device runs now; `None` when the timeline is off
/// and no profiler is attached.
pub(crate) fn cpu_op(device: usize, lane: &'static str, name: impl Into<String>) -> Option<CpuOp> {
    let (timed, profiling) = (enabled_for(device), super::nvtx::profiling());
    (timed || profiling).then(|| {
        let name = name.into();
        CpuOp {
            _range: profiling.then(|| super::nvtx::Range::push(lane, &name)),
            name,
            device,
            lane,
            start: Instant::now(),
            timed,
        }
    })
}

impl Drop for CpuOp {
    fn drop(&mut self) {
        if !self.timed {
            return;
        }
        let dur_us = self.start.elapsed().as_secs_f64() * 1e6;
        let mut s = lock();
        let start_us = since_origin(&mut s, self.start);
        finish(
            &mut s,
            TimelineEvent {
                name: std::mem::take(&mut self.name),
                device: self.device,
                lane: self.lane,
                start_us,
                dur_us,
            },
        );
    }
}

/// The events as Chrome / Perfetto trace JSON: complete (`"X"`) events, one process per
/// device and one thread per lane, named by metadata events.
pub fn chrome_trace_json(events: &[TimelineEvent]) -> String {
    use serde_json::json;
    let mut lanes: Vec<(usize, &'static str)> = Vec::new();
    let mut tid = |device: usize, lane: &'static str| match lanes.iter().position(|l| *l == (device, lane)) {
        Some(i) => i + 1,
        None => {
            lanes.push((device, lane));
            lanes.len()
        }
    };
    let mut out: Vec<serde_json::Value> = events
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "cat": e.lane,
                "ph": "X",
                "ts": e.start_us,
                "dur": e.dur_us,
                "pid": e.device,
                "tid": tid(e.device, e.lane),
            })
        })
        .collect();
    let mut devices: Vec<usize> = lanes.iter().map(|l| l.0).collect();
    devices.sort_unstable();
    devices.dedup();
    for d in devices {
        out.push(json!({"name": "process_name", "ph": "M", "pid": d, "args": {"name": format!("device {d}")}}));
    }
    for (i, (d, lane)) in lanes.iter().enumerate() {
        out.push(json!({"name": "thread_name", "ph": "M", "pid": d, "tid": i + 1, "args": {"name": lane}}));
    }
    json!({ "traceEvents": out, "displayTimeUnit": "ms" }).to_string()
}
