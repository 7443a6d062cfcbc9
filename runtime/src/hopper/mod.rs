//! Hopper (sm_90) primitives: thread-block cluster launches and TMA tensor maps.
//!
//! - [`LaunchSpec`]: a launch with cluster dimensions (`cuLaunchKernelEx`), validated
//!   against the device before anything is enqueued; run through
//!   `Device::launch_cluster` on a module's kernel.
//! - [`TensorMapBuilder`] → [`TensorMap`]: a `cuTensorMapEncodeTiled` descriptor of a
//!   device buffer, checked against the driver's documented rules (ranks, alignment,
//!   box sizes, swizzle spans, the buffer's extent) so a mistake is an
//!   `InvalidArgument` naming the rule rather than a driver status. Pass it to a kernel
//!   with `KernelArgs::tensor_map`, which also keeps the buffer alive and orders the
//!   launch after its last writer.
//!
//! Both need a GPU of compute capability 9.0 or later; elsewhere (older GPUs, the CPU
//! device) they answer `Unsupported`.

mod cluster;
mod tensor_map;

pub(crate) use cluster::enqueue_cluster;
pub use cluster::{LaunchSpec, MAX_PORTABLE_CLUSTER_SIZE};
pub use tensor_map::{L2Promotion, Swizzle, TensorMap, TensorMapBuilder};
