//! The user-process side of one worker incarnation: spawns the worker, sends requests,
//! routes replies to their askers, and fails every pending request when the worker goes.

use std::any::Any;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{IsolationConfig, WORKER_ENV, WORKER_FDS};
use crate::backend::state::{DeviceInfo, DeviceShared, Status};
use crate::device::route::Routed;
use crate::error::GpuError;
use crate::gpu_ref::BufferOwner;
use crate::observability::{decode_events, register_remote, RemoteTimeline, TimelineEvent};
use crate::wire::arena::{io_error, Arena, Lease};
use crate::wire::frame::{self, Kind, Outgoing};
use crate::wire::{ClientCtx, Reader, ReplySlot, Side, Wire, Writer};

/// Tells the supervisor that the worker is gone, and why.
pub(crate) type OnDeath = Box<dyn FnOnce(GpuError) + Send>;

/// A request waiting for its reply, with what must live until then.
struct Pending {
    slot: ReplySlot,
    lent: Lent,
}

/// What a request lends the worker: its data's leases of the request arena and what the
/// request keeps alive (pinned ranges the worker copies into or from, handles).
struct Lent {
    _leases: Vec<Lease>,
    _keep: Vec<Box<dyn Any + Send>>,
}

/// The pending requests, and why the link is dead once it is (checked under the same
/// lock, so no request is registered after the others were failed).
#[derive(Default)]
struct Requests {
    pending: HashMap<u64, Pending>,
    dead: Option<GpuError>,
}

/// One worker process and the channel to it.
pub(crate) struct LinkShared {
    pub(crate) ctx: ClientCtx,
    shared: Arc<DeviceShared>,
    /// Frames for the writer thread, the one writer of the socket: no caller (a tokio
    /// thread, the reader thread answering a reply with a release) ever blocks on a
    /// socket buffer the worker is not draining.
    outbox: Mutex<std::sync::mpsc::Sender<Outgoing>>,
    /// The socket, for shutting it down (its writing is the writer thread's).
    socket: UnixStream,
    requests: Mutex<Requests>,
    /// Requests allowed in flight ([`IsolationConfig::max_in_flight`]).
    max_in_flight: usize,
    /// When the worker last sent anything, in ms since `born` (the heartbeat's clock).
    last_heard: AtomicU64,
    born: Instant,
    /// Why the watchdog killed the worker, if it did (it answered nothing for too long).
    hung: Mutex<Option<GpuError>>,
    next_id: AtomicU64,
    child: Mutex<Option<Child>>,
    pid: u32,
    /// Told once, when the worker is gone (with why).
    on_death: Mutex<Option<OnDeath>>,
    /// Askers of the worker's timeline, by number, waiting for its `TimelineEvents`.
    timeline_askers: Mutex<HashMap<u64, std::sync::mpsc::Sender<Vec<TimelineEvent>>>>,
    /// What failed requests lent a worker that may still be running their copies — one
    /// that answered with a sticky fault, or requests failed while it is shut down —,
    /// held until the worker process is reaped: released at once, a pinned range could
    /// be leased again and then written by a copy the dying worker still had in flight.
    quarantine: Mutex<Vec<Lent>>,
}

impl LinkShared {
    /// Starts a worker for `config` and waits until its device is open. It serves no
    /// generation yet ([`LinkShared::start_serving`]); `on_death` hears of its death
    /// until then (and after, unless `start_serving` replaces it).
    pub(crate) async fn spawn(
        shared: &Arc<DeviceShared>,
        on_death: OnDeath,
    ) -> Result<(Arc<LinkShared>, DeviceInfo), GpuError> {
        if std::env::var_os(WORKER_ENV).is_some() {
            return Err(GpuError::Unsupported(
                "opening an isolated device from inside a worker process".into(),
            ));
        }
        let (config, instance) = (&shared.config, shared.instance);
        let iso = config.isolation.clone().unwrap_or_default();
        let requests = Arena::create("atomr-requests", iso.arena_bytes)?;
        let replies = Arena::create("atomr-replies", iso.arena_bytes)?;
        let pinned = shared.shared_pinned()?;
        let (ours, theirs) = UnixStream::pair().map_err(|e| io_error("socket pair", e))?;
        let mut worker_config = config.clone();
        worker_config.isolation = None;
        // The user process reports the device's metrics; the worker has no recorder.
        worker_config.metrics = false;
        // Copies stage through the shared arena, not through the worker's own pool.
        worker_config.pinned_initial_buffers = 0;
        let spec = serde_json::to_string(&worker_config)
            .map_err(|e| GpuError::Internal(format!("encoding the worker's configuration: {e}")))?;
        let child = spawn_child(
            &iso,
            &spec,
            [theirs.as_raw_fd(), requests.fd(), replies.fd(), pinned.fd()],
        )?;
        drop(theirs);
        let pid = child.id();
        let reader = ours.try_clone().map_err(|e| io_error("socket clone", e))?;
        let writer = ours.try_clone().map_err(|e| io_error("socket clone", e))?;
        let (outbox, outgoing) = std::sync::mpsc::channel::<Outgoing>();
        let link = Arc::new_cyclic(|weak: &std::sync::Weak<LinkShared>| LinkShared {
            ctx: ClientCtx {
                device_id: config.device_id,
                instance,
                generation: AtomicU64::new(0),
                link: weak.clone(),
                requests,
                replies,
                pinned,
            },
            shared: shared.clone(),
            outbox: Mutex::new(outbox),
            socket: ours,
            requests: Mutex::new(Requests::default()),
            max_in_flight: iso.max_in_flight.max(1),
            last_heard: AtomicU64::new(0),
            born: Instant::now(),
            hung: Mutex::new(None),
            next_id: AtomicU64::new(1),
            child: Mutex::new(Some(child)),
            pid,
            on_death: Mutex::new(Some(on_death)),
            timeline_askers: Mutex::new(HashMap::new()),
            quarantine: Mutex::new(Vec::new()),
        });
        // The worker times its operations whenever this process does.
        let remote: std::sync::Weak<dyn RemoteTimeline> = Arc::downgrade(&link) as _;
        register_remote(remote, config.device_id);
        let (ready_tx, ready_rx) = oneshot::channel();
        let l2 = link.clone();
        std::thread::Builder::new()
            .name(format!("atomr-worker-{}-rx", config.device_id))
            .spawn(move || l2.read_loop(reader, ready_tx))
            .map_err(|e| io_error("reader thread", e))?;
        std::thread::Builder::new()
            .name(format!("atomr-worker-{}-tx", config.device_id))
            .spawn(move || {
                let mut writer = writer;
                // A write failed (the worker is gone): shut the socket so that the
                // reader ends and fails what is pending.
                if frame::write_loop(&mut writer, outgoing).is_err() {
                    let _ = writer.shutdown(std::net::Shutdown::Both);
                }
            })
            .map_err(|e| io_error("writer thread", e))?;
        match tokio::time::timeout(iso.start_timeout, ready_rx).await {
            Ok(Ok(Ok(info))) => {
                if !iso.heartbeat.is_zero() {
                    let watched = Arc::downgrade(&link);
                    let (every, limit) = (iso.heartbeat, iso.hang_timeout.max(iso.heartbeat));
                    std::thread::Builder::new()
                        .name(format!("atomr-worker-{}-hb", config.device_id))
                        .spawn(move || watchdog(watched, every, limit))
                        .map_err(|e| io_error("heartbeat thread", e))?;
                }
                Ok((link, info))
            }
            Ok(Ok(Err(e))) => {
                link.shutdown(e.clone());
                Err(e)
            }
            Ok(Err(_)) => {
                let e = link
                    .death_cause()
                    .unwrap_or_else(|| GpuError::DeviceLost("the worker exited while starting".into()));
                Err(e)
            }
            Err(_) => {
                let e = GpuError::Timeout(iso.start_timeout);
                link.shutdown(GpuError::DeviceLost(format!(
                    "the worker did not open device {} within {:?}",
                    config.device_id, iso.start_timeout
                )));
                Err(e)
            }
        }
    }

    /// The worker's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Makes the worker serve `generation`, its death told to `on_death` from now on
    /// (replacing the callback it was spawned with). `Err` with its death's cause if the
    /// worker is already gone — a standby that died while it waited.
    pub(crate) fn start_serving(&self, generation: u64, on_death: OnDeath) -> Result<(), GpuError> {
        let mut slot = self.on_death.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the callback's lock: `die` marks the link dead before it takes
        // the callback, so a death either shows here or reaches the new callback.
        if let Some(cause) = self.death_cause() {
            return Err(cause);
        }
        self.ctx.generation.store(generation, Ordering::Release);
        *slot = Some(on_death);
        Ok(())
    }

    fn death_cause(&self) -> Option<GpuError> {
        self.lock_requests().dead.clone()
    }

    fn lock_requests(&self) -> std::sync::MutexGuard<'_, Requests> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a frame for the writer thread; an error once the writer is gone (the
    /// channel broke: the reader then fails every pending request).
    fn send_frame(&self, kind: Kind, id: u64, payload: &[u8]) -> Result<(), GpuError> {
        let frame = Outgoing::Frame(frame::encode(kind, id, payload));
        self.outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(frame)
            .map_err(|_| GpuError::DeviceLost("the channel to the worker is closed".into()))
    }

    /// Milliseconds on the link's own clock.
    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64
    }

    /// Sends a request; its asker is answered from the reply, or with an error if the
    /// request cannot be encoded or the worker goes first.
    pub(crate) fn submit(&self, routed: Routed, origin: u64) {
        let mut w = Writer::new(Side::Client(&self.ctx));
        w.put_u64(origin);
        let Some(slot) = routed.encode(&mut w) else {
            return; // answered with the encoding error
        };
        let Writer {
            bytes, leases, keep, ..
        } = w;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut r = self.lock_requests();
            if let Some(e) = r.dead.clone() {
                drop(r);
                slot.answer(Err(e), &|_| {});
                return;
            }
            if r.pending.len() >= self.max_in_flight {
                drop(r);
                let e = GpuError::Backpressure {
                    capacity: self.max_in_flight,
                };
                slot.answer(Err(e), &|_| {});
                return;
            }
            // A tell is answered too (with nothing): its shared-memory data and handles
            // must outlive the worker's reading of them.
            r.pending.insert(
                id,
                Pending {
                    slot,
                    lent: Lent {
                        _leases: leases,
                        _keep: keep,
                    },
                },
            );
        }
        if let Err(e) = self.send_frame(Kind::Request, id, &bytes) {
            if let Some(p) = self.lock_requests().pending.remove(&id) {
                p.slot.answer(Err(e), &|_| {});
            }
        }
    }

    /// Requests waiting for a reply.
    pub(crate) fn pending(&self) -> usize {
        self.lock_requests().pending.len()
    }

    fn read_loop(self: Arc<Self>, mut socket: UnixStream, ready: oneshot::Sender<Result<DeviceInfo, GpuError>>) {
        let mut ready = Some(ready);
        let mut fault: Option<GpuError> = None;
        let why = loop {
            let (kind, id, payload) = match frame::read(&mut socket) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break None,
                Err(e) => break Some(io_error("reading from the worker", e)),
            };
            self.last_heard.store(self.now_ms(), Ordering::Relaxed);
            match kind {
                Kind::Pong => {}
                Kind::Reply => self.answer(id, &payload),
                Kind::Ready => {
                    let info = serde_json::from_slice::<DeviceInfo>(&payload)
                        .map_err(|e| GpuError::DeviceLost(format!("the worker's device info: {e}")));
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(info);
                    }
                }
                Kind::StartFailed | Kind::Fault => {
                    let e = GpuError::take(&mut Reader::new(&payload, Side::Client(&self.ctx)))
                        .unwrap_or_else(|e| GpuError::DeviceLost(format!("the worker's error did not decode: {e}")));
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(Err(e.clone()));
                    }
                    fault = Some(e);
                }
                Kind::TimelineEvents => {
                    let events = decode_events(&payload).unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "the worker's timeline did not decode");
                        vec![]
                    });
                    let asker = self
                        .timeline_askers
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id);
                    if let Some(asker) = asker {
                        let _ = asker.send(events);
                    }
                }
                Kind::Request
                | Kind::Free
                | Kind::Release
                | Kind::OriginClosed
                | Kind::Timeline
                | Kind::TimelineTake
                | Kind::FreeEvent
                | Kind::FreeGraph
                | Kind::Ping => {
                    tracing::warn!(?kind, "the worker sent a user-side frame; ignored");
                }
            }
        };
        let (status, code) = self.reap();
        let not_entered = (ready.is_some() && code == Some(crate::process_role::NOT_ENTERED_EXIT)).then(|| {
            GpuError::Unsupported(
                "the worker program did not enter worker mode: put #[gpu_main] on `main`, or call \
                 isolation::enter_worker_if_requested() first in it (or name a worker program in IsolationConfig)"
                    .into(),
            )
        });
        let hung = self.hung.lock().unwrap_or_else(|p| p.into_inner()).take();
        let cause = hung.or(fault).or(not_entered).or(why).unwrap_or_else(|| {
            GpuError::DeviceLost(format!(
                "the worker process (pid {}) of device {} exited: {status}",
                self.pid, self.ctx.device_id
            ))
        });
        if let Some(tx) = ready.take() {
            let _ = tx.send(Err(cause.clone()));
        }
        self.die(cause);
        // The worker process is gone: nothing of it can copy any more.
        self.quarantine.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn answer(&self, id: u64, payload: &[u8]) {
        let Some(p) = self.lock_requests().pending.remove(&id) else {
            return; // failed meanwhile
        };
        let mut r = Reader::new(payload, Side::Client(&self.ctx));
        // A sticky error means the worker is done for: stop sending it requests before
        // its asker (who may ask again at once) hears of it.
        let sticky = std::cell::Cell::new(false);
        p.slot.answer(Ok(&mut r), &|e| {
            if e.is_sticky() {
                sticky.set(true);
                self.retire(e.clone());
            }
        });
        if sticky.get() {
            // Its copies may still be in flight in the faulted worker.
            self.quarantine.lock().unwrap_or_else(|p| p.into_inner()).push(p.lent);
        }
        for (offset, len) in std::mem::take(&mut r.released) {
            let mut b = Vec::with_capacity(16);
            b.extend_from_slice(&(offset as u64).to_le_bytes());
            b.extend_from_slice(&(len as u64).to_le_bytes());
            let _ = self.send_frame(Kind::Release, 0, &b);
        }
        // Otherwise `p`'s leases (request data) are released here, after the reply.
    }

    /// Waits (briefly) for the worker to exit and describes how it did.
    /// (With its exit code, if it exited with one.)
    fn reap(&self) -> (String, Option<i32>) {
        let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return ("already reaped".into(), None);
        };
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return (status.to_string(), status.code()),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(2)),
                Ok(None) => {
                    let _ = child.kill();
                    let s = child.wait().map(|s| format!("killed after closing its channel ({s})"));
                    return (s.unwrap_or_default(), None);
                }
                Err(e) => return (format!("unknown ({e})"), None),
            }
        }
    }

    /// Stops new requests from reaching this worker (they queue in the `DeviceActor`
    /// for the next one) and tells the supervisor, once.
    fn retire(&self, cause: GpuError) {
        let generation = self.ctx.generation();
        self.shared.publish(|s| {
            if s.generation == generation && matches!(s.status, Status::Ready) {
                s.status = Status::Starting;
                s.inner = None;
            }
        });
        if let Some(f) = self.on_death.lock().unwrap_or_else(|p| p.into_inner()).take() {
            f(cause);
        }
    }

    /// Marks the link dead with `cause`: every pending asker gets it, and the supervisor
    /// is told (once).
    fn die(&self, cause: GpuError) {
        let pending = {
            let mut r = self.lock_requests();
            if r.dead.is_none() {
                r.dead = Some(cause.clone());
            }
            std::mem::take(&mut r.pending)
        };
        let on_death = self.on_death.lock().unwrap_or_else(|p| p.into_inner()).is_some();
        if on_death {
            self.retire(cause.clone());
        }
        let mut quarantine = Vec::with_capacity(pending.len());
        for (_, p) in pending {
            p.slot.answer(Err(cause.clone()), &|_| {});
            // The worker may not be gone yet (a shutdown, a retired worker).
            quarantine.push(p.lent);
        }
        self.quarantine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(quarantine);
    }

    /// Ends the worker: pending requests fail with `why`, the channel closes (the worker
    /// exits on its end of file), and the reader thread reaps it.
    pub(crate) fn shutdown(&self, why: GpuError) {
        // Not the supervisor's business: it asked for this.
        self.on_death.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.die(why);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }

    /// Test hook: kills the worker process (`SIGKILL`), as a crash would.
    pub(crate) fn kill(&self) -> Result<(), GpuError> {
        match self.child.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(c) => c.kill().map_err(|e| io_error("killing the worker", e)),
            None => Ok(()),
        }
    }
}

/// The heartbeat: pings the worker every `every`; a worker that has sent nothing for
/// `limit` is taken for hung and killed (the reader then fails its pending requests
/// with the cause recorded here, and the device puts the standby in its place).
fn watchdog(link: std::sync::Weak<LinkShared>, every: Duration, limit: Duration) {
    let mut ping = 0u64;
    loop {
        std::thread::sleep(every);
        let Some(link) = link.upgrade() else { return };
        if link.death_cause().is_some() {
            return;
        }
        let silent = Duration::from_millis(link.now_ms().saturating_sub(link.last_heard.load(Ordering::Relaxed)));
        if silent >= limit {
            let e = GpuError::DeviceLost(format!(
                "the worker process (pid {}) of device {} hung: nothing from it for {silent:?} (heartbeat every \
                 {every:?}, limit {limit:?}); killed",
                link.pid, link.ctx.device_id
            ));
            tracing::warn!(error = %e, "isolated device: hung worker");
            *link.hung.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            let _ = link.kill();
            return;
        }
        ping += 1;
        let _ = link.send_frame(Kind::Ping, ping, &[]);
    }
}

/// Starts the worker with the socket and the arenas at [`WORKER_FDS`].
fn spawn_child(iso: &IsolationConfig, spec: &str, fds: [i32; 4]) -> Result<Child, GpuError> {
    let program = match &iso.program {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| io_error("finding this executable", e))?,
    };
    let mut cmd = Command::new(&program);
    cmd.args(&iso.args).env(WORKER_ENV, spec).stdin(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (fcntl, dup2, prctl) on descriptors this process
    // owns; dup2's copies have close-on-exec cleared, so exactly these four reach the
    // worker.
    unsafe {
        cmd.pre_exec(move || {
            // Move the sources out of the way first (one may sit at another's target).
            let mut high = [0; 4];
            for (h, src) in high.iter_mut().zip(fds) {
                *h = libc::fcntl(src, libc::F_DUPFD_CLOEXEC, 64);
                if *h < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (src, dst) in high.iter().zip(WORKER_FDS) {
                if libc::dup2(*src, dst) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // The worker dies with the user process (no orphaned GPU contexts).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    spawn_from_long_lived_thread(cmd).map_err(|e| io_error(&format!("starting the worker {}", program.display()), e))
}

/// A command to start, and where its child goes.
type SpawnJob = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Starts `cmd` from one thread that lives as long as the process. Linux sends a
/// child's `PR_SET_PDEATHSIG` when the *thread* that forked it exits, not the process:
/// forked from a tokio thread (which the runtime may retire when idle), a healthy
/// worker would be killed with it.
fn spawn_from_long_lived_thread(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<SpawnJob>>> = std::sync::OnceLock::new();
    let spawner = match SPAWNER.get() {
        Some(s) => s,
        None => {
            let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
            std::thread::Builder::new()
                .name("atomr-worker-spawner".into())
                .spawn(move || {
                    for (mut cmd, child) in rx {
                        let _ = child.send(cmd.spawn());
                    }
                })?;
            // Two first callers at once: one thread's sender wins, the other's thread
            // ends when its channel is dropped here.
            SPAWNER.get_or_init(|| Mutex::new(tx))
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the worker spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the worker spawner thread is gone"))?
}

/// The worker's timed operations join this process's timeline.
impl RemoteTimeline for LinkShared {
    fn set_enabled(&self, on: bool) {
        self.send_unless_dead(Kind::Timeline, on as u64);
    }

    /// Asks the worker and waits (up to 5 s) for its answer; a worker that is gone or
    /// silent contributes nothing (its operations went with it).
    fn take(&self) -> Vec<TimelineEvent> {
        if self.lock_requests().dead.is_some() {
            return vec![];
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        self.timeline_askers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let answer = self
            .send_frame(Kind::TimelineTake, id, &[])
            .ok()
            .and_then(|()| rx.recv_timeout(Duration::from_secs(5)).ok());
        self.timeline_askers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        answer.unwrap_or_else(|| {
            // A worker that died meanwhile took its operations with it; a live one that
            // does not answer is worth a warning (its operations are missing).
            if self.lock_requests().dead.is_none() {
                tracing::warn!(
                    pid = self.pid,
                    "the worker sent no timeline within 5 s: its operations are missing"
                );
            }
            vec![]
        })
    }
}

/// Buffers of this worker held in the user process.
impl BufferOwner for LinkShared {
    /// The last user handle to worker buffer `id` was dropped: tell the worker, unless
    /// it is gone (its buffers went with it).
    fn free(&self, id: u64) {
        self.send_unless_dead(Kind::Free, id);
    }

    /// The last user handle to worker event `id` was dropped.
    fn free_event(&self, id: u64) {
        self.send_unless_dead(Kind::FreeEvent, id);
    }

    /// The last user handle to worker graph `id` was dropped.
    fn free_graph(&self, id: u64) {
        self.send_unless_dead(Kind::FreeGraph, id);
    }
}

impl LinkShared {
    /// The `ActorGpu` numbered `origin` is gone: the worker drops its stream and handles.
    pub(crate) fn close_origin(&self, origin: u64) {
        self.send_unless_dead(Kind::OriginClosed, origin);
    }

    /// A frame without payload, unless the worker is gone (then nothing holds what it
    /// names any more).
    fn send_unless_dead(&self, kind: Kind, id: u64) {
        if self.lock_requests().dead.is_none() {
            let _ = self.send_frame(kind, id, &[]);
        }
    }
}
