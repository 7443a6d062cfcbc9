//! Procedural macros of `atomr-accel-cuda`.
//!
//! `#[gpu_actor]` and `#[kernel]` will live here (see DESIGN.md, "The DSL"). Until they
//! land this crate exports nothing: the facade re-exports it already so that users' build
//! files do not change when the macros arrive. README.md lists them as missing.
