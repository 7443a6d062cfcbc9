//! Runtime of `atomr-accel-cuda`: GPU acceleration through the actor model.
//!
//! The module map follows the original `atomr_accel_cuda` crate (see DESIGN.md), plus
//! `actor`, the actor core everything else is built on.

#![warn(missing_docs)]

pub mod actor;
pub mod dispatcher;
pub mod error;
pub mod prelude;

pub use error::{GpuError, Lib};
