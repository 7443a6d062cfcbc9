//! The value types a `#[kernel]` works with, and the `Float` / `Int` bounds its generic
//! parameters use.
//!
//! Each type knows its CUDA C++ spelling, so `cuda_source::<T>()` can instantiate a
//! generic kernel for the `T` a launch uses. The math methods of [`Float`] are the ones
//! the kernel translator maps to CUDA's math library: a body that calls one compiles as
//! Rust (CPU emulation) and as CUDA C++ (GPU) to the same function.

use std::ops::{Add, AddAssign, BitAnd, BitOr, BitXor, Div, DivAssign, Mul, MulAssign, Neg, Rem, Sub, SubAssign};

use cudarc::driver::DeviceRepr;
use half::{bf16, f16};

use super::atomics::AtomicAdd;
use super::intrinsics::ShuffleBits;
use crate::dtype::DTypeBase;

/// A CUDA header a type needs in generated source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// Built into the language.
    None,
    /// `cuda_fp16.h` (`__half`).
    Fp16,
    /// `cuda_bf16.h` (`__nv_bfloat16`).
    Bf16,
}

/// A type a kernel takes by value or holds in a register.
pub trait KernelScalar: DeviceRepr + Copy + Send + Sync + 'static {
    /// Its CUDA C++ spelling (`"float"`, `"__half"`, `"unsigned long long"`, …).
    const CUDA: &'static str;
    /// The header that declares it.
    const HEADER: Header = Header::None;
}

/// Implements [`KernelScalar`] for each type in one place.
macro_rules! kernel_scalar {
    ($($t:ty => $cuda:literal $(, $header:ident)?);* $(;)?) => {$(
        impl KernelScalar for $t {
            const CUDA: &'static str = $cuda;
            $(const HEADER: Header = Header::$header;)?
        }
    )*};
}

kernel_scalar! {
    f32 => "float"; f64 => "double"; f16 => "__half", Fp16; bf16 => "__nv_bfloat16", Bf16;
    i8 => "signed char"; i16 => "short"; i32 => "int"; i64 => "long long";
    u8 => "unsigned char"; u16 => "unsigned short"; u32 => "unsigned int"; u64 => "unsigned long long";
    usize => "unsigned long long"; isize => "long long"; bool => "bool";
}

/// What [`Float`] and [`Int`] share: the arithmetic operators and the constants 0 and 1.
/// Implemented for every dtype that has them.
pub trait Arith:
    KernelScalar
    + DTypeBase
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
{
    /// 0.
    fn zero() -> Self {
        Self::from_f64(0.0)
    }
    /// 1.
    fn one() -> Self {
        Self::from_f64(1.0)
    }
}

impl<T> Arith for T where
    T: KernelScalar
        + DTypeBase
        + Add<Output = T>
        + Sub<Output = T>
        + Mul<Output = T>
        + Div<Output = T>
        + Rem<Output = T>
        + AddAssign
        + SubAssign
        + MulAssign
        + DivAssign
{
}

/// Floating-point element types of a kernel (f32, f64, f16, bf16): arithmetic, the math
/// methods CUDA provides, constants, warp shuffles and `atomic_add` (CUDA has both for
/// every one of them, so a `T: Float` kernel needs no further bound to use them).
///
/// f16 and bf16 compute through f32 in both the emulation and the generated source, as
/// CUDA's own half-precision math functions do.
pub trait Float: Arith + PartialOrd + Neg<Output = Self> + ShuffleBits + AtomicAdd {
    /// +∞.
    fn infinity() -> Self;
    /// -∞.
    fn neg_infinity() -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// 1 / √x.
    fn rsqrt(self) -> Self;
    /// eˣ.
    fn exp(self) -> Self;
    /// 2ˣ.
    fn exp2(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Arc sine.
    fn asin(self) -> Self;
    /// Arc cosine.
    fn acos(self) -> Self;
    /// Arc tangent.
    fn atan(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Round down.
    fn floor(self) -> Self;
    /// Round up.
    fn ceil(self) -> Self;
    /// Round half away from zero.
    fn round(self) -> Self;
    /// Round toward zero.
    fn trunc(self) -> Self;
    /// 1 / x.
    fn recip(self) -> Self;
    /// The smaller of two (the other one if one is NaN).
    fn min(self, other: Self) -> Self;
    /// The larger of two (the other one if one is NaN).
    fn max(self, other: Self) -> Self;
    /// xʸ.
    fn powf(self, y: Self) -> Self;
    /// xⁿ.
    fn powi(self, n: i32) -> Self;
    /// Four-quadrant arc tangent of self / other.
    fn atan2(self, other: Self) -> Self;
    /// √(x² + y²).
    fn hypot(self, other: Self) -> Self;
    /// |self| with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// self · a + b, rounded once.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

/// Implements [`Float`] by forwarding to the primitive's own methods (f32, f64) or to
/// f32 (f16, bf16); `$up`/`$down` convert to and from the computing type.
macro_rules! float_impl {
    ($t:ty, $c:ty, $up:expr, $down:expr) => {
        impl Float for $t {
            fn infinity() -> Self { $down(<$c>::INFINITY) }
            fn neg_infinity() -> Self { $down(<$c>::NEG_INFINITY) }
            fn rsqrt(self) -> Self { $down(1.0 / $up(self).sqrt()) }
            fn recip(self) -> Self { $down(1.0 / $up(self)) }
            fn powi(self, n: i32) -> Self { $down($up(self).powi(n)) }
            fn mul_add(self, a: Self, b: Self) -> Self { $down($up(self).mul_add($up(a), $up(b))) }
            float_impl!(@unary $up, $down; sqrt exp exp2 ln log2 log10 sin cos tan tanh sinh cosh asin acos atan abs floor ceil round trunc);
            float_impl!(@binary $up, $down; min max powf atan2 hypot copysign);
        }
    };
    (@unary $up:expr, $down:expr; $($m:ident)*) => {$(
        fn $m(self) -> Self { $down($up(self).$m()) }
    )*};
    (@binary $up:expr, $down:expr; $($m:ident)*) => {$(
        fn $m(self, other: Self) -> Self { $down($up(self).$m($up(other))) }
    )*};
}

float_impl!(f32, f32, |x: f32| x, |x: f32| x);
float_impl!(f64, f64, |x: f64| x, |x: f64| x);
float_impl!(f16, f32, |x: f16| x.to_f32(), f16::from_f32);
float_impl!(bf16, f32, |x: bf16| x.to_f32(), bf16::from_f32);

/// Integer element types of a kernel (i8 … u64): arithmetic, bit operations, comparisons.
pub trait Int: Arith + Ord + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self> {
    /// The value as an `i64` (C++'s `(long long)` cast: a `u64` past `i64::MAX` keeps
    /// its bits), e.g. to sum integers without overflowing their own type.
    fn to_i64(self) -> i64;
    /// An `i64` as this type (C++'s cast: the low bits), e.g. a 64-bit sum's bits as a
    /// `u64`.
    fn from_i64(v: i64) -> Self;
}

/// Implements [`Int`] for each integer type.
macro_rules! int_impl {
    ($($t:ty),*) => {$(impl Int for $t {
        fn to_i64(self) -> i64 {
            self as i64
        }
        fn from_i64(v: i64) -> Self {
            v as $t
        }
    })*};
}

int_impl!(i8, i16, i32, i64, u8, u16, u32, u64);
