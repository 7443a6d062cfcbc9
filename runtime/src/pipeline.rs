//! The multi-stream pipeline pattern: host batches go through upload → compute →
//! download with several batches in flight, so the copies of one batch overlap the
//! compute of its neighbours.
//!
//! The stages already run on different streams — copies on the context actor's, compute
//! on the kernel (or BLAS) actor's — and are ordered by the events cudarc records per
//! buffer, so the pattern needs no extra synchronisation: only more than one batch in
//! flight. Copies go through pinned buffers from the device's pool (full PCIe speed,
//! asynchronous). `Pipeline::stream` (in `streams_pipeline`) is the same as a
//! `futures::Stream` adapter; [`Pipeline::run`] collects it.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::device::DType;
use crate::device::Device;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

/// The compute stage: takes the uploaded batch, returns the buffer to download.
pub type Compute<T, U> = dyn Fn(Device, GpuRef<T>) -> BoxFuture<'static, Result<GpuRef<U>, GpuError>> + Send + Sync;

/// A pipeline over one device: `depth` batches in flight (1 is the serial version).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// async fn double(d: Device, x: GpuRef<f32>) -> Result<GpuRef<f32>, GpuError> {
///     d.scal(2.0, &x).await?;
///     Ok(x)
/// }
/// let p = Pipeline::new(&dev, 2, double)?; // two batches in flight
/// let out = p.run(vec![vec![1.0f32; 4], vec![3.0; 2]]).await?;
/// assert_eq!(out, vec![vec![2.0; 4], vec![6.0; 2]]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Pipeline<T: DType, U: DType> {
    pub(crate) device: Device,
    pub(crate) depth: usize,
    pub(crate) compute: Arc<Compute<T, U>>,
}

impl<T: DType, U: DType> Clone for Pipeline<T, U> {
    fn clone(&self) -> Self {
        Pipeline {
            device: self.device.clone(),
            depth: self.depth,
            compute: self.compute.clone(),
        }
    }
}

impl<T: DType, U: DType> Pipeline<T, U> {
    /// A pipeline running `compute` on each batch, with up to `depth` (≥ 1) batches in
    /// flight.
    pub fn new<F, Fut>(device: &Device, depth: usize, compute: F) -> Result<Self, GpuError>
    where
        F: Fn(Device, GpuRef<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<GpuRef<U>, GpuError>> + Send + 'static,
    {
        if depth == 0 {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new("a pipeline needs at least one batch in flight (depth >= 1)")
                    .arg("depth")
                    .mismatch("≥ 1", 0),
            ));
        }
        Ok(Pipeline {
            device: device.clone(),
            depth,
            compute: Arc::new(move |d, r| Box::pin(compute(d, r))),
        })
    }

    /// Batches in flight at most.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// One batch through the three stages.
    pub async fn process(&self, batch: Vec<T>) -> Result<Vec<U>, GpuError> {
        let d = &self.device;
        let mut staged = d.pinned_scratch::<T>(batch.len()).await?;
        staged.as_mut_slice()?.copy_from_slice(&batch);
        drop(batch);
        let (input, staged) = d.upload_pinned(staged).await?;
        drop(staged);
        let output = (self.compute)(d.clone(), input).await?;
        let host = d.pinned_scratch::<U>(output.len()).await?;
        let host = d.download_pinned(&output, host).await?;
        Ok(host.as_slice()?.to_vec())
    }

    /// Runs every batch, `depth` at a time, and returns the results in input order.
    pub async fn run(&self, batches: Vec<Vec<T>>) -> Result<Vec<Vec<U>>, GpuError> {
        use futures::TryStreamExt;
        self.stream(futures::stream::iter(batches)).try_collect().await
    }
}
