//! The public element-type bounds of the `Device` API: each a capability marker of
//! `dtype` plus, per library actor, the one trait `#[gpu_actor(device)]` generates for a
//! named dtype set (`BlasActorBlas1`: every BLAS handler over `dtypes(blas1)`). A handler
//! added over a set joins its trait, so these lists do not change with the operations.
//! They live in the device tier, above the actors they name, so the element types below
//! stay free of actors.

use super::context_actor::ContextActorAny;
use crate::dtype::{c32, c64, f8e4m3, f8e5m2};
#[allow(unused_imports)] // named by the libraries' rows
use crate::dtype::{Blas1Base, BlasBase, DTypeBase, FftFloat, RngFloat};
#[allow(unused_imports)] // named by the libraries' rows
use crate::kernel::dsl::Float;
use crate::library::kernels::KernelActorAny;
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

/// Declares each optional library's bounds from its row of `crate::libraries`, in a module
/// that sees the library's public items (its element-type marker, its generated dtype-set
/// traits) beside this one's, re-exported here.
macro_rules! library_bounds {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, $device:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
        bounds { $($(#[$bdoc:meta])* $name:ident($message:literal) for [$($t:ty),+]: $($super:path),+;)* }
    })*) => {
        $(
            mod $field {
                #[allow(unused_imports)]
                use super::*;
                #[allow(unused_imports)]
                use crate::library::$field::*;
                $(bound_alias!($(#[$bdoc])* $name($message) for [$($t),+]: $($super),+);)*
            }
            pub use self::$field::*;
        )*
    };
}

crate::libraries::library_table!(library_bounds {});
