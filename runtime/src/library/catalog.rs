//! The optional libraries of a device, declared once (`library_table!`): each one's
//! actor and its generated types and surfaces, whether the device keeps a pool of it,
//! its wire tag, its name in errors, the cargo feature that compiles it in, the
//! `DeviceConfig::libraries` switch, and the public bound of each of its dtype sets.
//! Every place that lists the libraries expands the table — the route
//! (`device/route.rs`), an `ActorGpu`'s in-place actors and methods
//! (`device/actor_gpu.rs`), the `Device` methods (`device/surface.rs`), the context
//! actor that spawns them (`device/context_actor.rs`) and [`Lib`] here. Adding a library
//! is its folder (with its `mod` line in `library/mod.rs`), its row below, its public
//! bounds (`device/bounds.rs`, re-exported by `device/mod.rs`), its switch in
//! `DeviceConfig::libraries` (`backend/config.rs`, below the actors) and its cargo
//! feature (the runtime's and the facade's `Cargo.toml`).
//!
//! Whether a library serves a device is asked here and nowhere else, so the answer and
//! its error are the same on every path.

use crate::backend::config::Libraries;
use crate::error::GpuError;

/// Hands the table of the optional libraries to `$callback!`, after the tokens in
/// braces: `library_table!(my_macro { leading tokens })` expands
/// `my_macro! { leading tokens @libraries Variant: module { … } … }`. Each row:
/// `Variant: module` (the library's folder under `library/`, also its field in
/// `DeviceConfig::libraries` and on the route), then its actor, message and client
/// types, `pooled` (a pool of `DeviceConfig::library_pool` actors) or `single`, its wire
/// tag (stable: journals and workers decode by it), how errors name it, its cargo
/// feature, its two generated surface macros and the public bound of each dtype set.
macro_rules! library_table {
    ($callback:path { $($lead:tt)* }) => {
        $callback! {
            $($lead)*
            @libraries
            /// cuBLAS and cuBLASLt (host GEMM on the CPU device).
            Blas: blas {
                BlasActor, BlasActorMsg, BlasActorRef, pooled, wire(1), "BLAS", "blas",
                blas_actor_device_surface, blas_actor_actor_gpu_surface,
                [float = BlasScalar, blas1 = Blas1Scalar]
            }
            /// cuRAND (ChaCha12 and Sobol on the CPU device). One actor: a seeded
            /// generator's sequence is its state.
            Rng: rng {
                RngActor, RngActorMsg, RngActorRef, single, wire(2), "RNG", "rand",
                rng_actor_device_surface, rng_actor_actor_gpu_surface,
                [blas1 = RandomScalar]
            }
            /// cuFFT (rustfft on the CPU device).
            Fft: fft {
                FftActor, FftActorMsg, FftActorRef, pooled, wire(3), "FFT", "fft",
                fft_actor_device_surface, fft_actor_actor_gpu_surface,
                [blas1 = FftScalar]
            }
            /// cuSOLVER (nalgebra on the CPU device).
            Solver: solver {
                SolverActor, SolverActorMsg, SolverActorRef, pooled, wire(4), "the solver", "solver",
                solver_actor_device_surface, solver_actor_actor_gpu_surface,
                [blas1 = SolverScalar]
            }
            /// cuSPARSE (sprs on the CPU device). One actor: on a GPU most calls run in
            /// place on the device's slots; the actor serves the rest.
            Sparse: sparse {
                SparseActor, SparseActorMsg, SparseActorRef, single, wire(9), "cuSPARSE", "sparse",
                sparse_actor_device_surface, sparse_actor_actor_gpu_surface,
                [blas1 = SparseScalar]
            }
        }
    };
}
pub(crate) use library_table;

/// Writes [`Lib`] from the table.
macro_rules! declare_lib {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
    })*) => {
        /// One optional library of a device.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Lib {
            $($(#[$doc])* $variant,)*
        }

        impl Lib {
            /// Every optional library.
            #[cfg(test)]
            pub(crate) const ALL: &'static [Lib] = &[$(Lib::$variant),*];

            /// How errors name it.
            pub(crate) fn what(self) -> &'static str {
                match self {
                    $(Lib::$variant => $what,)*
                }
            }

            /// The cargo feature that compiles it in.
            pub(crate) fn feature(self) -> &'static str {
                match self {
                    $(Lib::$variant => $feature,)*
                }
            }

            /// Whether this build has it.
            pub(crate) fn built(self) -> bool {
                match self {
                    $(Lib::$variant => cfg!(feature = $feature),)*
                }
            }

            /// Whether the device's config asks for it.
            fn configured(self, libs: &Libraries) -> bool {
                match self {
                    $(Lib::$variant => libs.$field,)*
                }
            }
        }
    };
}

library_table!(declare_lib {});

impl Lib {
    /// Whether the library serves a device of this config: built in and asked for.
    pub(crate) fn on(self, libs: &Libraries) -> bool {
        self.built() && self.configured(libs)
    }

    /// `Ok` when it serves the device, else the `Unsupported` its callers get: the
    /// missing cargo feature named first (no config can bring it back), else the config.
    pub(crate) fn check(self, libs: &Libraries) -> Result<(), GpuError> {
        if !self.built() {
            Err(GpuError::without_feature(self.what(), self.feature(), crate::CRATE))
        } else if !self.configured(libs) {
            Err(GpuError::Unsupported(format!(
                "{} is disabled in this DeviceConfig (libraries)",
                self.what()
            )))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_library_names_what_brings_it_back() {
        for &lib in Lib::ALL {
            let mut libs = Libraries::default();
            let err = lib.check(&libs);
            assert_eq!(err.is_ok(), lib.built(), "{lib:?}");
            if let Err(e) = err {
                assert!(
                    e.to_string().contains(&format!("`{}` cargo feature", lib.feature())),
                    "{e}"
                );
            }
            libs = Libraries {
                blas: false,
                rng: false,
                fft: false,
                solver: false,
                sparse: false,
            };
            let e = lib.check(&libs).expect_err("switched off");
            let wanted = if lib.built() { "DeviceConfig" } else { "cargo feature" };
            assert!(e.to_string().contains(wanted), "{e}");
            assert!(!lib.on(&libs));
        }
    }
}
