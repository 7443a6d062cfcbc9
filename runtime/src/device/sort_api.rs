//! Sorting as a library call: `Device::sort_by_key` sorts a buffer of keys in place,
//! ascending and stable (equal keys keep their order; NaNs last), and permutes a buffer
//! of values alike.
//!
//! Written as `#[kernel]`s (no CUDA library cudarc reaches sorts): each key becomes a
//! triple (class, a 64-bit integer whose unsigned order is the keys' order — a float's
//! bits with the sign folded, a signed integer's with its top bit flipped —, original
//! index), the triples padded to a power of two (padding of a class of its own, after
//! everything) are sorted by a bitonic network — one launch per stage, each thread
//! ordering one pair —, and keys and values are gathered back through the sorted
//! indices. The original index in every comparison makes the order total: stable, and
//! the same result on every run and backend. Work is O(n log² n) in log² n / 2
//! launches: a correct first sort, not yet a fast one (a radix sort is the way to CUB's
//! speed).

use std::future::Future;

use crate::device::DType;
use crate::device::Device;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int};
use crate::launch::LaunchConfig;

/// The top bit of a 64-bit key.
const TOP: u64 = 0x8000_0000_0000_0000;

/// Writes triple `i`: key `key` (from element `i` of the keys when `present`, else the
/// padding: class 2), class 0 for a number and 1 for a NaN (whose key is then 0), index
/// `i`. The one classification both key families go through.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn put_triple(i: usize, key: u64, nan: bool, present: bool, keys: &mut [u64], class: &mut [u32], index: &mut [u32]) {
    index[i] = i as u32;
    keys[i] = 0;
    class[i] = 2;
    if present {
        if nan {
            class[i] = 1;
        } else {
            keys[i] = key;
            class[i] = 0;
        }
    }
}

/// The triples of a float key buffer, padded to `keys.len()`: each key widened to f64
/// (exact), -0 taken as +0 (equal keys keep their order), its bits made unsigned-ordered
/// (a negative number's bits all flipped, a positive one's sign bit set).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_sort_keys<T: Float>(x: &[T], keys: &mut [u64], class: &mut [u32], index: &mut [u32]) {
    let i = global_index();
    if i < keys.len() {
        let present = i < x.len();
        let mut v: f64 = 0.0;
        if present {
            v = x[i].to_f64();
        }
        if v == 0.0 {
            v = 0.0;
        }
        let bits: u64 = v.to_bits();
        let mut key: u64 = bits | 0x8000_0000_0000_0000u64;
        if bits >= 0x8000_0000_0000_0000u64 {
            key = bits ^ 0xFFFF_FFFF_FFFF_FFFFu64;
        }
        put_triple(i, key, v != v, present, keys, class, index);
    }
}

/// The triples of an integer key buffer, padded alike: each key widened to i64 and its
/// bits XORed with `flip` (the top bit for signed keys and u32, nothing for u64).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_sort_keys<T: Int>(x: &[T], flip: u64, keys: &mut [u64], class: &mut [u32], index: &mut [u32]) {
    let i = global_index();
    if i < keys.len() {
        let present = i < x.len();
        let mut key: u64 = 0;
        if present {
            key = (x[i].to_i64() as u64) ^ flip;
        }
        put_triple(i, key, false, present, keys, class, index);
    }
}

/// One stage of the bitonic network over the triples: the pair (i, i ^ j) ordered
/// ascending where `i & k` is 0, descending elsewhere, by (class, key, index).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn bitonic_step(keys: &mut [u64], class: &mut [u32], index: &mut [u32], j: u32, k: u32) {
    let i = global_index();
    let l = i ^ (j as usize);
    if l > i && l < keys.len() {
        let ascending = (i & (k as usize)) == 0;
        let ki = keys[i];
        let kl = keys[l];
        let ci = class[i];
        let cl = class[l];
        let ii = index[i];
        let il = index[l];
        let later = ci > cl || (ci == cl && (ki > kl || (ki == kl && ii > il)));
        if later == ascending {
            keys[i] = kl;
            keys[l] = ki;
            class[i] = cl;
            class[l] = ci;
            index[i] = il;
            index[l] = ii;
        }
    }
}

/// `out[i] = src[index[i]]`, floats.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn gather_float<T: Float>(src: &[T], index: &[u32], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[index[i] as usize];
    }
}

/// `out[i] = src[index[i]]`, integers.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn gather_int<T: Int>(src: &[T], index: &[u32], out: &mut [T]) {
    let i = global_index();
    if i < out.len() {
        out[i] = src[index[i] as usize];
    }
}

/// The triples of a sort's keys, padded to `keys.len()` (a power of two).
type Triples<'a> = (&'a mut GpuRef<u64>, &'a mut GpuRef<u32>, &'a mut GpuRef<u32>);

/// Key types of [`Device::sort_by_key`]: f16, bf16, f32, f64 (NaNs last), i32, i64, u32, u64.
pub trait SortKey: DType {
    /// Writes the sort triples of `x` on `dev`.
    #[doc(hidden)]
    fn triples_on<'a>(
        dev: &'a Device,
        x: &'a GpuRef<Self>,
        out: Triples<'a>,
    ) -> impl Future<Output = Result<(), GpuError>> + Send + 'a;
}

/// Value types of [`Device::sort_by_key`] (and key types, for gathering them back):
/// f16, bf16, f32, f64, i32, i64, u32, u64.
pub trait SortValue: DType {
    /// `out[i] = src[index[i]]` on `dev`.
    #[doc(hidden)]
    fn gather_on<'a>(
        dev: &'a Device,
        src: &'a GpuRef<Self>,
        index: &'a GpuRef<u32>,
        out: &'a GpuRef<Self>,
    ) -> impl Future<Output = Result<(), GpuError>> + Send + 'a;
}

macro_rules! sort_keys {
    ($triples:ident: $($k:ty $(= $flip:expr)?),*) => {
        $(impl SortKey for $k {
            fn triples_on<'a>(dev: &'a Device, x: &'a GpuRef<Self>, (keys, class, index): Triples<'a>)
                -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
                let cfg = LaunchConfig::for_elements(keys.len(), 256);
                $triples::launch::<$k>(dev, cfg, x, $($flip,)? keys, class, index)
            }
        })*
    };
}

macro_rules! sort_values {
    ($gather:ident: $($v:ty),*) => {
        $(impl SortValue for $v {
            fn gather_on<'a>(dev: &'a Device, src: &'a GpuRef<Self>, index: &'a GpuRef<u32>, out: &'a GpuRef<Self>)
                -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
                async move {
                    let mut out = out.clone();
                    let cfg = LaunchConfig::for_elements(out.len(), 256);
                    $gather::launch::<$v>(dev, cfg, src, index, &mut out).await
                }
            }
        })*
    };
}

sort_keys!(float_sort_keys: half::f16, half::bf16, f32, f64);
// Widened to i64, a u32 is never negative: flipping the top bit keeps its order too; a
// u64's bits are its order already.
sort_keys!(int_sort_keys: i32 = TOP, i64 = TOP, u32 = TOP, u64 = 0);
sort_values!(gather_float: half::f16, half::bf16, f32, f64);
sort_values!(gather_int: i32, i64, u32, u64);

impl Device {
    /// Sorts `keys` in place, ascending and stable (equal keys keep their order; NaNs
    /// last), and puts `values` (as many elements, another buffer) in the same order.
    /// Keys and values: f16, bf16, f32, f64, i32, i64, u32, u64. Buffers or views.
    pub async fn sort_by_key<K: SortKey + SortValue, V: SortValue>(
        &self,
        keys: &GpuRef<K>,
        values: &GpuRef<V>,
    ) -> Result<(), GpuError> {
        let n = keys.len();
        if values.len() != n {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!("sort_by_key: {n} keys and {} values: one value per key", values.len()),
                "values",
                n,
                values.len(),
            )));
        }
        if keys.id() == values.id() {
            return Err(GpuError::InvalidArgument(
                Invalid::new("sort_by_key: keys and values must be different buffers (not views of one)")
                    .arg("values")
                    .mismatch("a buffer other than the keys'", "the keys' buffer"),
            ));
        }
        if n >= (u32::MAX / 2) as usize {
            return Err(GpuError::Unsupported(format!(
                "sort_by_key of {n} elements: sorts take fewer than 2^31 (32-bit indices)"
            )));
        }
        let padded = n.next_power_of_two();
        let (mut sk, mut class, mut index) = (
            self.alloc::<u64>(padded).await?,
            self.alloc::<u32>(padded).await?,
            self.alloc::<u32>(padded).await?,
        );
        K::triples_on(self, keys, (&mut sk, &mut class, &mut index)).await?;
        let cfg = LaunchConfig::for_elements(padded, 256);
        let mut k = 2;
        while k <= padded {
            let mut j = k / 2;
            while j > 0 {
                bitonic_step::launch(self, cfg, &mut sk, &mut class, &mut index, j as u32, k as u32).await?;
                j /= 2;
            }
            k *= 2;
        }
        // The padding sorted last: the first n indices are the keys' order.
        let order = index.view(0..n)?;
        let (kc, vc) = (self.alloc::<K>(n).await?, self.alloc::<V>(n).await?);
        self.copy(keys, &kc).await?;
        self.copy(values, &vc).await?;
        K::gather_on(self, &kc, &order, keys).await?;
        V::gather_on(self, &vc, &order, values).await
    }
}
