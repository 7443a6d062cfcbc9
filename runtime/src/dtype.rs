//! Element types: one trait for every dtype a buffer can hold, with capability markers.
//!
//! Generic code (`GpuRef<T>`, uploads, GEMM) is written once over [`DTypeBase`]; the markers
//! ([`BlasBase`], [`FloatDType`]) let the compiler reject, say, an `i8` GEMM before it
//! reaches cuBLAS.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};

/// The kind of an element type, for errors and dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DTypeKind {
    /// IEEE binary floating point (f16, bf16, f32, f64).
    Float,
    /// Signed integer.
    Int,
    /// Unsigned integer.
    UInt,
    /// Complex floating point (interleaved real, imaginary).
    Complex,
}

/// Keeps [`DTypeBase`] to the element types of this crate.
mod sealed {
    /// Implemented by each element type of this crate, and by nothing else.
    pub trait Sealed {}
}

/// An element type a device buffer can hold.
///
/// The trait is sealed: buffers are read back and sent to workers and journals as raw
/// bytes, device memory is handed out zeroed, and the pinned pool recycles a buffer
/// between types of one size — all sound only for types whose every bit pattern this
/// crate has checked (the numeric types, FP8, the half types and their complexes). A
/// program's own plain-data structs cross to kernels as `#[derive(KernelArg)]`
/// parameters instead.
pub trait DTypeBase:
    sealed::Sealed + DeviceRepr + ValidAsZeroBits + Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static
{
    /// The Rust name (`"f32"`, `"bf16"`, …).
    const NAME: &'static str;
    /// Float, signed or unsigned.
    const KIND: DTypeKind;
    /// Every bit pattern of `size_of::<Self>()` bytes is a value of the type (true of the
    /// built-in numeric types; the default, false, for any other): the pinned pool may
    /// then hand a free buffer left by one such type to another of the same byte size
    /// (a staging buffer freed by an `f32` copy serves the next `f64` one). A type with
    /// padding, or with invalid bit patterns (a `bool`, an enum), must leave it false.
    const EVERY_BIT_PATTERN: bool = false;
    /// Widens to `f64` (exact for every type but `u64`/`i64` beyond 2^53), for reference
    /// checks and statistics.
    fn to_f64(self) -> f64;
    /// Narrows from `f64` with the type's own rounding (`as` for primitives).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f32` (`as` for primitives; the half types widen exactly).
    fn to_f32(self) -> f32 {
        self.to_f64() as f32
    }
    /// Converts from `f32` with the type's own rounding (through `f64`, which holds every
    /// `f32` exactly, so it rounds once).
    fn from_f32(v: f32) -> Self {
        Self::from_f64(v as f64)
    }
    /// Appends the value's bytes, little-endian: every bit (NaN payloads, u64 beyond
    /// 2^53), for the replay journal.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads a value written by [`DTypeBase::write_le`] from exactly
    /// `size_of::<Self>()` bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

/// Implements [`DTypeBase`] for the primitive types in one place.
macro_rules! primitive_dtype {
    ($($t:ty => $kind:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl DTypeBase for $t {
            const NAME: &'static str = stringify!($t);
            const KIND: DTypeKind = DTypeKind::$kind;
            const EVERY_BIT_PATTERN: bool = true;
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn write_le(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("size_of bytes"))
            }
        }
    )*};
}

primitive_dtype!(
    f32 => Float, f64 => Float,
    i8 => Int, i16 => Int, i32 => Int, i64 => Int,
    u8 => UInt, u16 => UInt, u32 => UInt, u64 => UInt,
);

/// Implements [`DTypeBase`] for the `half` types.
macro_rules! half_dtype {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl DTypeBase for $t {
            const NAME: &'static str = stringify!($t);
            const KIND: DTypeKind = DTypeKind::Float;
            const EVERY_BIT_PATTERN: bool = true;
            fn to_f64(self) -> f64 { self.to_f64() }
            fn from_f64(v: f64) -> Self { $t::from_f64(v) }
            fn write_le(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_bits().to_le_bytes()) }
            fn read_le(bytes: &[u8]) -> Self {
                $t::from_bits(u16::from_le_bytes(bytes.try_into().expect("size_of bytes")))
            }
        }
    )*};
}

half_dtype!(f16, bf16);

/// FP8 with 4 exponent and 3 mantissa bits (CUDA's `__nv_fp8_e4m3`: finite only, ±448,
/// NaN): the input type of FP8 matmuls (`library::blas::matmul`). Conversions are CUDA's own
/// (round to nearest even, saturating to the finite range), from the `float8` crate.
#[allow(non_camel_case_types)]
pub type f8e4m3 = float8::F8E4M3;
/// FP8 with 5 exponent and 2 mantissa bits (CUDA's `__nv_fp8_e5m2`: ±57344, ±∞, NaN): the
/// wider-range FP8 input of matmuls (gradients, by convention).
#[allow(non_camel_case_types)]
pub type f8e5m2 = float8::F8E5M2;

/// Implements [`DTypeBase`] for the FP8 types (one byte, its bits on the wire).
macro_rules! fp8_dtype {
    ($($t:ident => $name:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl DTypeBase for $t {
            const NAME: &'static str = $name;
            const KIND: DTypeKind = DTypeKind::Float;
            const EVERY_BIT_PATTERN: bool = true;
            fn to_f64(self) -> f64 { $t::to_f64(&self) }
            fn from_f64(v: f64) -> Self { $t::from_f64(v) }
            fn write_le(self, out: &mut Vec<u8>) { out.push(self.to_bits()) }
            fn read_le(bytes: &[u8]) -> Self { $t::from_bits(bytes[0]) }
        }
    )*};
}

fp8_dtype!(f8e4m3 => "f8e4m3", f8e5m2 => "f8e5m2");

/// A complex number laid out as cuFFT's `cufftComplex` / `cufftDoubleComplex`:
/// `re` then `im`, no padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Complex<T> {
    /// Real part.
    pub re: T,
    /// Imaginary part.
    pub im: T,
}

impl<T> Complex<T> {
    /// `re + i·im`.
    pub const fn new(re: T, im: T) -> Self {
        Complex { re, im }
    }
}

// SAFETY: `Complex<T>` is `#[repr(C)]` with two fields of one plain float type (f32 or
// f64, the only `ComplexPart`s), so it has the layout of `cufftComplex` /
// `cufftDoubleComplex` and may be copied to the device bit for bit.
unsafe impl<T: ComplexPart> DeviceRepr for Complex<T> {}
// SAFETY: all-zero bits are 0 + 0i for both float types.
unsafe impl<T: ComplexPart> ValidAsZeroBits for Complex<T> {}

/// Single-precision complex (`cufftComplex`).
#[allow(non_camel_case_types)]
pub type c32 = Complex<f32>;
/// Double-precision complex (`cufftDoubleComplex`).
#[allow(non_camel_case_types)]
pub type c64 = Complex<f64>;

/// The float types a [`Complex`] is made of (f32, f64).
pub trait ComplexPart: DTypeBase + num_traits::Float {
    /// The complex type's name (`"c32"`, `"c64"`).
    const COMPLEX_NAME: &'static str;
}
impl ComplexPart for f32 {
    const COMPLEX_NAME: &'static str = "c32";
}
impl ComplexPart for f64 {
    const COMPLEX_NAME: &'static str = "c64";
}

/// `to_f64`/`from_f64` use the real part (a real number is a complex one with a zero
/// imaginary part).
impl<T: ComplexPart> sealed::Sealed for Complex<T> {}
impl<T: ComplexPart> DTypeBase for Complex<T> {
    const NAME: &'static str = T::COMPLEX_NAME;
    const KIND: DTypeKind = DTypeKind::Complex;
    // Two f32s or two f64s, `repr(C)` with no padding.
    const EVERY_BIT_PATTERN: bool = true;
    fn to_f64(self) -> f64 {
        self.re.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        Complex::new(T::from_f64(v), T::from_f64(0.0))
    }
    fn write_le(self, out: &mut Vec<u8>) {
        self.re.write_le(out);
        self.im.write_le(out);
    }
    fn read_le(bytes: &[u8]) -> Self {
        let (re, im) = bytes.split_at(bytes.len() / 2);
        Complex::new(T::read_le(re), T::read_le(im))
    }
}

/// Floating-point dtypes.
pub trait FloatDType: DTypeBase {}
impl FloatDType for f16 {}
impl FloatDType for bf16 {}
impl FloatDType for f32 {}
impl FloatDType for f64 {}

/// Dtypes cuBLAS multiplies (GEMM). f16 and bf16 accumulate in f32, as cuBLAS's
/// `cublasGemmEx` does with `CUBLAS_COMPUTE_32F`; [`BlasBase::Acc`] names that type so
/// the CPU device computes the same way.
pub trait BlasBase: FloatDType + crate::sys::CublasGemm {
    /// The accumulation type (f32 for f16/bf16/f32, f64 for f64).
    type Acc: DTypeBase + num_traits::Float + 'static;
    /// Widens to the accumulation type.
    fn to_acc(self) -> Self::Acc;
    /// Rounds from the accumulation type.
    fn from_acc(v: Self::Acc) -> Self;
}

macro_rules! blas_scalar {
    ($($t:ty => $acc:ty),*) => {$(
        impl BlasBase for $t {
            type Acc = $acc;
            fn to_acc(self) -> $acc { DTypeBase::to_f64(self) as $acc }
            fn from_acc(v: $acc) -> Self { <$t as DTypeBase>::from_f64(v as f64) }
        }
    )*};
}

blas_scalar!(f16 => f32, bf16 => f32, f32 => f32, f64 => f64);

/// Level-1/2 BLAS dtypes (GEMV, AXPY, DOT, NRM2, SCAL): f32 and f64, as in cuBLAS's
/// classic API.
pub trait Blas1Base: BlasBase<Acc = Self> + num_traits::Float + crate::sys::CublasLevel1 {}
impl Blas1Base for f32 {}
impl Blas1Base for f64 {}

/// Float types the RNG fills (f32, f64): the bound of the `RngActor`'s handlers.
pub trait RngFloat: DTypeBase + crate::sys::CurandFloat {}
impl RngFloat for f32 {}
impl RngFloat for f64 {}

/// Float types cuFFT transforms (f32, f64): the bound of the `FftActor`'s handlers.
pub trait FftFloat: ComplexPart + crate::sys::CufftFloat {}
impl FftFloat for f32 {}
impl FftFloat for f64 {}

/// Runs `$body` with the type alias `$t` standing for the element type named `$name`
/// (its [`DTypeBase::NAME`]) among a set — `any` (every element type) or `float` (f16,
/// bf16, f32, f64) — and returns what the body gives; falls through when no type of the
/// set has that name. How a worker rebuilds a value whose element type crossed by name
/// (a graph's operations, a list of buffers of mixed types): the lists live here, once.
macro_rules! with_dtype_named {
    (any, $name:expr, $t:ident => $body:expr) => {
        $crate::dtype::with_dtype_named!(@in [
            half::f16, half::bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64,
            $crate::dtype::f8e4m3, $crate::dtype::f8e5m2, $crate::dtype::c32, $crate::dtype::c64
        ], $name, $t => $body)
    };
    (float, $name:expr, $t:ident => $body:expr) => {
        $crate::dtype::with_dtype_named!(@in [half::f16, half::bf16, f32, f64], $name, $t => $body)
    };
    (@in [$($ty:ty),*], $name:expr, $t:ident => $body:expr) => {{
        $(
            if $name == <$ty as $crate::dtype::DTypeBase>::NAME {
                type $t = $ty;
                return $body;
            }
        )*
    }};
}
pub(crate) use with_dtype_named;

/// How many elements of `T` `bytes` bytes hold, or an `InvalidArgument` naming `what`
/// when they are not a whole number of them — bytes that arrive untyped (a journal, an
/// isolated device's arena) are checked here before they become a `Vec<T>`.
pub(crate) fn whole_elements<T: DTypeBase>(bytes: usize, what: &str) -> Result<usize, crate::error::GpuError> {
    let size = std::mem::size_of::<T>();
    if bytes % size != 0 {
        return Err(crate::error::GpuError::invalid(format!(
            "{what}: {bytes} bytes are not a whole number of {} elements",
            T::NAME
        )));
    }
    Ok(bytes / size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_round_trips() {
        assert_eq!(<bf16 as DTypeBase>::NAME, "bf16");
        assert_eq!(<u64 as DTypeBase>::KIND, DTypeKind::UInt);
        assert_eq!(<f16 as DTypeBase>::from_f64(1.5).to_f64(), 1.5);
        assert_eq!(<i8 as DTypeBase>::from_f64(-3.0), -3i8);
        assert_eq!(f16::from_f64(2.0).to_acc(), 2.0f32);
        assert_eq!(<f8e4m3 as DTypeBase>::NAME, "f8e4m3");
        // 1.0625 lies between E4M3's 1.0 and 1.125 (a tie): to even, 1.0; E5M2 steps by 0.25.
        assert_eq!(<f8e4m3 as DTypeBase>::from_f64(1.0625).to_f64(), 1.0);
        assert_eq!(<f8e5m2 as DTypeBase>::from_f64(1.3).to_f64(), 1.25);
        assert_eq!(<f8e4m3 as DTypeBase>::from_f64(1e6).to_f64(), 448.0, "saturates");
        let mut bytes = Vec::new();
        f8e5m2::from_f64(-3.5).write_le(&mut bytes);
        assert_eq!(bytes.len(), 1);
        assert_eq!(<f8e5m2 as DTypeBase>::read_le(&bytes).to_f64(), -3.5);
    }
}
