//! The names most programs need, in one `use`.

pub use crate::actor::{
    Actor, ActorRef, ActorSystem, Context, Directive, Failure, Props, Reply, StopMode, SupervisorStrategy, Terminated,
};
pub use crate::device::precompile_all;
pub use crate::device::Svd;
pub use crate::device::{ActorGpu, BackendChoice, BackendKind, Device, DeviceConfig, Libraries};
pub use crate::device::{DType, Reduce, Scan, SortKey, SortValue};
pub use crate::dispatcher::{Dispatcher, GpuDispatcher};
pub use crate::dtype::{c32, c64, f8e4m3, f8e5m2, Complex, FloatDType};
pub use crate::error::{GpuError, NumericalIssue};
pub use crate::event::GpuEvent;
pub use crate::gpu_ref::GpuRef;
pub use crate::graph::{GraphBuilder, GraphRef};
pub use crate::kernel::dsl::KernelSequence;
pub use crate::kernel::dsl::{Float, Int, KernelArg, KernelScalar};
pub use crate::launch::LaunchConfig;
pub use crate::memory::{Advice, Location};
pub use crate::pipeline::Pipeline;
pub use crate::placement::{DeviceLoad, Placement, PlacementActor, PlacementActorRef, PlacementPolicy};
pub use crate::replay::{replay, Recorder, ReplayReport};
pub use half::{bf16, f16};

/// Each optional library's element-type bounds and the names of its `prelude` module
/// (`crate::libraries`).
macro_rules! library_prelude {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, $device:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
        bounds { $($bounds:tt)* }
    })*) => {
        $(
            pub use crate::library::$field::prelude::*;
            $(pub use crate::device::$bound;)*
        )*
    };
}
crate::libraries::library_table!(library_prelude {});
