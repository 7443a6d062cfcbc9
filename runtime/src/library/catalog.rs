//! [`Lib`]: one optional library of a device (the table of them is
//! `crate::libraries::library_table!`), its name, its cargo feature, and whether it
//! serves a device.
//!
//! Whether a library serves a device is asked here and nowhere else, so the answer and
//! its error are the same on every path.

use crate::backend::config::Libraries;
use crate::error::GpuError;

/// Writes [`Lib`] from the table.
macro_rules! declare_lib {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, $device:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
        bounds { $($bounds:tt)* }
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

crate::libraries::library_table!(declare_lib {});

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
            libs = Libraries::none();
            let e = lib.check(&libs).expect_err("switched off");
            let wanted = if lib.built() { "DeviceConfig" } else { "cargo feature" };
            assert!(e.to_string().contains(wanted), "{e}");
            assert!(!lib.on(&libs));
        }
    }
}
