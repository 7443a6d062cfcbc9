//! What every part of a device shares and no actor owns: its configuration, its
//! published state (generation, status, info, the lost flag), and the engine — a CUDA
//! context with its streams and completer, or the emulated CPU device — that the
//! library actors enqueue on. The floor below the library actors: it names none.

pub mod config;
pub(crate) mod engine;
mod staging;
pub mod state;
