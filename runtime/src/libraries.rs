//! The optional libraries of a device, declared once: `library_table!` hands every
//! row — a library's folder, actor, generated types and surfaces, pool or single actor,
//! wire tag, name in errors, cargo feature and public element-type bounds — to the macro
//! that asks. Each place that lists the libraries expands it: the `mod` lines
//! (`library/mod.rs`), the `DeviceConfig::libraries` switches (`backend/config.rs`),
//! `Lib` (`library/catalog.rs`), the route (`device/route.rs`), an `ActorGpu`'s
//! in-place actors and methods (`device/actor_gpu.rs`), the `Device` methods
//! (`device/surface.rs`), the bounds (`device/bounds.rs`) and the context actor that
//! spawns them (`device/context_actor.rs`). Adding a library is its folder, its row here
//! and its cargo feature (the runtime's and the facade's `Cargo.toml`).
//!
//! The table is tokens only: it resolves nothing itself, so it sits at the ground of the
//! crate, below every layer that expands it; each name in a row resolves where it is
//! expanded, in the layer that may name it.

/// Hands the table of the optional libraries to `$callback!`, after the tokens in
/// braces: `library_table!(my_macro { leading tokens })` expands
/// `my_macro! { leading tokens @libraries Variant: module { … } … }`. Each row:
/// `Variant: module` (the library's folder under `library/`, also its field in
/// `DeviceConfig::libraries` and on the route), then its actor, message and client
/// types, `pooled` (a pool of `DeviceConfig::library_pool` actors) or `single`,
/// `in_place` (on a GPU a `Device` call runs on a free slot of the device's own, with no
/// hop to the actor) or `by_message` (always the actor's message: see [`device_in_place!`]), its wire
/// tag (stable: journals and workers decode by it), how errors name it, its cargo
/// feature, its two generated surface macros, the public bound of each dtype set, and
/// those bounds declared (docs, the message a wrong type gets, the types, the traits —
/// names the device tier's `bounds.rs` resolves, with the library's module in scope).
macro_rules! library_table {
    ($callback:path { $($lead:tt)* }) => {
        $callback! {
            $($lead)*
            @libraries
            /// cuBLAS and cuBLASLt (host GEMM on the CPU device).
            Blas: blas {
                BlasActor, BlasActorMsg, BlasActorRef, pooled, in_place, wire(1), "BLAS", "blas",
                blas_actor_device_surface, blas_actor_actor_gpu_surface,
                [float = BlasScalar, blas1 = Blas1Scalar]
                bounds {
                    /// Element types the device multiplies (GEMM): f16, bf16, f32, f64.
                    BlasScalar("`{Self}` is not a GEMM dtype: GEMM takes f16, bf16, f32 or f64")
                        for [f16, bf16, f32, f64]: DType, BlasBase, BlasActorFloat;
                    /// Element types of the level-1/2 BLAS calls (GEMV, AXPY, SCAL, DOT, NRM2): f32, f64.
                    Blas1Scalar("`{Self}` is not a level-1/2 BLAS dtype: GEMV, AXPY, SCAL, DOT and NRM2 take f32 or f64")
                        for [f32, f64]: BlasScalar, Blas1Base, BlasActorBlas1;
                }
            }
            /// cuRAND (ChaCha12 and Sobol on the CPU device). One actor: a seeded
            /// generator's sequence is its state.
            Rng: rng {
                RngActor, RngActorMsg, RngActorRef, single, by_message, wire(2), "RNG", "rand",
                rng_actor_device_surface, rng_actor_actor_gpu_surface,
                [blas1 = RandomScalar]
                bounds {
                    /// Element types the RNG fills with uniform, normal and log-normal numbers: f32, f64.
                    RandomScalar("`{Self}` is not an RNG dtype: the generator fills f32 or f64 (u32 for Poisson)")
                        for [f32, f64]: DType, RngFloat, RngActorBlas1;
                }
            }
            /// cuFFT (rustfft on the CPU device).
            Fft: fft {
                FftActor, FftActorMsg, FftActorRef, pooled, in_place, wire(3), "FFT", "fft",
                fft_actor_device_surface, fft_actor_actor_gpu_surface,
                [blas1 = FftScalar]
                bounds {
                    /// Float types of the FFT: f32 (with c32) and f64 (with c64).
                    FftScalar("`{Self}` is not an FFT dtype: transforms take f32/c32 or f64/c64")
                        for [f32, f64]: DType, FftFloat, FftActorBlas1;
                }
            }
            /// cuSOLVER (nalgebra on the CPU device).
            Solver: solver {
                SolverActor, SolverActorMsg, SolverActorRef, pooled, in_place, wire(4), "the solver", "solver",
                solver_actor_device_surface, solver_actor_actor_gpu_surface,
                [blas1 = SolverScalar]
                bounds {
                    /// Float types of the dense solvers (LU, Cholesky, QR, SVD, symmetric eigen): f32, f64.
                    SolverScalar("`{Self}` is not a solver dtype: the dense factorizations take f32 or f64")
                        for [f32, f64]: DType, SolverFloat, SolverActorBlas1;
                }
            }
            /// cuSPARSE (sprs on the CPU device). One actor: on a GPU most calls run in
            /// place on the device's slots; the actor serves the rest.
            Sparse: sparse {
                SparseActor, SparseActorMsg, SparseActorRef, single, in_place, wire(9), "cuSPARSE", "sparse",
                sparse_actor_device_surface, sparse_actor_actor_gpu_surface,
                [blas1 = SparseScalar]
                bounds {
                    /// Float types of the sparse routines (SpMV, SpMM, dense ↔ CSR): f32, f64.
                    SparseScalar("`{Self}` is not a sparse dtype: cuSPARSE's routines here take f32 or f64")
                        for [f32, f64]: DType, SparseFloat, SparseActorBlas1, Float;
                }
            }
            /// Tensor contractions in einsum notation (cuBLAS batched GEMMs and our own
            /// permutation kernels; the same plan on the CPU device).
            Tensor: tensor {
                TensorActor, TensorActorMsg, TensorActorRef, pooled, in_place, wire(10), "the tensor library", "tensor",
                tensor_actor_device_surface, tensor_actor_actor_gpu_surface,
                [float = TensorScalar]
                bounds {
                    /// Element types of tensor contractions (einsum): f16, bf16, f32, f64.
                    TensorScalar("`{Self}` is not a tensor dtype: contractions take f16, bf16, f32 or f64")
                        for [f16, bf16, f32, f64]: DType, TensorFloat, TensorActorFloat;
                }
            }
            /// Row-wise neural-network ops — softmax, layer and RMS norm, bias and
            /// activation — as our own kernels (emulated on the CPU device).
            Dnn: dnn {
                DnnActor, DnnActorMsg, DnnActorRef, pooled, in_place, wire(11), "the dnn library", "dnn",
                dnn_actor_device_surface, dnn_actor_actor_gpu_surface,
                [float = DnnScalar]
                bounds {
                    /// Element types of the dnn library: f16, bf16, f32, f64.
                    DnnScalar("`{Self}` is not a dnn dtype: softmax, norms and activations take f16, bf16, f32 or f64")
                        for [f16, bf16, f32, f64]: DType, DnnFloat, DnnActorFloat;
                }
            }
        }
    };
}
pub(crate) use library_table;

/// A row's `in_place` / `by_message` as a bool: whether the library's `Device` calls may
/// run in place. The RNG's may not: a seeded generator's sequence is its one actor's
/// state, which an in-place slot's generator of its own would fork.
macro_rules! device_in_place {
    (in_place) => {
        true
    };
    (by_message) => {
        false
    };
}
pub(crate) use device_in_place;
