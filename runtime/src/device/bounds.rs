//! The public element-type bounds of the `Device` API: each a capability marker of
//! `dtype` plus, per library actor, the one trait `#[gpu_actor(device)]` generates for a
//! named dtype set (`BlasActorBlas1`: every BLAS handler over `dtypes(blas1)`). A handler
//! added over a set joins its trait, so these lists do not change with the operations.
//! They live in the device tier, above the actors they name, so the element types below
//! stay free of actors.

use super::context_actor::ContextActorAny;
use crate::dtype::{c32, c64, f8e4m3, f8e5m2};
use crate::dtype::{Blas1Base, BlasBase, DTypeBase, FftFloat, RngFloat};
use crate::kernel::dsl::Float;
use crate::library::blas::{BlasActorBlas1, BlasActorFloat};
use crate::library::fft::FftActorBlas1;
use crate::library::kernels::KernelActorAny;
use crate::library::rng::RngActorBlas1;
use crate::library::solver::{SolverActorBlas1, SolverFloat};
use crate::library::sparse::{SparseActorBlas1, SparseFloat};
use half::{bf16, f16};

/// Declares a public bound that names a base trait plus the generated message mappings of
/// the runtime's own actors, implemented for the listed types (explicit impls rather than
/// a blanket one, so a wrong type gets this trait's message instead of one about an
/// internal trait).
macro_rules! bound_alias {
    ($(#[$doc:meta])* $name:ident ($msg:literal) for [$($t:ty),+]: $($bound:path),+) => {
        $(#[$doc])*
        #[diagnostic::on_unimplemented(message = $msg)]
        pub trait $name: $($bound +)+ {}
        $(impl $name for $t {})+
    };
}

bound_alias!(
    /// Every element type a device buffer can hold: f16, bf16, f32, f64, i8–i64, u8–u64,
    /// the FP8 f8e4m3, f8e5m2 (matmul inputs), and the complex c32, c64.
    /// The bound of the `Device` API (a [`DTypeBase`] plus the device actors' message
    /// mappings, which `#[gpu_actor]` generates).
    DType("`{Self}` is not an element type: buffers hold f16, bf16, f32, f64, i8–i64, u8–u64, f8e4m3, f8e5m2, c32 or c64") for [f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, f8e4m3, f8e5m2, c32, c64]: DTypeBase, ContextActorAny, KernelActorAny
);

bound_alias!(
    /// Element types the device multiplies (GEMM): f16, bf16, f32, f64.
    BlasScalar("`{Self}` is not a GEMM dtype: GEMM takes f16, bf16, f32 or f64") for [f16, bf16, f32, f64]: DType, BlasBase, BlasActorFloat
);

bound_alias!(
    /// Element types of the level-1/2 BLAS calls (GEMV, AXPY, SCAL, DOT, NRM2): f32, f64.
    Blas1Scalar("`{Self}` is not a level-1/2 BLAS dtype: GEMV, AXPY, SCAL, DOT and NRM2 take f32 or f64") for [f32, f64]: BlasScalar, Blas1Base, BlasActorBlas1
);

bound_alias!(
    /// Element types the RNG fills with uniform, normal and log-normal numbers: f32, f64.
    RandomScalar("`{Self}` is not an RNG dtype: the generator fills f32 or f64 (u32 for Poisson)") for [f32, f64]:
        DType, RngFloat, RngActorBlas1
);

bound_alias!(
    /// Float types of the dense solvers (LU, Cholesky, QR, SVD, symmetric eigen): f32, f64.
    SolverScalar("`{Self}` is not a solver dtype: the dense factorizations take f32 or f64") for [f32, f64]:
        DType, SolverFloat, SolverActorBlas1
);

bound_alias!(
    /// Float types of the sparse routines (SpMV, SpMM, dense ↔ CSR): f32, f64.
    SparseScalar("`{Self}` is not a sparse dtype: cuSPARSE's routines here take f32 or f64") for [f32, f64]:
        DType, SparseFloat, SparseActorBlas1, Float
);

bound_alias!(
    /// Float types of the FFT: f32 (with c32) and f64 (with c64).
    FftScalar("`{Self}` is not an FFT dtype: transforms take f32/c32 or f64/c64") for [f32, f64]:
        DType, FftFloat, FftActorBlas1
);
