//! `memory`: managed (unified) memory — one allocation the GPU and the host both address,
//! migrated on demand by the driver.
//!
//! `Device::alloc_managed` returns an ordinary [`GpuRef`](crate::GpuRef): every
//! operation that takes device buffers (GEMM, `#[kernel]`, FFT, solvers, graphs) takes
//! it. What managed memory adds:
//! - host access without a copy: `GpuRef::with_host` / `with_host_mut` wait for the GPU
//!   work on the buffer, then hand out the elements in place;
//! - `Device::prefetch` to move the pages ahead of use (stream-ordered after the
//!   buffer's last writer), and `Device::advise` to tell the driver how the memory is
//!   used ([`Advice`]).
//!
//! On the CPU device every buffer is host memory: `alloc_managed` is `alloc`, the host
//! accessors work on any buffer, and prefetch and advice succeed without effect, so a
//! program written for the GPU runs unchanged.

/// Where memory should live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// The buffer's GPU.
    Device,
    /// Host memory (the NUMA node nearest the calling thread, for prefetches).
    Host,
}

/// Usage hints for managed memory (`cuMemAdvise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Mostly read: the driver may keep read-only copies where it is read (`true`), or
    /// stop doing so (`false`).
    ReadMostly(bool),
    /// Keep the pages at this location when possible (`None`: no preference).
    PreferredLocation(Option<Location>),
    /// This location will access the memory: map it there to avoid faults (`true`), or
    /// undo that (`false`).
    AccessedBy(Location, bool),
}
