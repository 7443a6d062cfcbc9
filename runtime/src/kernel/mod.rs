//! `#[kernel]`: the runtime side of the kernel DSL — its scalar types and intrinsics,
//! the CPU device's emulated grid, launches and the registry of every kernel of the
//! program. The device's `KernelActor` that runs launches is a library actor
//! (`library::kernels`).

pub(crate) mod cache;
pub mod dsl;
pub(crate) mod once_loads;
