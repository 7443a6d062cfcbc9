//! `EventActor`: CUDA events for timing and waiting, without blocking any mailbox.
//!
//! Work on a device runs on several actors' streams, so an event is recorded *after
//! buffers* rather than on a stream of the caller's choosing: `record` makes the event
//! actor's stream wait for the last write of every buffer given (the same per-buffer
//! events cudarc orders all work by) and records there. The event completes when those
//! writes have; two such events time the work between them. `wait` hands the blocking
//! synchronisation to a blocking thread and answers when it returns, so the actor keeps
//! serving. On the CPU device work is finished when its request is answered: an event
//! records the time of `record` and is complete at once. Written with `#[gpu_actor]`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use atomr_accel_cuda_macros::gpu_actor;
use cudarc::driver::{sys::CUevent_flags, CudaEvent, CudaStream};

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::error::GpuError;
use crate::launch::KernelArgs;
use crate::library::seed::{CudaSeed, LibrarySeed};
use crate::library::shell::{Core, Library};
use crate::wire::{put_remote_object, Reader, RemoteObject, Side, Wire, Writer};

static NEXT_EVENT: AtomicU64 = AtomicU64::new(1);

enum Mark {
    /// The CPU device: when it was recorded.
    Cpu(Mutex<Option<Instant>>),
    /// A CUDA event with timing, and whether it has been recorded.
    Cuda(CudaEvent, std::sync::atomic::AtomicBool),
    /// An isolated device's event: the worker holds it (its `id` is the worker's).
    Remote(RemoteObject),
}

/// An event of one device generation. Cheap to clone.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let x = dev.upload(vec![1.0f32; 1024]).await?;
/// let done = dev.create_event().await?;
/// dev.record_event(&done, &[&x]).await?; // after the last write of x
/// dev.wait_event(&done).await?;
/// assert!(dev.event_done(&done).await?);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct GpuEvent {
    id: u64,
    device_id: usize,
    generation: u64,
    mark: Arc<Mark>,
}

impl std::fmt::Debug for GpuEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuEvent(#{} of device {}, generation {})",
            self.id, self.device_id, self.generation
        )
    }
}

impl GpuEvent {
    fn recorded(&self) -> bool {
        match &*self.mark {
            Mark::Cpu(at) => at.lock().unwrap_or_else(|p| p.into_inner()).is_some(),
            Mark::Cuda(_, recorded) => recorded.load(Ordering::Acquire),
            // The worker's event answers for itself.
            Mark::Remote(_) => true,
        }
    }

    /// An isolated device's event handed to an in-process one.
    fn of_isolated(&self) -> GpuError {
        GpuError::invalid(format!("{self:?} belongs to an isolated device, not to this one"))
    }

    fn not_recorded(&self) -> GpuError {
        GpuError::invalid(format!("{self:?} was never recorded; record it first"))
    }
}

/// An event crosses to and from an isolated device's worker as the worker's number for
/// it; the worker keeps it while the user process holds a handle. Not journalled: a
/// replay stops at an event's request with `Unsupported` (README).
impl Wire for GpuEvent {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match w.side {
            Side::Client(c) => {
                let remote = match &*self.mark {
                    Mark::Remote(r) => Some(r),
                    _ => None,
                };
                put_remote_object(
                    w,
                    c,
                    (remote, self.generation),
                    &format_args!("{self:?}"),
                    Box::new(self.clone()),
                )
            }
            Side::Worker(wc) => {
                wc.export_event(self.id, self);
                w.put_u64(self.id);
                Ok(())
            }
            Side::Journal(_) => Err(GpuError::Unsupported(
                "events are not journalled (a replay has no GPU timing to compare)".into(),
            )),
        }
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let id = r.take_u64()?;
        match r.side {
            Side::Worker(wc) => wc.lookup_event(id),
            Side::Client(c) => Ok(GpuEvent {
                id,
                device_id: c.device_id,
                generation: c.generation(),
                mark: Arc::new(Mark::Remote(RemoteObject::new(c, id, |link, id| link.free_event(id)))),
            }),
            Side::Journal(_) => Err(GpuError::Unsupported("events are not journalled".into())),
        }
    }
}

/// The buffers an event is recorded after (of any element types): `record`'s argument.
pub struct AfterWrites(pub(crate) KernelArgs);

impl Wire for AfterWrites {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        crate::launch::put_buffer_list(&self.0, w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        crate::launch::take_buffer_list(r).map(AfterWrites)
    }
}

enum EventEngine {
    Cpu,
    Cuda {
        cuda: Box<CudaSeed>,
        stream: Arc<CudaStream>,
    },
}

/// The event state of one generation of a device.
pub(crate) struct EventCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: EventEngine,
}

impl EventCore {
    fn check(&self, e: &GpuEvent) -> Result<(), GpuError> {
        let device_id = self.shared.config.device_id;
        if e.device_id != device_id {
            return Err(GpuError::invalid(format!("{e:?} used on device {device_id}")));
        }
        if e.generation != self.generation {
            return Err(GpuError::Stale {
                buffer_generation: e.generation,
                device_generation: self.generation,
            });
        }
        Ok(())
    }

    fn create(&mut self) -> Result<GpuEvent, GpuError> {
        let mark = match &self.engine {
            EventEngine::Cpu => Mark::Cpu(Mutex::new(None)),
            EventEngine::Cuda { cuda, .. } => {
                let e = cuda
                    .ctx
                    .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| self.shared.observe(e.into()))?;
                Mark::Cuda(e, std::sync::atomic::AtomicBool::new(false))
            }
        };
        Ok(GpuEvent {
            id: NEXT_EVENT.fetch_add(1, Ordering::Relaxed),
            device_id: self.shared.config.device_id,
            generation: self.generation,
            mark: Arc::new(mark),
        })
    }

    fn record(&mut self, e: &GpuEvent, after: &KernelArgs) -> Result<(), GpuError> {
        self.check(e)?;
        after.validate(self.shared.config.device_id, self.generation)?;
        match (&self.engine, &*e.mark) {
            (EventEngine::Cpu, Mark::Cpu(at)) => {
                *at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                Ok(())
            }
            (EventEngine::Cuda { stream, .. }, Mark::Cuda(ev, recorded)) => {
                crate::launch::wait_for_writes(stream, after)?;
                ev.record(stream).map_err(|err| self.shared.observe(err.into()))?;
                recorded.store(true, Ordering::Release);
                Ok(())
            }
            _ => Err(GpuError::invalid("an event of another backend")),
        }
    }

    fn query(&mut self, e: &GpuEvent) -> Result<bool, GpuError> {
        self.check(e)?;
        if !e.recorded() {
            return Err(e.not_recorded());
        }
        match &*e.mark {
            Mark::Cpu(_) => Ok(true),
            Mark::Cuda(ev, _) => ev.try_is_complete().map_err(|err| self.shared.observe(err.into())),
            Mark::Remote(_) => Err(e.of_isolated()),
        }
    }

    fn wait(&mut self, e: &GpuEvent) -> Result<Deferred<()>, GpuError> {
        self.check(e)?;
        if !e.recorded() {
            return Err(e.not_recorded());
        }
        match &*e.mark {
            Mark::Cpu(_) => Ok(Deferred::Now(())),
            Mark::Remote(_) => Err(e.of_isolated()),
            Mark::Cuda(..) => {
                let (event, shared) = (e.clone(), self.shared.clone());
                Ok(Deferred::later(async move {
                    let done = tokio::task::spawn_blocking(move || match &*event.mark {
                        Mark::Cuda(ev, _) => ev.synchronize().map_err(GpuError::from),
                        Mark::Cpu(_) | Mark::Remote(_) => Ok(()),
                    })
                    .await
                    .map_err(|err| GpuError::Internal(format!("the event wait task failed: {err}")))?;
                    done.map_err(|err| shared.observe(err))
                }))
            }
        }
    }

    fn elapsed_ms(&mut self, start: &GpuEvent, end: &GpuEvent) -> Result<f32, GpuError> {
        self.check(start)?;
        self.check(end)?;
        for e in [start, end] {
            if !e.recorded() {
                return Err(e.not_recorded());
            }
        }
        match (&*start.mark, &*end.mark) {
            (Mark::Cpu(a), Mark::Cpu(b)) => {
                let at = |m: &Mutex<Option<Instant>>| m.lock().unwrap_or_else(|p| p.into_inner()).expect("recorded");
                let (a, b) = (at(a), at(b));
                Ok(if b >= a {
                    (b - a).as_secs_f32() * 1e3
                } else {
                    -((a - b).as_secs_f32() * 1e3)
                })
            }
            (Mark::Cuda(a, _), Mark::Cuda(b, _)) => a.elapsed_ms(b).map_err(|err| {
                // Not yet complete is CUDA_ERROR_NOT_READY: not a fault, say what to do.
                let e = GpuError::from(err);
                match e {
                    GpuError::Library { code: 600, .. } => {
                        GpuError::invalid("the events have not completed yet; wait for the end event first")
                    }
                    other => self.shared.observe(other),
                }
            }),
            _ => Err(GpuError::invalid("events of another backend")),
        }
    }
}

impl Core for EventCore {
    const WHAT: &'static str = "event actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match (&seed.cuda, seed.cuda_stream()?) {
            (Some(cuda), Some((stream, _))) => EventEngine::Cuda {
                cuda: Box::new(cuda.clone()),
                stream,
            },
            _ => EventEngine::Cpu,
        };
        Ok(EventCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

/// The event actor of a device.
pub struct EventActor(pub(crate) Library<EventCore>);

#[gpu_actor(crate = crate, wire, device)]
impl EventActor {
    /// Takes a stream of its own (per the device's stream strategy).
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// A new event of this device (with timing), not yet recorded.
    #[handler(device(name = create_event))]
    fn create(&mut self) -> Result<GpuEvent, GpuError> {
        self.0.core()?.create()
    }

    /// Records `event` after the last write of every buffer in `after`.
    #[handler]
    fn record(&mut self, event: GpuEvent, after: AfterWrites) -> Result<(), GpuError> {
        self.0.core()?.record(&event, &after.0)
    }

    /// Whether `event` (recorded) has completed.
    #[handler(device(name = event_done, borrow(event)))]
    fn query(&mut self, event: GpuEvent) -> Result<bool, GpuError> {
        self.0.core()?.query(&event)
    }

    /// Resolves when `event` (recorded) has completed; the wait runs on a blocking
    /// thread, so the event actor keeps serving meanwhile.
    #[handler(device(name = wait_event, borrow(event)))]
    fn wait(&mut self, event: GpuEvent) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.wait(&event)
    }

    /// Milliseconds between two completed events, `start` to `end`.
    #[handler(device(name = elapsed_ms, borrow(start, end)))]
    fn elapsed_ms(&mut self, start: GpuEvent, end: GpuEvent) -> Result<f32, GpuError> {
        self.0.core()?.elapsed_ms(&start, &end)
    }
}
