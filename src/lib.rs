//! `atomr-accel-cuda`: GPU acceleration through the actor model, as an embedded DSL.
//!
//! This facade re-exports the runtime (`atomr-accel-cuda-runtime`) and the macros
//! (`atomr-accel-cuda-macros`), so users depend on one crate. See README.md for what works
//! today and DESIGN.md for the target.

pub use atomr_accel_cuda_macros::{
    device, gpu_actor, gpu_main, handler, kernel, post_stop, pre_restart, pre_start, KernelArg,
};
pub use atomr_accel_cuda_runtime::*;

/// The names most programs need, in one `use`: the runtime's prelude and the macros
/// (`#[gpu_actor]`, `#[kernel]`, `#[derive(KernelArg)]`, …).
pub mod prelude {
    pub use atomr_accel_cuda_macros::{
        device, gpu_actor, gpu_main, handler, kernel, post_stop, pre_restart, pre_start, KernelArg,
    };
    pub use atomr_accel_cuda_runtime::prelude::*;
}
