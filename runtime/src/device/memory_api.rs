//! The managed-memory part of the `Device` client (see `crate::memory`).

use super::bounds::DType;
use super::context_actor::{ContextActorAdviseDType, ContextActorAllocManagedDType, ContextActorPrefetchDType};
use super::Device;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::memory::{Advice, Location};

impl Device {
    /// Allocates `len` zeroed elements of managed (unified) memory: a `GpuRef` every
    /// device operation takes, that the host also reads and writes in place
    /// (`GpuRef::with_host`). An ordinary buffer on the CPU device.
    pub async fn alloc_managed<T: DType>(&self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.call(|reply| <T as ContextActorAllocManagedDType>::__into_msg(len, reply))
            .await
    }

    /// Moves a managed buffer's pages to `to` ahead of use, after its last writer;
    /// resolves when they are there. `InvalidArgument` for a buffer that is not managed;
    /// nothing to do on the CPU device.
    pub async fn prefetch<T: DType>(&self, buffer: &GpuRef<T>, to: Location) -> Result<(), GpuError> {
        let buffer = buffer.clone();
        self.call(|reply| <T as ContextActorPrefetchDType>::__into_msg(buffer, to, reply))
            .await
    }

    /// Tells the driver how a managed buffer is used. `InvalidArgument` for a buffer that
    /// is not managed; nothing to do on the CPU device.
    pub async fn advise<T: DType>(&self, buffer: &GpuRef<T>, advice: Advice) -> Result<(), GpuError> {
        let buffer = buffer.clone();
        self.call(|reply| <T as ContextActorAdviseDType>::__into_msg(buffer, advice, reply))
            .await
    }
}
