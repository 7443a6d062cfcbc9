//! The optional libraries of a device, declared once: each one's name in errors, the
//! cargo feature that compiles it in, and its switch in `DeviceConfig::libraries`.
//! Whether a library serves a device is asked here and nowhere else — by the route (a
//! request for an absent library is answered at once), by an `ActorGpu`'s in-place
//! actors, by the context actor that spawns the library actors, and by the warm-up — so
//! the answer and its error are the same on every path.

use crate::backend::config::Libraries;
use crate::error::GpuError;

/// Declares the optional libraries: `Variant: config_field, "name in errors", "feature";`.
macro_rules! libraries {
    ($($(#[$doc:meta])* $variant:ident: $field:ident, $what:literal, $feature:literal;)*) => {
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

libraries! {
    /// cuBLAS and cuBLASLt (host GEMM on the CPU device).
    Blas: blas, "BLAS", "blas";
    /// cuRAND (ChaCha12 and Sobol on the CPU device).
    Rng: rng, "RNG", "rand";
    /// cuFFT (rustfft on the CPU device).
    Fft: fft, "FFT", "fft";
    /// cuSOLVER (nalgebra on the CPU device).
    Solver: solver, "the solver", "solver";
    /// cuSPARSE (sprs on the CPU device).
    Sparse: sparse, "cuSPARSE", "sparse";
}

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
