//! Reductions as library calls: `Device::sum`, `min`, `max`, `argmin`, `argmax` over a
//! buffer (or a view) of f16, bf16, f32 or f64 (sums, minima and maxima carried in f64,
//! rounded once to the element type) or of the integers of 8 to 64 bits (minima and
//! maxima in the type itself, sums carried in 64 bits: see [`Reduce`]). Their kernels,
//! why they are ours and how a sum keeps its bits are in `library/kernels/reduce.rs`;
//! here the partials' buffers are found and each pass sent with its read back.

use std::future::Future;

use crate::device::DType;
use crate::device::Device;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::Float;
use crate::library::kernels::reduce::{
    arg_calls, blocks, check_len, first_index, float_combined, float_pass, int_combined, int_pass, ArgBuffers, Bounds,
    Op,
};

/// The element types the reductions take, and how each reduces: the floats f16, bf16,
/// f32, f64 (sums, minima and maxima carried in f64 — every one widens exactly — and
/// rounded once to the type; NaNs skipped by min, max and the arg*, propagated by a
/// sum) and the integers i8, i16, i32, i64, u8, u16, u32, u64 (minima, maxima and arg*
/// exact in the type; sums carried in 64 bits, exact while they fit — an `i64` for the
/// signed types, a `u64` for the unsigned — and wrapping beyond, as an int64
/// accumulator does).
pub trait Reduce: DType {
    /// What a sum gives: the type itself for a float, `i64` or `u64` for an integer.
    type Sum;

    /// The sum of `x` on `dev`.
    #[doc(hidden)]
    fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<Self::Sum, GpuError>> + Send;

    /// The smallest (`max` false) or largest element of `x` on `dev`.
    #[doc(hidden)]
    fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send;

    /// The index of the first smallest (largest) element of `x` on `dev`.
    #[doc(hidden)]
    fn arg_on(
        dev: &Device,
        x: &GpuRef<Self>,
        max: bool,
    ) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send;
}

/// The floats reduce through `reduce_pass` and `arg_pass`.
macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            type Sum = $t;
            fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<Self, GpuError>> + Send {
                dev.reduce(x, Op::Sum)
            }
            fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send {
                dev.reduce(x, if max { Op::Max } else { Op::Min })
            }
            fn arg_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send {
                dev.arg(x, max)
            }
        }
    )*};
}

reduce_float!(half::f16, half::bf16, f32, f64);

/// The integers reduce through `reduce_int_pass` (and `first_index_pass`); `$sum` is
/// the sum's type, its bits the `i64` carry's.
macro_rules! reduce_int {
    ($($t:ty => $sum:ty),*) => {$(
        impl Reduce for $t {
            type Sum = $sum;
            fn sum_on(dev: &Device, x: &GpuRef<Self>) -> impl Future<Output = Result<$sum, GpuError>> + Send {
                async move { Ok(dev.reduce_int(x).await?.0 as $sum) }
            }
            fn extreme_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Self, GpuError>> + Send {
                async move {
                    let (_, lo, hi) = dev.reduce_int(x).await?;
                    Ok(if max { hi } else { lo })
                }
            }
            fn arg_on(dev: &Device, x: &GpuRef<Self>, max: bool) -> impl Future<Output = Result<Option<usize>, GpuError>> + Send {
                dev.arg_int(x, max)
            }
        }
    )*};
}

reduce_int!(i8 => i64, i16 => i64, i32 => i64, i64 => i64, u8 => u64, u16 => u64, u32 => u64, u64 => u64);

impl Device {
    /// The sum of `x`'s elements (a buffer or a view), in an order fixed by the launch
    /// shape: the same bits on every run. A float's sum is its own type, an integer's an
    /// `i64` (`u64` for an unsigned type): see [`Reduce`].
    pub async fn sum<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T::Sum, GpuError> {
        T::sum_on(self, x).await
    }

    /// The smallest element of `x`, NaNs skipped (+∞ if all are NaN).
    pub async fn min<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        T::extreme_on(self, x, false).await
    }

    /// The largest element of `x`, NaNs skipped (−∞ if all are NaN).
    pub async fn max<T: Reduce>(&self, x: &GpuRef<T>) -> Result<T, GpuError> {
        T::extreme_on(self, x, true).await
    }

    /// The index (in `x`) of the first smallest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmin<T: Reduce>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        T::arg_on(self, x, false).await
    }

    /// The index (in `x`) of the first largest element, NaNs skipped; `None` if every
    /// element is NaN.
    pub async fn argmax<T: Reduce>(&self, x: &GpuRef<T>) -> Result<Option<usize>, GpuError> {
        T::arg_on(self, x, true).await
    }

    /// An integer buffer's (wrapping 64-bit) sum, minimum and maximum, in one pass.
    async fn reduce_int<T: Bounds + DType>(&self, x: &GpuRef<T>) -> Result<(i64, T, T), GpuError> {
        check_len(x, "a reduction")?;
        let b = blocks(x.len());
        let mut parts = self.scratch::<i64>(3 * b).await?;
        // The pass and the read back of its partials: one request.
        let pass = int_pass(x, &mut parts, b);
        Ok(int_combined(&self.launch_then_read([pass], &parts).await?, b))
    }

    /// An integer buffer's first minimum (maximum): the extreme first, then the first
    /// index holding it.
    async fn arg_int<T: Bounds + DType>(&self, x: &GpuRef<T>, max: bool) -> Result<Option<usize>, GpuError> {
        let none = check_len(x, "an argmin/argmax")?;
        let (_, lo, hi) = self.reduce_int(x).await?;
        let b = blocks(x.len());
        let mut at = self.scratch::<u32>(b).await?;
        let pass = first_index(x, if max { hi } else { lo }, none, &mut at, b);
        let first = self
            .launch_then_read([pass], &at)
            .await?
            .into_iter()
            .min()
            .filter(|&i| i != none);
        Ok(first.map(|i| i as usize))
    }

    /// `x`, or — a view not starting at a multiple of four elements, which the float
    /// passes read four at a time — a copy of it in a buffer of its own.
    async fn quad_aligned<T: DType>(&self, x: &GpuRef<T>) -> Result<GpuRef<T>, GpuError> {
        if x.offset() % 4 == 0 {
            return Ok(x.clone());
        }
        let copied = self.alloc::<T>(x.len()).await?;
        self.copy(x, &copied).await?;
        Ok(copied)
    }

    async fn reduce<T: Float + DType>(&self, x: &GpuRef<T>, op: Op) -> Result<T, GpuError> {
        self.reduce_in(x, op, blocks(x.len())).await
    }

    /// [`Device::reduce`] in `b` blocks (a test gives few, so that each thread meets
    /// many vectors).
    async fn reduce_in<T: Float + DType>(&self, x: &GpuRef<T>, op: Op, b: usize) -> Result<T, GpuError> {
        check_len(x, "a reduction")?;
        let x = &self.quad_aligned(x).await?;
        let mut partial = self.scratch::<f64>(b).await?;
        // The pass and the read back of its partials (at most `MAX_BLOCKS`) in one
        // request; the partials combined here.
        let pass = float_pass(x, &mut partial, op, b);
        Ok(float_combined(self.launch_then_read([pass], &partial).await?, op))
    }

    async fn arg<T: Float + DType>(&self, x: &GpuRef<T>, max: bool) -> Result<Option<usize>, GpuError> {
        self.arg_in(x, max, blocks(x.len())).await
    }

    /// [`Device::arg`] in `b` blocks (as [`Device::reduce_in`]).
    async fn arg_in<T: Float + DType>(&self, x: &GpuRef<T>, max: bool, b: usize) -> Result<Option<usize>, GpuError> {
        let none = check_len(x, "an argmin/argmax")?;
        let x = &self.quad_aligned(x).await?;
        let (v, at, best_v, best) = futures::try_join!(
            self.scratch::<T>(b),
            self.scratch::<u32>(b),
            self.scratch::<T>(1),
            self.scratch::<u32>(1)
        )?;
        let mut bufs = ArgBuffers {
            values: (*v).clone(),
            at: (*at).clone(),
            best_value: (*best_v).clone(),
            best: (*best).clone(),
        };
        // The pass, the blocks' bests reduced, the winner read back: one request.
        let calls = arg_calls(x, &mut bufs, none, max, b);
        let found = self.launch_then_read(calls, &bufs.best).await?[0];
        Ok((found != none).then_some(found as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::Op;
    use crate::actor::ActorSystem;
    use crate::device::{Device, DeviceConfig};

    /// A few blocks over many vectors: each thread meets several vectors on its
    /// grid-stride loop, then the tail — both passes against float64 references on
    /// random data (the extremes planted twice, ties for the arg passes).
    #[tokio::test]
    async fn few_blocks_each_meet_many_vectors_and_the_tail() {
        let sys = ActorSystem::new("reduce-blocks");
        let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        // 2 blocks × 256 threads over 10 007 elements: 2501 vectors (each thread four or
        // five) and a tail of 3.
        let mut v: Vec<f32> = (0..10_007).map(|_| next() as f32).collect();
        // Ties: the first wins, whether the second is met by another thread (9000)
        // or in the tail (10 005).
        let (hi, lo) = (1200, 4000);
        v[hi] = 2.0;
        v[9000] = 2.0;
        v[lo] = -2.0;
        v[10_005] = -2.0;
        let wide: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let x = d.upload(v).await.unwrap();
        let sum = d.reduce_in(&x, Op::Sum, 2).await.unwrap() as f64;
        let want: f64 = wide.iter().sum();
        assert!(
            (sum - want).abs() < 1e-5 * wide.iter().map(|x| x.abs()).sum::<f64>(),
            "{sum} vs {want}"
        );
        assert_eq!(d.reduce_in(&x, Op::Max, 2).await.unwrap(), 2.0);
        assert_eq!(d.reduce_in(&x, Op::Min, 2).await.unwrap(), -2.0);
        assert_eq!(d.arg_in(&x, true, 2).await.unwrap(), Some(hi));
        assert_eq!(d.arg_in(&x, false, 2).await.unwrap(), Some(lo));
        sys.shutdown().await;
    }
}
