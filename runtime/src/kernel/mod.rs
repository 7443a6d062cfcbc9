//! Library actors of a device: each owns one CUDA library handle (or its CPU
//! equivalent) and the stream it enqueues on.

pub mod blas;
pub mod dsl;
pub mod fft;
pub mod kernel_actor;
pub mod module_actor;
pub mod rng;
pub(crate) mod seed;
pub mod solver;
