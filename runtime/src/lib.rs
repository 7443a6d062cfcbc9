//! Runtime of `atomr-accel-cuda`: GPU acceleration through the actor model.
//!
//! The module map follows the original `atomr_accel_cuda` crate (see DESIGN.md), plus
//! `actor`, the actor core everything else is built on.

#![warn(missing_docs)]
// A build without one of the library features (`blas`, `fft`, `rand`, `solver`,
// `sparse`, `nccl`) or without isolated devices (the `isolation` feature, Linux)
// compiles out their code, which leaves some shared helpers only it calls unused; the
// full build (CI's clippy) still flags dead code.
#![cfg_attr(
    not(all(
        feature = "blas",
        feature = "fft",
        feature = "rand",
        feature = "solver",
        feature = "sparse",
        feature = "nccl",
        isolation
    )),
    allow(dead_code, unused_imports)
)]

/// The crate users depend on, as errors name it (its cargo features are forwarded to
/// this runtime).
pub(crate) const CRATE: &str = "atomr-accel-cuda";

pub mod actor;
pub mod backend;
pub mod completion;
pub mod device;
pub mod dispatcher;
pub mod dtype;
pub mod error;
pub mod event;
#[cfg(test)]
mod fuzz;
pub mod gpu_ref;
pub mod graph;
pub mod hopper;
pub mod host;
pub mod interop;
mod invalid;
pub mod isolation;
pub mod kernel;
pub mod launch;
mod libraries;
pub mod library;
pub mod memory;
pub mod module;
pub mod multi_device;
pub mod nvrtc_cache;
pub mod observability;
pub mod p2p;
pub mod pipeline;
pub mod placement;
pub mod prelude;
pub(crate) mod process_role;
pub mod replay;
pub mod stream;
pub mod streams_pipeline;
#[doc(hidden)]
pub mod sys;
pub mod wire;

pub use completion::CompletionStrategy;
pub use device::{precompile_all, precompile_all_with, PrecompileStep, PrecompileSummary};
pub use device::{Device, DeviceConfig};
pub use error::{GpuError, Invalid, Lib, NumericalIssue};
pub use gpu_ref::GpuRef;
pub use host::PinnedBuf;
pub use kernel::dsl::{Float, Int, KernelArg, KernelScalar};
pub use library::blas::{Batch, Gemm, Gemv, Strided};
pub use library::fft::FftShape;
pub use library::rng::RngKind;
pub use stream::StreamStrategy;

/// Hooks for tests and fault drills (a forced context rebuild, killing an isolated
/// device's worker): import [`testing::TestHooks`] to use them on a `Device`.
pub mod testing {
    pub use crate::device::test_hooks::TestHooks;
    pub use crate::sys::graph::recaptures;
}

/// Re-exports the generated code of `#[gpu_actor]` names, so users need not depend on
/// these crates themselves. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use cudarc;
    pub use half;
    pub use inventory;
}
