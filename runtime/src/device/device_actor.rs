//! `DeviceActor`: the outer, stable tier. Supervises the `ContextActor`, holds requests
//! while it (re)starts, and marks the device lost when it is gone for good. Written with
//! `#[gpu_actor]`.

use std::collections::VecDeque;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use super::context_actor::{ContextActor, ContextActorMsg};
use super::state::{DeviceShared, Status};
use super::state::{Inner, InnerRefs};
use crate::actor::{Context, Directive, StopReason, SupervisorStrategy, Terminated};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::event::EventActorMsg;
use crate::graph::GraphActorMsg;
use crate::isolation::wire::{Reader, ReplySlot, ReplyWait, WireMessage, Writer};
use crate::isolation::worker_actor::WorkerActor;
use crate::kernel::blas::BlasActorMsg;
use crate::kernel::fft::FftActorMsg;
use crate::kernel::kernel_actor::KernelActorMsg;
use crate::kernel::module_actor::ModuleActorMsg;
use crate::kernel::rng::RngActorMsg;
use crate::kernel::solver::SolverActorMsg;

/// A request addressed to one of the inner actors.
pub enum Routed {
    /// For the context actor.
    Ctx(ContextActorMsg),
    /// For the BLAS actor.
    Blas(BlasActorMsg),
    /// For the RNG actor.
    Rng(RngActorMsg),
    /// For the FFT actor.
    Fft(FftActorMsg),
    /// For the solver actor.
    Solver(SolverActorMsg),
    /// For the kernel actor.
    Kernel(KernelActorMsg),
    /// For the module actor.
    Module(ModuleActorMsg),
    /// For the event actor.
    Event(EventActorMsg),
    /// For the graph actor.
    Graph(GraphActorMsg),
}

impl Routed {
    /// Answers the request's asker with `e` instead of delivering it.
    pub(crate) fn fail(self, e: GpuError) {
        match self {
            Routed::Ctx(m) => m.fail(e),
            Routed::Blas(m) => m.fail(e),
            Routed::Rng(m) => m.fail(e),
            Routed::Fft(m) => m.fail(e),
            Routed::Solver(m) => m.fail(e),
            Routed::Kernel(m) => m.fail(e),
            Routed::Module(m) => m.fail(e),
            Routed::Event(m) => m.fail(e),
            Routed::Graph(m) => m.fail(e),
        };
    }

    /// Sends the request to the inner tier: its actor in this process, or an isolated
    /// device's worker.
    pub(crate) async fn send_to(self, inner: &Inner) -> Result<(), GpuError> {
        match inner {
            Inner::Local(refs) => self.send_local(refs).await,
            Inner::Worker(link) => {
                link.submit(self);
                Ok(())
            }
        }
    }

    /// Writes the request for an isolated device's worker; `None` when it cannot cross
    /// (its asker has been answered with why).
    pub(crate) fn encode(self, w: &mut Writer<'_>) -> Option<ReplySlot> {
        let local_only = |what: &str| {
            GpuError::Unsupported(format!(
                "{what} on an isolated device (README: isolated devices); open the device in-process for them"
            ))
        };
        macro_rules! tagged {
            ($tag:expr, $m:expr) => {{
                w.put_tag($tag);
                $m.encode(w)
            }};
        }
        match self {
            Routed::Ctx(m) => tagged!(0, m),
            Routed::Blas(m) => tagged!(1, m),
            Routed::Rng(m) => tagged!(2, m),
            Routed::Fft(m) => tagged!(3, m),
            Routed::Solver(m) => tagged!(4, m),
            Routed::Kernel(m) => tagged!(5, m),
            Routed::Module(m) => {
                m.fail(local_only("raw CUDA modules"));
                None
            }
            Routed::Event(m) => {
                m.fail(local_only("events"));
                None
            }
            Routed::Graph(m) => {
                m.fail(local_only("CUDA graphs"));
                None
            }
        }
    }

    /// Reads a request written by [`Routed::encode`] (in the worker).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<(Routed, ReplyWait), GpuError> {
        fn wrap<M: WireMessage>(r: &mut Reader<'_>, f: fn(M) -> Routed) -> Result<(Routed, ReplyWait), GpuError> {
            M::decode(r).map(|(m, w)| (f(m), w))
        }
        match r.take_tag()? {
            0 => wrap(r, Routed::Ctx),
            1 => wrap(r, Routed::Blas),
            2 => wrap(r, Routed::Rng),
            3 => wrap(r, Routed::Fft),
            4 => wrap(r, Routed::Solver),
            5 => wrap(r, Routed::Kernel),
            t => Err(GpuError::InvalidArgument(format!("unknown actor tag {t}"))),
        }
    }

    /// Sends the request to the inner actor it is for. A library the device was
    /// configured without answers `Unsupported`; a send to a stopped actor drops the
    /// message, whose reply then tells its asker.
    async fn send_local(self, inner: &InnerRefs) -> Result<(), GpuError> {
        let disabled = |lib: &str| GpuError::Unsupported(format!("{lib} is disabled in this DeviceConfig (libraries)"));
        match self {
            Routed::Ctx(m) => inner.ctx.actor_ref().send(m).await,
            Routed::Kernel(m) => inner.kernel.actor_ref().send(m).await,
            Routed::Module(m) => inner.module.actor_ref().send(m).await,
            Routed::Event(m) => inner.event.actor_ref().send(m).await,
            Routed::Graph(m) => inner.graph.actor_ref().send(m).await,
            Routed::Blas(m) => match &inner.blas {
                Some(b) => b.actor_ref().send(m).await,
                None => {
                    m.fail(disabled("BLAS"));
                    Ok(())
                }
            },
            Routed::Rng(m) => match &inner.rng {
                Some(r) => r.actor_ref().send(m).await,
                None => {
                    m.fail(disabled("RNG"));
                    Ok(())
                }
            },
            Routed::Fft(m) => match &inner.fft {
                Some(f) => f.actor_ref().send(m).await,
                None => {
                    m.fail(disabled("FFT"));
                    Ok(())
                }
            },
            Routed::Solver(m) => match &inner.solver {
                Some(s) => s.actor_ref().send(m).await,
                None => {
                    m.fail(disabled("the solver"));
                    Ok(())
                }
            },
        }
    }
}

/// Messages of the inner actors that the device knows how to route.
pub trait Routable: Send + 'static {
    /// Wraps the message for routing.
    fn route(self) -> Routed;
}

impl Routable for ContextActorMsg {
    fn route(self) -> Routed {
        Routed::Ctx(self)
    }
}

impl Routable for BlasActorMsg {
    fn route(self) -> Routed {
        Routed::Blas(self)
    }
}

impl Routable for RngActorMsg {
    fn route(self) -> Routed {
        Routed::Rng(self)
    }
}

impl Routable for FftActorMsg {
    fn route(self) -> Routed {
        Routed::Fft(self)
    }
}

impl Routable for SolverActorMsg {
    fn route(self) -> Routed {
        Routed::Solver(self)
    }
}

impl Routable for KernelActorMsg {
    fn route(self) -> Routed {
        Routed::Kernel(self)
    }
}

impl Routable for ModuleActorMsg {
    fn route(self) -> Routed {
        Routed::Module(self)
    }
}

impl Routable for GraphActorMsg {
    fn route(self) -> Routed {
        Routed::Graph(self)
    }
}

impl Routable for EventActorMsg {
    fn route(self) -> Routed {
        Routed::Event(self)
    }
}

/// The outer tier of one device.
pub struct DeviceActor {
    shared: Arc<DeviceShared>,
    queue: VecDeque<Routed>,
}

impl DeviceActor {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        DeviceActor {
            shared,
            queue: VecDeque::new(),
        }
    }

    /// The inner tier's supervision: a sticky fault stops it (in-process mode cannot
    /// recover; the device is lost), anything else rebuilds it, at most 5 times a minute.
    /// An isolated device's worker is respawned after anything, sticky faults included,
    /// within its restart budget.
    pub(crate) fn inner_strategy(config: &super::DeviceConfig) -> SupervisorStrategy {
        if let Some(iso) = &config.isolation {
            return SupervisorStrategy::one_for_one()
                // A worker program that cannot serve (no #[gpu_main]) will not do better
                // on a restart.
                .with_decider(|f| match f.gpu_error() {
                    Some(GpuError::Unsupported(_)) => Directive::Stop,
                    _ => Directive::Restart,
                })
                .with_budget(iso.max_restarts, iso.restart_window, crate::actor::Exhausted::Stop);
        }
        SupervisorStrategy::one_for_one()
            .with_decider(|f| match f.gpu_error() {
                Some(e) if e.is_sticky() => Directive::Stop,
                _ => Directive::Restart,
            })
            .with_budget(5, std::time::Duration::from_secs(60), crate::actor::Exhausted::Stop)
    }

    /// Turns every change of the published state into a `StateChanged` message (which
    /// delivers what waited for the inner tier).
    fn watch_state(&self, ctx: &mut Context<Self>) {
        let mut rx = self.shared.state.subscribe();
        let me = ctx.self_ref().clone();
        ctx.dispatcher().spawn(async move {
            while rx.changed().await.is_ok() {
                if me.send(DeviceActorMsg::StateChanged {}).await.is_err() {
                    return;
                }
            }
        });
    }

    async fn deliver(&mut self, routed: Routed) {
        let inner = self.shared.state.borrow().inner.clone();
        match (self.shared.lost(), inner) {
            (Some(e), _) => routed.fail(GpuError::DeviceLost(e.to_string())),
            (None, Some(inner)) => {
                let _ = routed.send_to(&inner).await;
            }
            (None, None) => self.queue.push_back(routed),
        }
    }

    async fn flush(&mut self) {
        let ready = matches!(self.shared.state.borrow().status, Status::Ready | Status::Lost(_));
        if ready {
            while let Some(r) = self.queue.pop_front() {
                self.deliver(r).await;
            }
        }
    }
}

#[gpu_actor(crate = crate)]
impl DeviceActor {
    /// Starts the inner tier on a GPU thread of its own (kept across its restarts) and
    /// watches the published state.
    #[pre_start]
    async fn start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        if self.shared.config.isolation.is_some() {
            let shared = self.shared.clone();
            let props = WorkerActor::gpu_props(move || WorkerActor::new(shared.clone()))
                .mailbox(self.shared.config.mailbox_capacity);
            let inner = ctx.spawn_child(props, "context")?;
            ctx.watch(&inner, |terminated| DeviceActorMsg::InnerTerminated { terminated });
            self.watch_state(ctx);
            return Ok(());
        }
        let thread = GpuDispatcher::new(&format!("cuda-ctx-{}", self.shared.config.device_id))?;
        let shared = self.shared.clone();
        let props = ContextActor::gpu_props(move || ContextActor::new(shared.clone()))
            .dispatcher(thread)
            .mailbox(self.shared.config.mailbox_capacity);
        let inner = ctx.spawn_child(props, "context")?;
        ctx.watch(&inner, |terminated| DeviceActorMsg::InnerTerminated { terminated });
        self.watch_state(ctx);
        Ok(())
    }

    /// Fails queued requests once the device stops.
    #[post_stop]
    async fn stopped(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.shared
            .mark_lost(GpuError::DeviceLost("the device was stopped".into()));
        while let Some(r) = self.queue.pop_front() {
            r.fail(GpuError::DeviceLost("the device was stopped".into()));
        }
        Ok(())
    }
    /// Delivers a request now if the inner tier is ready, else queues it
    /// (`Backpressure` when the queue is full).
    #[handler]
    async fn submit(&mut self, routed: Routed) -> Result<(), GpuError> {
        let starting = self.shared.state.borrow().inner.is_none() && self.shared.lost().is_none();
        if starting && self.queue.len() >= self.shared.config.queue_capacity {
            let e = GpuError::Backpressure {
                capacity: self.shared.config.queue_capacity,
            };
            routed.fail(e.clone());
            return Err(e);
        }
        self.deliver(routed).await;
        Ok(())
    }

    /// The published state changed: deliver what waited for the inner tier.
    #[handler(tell)]
    async fn state_changed(&mut self) {
        self.flush().await;
    }

    /// The inner tier stopped for good: the device is lost.
    #[handler(tell)]
    async fn inner_terminated(&mut self, terminated: Terminated) {
        let why = match terminated.reason {
            StopReason::Failed(f)
                if self.shared.config.isolation.is_some()
                    && !matches!(f.gpu_error(), Some(GpuError::Unsupported(_))) =>
            {
                let iso = self.shared.config.isolation.as_ref().expect("checked");
                GpuError::DeviceLost(format!(
                    "the worker of device {} failed more than {} times within {:?}; giving up (last failure: {f})",
                    self.shared.config.device_id, iso.max_restarts, iso.restart_window
                ))
            }
            StopReason::Failed(f) => f.gpu_error().unwrap_or_else(|| GpuError::DeviceLost(f.to_string())),
            StopReason::Requested => GpuError::DeviceLost("the device was stopped".into()),
        };
        self.shared.mark_lost(why);
        self.flush().await;
    }

    /// Rebuilds the inner tier (a new generation).
    #[handler]
    async fn rebuild(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        if ctx.restart_child("context") {
            Ok(())
        } else {
            Err(GpuError::DeviceLost("the device has no inner tier to rebuild".into()))
        }
    }
}
