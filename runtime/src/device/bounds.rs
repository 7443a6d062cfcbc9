//! The public element-type bounds of the `Device` API: each a capability marker of
//! `dtype` plus the message mappings `#[gpu_actor]` generates for the library actors'
//! generic handlers. They live in the device tier, above the actors they name, so the
//! element types below stay free of actors.

use crate::dtype::{c32, c64};
use crate::dtype::{Blas1Base, BlasBase, DTypeBase, FftFloat, RngFloat};
use crate::library::solver::SolverFloat;
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

use crate::device::context_actor::{
    ContextActorAdviseDType, ContextActorAllocDType, ContextActorAllocManagedDType, ContextActorCopyDType,
    ContextActorDownloadDType, ContextActorDownloadPinnedDType, ContextActorPinnedDType, ContextActorPrefetchDType,
    ContextActorUploadDType, ContextActorUploadPinnedDType, ContextActorWriteDType, ContextActorWritePinnedDType,
};
use crate::library::blas::{
    BlasActorAxpyDType, BlasActorDotDType, BlasActorGemmDType, BlasActorGemvDType, BlasActorNrm2DType,
    BlasActorScalDType,
};
use crate::library::fft::{FftActorC2cDType, FftActorC2rDType, FftActorR2cDType};
use crate::library::rng::{RngActorLogNormalDType, RngActorNormalDType, RngActorUniformDType};
use crate::library::solver::{
    SolverActorCholeskyDType, SolverActorCholeskySolveDType, SolverActorEighDType, SolverActorLuFactorDType,
    SolverActorLuSolveDType, SolverActorQrDType, SolverActorSvdDType,
};

bound_alias!(
    /// Every element type a device buffer can hold: f16, bf16, f32, f64, i8–i64, u8–u64,
    /// and the complex c32, c64.
    /// The bound of the `Device` API (a [`DTypeBase`] plus the device actors' message
    /// mappings, which `#[gpu_actor]` generates).
    DType("`{Self}` is not an element type: buffers hold f16, bf16, f32, f64, i8–i64, u8–u64, c32 or c64") for [f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, c32, c64]: DTypeBase, ContextActorAllocDType, ContextActorUploadDType, ContextActorWriteDType,
        ContextActorDownloadDType, ContextActorCopyDType, ContextActorPinnedDType, ContextActorUploadPinnedDType,
        ContextActorWritePinnedDType, ContextActorDownloadPinnedDType, ContextActorAllocManagedDType,
        ContextActorPrefetchDType, ContextActorAdviseDType
);

bound_alias!(
    /// Element types the device multiplies (GEMM): f16, bf16, f32, f64.
    BlasScalar("`{Self}` is not a GEMM dtype: GEMM takes f16, bf16, f32 or f64") for [f16, bf16, f32, f64]: DType, BlasBase, BlasActorGemmDType
);

bound_alias!(
    /// Element types of the level-1/2 BLAS calls (GEMV, AXPY, SCAL, DOT, NRM2): f32, f64.
    Blas1Scalar("`{Self}` is not a level-1/2 BLAS dtype: GEMV, AXPY, SCAL, DOT and NRM2 take f32 or f64") for [f32, f64]: BlasScalar, Blas1Base, BlasActorGemvDType, BlasActorAxpyDType, BlasActorScalDType,
        BlasActorDotDType, BlasActorNrm2DType
);

bound_alias!(
    /// Element types the RNG fills with uniform, normal and log-normal numbers: f32, f64.
    RandomScalar("`{Self}` is not an RNG dtype: the generator fills f32 or f64 (u32 for Poisson)") for [f32, f64]:
        DType, RngFloat, RngActorUniformDType, RngActorNormalDType, RngActorLogNormalDType
);

bound_alias!(
    /// Float types of the dense solvers (LU, Cholesky, QR, SVD, symmetric eigen): f32, f64.
    SolverScalar("`{Self}` is not a solver dtype: the dense factorizations take f32 or f64") for [f32, f64]:
        DType, SolverFloat, SolverActorLuFactorDType, SolverActorLuSolveDType, SolverActorCholeskyDType,
        SolverActorCholeskySolveDType, SolverActorQrDType, SolverActorSvdDType, SolverActorEighDType
);

bound_alias!(
    /// Float types of the FFT: f32 (with c32) and f64 (with c64).
    FftScalar("`{Self}` is not an FFT dtype: transforms take f32/c32 or f64/c64") for [f32, f64]:
        DType, FftFloat, FftActorC2cDType, FftActorR2cDType, FftActorC2rDType
);
