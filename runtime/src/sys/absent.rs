//! The element-type markers of the CUDA libraries a build leaves out, empty and held by
//! every type. The public capability bounds (`BlasBase`, `FftFloat`, …) name these
//! traits as supertraits; with a library's cargo feature off they still resolve, so the
//! bounds, the messages and the `Device` methods are the same in every build — the
//! library's actor answers `Unsupported` instead of calling into it.

/// Declares each stand-in under the feature whose absence it stands in for.
macro_rules! absent {
    ($($feature:literal: $($name:ident),+;)*) => {$($(
        #[cfg(not(feature = $feature))]
        #[doc(hidden)]
        pub trait $name {}
        #[cfg(not(feature = $feature))]
        impl<T> $name for T {}
    )+)*};
}

absent! {
    "blas": CublasGemm, CublasBatchedLu, CublasLevel1;
    "fft": CufftFloat;
    "rand": CurandFloat;
    "solver": CusolverFloat;
    "sparse": CusparseFloat;
    "nccl": NcclType;
}
