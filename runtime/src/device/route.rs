//! The route of a request inside the device tier: which inner actor serves it, and how
//! it gets there — to that actor in this process, or across to an isolated device's
//! worker. Every library actor's message type appears here and nowhere below.

use std::sync::Arc;

use crate::error::GpuError;
use crate::event::{EventActorMsg, EventActorRef};
use crate::graph::{GraphActorMsg, GraphActorRef};
use crate::library::blas::{BlasActorMsg, BlasActorRef};
use crate::library::fft::{FftActorMsg, FftActorRef};
use crate::library::kernels::{KernelActorMsg, KernelActorRef};
use crate::library::modules::{ModuleActorMsg, ModuleActorRef};
use crate::library::rng::{RngActorMsg, RngActorRef};
use crate::library::solver::{SolverActorMsg, SolverActorRef};
use crate::wire::{Reader, ReplySlot, ReplyWait, WireMessage, Writer};

use super::context_actor::{ContextActorMsg, ContextActorRef};

/// The addresses of the current inner tier.
#[derive(Clone)]
pub(crate) struct InnerRefs {
    pub(crate) ctx: ContextActorRef,
    pub(crate) blas: Option<BlasActorRef>,
    pub(crate) rng: Option<RngActorRef>,
    pub(crate) fft: Option<FftActorRef>,
    pub(crate) solver: Option<SolverActorRef>,
    pub(crate) kernel: KernelActorRef,
    pub(crate) module: ModuleActorRef,
    pub(crate) event: EventActorRef,
    pub(crate) graph: GraphActorRef,
}

/// Where requests go while a device is ready.
// Built once per generation and held behind the `RouteSlot`'s `Arc`, never moved per
// request: boxing the larger variant would only add an indirection to every request.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(crate) enum Inner {
    /// The inner actors, in this process (the `RouteSlot` that holds the route shares
    /// it: a request's clone is one reference count).
    Local(InnerRefs),
    /// An isolated device's worker process.
    Worker(Arc<crate::isolation::link::LinkShared>),
}

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
