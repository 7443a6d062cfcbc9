//! `DeviceActor`: the outer, stable tier. Supervises the `ContextActor`, holds requests
//! while it (re)starts, and marks the device lost when it is gone for good. Written with
//! `#[gpu_actor]`.

use std::collections::VecDeque;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use super::context_actor::{ContextActor, ContextActorMsg};
use super::state::InnerRefs;
use super::state::{DeviceShared, Status};
use crate::actor::{Context, Directive, StopReason, SupervisorStrategy, Terminated};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::event::EventActorMsg;
use crate::graph::GraphActorMsg;
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

    /// Sends the request to the inner actor it is for. A library the device was
    /// configured without answers `Unsupported`; a send to a stopped actor drops the
    /// message, whose reply then tells its asker.
    pub(crate) async fn send_to(self, inner: &InnerRefs) -> Result<(), GpuError> {
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
    pub(crate) fn inner_strategy() -> SupervisorStrategy {
        SupervisorStrategy::one_for_one()
            .with_decider(|f| match f.gpu_error() {
                Some(e) if e.is_sticky() => Directive::Stop,
                _ => Directive::Restart,
            })
            .with_budget(5, std::time::Duration::from_secs(60), crate::actor::Exhausted::Stop)
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
        let thread = GpuDispatcher::new(&format!("cuda-ctx-{}", self.shared.config.device_id))?;
        let shared = self.shared.clone();
        let props = ContextActor::gpu_props(move || ContextActor::new(shared.clone()))
            .dispatcher(thread)
            .mailbox(self.shared.config.mailbox_capacity);
        let inner = ctx.spawn_child(props, "context")?;
        ctx.watch(&inner, |terminated| DeviceActorMsg::InnerTerminated { terminated });
        let mut rx = self.shared.state.subscribe();
        let me = ctx.self_ref().clone();
        ctx.dispatcher().spawn(async move {
            while rx.changed().await.is_ok() {
                if me.send(DeviceActorMsg::StateChanged {}).await.is_err() {
                    return;
                }
            }
        });
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
