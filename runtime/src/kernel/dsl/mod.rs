//! Runtime support of `#[kernel]`: what generated code calls.
//!
//! A `#[kernel]` function becomes a module holding its CUDA C++ (assembled per dtype by
//! [`source`]), its body as Rust (run by the CPU device's [`grid`] executor over
//! [`slices`] handles, with the [`intrinsics`] reading the emulated thread's position),
//! a typed launcher (a [`launch::KernelCall`] to the device's `KernelActor`) and an
//! [`registry`] entry for `precompile_all`.

pub mod atomics;
pub mod grid;
pub mod index;
pub mod intrinsics;
pub mod launch;
pub mod registry;
pub mod rows;
pub mod scalar;
pub mod slices;
pub mod source;
pub mod stream_launch;
pub mod vectors;
mod wire;

pub use launch::{KernelArg, KernelCall, KernelSequence, LaunchTarget};
pub use registry::{registered, KernelRegistration};
pub use scalar::{Arith, Float, Int, KernelScalar};

/// What a kernel body sees: the intrinsics, the `Float`/`Int` bounds and the buffer
/// handles. The `#[kernel]` macro imports it into the kernel's module.
pub mod prelude {
    pub use super::atomics::{AtomicAdd, AtomicOrd, AtomicSwap};
    pub use super::index::KernelIndex;
    pub use super::intrinsics::*;
    pub use super::rows::Rows;
    pub use super::scalar::{Arith, Float, Int, KernelScalar};
    pub use super::slices::{GlobalSlice, GlobalSliceMut, SharedArray};
    pub use super::vectors::{Vec2, Vec4};
    pub use crate::dtype::DTypeBase as _;
    pub use half::{bf16, f16};
}
