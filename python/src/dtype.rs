//! A buffer of any element type, as Python sees one: `AnyRef` holds the typed `GpuRef`;
//! the macros below write the per-type plumbing once.

use atomr_accel_cuda::dtype::{DTypeBase, DTypeKind};
use atomr_accel_cuda::interop::dlpack::{dl_dtype, ffi::DLDataType};
use atomr_accel_cuda::GpuRef;
use pyo3::prelude::*;

/// An element type Python can use: picks its buffers out of an `AnyRef`.
pub trait Typed: atomr_accel_cuda::device::DType + Sized {
    /// `r`'s buffer if it holds this type.
    fn of(r: &AnyRef) -> Option<&GpuRef<Self>>;
}

/// Declares `AnyRef` over the element types listed (variant, Rust type, NumPy name),
/// `AnyRef::dtype`, and `with_dtype!`, which runs an expression with the Rust type
/// named by a DLPack dtype.
macro_rules! element_types {
    ($d:tt $($v:ident $t:ty = $np:literal;)*) => {
        /// A buffer of one of the element types Python can use.
        #[derive(Clone)]
        pub enum AnyRef {
            $(
                #[doc = $np]
                $v(GpuRef<$t>),
            )*
        }

        impl AnyRef {
            /// The NumPy name of its element type.
            pub fn dtype(&self) -> &'static str {
                match self {
                    $(AnyRef::$v(_) => $np,)*
                }
            }
        }

        $(
            impl Typed for $t {
                fn of(r: &AnyRef) -> Option<&GpuRef<$t>> {
                    match r {
                        AnyRef::$v(x) => Some(x),
                        _ => None,
                    }
                }
            }

            impl From<GpuRef<$t>> for AnyRef {
                fn from(r: GpuRef<$t>) -> Self {
                    AnyRef::$v(r)
                }
            }
        )*

        /// The NumPy name of `dl`, if it is one of the element types.
        pub fn name_of(dl: DLDataType) -> Option<&'static str> {
            $(if dl == dl_dtype::<$t>() { return Some($np); })*
            None
        }

        /// Runs `$body` with `$T` the Rust type whose NumPy name is `$name`; `$none` if
        /// none is.
        macro_rules! with_dtype {
            ($d name:expr, $d T:ident => $d body:expr, else $d none:expr) => {
                match $d name {
                    $($np => { type $d T = $t; $d body })*
                    _ => $d none,
                }
            };
        }
        pub(crate) use with_dtype;
    };
}

element_types! {$
    F32 f32 = "float32";
    F64 f64 = "float64";
    F16 half::f16 = "float16";
    BF16 half::bf16 = "bfloat16";
    I8 i8 = "int8";
    I16 i16 = "int16";
    I32 i32 = "int32";
    I64 i64 = "int64";
    U8 u8 = "uint8";
    U16 u16 = "uint16";
    U32 u32 = "uint32";
    U64 u64 = "uint64";
    C64 atomr_accel_cuda::dtype::Complex<f32> = "complex64";
    C128 atomr_accel_cuda::dtype::Complex<f64> = "complex128";
}

/// Matches an `AnyRef` on the variants listed, binding the typed buffer to `$x`; any
/// other element type is an `InvalidArgument` naming `$op` and the types it takes.
macro_rules! on_types {
    ($r:expr, $op:literal, $x:ident => $body:expr, [$($v:ident),*]) => {
        match $r {
            $($crate::dtype::AnyRef::$v($x) => $body,)*
            #[allow(unreachable_patterns)]
            other => Err($crate::errors::invalid(format!(
                "{} does not take {} buffers (it takes {})",
                $op,
                other.dtype(),
                stringify!($($v),*)
            ))),
        }
    };
}
pub(crate) use on_types;

/// Every element type: the variants to pass `on_types!` for an operation on any buffer.
macro_rules! any_type {
    ($r:expr, $op:literal, $x:ident => $body:expr) => {
        $crate::dtype::on_types!($r, $op, $x => $body, [F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, C64, C128])
    };
}
pub(crate) use any_type;

/// The real number types (floats and integers): what the reductions and sort take.
macro_rules! real_type {
    ($r:expr, $op:literal, $x:ident => $body:expr) => {
        $crate::dtype::on_types!($r, $op, $x => $body, [F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64])
    };
}
pub(crate) use real_type;

/// A value of an element type as a Python number: a float, an int (every bit of 64-bit
/// integers kept) or a complex.
pub fn scalar<T: DTypeBase>(py: Python<'_>, v: T) -> PyResult<Py<PyAny>> {
    let mut bytes = Vec::with_capacity(16);
    v.write_le(&mut bytes);
    let n = bytes.len();
    Ok(match T::KIND {
        DTypeKind::Float => v.to_f64().into_pyobject(py)?.into_any().unbind(),
        DTypeKind::Int => {
            let mut wide = [if bytes[n - 1] & 0x80 != 0 { 0xff } else { 0 }; 8];
            wide[..n].copy_from_slice(&bytes);
            i64::from_le_bytes(wide).into_pyobject(py)?.into_any().unbind()
        }
        DTypeKind::UInt => {
            let mut wide = [0u8; 8];
            wide[..n].copy_from_slice(&bytes);
            u64::from_le_bytes(wide).into_pyobject(py)?.into_any().unbind()
        }
        DTypeKind::Complex => {
            let half = n / 2;
            let part = |b: &[u8]| {
                if half == 4 {
                    f32::from_le_bytes(b.try_into().unwrap()) as f64
                } else {
                    f64::from_le_bytes(b.try_into().unwrap())
                }
            };
            let c = pyo3::types::PyComplex::from_doubles(py, part(&bytes[..half]), part(&bytes[half..]));
            c.into_any().unbind()
        }
    })
}
