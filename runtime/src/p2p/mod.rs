//! Copies between devices, and which GPUs reach each other's memory directly.
//!
//! Why: work spread over several devices (placement, data-parallel GEMMs, a world of
//! ranks) needs its buffers moved between them, in stream order and with the same
//! generation checks as any other use. [`Device::copy_to`](crate::Device::copy_to) copies
//! a buffer of one device into a buffer of another, whatever the pair: two GPUs (CUDA peer
//! copies, direct where [`Topology`] says the pair has peer access), two `Device`s on one
//! GPU, a GPU and the CPU device, two CPU devices. A pair that has no direct path is
//! staged through host memory.

mod copy;
mod topology;

pub use topology::Topology;
