//! Atomic operations on kernel buffers in the CPU emulation, with the type support of
//! CUDA's own atomics: a kernel that calls `atomic_max` on an `f32` buffer does not
//! compile for the CPU either, because CUDA has no such atomic.
//!
//! Each operation is a compare-and-swap loop on the element's bits, so the emulation's
//! threads (running in parallel) see the same atomicity the GPU gives.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use half::{bf16, f16};

/// Element types CUDA's `atomicAdd` supports.
pub trait AtomicAdd: Copy {
    /// Adds `v` at `p` atomically; returns the old value.
    fn atomic_add(p: *mut Self, v: Self) -> Self;
}

/// Integer types CUDA's `atomicMin` / `atomicMax` support.
pub trait AtomicOrd: Copy {
    /// Stores min(*p, v) atomically; returns the old value.
    fn atomic_min(p: *mut Self, v: Self) -> Self;
    /// Stores max(*p, v) atomically; returns the old value.
    fn atomic_max(p: *mut Self, v: Self) -> Self;
}

/// Types CUDA's `atomicExch` / `atomicCAS` support (32 and 64 bits).
pub trait AtomicSwap: Copy {
    /// Stores `v` at `p` atomically; returns the old value.
    fn atomic_exch(p: *mut Self, v: Self) -> Self;
    /// Stores `new` if `*p == current` (bitwise); returns the old value.
    fn atomic_cas(p: *mut Self, current: Self, new: Self) -> Self;
    /// Reads the value at `p` atomically (acquire: what a writer stored before its
    /// atomic, or before a fence, is seen).
    fn atomic_load(p: *mut Self) -> Self;
}

/// Applies `f` to the value at `p` atomically through a CAS loop on its bits.
macro_rules! rmw {
    ($atomic:ty, $p:expr, $to:expr, $from:expr, $f:expr) => {{
        // SAFETY: `p` points at an aligned, live element of a kernel buffer (checked by
        // the caller's bounds check); every concurrent access to it in the emulation goes
        // through these atomics, as CUDA requires of its own.
        let a = unsafe { <$atomic>::from_ptr($p as *mut _) };
        let mut old = a.load(Ordering::Relaxed);
        loop {
            let new = $to($f($from(old)));
            match a.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break $from(old),
                Err(cur) => old = cur,
            }
        }
    }};
}

/// Implements the atomics of one type: `$atomic` holds its bits, `$to`/`$from` convert.
macro_rules! atomics {
    (add: $($t:ty => $atomic:ty, $to:expr, $from:expr, $add:expr);* $(;)?) => {$(
        impl AtomicAdd for $t {
            fn atomic_add(p: *mut Self, v: Self) -> Self {
                rmw!($atomic, p, $to, $from, |x: $t| $add(x, v))
            }
        }
    )*};
    (ord: $($t:ty => $atomic:ty);* $(;)?) => {$(
        impl AtomicOrd for $t {
            fn atomic_min(p: *mut Self, v: Self) -> Self {
                rmw!($atomic, p, |x: $t| x as _, |b| b as $t, |x: $t| x.min(v))
            }
            fn atomic_max(p: *mut Self, v: Self) -> Self {
                rmw!($atomic, p, |x: $t| x as _, |b| b as $t, |x: $t| x.max(v))
            }
        }
    )*};
    (swap: $($t:ty => $atomic:ty, $to:expr, $from:expr);* $(;)?) => {$(
        impl AtomicSwap for $t {
            fn atomic_exch(p: *mut Self, v: Self) -> Self {
                rmw!($atomic, p, $to, $from, |_| v)
            }
            fn atomic_cas(p: *mut Self, current: Self, new: Self) -> Self {
                rmw!($atomic, p, $to, $from, |x: $t| if $to(x) == $to(current) { new } else { x })
            }
            fn atomic_load(p: *mut Self) -> Self {
                // SAFETY: as in `rmw!`: an aligned, live element, every concurrent
                // access to it through atomics.
                let a = unsafe { <$atomic>::from_ptr(p as *mut _) };
                $from(a.load(Ordering::Acquire))
            }
        }
    )*};
}

atomics! { add:
    i32 => AtomicU32, |x: i32| x as u32, |b: u32| b as i32, i32::wrapping_add;
    u32 => AtomicU32, |x: u32| x, |b: u32| b, u32::wrapping_add;
    i64 => AtomicU64, |x: i64| x as u64, |b: u64| b as i64, i64::wrapping_add;
    u64 => AtomicU64, |x: u64| x, |b: u64| b, u64::wrapping_add;
    f32 => AtomicU32, f32::to_bits, f32::from_bits, |a: f32, b: f32| a + b;
    f64 => AtomicU64, f64::to_bits, f64::from_bits, |a: f64, b: f64| a + b;
    f16 => AtomicU16, f16::to_bits, f16::from_bits, |a: f16, b: f16| a + b;
    bf16 => AtomicU16, bf16::to_bits, bf16::from_bits, |a: bf16, b: bf16| a + b;
}

atomics! { ord: i32 => AtomicU32; u32 => AtomicU32; i64 => AtomicU64; u64 => AtomicU64; }

atomics! { swap:
    i32 => AtomicU32, |x: i32| x as u32, |b: u32| b as i32;
    u32 => AtomicU32, |x: u32| x, |b: u32| b;
    i64 => AtomicU64, |x: i64| x as u64, |b: u64| b as i64;
    u64 => AtomicU64, |x: u64| x, |b: u64| b;
    f32 => AtomicU32, f32::to_bits, f32::from_bits;
    f64 => AtomicU64, f64::to_bits, f64::from_bits;
}
