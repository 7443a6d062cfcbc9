//! The names most programs need, in one `use`.

pub use crate::actor::{
    Actor, ActorRef, ActorSystem, Context, Directive, Failure, Props, Reply, StopMode, SupervisorStrategy, Terminated,
};
pub use crate::device::precompile_all;
pub use crate::device::Svd;
pub use crate::device::{ActorGpu, BackendChoice, BackendKind, Device, DeviceConfig, Libraries};
pub use crate::device::{
    Blas1Scalar, BlasScalar, DType, FftScalar, RandomScalar, Reduce, Scan, SolverScalar, SortKey, SortValue,
    SparseScalar,
};
pub use crate::dispatcher::{Dispatcher, GpuDispatcher};
pub use crate::dtype::{c32, c64, f8e4m3, f8e5m2, Complex, FloatDType};
pub use crate::error::{GpuError, NumericalIssue};
pub use crate::event::GpuEvent;
pub use crate::gpu_ref::GpuRef;
pub use crate::graph::{GraphBuilder, GraphRef};
pub use crate::kernel::dsl::KernelSequence;
pub use crate::kernel::dsl::{Float, Int, KernelArg, KernelScalar};
pub use crate::launch::LaunchConfig;
pub use crate::library::blas::matmul::{Activation, Compute, Epilogue, Matmul, MatmulBuffer};
pub use crate::library::blas::{Batch, Gemm, Gemv, Strided};
pub use crate::library::fft::FftShape;
pub use crate::library::rng::RngKind;
pub use crate::library::solver::{Eigh, Triangle};
pub use crate::library::sparse::{CooMatrix, CsrMatrix, HostCsr, SparseMatrix, SparseOp};
pub use crate::memory::{Advice, Location};
pub use crate::pipeline::Pipeline;
pub use crate::placement::{DeviceLoad, Placement, PlacementActor, PlacementActorRef, PlacementPolicy};
pub use crate::replay::{replay, Recorder, ReplayReport};
pub use half::{bf16, f16};
