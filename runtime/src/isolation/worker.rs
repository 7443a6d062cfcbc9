//! The worker process of an isolated device: opens the device in-process, serves the
//! requests that arrive on its socket, and exits — without running CUDA's destructors —
//! on a sticky fault or when the user process goes away.

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{WORKER_ENV, WORKER_FDS};
use crate::actor::ActorSystem;
use crate::backend::state::Status;
use crate::device::route::Routed;
use crate::device::{ActorGpu, Device, DeviceConfig};
use crate::error::GpuError;
use crate::wire::arena::Arena;
use crate::wire::frame::{self, Kind, Outgoing};
use crate::wire::{Reader, Side, Wire, WorkerCtx, Writer};

/// Exit status of a worker after a sticky fault.
const FAULT_EXIT: i32 = 70;

/// Runs this process as an isolated device's GPU worker if it was started as one, and
/// never returns then; returns at once otherwise. Call it first thing in `main` (or put
/// `#[gpu_main]` on `main`) in every program that opens isolated devices: the worker is
/// this same executable, so it knows the same `#[kernel]`s.
pub fn enter_worker_if_requested() {
    let Some(spec) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    crate::process_role::enter_worker_mode();
    let code = match spec.to_str().map(serde_json::from_str::<DeviceConfig>) {
        // On a thread of its own: `main` may already be inside a tokio runtime
        // (`#[tokio::main]`), and the worker builds its own.
        Some(Ok(config)) => std::thread::Builder::new()
            .name("atomr-worker".into())
            .spawn(move || run(config))
            .map(|t| t.join().unwrap_or(1))
            .unwrap_or(1),
        _ => {
            eprintln!("atomr-accel-cuda worker: {WORKER_ENV} does not hold a device configuration");
            2
        }
    };
    exit_now(code)
}

/// Ends the process without unwinding or destructors (after a sticky fault, CUDA's
/// teardown can hang or fault again; the driver reclaims everything at exit).
fn exit_now(code: i32) -> ! {
    let _ = std::io::stderr().flush();
    // SAFETY: FFI edge: `_exit` ends the process at once; nothing in this process
    // needs to run afterwards.
    unsafe { libc::_exit(code) }
}

/// What the serving side shares across its threads and tasks.
struct Serve {
    ctx: WorkerCtx,
    /// Frames for the writer thread, the one writer of the socket: no task and not the
    /// reading thread ever blocks on a socket buffer the user process is not draining.
    outbox: Mutex<std::sync::mpsc::Sender<Outgoing>>,
    device: Device,
    in_flight: AtomicUsize,
    /// The `ActorGpu` serving each user `ActorGpu`'s requests (`device::origin`): made on its first
    /// request, dropped when the user's `ActorGpu` goes.
    origins: Mutex<HashMap<u64, Arc<ActorGpu>>>,
}

impl Serve {
    /// The `ActorGpu` serving `origin`, `None` for the device's own requests (origin 0).
    fn origin(&self, origin: u64) -> Option<Arc<ActorGpu>> {
        if origin == crate::device::origin::DEVICE {
            return None;
        }
        let mut origins = self.origins.lock().unwrap_or_else(|p| p.into_inner());
        Some(
            origins
                .entry(origin)
                .or_insert_with(|| Arc::new(self.device.origin_gpu(origin)))
                .clone(),
        )
    }
}

impl Serve {
    fn send(&self, kind: Kind, id: u64, payload: &[u8]) {
        let frame = Outgoing::Frame(frame::encode(kind, id, payload));
        if self
            .outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(frame)
            .is_err()
        {
            // The writer is gone, so is the user process: so is the reason to exist.
            exit_now(0);
        }
    }

    /// Waits until every frame queued so far is written (before exiting on a fault).
    fn flush(&self) {
        let (done, written) = std::sync::mpsc::channel();
        let queued = self
            .outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Outgoing::Flush(done));
        if queued.is_ok() {
            let _ = written.recv_timeout(Duration::from_secs(5));
        }
    }

    fn send_error(&self, kind: Kind, id: u64, e: &GpuError) {
        let mut w = Writer::new(Side::Worker(&self.ctx));
        if kind == Kind::Reply {
            w.put_u8(1); // the `Err` of a `Result`
        }
        let _ = e.put(&mut w);
        self.send(kind, id, &w.bytes);
    }
}

fn run(config: DeviceConfig) -> i32 {
    // SAFETY: the user process placed the socket at this descriptor before exec; this
    // process takes ownership of it once, here.
    let socket = unsafe { UnixStream::from_raw_fd(WORKER_FDS[0]) };
    let arenas = (
        Arena::inherit(WORKER_FDS[1]),
        Arena::inherit(WORKER_FDS[2]),
        Arena::inherit(WORKER_FDS[3]),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("atomr-accel-cuda worker: no tokio runtime: {e}");
            return 1;
        }
    };
    let (requests, replies, pinned) = match arenas {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("atomr-accel-cuda worker: {e}");
            return 1;
        }
    };
    let ctx = WorkerCtx {
        buffers: Mutex::new(HashMap::new()),
        events: Mutex::new(HashMap::new()),
        graphs: Mutex::new(HashMap::new()),
        modules: Mutex::new(HashMap::new()),
        requests,
        replies,
        pinned,
    };
    let opened = rt.block_on(async {
        let system = ActorSystem::new("atomr-worker");
        Device::open(&system, config).await
    });
    let device = match opened {
        Ok(d) => d,
        Err(e) => {
            let mut w = Writer::new(Side::Worker(&ctx));
            let _ = e.put(&mut w);
            let mut s = socket;
            let _ = frame::write(&mut s, Kind::StartFailed, 0, &w.bytes);
            return 1;
        }
    };
    let writer = match socket.try_clone() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("atomr-accel-cuda worker: {e}");
            return 1;
        }
    };
    let (outbox, outgoing) = std::sync::mpsc::channel();
    if let Err(e) = std::thread::Builder::new()
        .name("atomr-worker-tx".into())
        .spawn(move || {
            let mut writer = writer;
            // A write failed: the user process is gone, and with it the reason to exist.
            if frame::write_loop(&mut writer, outgoing).is_err() {
                exit_now(0);
            }
        })
    {
        eprintln!("atomr-accel-cuda worker: {e}");
        return 1;
    }
    let reader = match socket.try_clone() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("atomr-accel-cuda worker: {e}");
            return 1;
        }
    };
    let info = device.state().info.expect("an open device has its info");
    let serve = Arc::new(Serve {
        ctx,
        outbox: Mutex::new(outbox),
        device,
        in_flight: AtomicUsize::new(0),
        origins: Mutex::new(HashMap::new()),
    });
    serve.send(
        Kind::Ready,
        0,
        &serde_json::to_vec(&info).expect("DeviceInfo serialises"),
    );
    rt.spawn(watch_for_fault(serve.clone()));
    serve_requests(&serve, reader, rt.handle());
    // End of file: the user process closed the channel (or exited).
    0
}

/// Reads frames until the channel closes; each request runs as a task of its own.
fn serve_requests(serve: &Arc<Serve>, mut socket: UnixStream, rt: &tokio::runtime::Handle) {
    loop {
        let (kind, id, payload) = match frame::read(&mut socket) {
            Ok(f) => f,
            Err(_) => return,
        };
        match kind {
            Kind::Request => {
                let decoded = {
                    let mut r = Reader::new(&payload, Side::Worker(&serve.ctx));
                    r.take_u64().and_then(|origin| Ok((origin, Routed::decode(&mut r)?)))
                };
                match decoded {
                    Err(e) => serve.send_error(Kind::Reply, id, &e),
                    Ok((origin, (routed, wait))) => {
                        serve.in_flight.fetch_add(1, Ordering::SeqCst);
                        let s = serve.clone();
                        let gpu = serve.origin(origin);
                        rt.spawn(async move {
                            match gpu {
                                Some(gpu) => gpu.serve(routed).await,
                                None => s.device.submit_routed(routed).await,
                            }
                            let encode = wait.0.await;
                            let mut w = Writer::new(Side::Worker(&s.ctx));
                            encode(&mut w);
                            // Reply-arena ranges are released by the user process once read.
                            w.leases.drain(..).for_each(|l| {
                                l.keep();
                            });
                            s.send(Kind::Reply, id, &w.bytes);
                            s.in_flight.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                }
            }
            Kind::Free => serve.ctx.release(id),
            Kind::FreeEvent => serve.ctx.release_event(id),
            Kind::FreeGraph => serve.ctx.release_graph(id),
            Kind::Timeline => crate::observability::enable_timeline(id != 0),
            Kind::TimelineTake => {
                // Resolving waits for GPU work still running: not on the reading thread.
                let s = serve.clone();
                rt.spawn_blocking(move || {
                    let events = crate::observability::take_timeline_monotonic();
                    s.send(Kind::TimelineEvents, id, &crate::observability::encode_events(&events));
                });
            }
            Kind::OriginClosed => {
                serve.origins.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            }
            Kind::Release => {
                if payload.len() == 16 {
                    let offset = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes")) as usize;
                    let len = u64::from_le_bytes(payload[8..].try_into().expect("8 bytes")) as usize;
                    serve.ctx.replies.release(offset, len);
                }
            }
            Kind::Ping => {
                // Answered by the runtime, not this thread: a worker whose runtime is
                // wedged counts as hung too.
                let s = serve.clone();
                rt.spawn(async move { s.send(Kind::Pong, id, &[]) });
            }
            Kind::Ready | Kind::StartFailed | Kind::Reply | Kind::Fault | Kind::TimelineEvents | Kind::Pong => {}
        }
    }
}

/// On a sticky fault: lets the requests in flight get their (typed) errors, reports the
/// fault and exits at once.
async fn watch_for_fault(serve: Arc<Serve>) {
    let mut rx = serve.device.watch_state();
    let cause = loop {
        if let Status::Lost(e) = &rx.borrow_and_update().status {
            break e.clone();
        }
        if rx.changed().await.is_err() {
            break GpuError::DeviceLost("the worker's device state closed".into());
        }
    };
    // Every request pending on a lost device is answered within its deadlines; give
    // them a moment to reach their askers so each sees its own error.
    let until = Instant::now() + Duration::from_secs(1);
    while serve.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    serve.send_error(Kind::Fault, 0, &cause);
    serve.flush();
    exit_now(FAULT_EXIT)
}
