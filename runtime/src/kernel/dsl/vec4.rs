//! `Vec4<T>`: four elements a kernel thread loads or stores as one access.
//!
//! A streaming kernel reaches the copy bandwidth only with enough bytes in flight per
//! thread; one 16-byte load (`float4` in CUDA) instead of four 4-byte ones is the usual
//! way there. `x.load4(i)` reads elements `4i .. 4i + 4` of a buffer as a `Vec4`,
//! `y.store4(i, v)` writes them; arithmetic is elementwise, with another `Vec4` or with a
//! scalar on the right. In generated CUDA it is `k_vec4<T>`, a struct aligned to its size
//! so the compiler issues one vector instruction (buffers from the device are aligned
//! to 256 bytes). The CPU emulation checks the whole vector against the buffer's length.

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Four elements, read and written as one (`x`, `y`, `z`, `w`, as CUDA's `float4`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(C)]
pub struct Vec4<T> {
    /// Element 0.
    pub x: T,
    /// Element 1.
    pub y: T,
    /// Element 2.
    pub z: T,
    /// Element 3.
    pub w: T,
}

impl<T: Copy> Vec4<T> {
    /// The four elements in order.
    pub fn new(x: T, y: T, z: T, w: T) -> Self {
        Vec4 { x, y, z, w }
    }

    /// `v` in every element.
    pub fn splat(v: T) -> Self {
        Vec4 { x: v, y: v, z: v, w: v }
    }

    fn map2(self, o: Self, f: impl Fn(T, T) -> T) -> Self {
        Vec4::new(f(self.x, o.x), f(self.y, o.y), f(self.z, o.z), f(self.w, o.w))
    }
}

/// Elementwise operators: `Vec4 op Vec4`, `Vec4 op scalar` and the assigning forms.
macro_rules! vec4_ops {
    ($($op:ident $f:ident $assign:ident $af:ident),*) => {$(
        impl<T: Copy + $op<Output = T>> $op for Vec4<T> {
            type Output = Vec4<T>;
            #[inline]
            fn $f(self, o: Vec4<T>) -> Vec4<T> {
                self.map2(o, |a, b| a.$f(b))
            }
        }
        impl<T: Copy + $op<Output = T>> $op<T> for Vec4<T> {
            type Output = Vec4<T>;
            #[inline]
            fn $f(self, s: T) -> Vec4<T> {
                self.map2(Vec4::splat(s), |a, b| a.$f(b))
            }
        }
        impl<T: Copy + $op<Output = T>> $assign for Vec4<T> {
            #[inline]
            fn $af(&mut self, o: Vec4<T>) {
                *self = (*self).$f(o);
            }
        }
        impl<T: Copy + $op<Output = T>> $assign<T> for Vec4<T> {
            #[inline]
            fn $af(&mut self, s: T) {
                *self = (*self).$f(s);
            }
        }
    )*};
}

vec4_ops!(Add add AddAssign add_assign, Sub sub SubAssign sub_assign, Mul mul MulAssign mul_assign, Div div DivAssign div_assign);

impl<T: Copy + Neg<Output = T>> Neg for Vec4<T> {
    type Output = Vec4<T>;
    #[inline]
    fn neg(self) -> Vec4<T> {
        Vec4::new(-self.x, -self.y, -self.z, -self.w)
    }
}
