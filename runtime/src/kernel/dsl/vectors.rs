//! `Vec2<T>` and `$v<T>`: two or four elements a kernel thread loads or stores as one
//! access, and computes on lane by lane.
//!
//! A streaming kernel reaches the copy bandwidth only with enough bytes in flight per
//! thread; one 16-byte load (`float4` in CUDA) instead of four 4-byte ones is the usual
//! way there. `x.load4(i)` reads elements `4i .. 4i + 4` of a buffer as a `Vec4`,
//! `y.store4(i, v)` writes them (`load2`/`store2` with a `Vec2`); arithmetic is
//! elementwise, with another vector or with a scalar on the right. In generated CUDA they
//! are `k_vec2<T>` / `k_vec4<T>`, structs aligned to their size so the compiler issues one
//! vector instruction (buffers from the device are aligned to 256 bytes); a `Vec2` of
//! `f16` or `bf16` computes with CUDA's packed `__half2` / `__nv_bfloat162` instructions
//! (`__hadd2`, `__hmul2` …), two lanes per instruction. The CPU emulation checks the
//! whole vector against the buffer's length.

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Defines a vector type of the given lanes with `new`, `splat` and a lane-wise map.
macro_rules! vector {
    ($(#[$doc:meta])* $name:ident { $($lane:ident: $doc_lane:literal),* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        #[repr(C)]
        pub struct $name<T> {
            $(#[doc = $doc_lane] pub $lane: T,)*
        }

        impl<T: Copy> $name<T> {
            /// The elements in order.
            pub fn new($($lane: T),*) -> Self {
                $name { $($lane),* }
            }

            /// `v` in every element.
            pub fn splat(v: T) -> Self {
                $name { $($lane: v),* }
            }

            fn map2(self, o: Self, f: impl Fn(T, T) -> T) -> Self {
                $name { $($lane: f(self.$lane, o.$lane)),* }
            }

            fn map(self, f: impl Fn(T) -> T) -> Self {
                $name { $($lane: f(self.$lane)),* }
            }
        }
    };
}

vector!(
    /// Two elements, read and written as one (`x`, `y`, as CUDA's `float2` / `__half2`).
    Vec2 { x: "Element 0.", y: "Element 1." }
);
vector!(
    /// Four elements, read and written as one (`x`, `y`, `z`, `w`, as CUDA's `float4`).
    Vec4 { x: "Element 0.", y: "Element 1.", z: "Element 2.", w: "Element 3." }
);

/// Elementwise operators: `vector op vector`, `vector op scalar` and the assigning forms.
macro_rules! vector_ops {
    ($v:ident: $($op:ident $f:ident $assign:ident $af:ident),*) => {$(
        impl<T: Copy + $op<Output = T>> $op for $v<T> {
            type Output = $v<T>;
            #[inline]
            fn $f(self, o: $v<T>) -> $v<T> {
                self.map2(o, |a, b| a.$f(b))
            }
        }
        impl<T: Copy + $op<Output = T>> $op<T> for $v<T> {
            type Output = $v<T>;
            #[inline]
            fn $f(self, s: T) -> $v<T> {
                self.map2($v::splat(s), |a, b| a.$f(b))
            }
        }
        impl<T: Copy + $op<Output = T>> $assign for $v<T> {
            #[inline]
            fn $af(&mut self, o: $v<T>) {
                *self = (*self).$f(o);
            }
        }
        impl<T: Copy + $op<Output = T>> $assign<T> for $v<T> {
            #[inline]
            fn $af(&mut self, s: T) {
                *self = (*self).$f(s);
            }
        }
    )*};
}

/// The operators of each vector type.
macro_rules! all_vector_ops {
    ($($v:ident),*) => {$(
        vector_ops!($v: Add add AddAssign add_assign, Sub sub SubAssign sub_assign, Mul mul MulAssign mul_assign, Div div DivAssign div_assign);
        impl<T: Copy + Neg<Output = T>> Neg for $v<T> {
            type Output = $v<T>;
            #[inline]
            fn neg(self) -> $v<T> {
                self.map(|a| -a)
            }
        }
    )*};
}

all_vector_ops!(Vec2, Vec4);
