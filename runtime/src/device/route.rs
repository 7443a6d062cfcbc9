//! The route of a request inside the device tier: which inner actor serves it, and how
//! it gets there — to that actor in this process, or across to an isolated device's
//! worker. Every inner actor's message type is routed here and nowhere below.

use std::sync::Arc;

use crate::error::GpuError;
use crate::event::{EventActorMsg, EventActorRef};
use crate::graph::{GraphActorMsg, GraphActorRef};
use crate::library::kernels::{KernelActorMsg, KernelActorRef};
use crate::library::modules::{ModuleActorMsg, ModuleActorRef};
use crate::wire::{Journalled, Reader, ReplySlot, ReplyTap, ReplyWait, WireMessage, Writer};

use super::context_actor::{ContextActorMsg, ContextActorRef};
use super::pool::{Busy, Pool};
use crate::library::catalog::Lib;
use crate::library::seed::LibrarySeed;

/// Declares the inner actors of a device once — variant, message and client types, the
/// field that holds its address, whether it is one actor or a pool, and the tag its
/// messages cross to an isolated device's worker (and into a replay journal) under — and
/// writes from that table [`InnerRefs`], [`LibraryRefs`], [`Routed`], its `fail`,
/// `encode`, `decode` and local delivery, and the [`Routable`] impls. The device's own
/// actors are the rows here; the optional libraries come from `library_table!` (each
/// `Option`al: left out by the build or the `DeviceConfig`). Adding an operation to an
/// actor touches none of this.
macro_rules! inner_actors {
    (
        $($(#[$doc:meta])* $variant:ident($msg:ty, $client:ty) at $field:ident, $presence:ident, wire($tag:literal);)*
        @libraries
        $($(#[$ldoc:meta])* $lvariant:ident: $lfield:ident {
            $lactor:ident, $lmsg:ident, $lclient:ident, $pool:ident, $device:ident, wire($ltag:literal), $what:literal,
            $feature:literal, $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
            bounds { $($bounds:tt)* }
        })*
    ) => {
        /// The addresses of the current inner tier, and the seed its library actors were
        /// built from (an actor's own GPU builds its cores from it).
        #[derive(Clone)]
        pub(crate) struct InnerRefs {
            $(pub(crate) $field: inner_actors!(@field $presence, $client),)*
            /// The optional libraries' actors.
            pub(crate) libs: LibraryRefs,
            pub(crate) seed: LibrarySeed,
        }

        /// The addresses of the optional libraries' actors (`None`: left out of the
        /// build or the `DeviceConfig`).
        #[derive(Clone)]
        pub(crate) struct LibraryRefs {
            $(pub(crate) $lfield: Option<inner_actors!(@field $pool, crate::library::$lfield::$lclient)>,)*
        }

        inner_actors!(@routed
            $($(#[$doc])* $variant($msg) at ($field), $presence, wire($tag);)*
            $($(#[$ldoc])* $lvariant(crate::library::$lfield::$lmsg) at (libs.$lfield), lib($pool, $lvariant), wire($ltag);)*
        );
    };
    (@routed $($(#[$doc:meta])* $variant:ident($msg:ty) at ($($at:ident).+), $presence:ident $(($($how:tt)*))?, wire($tag:literal);)*) => {
        /// A request addressed to one of the inner actors.
        pub enum Routed {
            $($(#[$doc])* $variant($msg),)*
        }

        impl Routed {
            /// Answers the request's asker with `e` instead of delivering it.
            pub(crate) fn fail(self, e: GpuError) {
                match self {
                    $(Routed::$variant(m) => {
                        m.fail(e);
                    })*
                }
            }

            /// Writes the request for an isolated device's worker; `None` when it cannot
            /// cross (its asker has been answered with why).
            pub(crate) fn encode(self, w: &mut Writer<'_>) -> Option<ReplySlot> {
                match self {
                    $(Routed::$variant(m) => {
                        w.put_tag($tag);
                        m.encode(w)
                    },)*
                }
            }

            /// Writes the request for the replay journal, keeping it (its reply passes
            /// through `tap`); a request with a field the journal refuses (a raw module, an
            /// event, a graph) is named but not written.
            pub(crate) fn journal(self, w: &mut Writer<'_>, tap: &ReplyTap) -> (Routed, Journalled) {
                match self {
                    $(Routed::$variant(m) => {
                        w.put_tag($tag);
                        let (m, j) = m.journal(w, tap);
                        (Routed::$variant(m), j)
                    },)*
                }
            }

            /// Reads a request written by [`Routed::encode`] (in the worker) or
            /// [`Routed::journal`] (in a replay).
            pub(crate) fn decode(r: &mut Reader<'_>) -> Result<(Routed, ReplyWait), GpuError> {
                fn wrap<M: WireMessage>(r: &mut Reader<'_>, f: fn(M) -> Routed) -> Result<(Routed, ReplyWait), GpuError> {
                    M::decode(r).map(|(m, w)| (f(m), w))
                }
                let tag = r.take_tag()?;
                $(if tag == $tag {
                    return wrap(r, Routed::$variant);
                })*
                Err(GpuError::invalid(format!("unknown actor tag {tag}")))
            }

            /// Sends the request to the inner actor it is for (the least busy member of a
            /// pooled library, counted busy while the returned guard lives). A library the
            /// device does not serve answers `Unsupported`; a send to a stopped actor drops
            /// the message, whose reply then tells its asker.
            async fn send_local(self, inner: &InnerRefs) -> Result<Option<Busy>, GpuError> {
                match self {
                    $(Routed::$variant(m) => inner_actors!(@send $presence $(($($how)*))?, m, inner.$($at).+, inner),)*
                }
            }
        }

        $(impl Routable for $msg {
            fn route(self) -> Routed {
                Routed::$variant(self)
            }
        })*
    };
    (@field required, $client:ty) => { $client };
    (@field single, $client:ty) => { $client };
    (@field pooled, $client:ty) => { Pool<$client> };
    (@send required, $m:ident, $at:expr, $inner:ident) => {
        $at.actor_ref().send($m).await.map(|()| None)
    };
    (@send pooled, $m:ident, $at:expr, $inner:ident) => {{
        let (a, busy) = $at.pick();
        a.actor_ref().send($m).await.map(|()| Some(busy))
    }};
    (@send lib($pool:ident, $lib:ident), $m:ident, $at:expr, $inner:ident) => {
        match &$at {
            Some(a) => inner_actors!(@send_present $pool, $m, a),
            None => {
                $m.fail(disabled(Lib::$lib, $inner));
                Ok(None)
            }
        }
    };
    (@send_present single, $m:ident, $a:ident) => {
        $a.actor_ref().send($m).await.map(|()| None)
    };
    (@send_present pooled, $m:ident, $a:ident) => {{
        let (a, busy) = $a.pick();
        a.actor_ref().send($m).await.map(|()| Some(busy))
    }};
}

crate::libraries::library_table!(inner_actors {
    /// For the context actor.
    Ctx(ContextActorMsg, ContextActorRef) at ctx, required, wire(0);
    /// For the kernel actors.
    Kernel(KernelActorMsg, KernelActorRef) at kernel, pooled, wire(5);
    /// For the module actor.
    Module(ModuleActorMsg, ModuleActorRef) at module, required, wire(8);
    /// For the event actor.
    Event(EventActorMsg, EventActorRef) at event, required, wire(6);
    /// For the graph actor.
    Graph(GraphActorMsg, GraphActorRef) at graph, required, wire(7);
});

/// What a request for a library the device does not serve gets: the build left its
/// cargo feature out, or the `DeviceConfig` the library (`Lib::check`).
fn disabled(lib: Lib, inner: &InnerRefs) -> GpuError {
    match lib.check(&inner.seed.shared.config.libraries) {
        Err(e) => e,
        Ok(()) => GpuError::Internal(format!("{} is configured but has no actor", lib.what())),
    }
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

impl Routed {
    /// Sends the request to the inner tier: its actor in this process (with the guard
    /// that counts it at a pooled actor until its reply), or an isolated device's worker,
    /// served there for the `ActorGpu` numbered `origin` (`device::origin`; in this process
    /// an `ActorGpu` enqueues in place).
    pub(crate) async fn send_to(self, inner: &Inner, origin: u64) -> Result<Option<Busy>, GpuError> {
        match inner {
            Inner::Local(refs) => self.send_local(refs).await,
            Inner::Worker(link) => {
                link.submit(self, origin);
                Ok(None)
            }
        }
    }
}

/// Messages of the inner actors that the device knows how to route.
pub trait Routable: Send + 'static {
    /// Wraps the message for routing.
    fn route(self) -> Routed;
}
