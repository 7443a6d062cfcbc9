//! Library actors of a device: each owns one CUDA library handle (or its CPU
//! equivalent) and the stream it enqueues on, and is written with `#[gpu_actor]`. They
//! build on the shared floor (`backend`, `gpu_ref`, `completion`, `wire`) and are named
//! only by the device tier above them.
//!
//! A library whose cargo feature a build leaves out keeps its public types, messages
//! and methods; its handlers are compiled only with the feature (`#[gpu_actor(feature
//! = …)]`), and its calls answer `Unsupported` naming it (`catalog.rs`).

pub(crate) mod catalog;
pub(crate) mod engine;
pub mod kernels;
pub mod modules;
pub(crate) mod pivots;
pub(crate) mod seed;
pub(crate) mod shell;

/// Declares the folder of each optional library (`crate::libraries`).
macro_rules! library_modules {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident { $($row:tt)* })*) => {
        $(pub mod $field;)*
    };
}
crate::libraries::library_table!(library_modules {});
