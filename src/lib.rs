//! GPU acceleration through the actor model, in Rust, as an embedded DSL.
//!
//! This facade re-exports the runtime (`atomr-accel-cuda-runtime`) and the macros
//! (`atomr-accel-cuda-macros`), so a program depends on one crate and writes
//! `use atomr_accel_cuda::prelude::*;`. Every example on this page runs on the CPU device
//! (`DeviceConfig::cpu()`), which offers the same API as a GPU; `DeviceConfig::auto()`
//! opens GPU 0 when one is usable and the CPU device otherwise.
//!
//! # A device and its buffers
//!
//! A [`Device`] is the handle to a two-tier supervision tree: a stable `DeviceActor` over a
//! restartable `ContextActor` that owns the CUDA context, its streams and the library
//! actors (cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, kernels). Buffers are [`GpuRef`]s:
//! cheap handles, freed when the last clone drops, ordered across streams, and `Stale`
//! after the context they were made in is rebuilt.
//!
//! ```
//! use atomr_accel_cuda::prelude::*;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), GpuError> {
//! let system = ActorSystem::new("guide");
//! let dev = Device::open(&system, DeviceConfig::cpu()).await?;
//! let x = dev.upload(vec![1.0f32, 2.0, 3.0, 4.0]).await?;
//! let y = dev.upload(vec![10.0f32; 4]).await?;
//! dev.axpy(2.0, &x, &y).await?; // y = 2·x + y, cuBLAS on a GPU
//! assert_eq!(dev.download(&y).await?, vec![12.0, 14.0, 16.0, 18.0]);
//! assert_eq!(dev.sum(&y).await?, 60.0);
//! # system.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Kernels: `#[kernel]`
//!
//! A function in a subset of Rust becomes a module with a typed launcher, its CUDA C++
//! source (compiled by NVRTC once per device and element type, disk-cached) and a CPU
//! emulation. Generic parameters bounded by [`Float`] or [`Int`] are instantiated per
//! element type.
//!
//! ```
//! use atomr_accel_cuda::prelude::*;
//!
//! #[kernel]
//! pub fn scale_add<T: Float>(a: T, x: &[T], y: &mut [T]) {
//!     let i = global_index();
//!     if i < y.len() {
//!         y[i] = a * x[i] + y[i];
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), GpuError> {
//! let system = ActorSystem::new("kernel");
//! let dev = Device::open(&system, DeviceConfig::cpu()).await?;
//! let x = dev.upload(vec![1.0f64; 300]).await?;
//! let mut y = dev.upload(vec![0.5f64; 300]).await?;
//! scale_add::launch::<f64>(&dev, LaunchConfig::for_elements(300, 128), 3.0, &x, &mut y).await?;
//! assert!(dev.download(&y).await?.iter().all(|&v| v == 3.5));
//! assert!(scale_add::cuda_source::<f64>().contains("__global__"));
//! # system.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Helpers called from kernels are `#[device]` functions, and plain-data parameter
//! structs derive [`KernelArg`] (with `#[repr(C)]`, so the GPU sees the same layout):
//!
//! ```
//! use atomr_accel_cuda::prelude::*;
//!
//! #[derive(Clone, Copy, KernelArg)]
//! #[repr(C)]
//! pub struct Affine {
//!     pub scale: f32,
//!     pub shift: f32,
//! }
//!
//! #[device]
//! pub fn apply(p: Affine, v: f32) -> f32 {
//!     p.scale * v + p.shift
//! }
//!
//! #[kernel]
//! pub fn affine(p: Affine, x: &[f32], y: &mut [f32]) {
//!     let i = global_index();
//!     if i < y.len() {
//!         y[i] = apply(p, x[i]);
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), GpuError> {
//! let system = ActorSystem::new("affine");
//! let dev = Device::open(&system, DeviceConfig::cpu()).await?;
//! let x = dev.upload(vec![1.0f32, 2.0, 3.0]).await?;
//! let mut y = dev.alloc::<f32>(3).await?;
//! let p = Affine { scale: 2.0, shift: -1.0 };
//! affine::launch(&dev, LaunchConfig::for_elements(3, 32), p, &x, &mut y).await?;
//! assert_eq!(dev.download(&y).await?, vec![1.0, 3.0, 5.0]);
//! assert!(<Affine as KernelArg>::cuda_decl().contains("struct Affine"));
//! # system.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Actors with a GPU of their own: `#[gpu_actor]`
//!
//! `#[gpu_actor]` on an `impl` block writes the message enum (one variant per handler and
//! element type), the dispatch, a typed client (`<Name>Ref`) and the supervision wiring.
//! An actor holding an [`ActorGpu`](device::ActorGpu) runs its library calls and kernel
//! launches in place, on a stream of its own, so independent actors overlap on the GPU.
//!
//! ```
//! use atomr_accel_cuda::prelude::*;
//!
//! struct Counter {
//!     gpu: ActorGpu,
//!     calls: u32,
//! }
//!
//! #[gpu_actor]
//! impl Counter {
//!     /// Scales `x` in place on this actor's own stream (one message variant per
//!     /// element type), and counts the calls.
//!     #[handler(dtypes(f32, f64))]
//!     async fn scale<T: Blas1Scalar>(&mut self, alpha: T, x: GpuRef<T>) -> Result<(), GpuError> {
//!         self.calls += 1;
//!         self.gpu.scal(alpha, &x).await
//!     }
//!
//!     /// How many sums were asked for.
//!     #[handler]
//!     async fn calls(&mut self) -> Result<u32, GpuError> {
//!         Ok(self.calls)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), GpuError> {
//! let system = ActorSystem::new("actors");
//! let dev = Device::open(&system, DeviceConfig::cpu()).await?;
//! let counter = CounterRef::spawn_on(&dev, &system, "counter", |gpu| Counter { gpu, calls: 0 })?;
//! let x = dev.upload(vec![0.25f64; 8]).await?;
//! counter.scale::<f64>(4.0, x.clone()).await?;
//! counter.scale::<f64>(0.5, x.clone()).await?;
//! assert_eq!(dev.download(&x).await?, vec![0.5; 8]);
//! assert_eq!(counter.calls().await?, 2);
//! # system.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Isolated devices: `#[gpu_main]`
//!
//! A sticky CUDA fault kills every context of its process. An isolated device
//! (`DeviceConfig::cuda(0).isolated()`) runs its inner tier in a worker process — this same
//! executable, started again — and replaces it after a fault; `#[gpu_main]` on `main` lets
//! the executable serve as that worker. Outside a worker it changes nothing:
//!
//! ```
//! use atomr_accel_cuda::prelude::*;
//!
//! #[atomr_accel_cuda::gpu_main]
//! #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! async fn main() -> Result<(), GpuError> {
//!     let system = ActorSystem::new("app");
//!     let dev = Device::open(&system, DeviceConfig::cpu()).await?;
//!     assert_eq!(dev.download(&dev.upload(vec![7u8; 3]).await?).await?, vec![7, 7, 7]);
//!     system.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! # Where to read on
//!
//! The module list below follows the runtime's layers (`docs/ARCHITECTURE.md` in the
//! repository draws them); [`device::Device`] lists every call a device answers;
//! [`error::GpuError`] every failure. The repository's README has the status of each area
//! and BENCHMARKS.md the measurements against the raw libraries.

pub use atomr_accel_cuda_macros::{
    device, gpu_actor, gpu_main, handler, kernel, post_stop, pre_restart, pre_start, KernelArg,
};
pub use atomr_accel_cuda_runtime::*;

/// The names most programs need, in one `use`: the runtime's prelude and the macros
/// (`#[gpu_actor]`, `#[kernel]`, `#[derive(KernelArg)]`, …).
pub mod prelude {
    pub use atomr_accel_cuda_macros::{
        device, gpu_actor, gpu_main, handler, kernel, post_stop, pre_restart, pre_start, KernelArg,
    };
    pub use atomr_accel_cuda_runtime::prelude::*;
}
