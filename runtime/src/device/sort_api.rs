//! Sorting as a library call: `Device::sort_by_key` sorts a buffer of keys in place,
//! ascending and stable (equal keys keep their order; NaNs last), and permutes a buffer
//! of values alike.
//!
//! Written as `#[kernel]`s (no CUDA library cudarc reaches sorts): a least-significant-
//! digit radix sort. Each key becomes a 64-bit integer whose unsigned order is the keys'
//! order — a float's bits (widened to f64, -0 as +0) with the sign folded, every NaN the
//! largest value; a signed integer's with its top bit flipped — paired with its original
//! index. The pairs are sorted by 4-bit digits from the lowest: per digit, one pass counts
//! each block's digits (1024 keys a block), an exclusive scan of those counts (digit-major,
//! in one block on the device) gives every block's start for every digit, and a second
//! pass moves each key to its place — keys of one digit in their order within the block
//! (each thread's four keys, in order, after the earlier threads' keys of that digit:
//! per-thread counts of the 16 digits packed four to a 64-bit word and scanned across
//! the block), so every pass is stable and so is the sort. Digits that no key changes
//! (an OR and an AND of all keys find them: f32 keys widened to f64 leave 29 low bits
//! zero, small integers their high ones) take no pass. Keys and values are then
//! gathered back through the sorted indices. The same result on every run and backend;
//! O(n) work per pass, at most 16 passes of three launches.

use crate::device::DType;
use crate::device::Device;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int};
use crate::kernel::dsl::{KernelCall, KernelSequence};
use crate::launch::LaunchConfig;

/// The top bit of a 64-bit key.
const TOP: u64 = 0x8000_0000_0000_0000;

/// Keys a block counts or moves in one pass: 256 threads × 4.
const TILE: usize = 1024;

/// The radix: 4-bit digits, 16 of them in a 64-bit key.
const DIGITS: usize = 16;

/// The sort key of a float (widened to f64, exact): -0 taken as +0 (equal keys keep
/// their order), the bits made unsigned-ordered (a negative number's bits all flipped, a
/// positive one's sign bit set), a NaN the largest key (after +∞, whose key is
/// 0xFFF0…).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn float_sort_keys<T: Float>(x: &[T], keys: &mut [u64], index: &mut [u32]) {
    let i = global_index();
    if i < keys.len() {
        let mut v = x[i].to_f64();
        if v == 0.0 {
            v = 0.0;
        }
        let bits: u64 = v.to_bits();
        let mut key: u64 = bits | 0x8000_0000_0000_0000u64;
        if bits >= 0x8000_0000_0000_0000u64 {
            key = bits ^ 0xFFFF_FFFF_FFFF_FFFFu64;
        }
        if v != v {
            key = 0xFFFF_FFFF_FFFF_FFFFu64;
        }
        keys[i] = key;
        index[i] = i as u32;
    }
}

/// The sort key of an integer: widened to i64, its bits XORed with `flip` (the top bit
/// for signed keys and u32, nothing for u64).
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn int_sort_keys<T: Int>(x: &[T], flip: u64, keys: &mut [u64], index: &mut [u32]) {
    let i = global_index();
    if i < keys.len() {
        keys[i] = (x[i].to_i64() as u64) ^ flip;
        index[i] = i as u32;
    }
}

/// Block `b` writes the AND and the OR of its tile of keys to `ands[b]`, `ors[b]`: the
/// digits on which AND and OR agree are the same in every key.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn key_bits(keys: &[u64], ands: &mut [u64], ors: &mut [u64]) {
    let mut a = shared_array::<u64, 256>();
    let mut o = shared_array::<u64, 256>();
    let t = thread_idx_x();
    let base = block_idx_x() * 1024 + t * 4;
    let mut all: u64 = 0xFFFF_FFFF_FFFF_FFFFu64;
    let mut any: u64 = 0;
    let mut k: usize = 0;
    while k < 4 {
        if base + k < keys.len() {
            all = all & keys[base + k];
            any = any | keys[base + k];
        }
        k += 1;
    }
    a[t] = all;
    o[t] = any;
    sync_threads();
    let mut half: usize = 128;
    while half > 0 {
        if t < half {
            a[t] = a[t] & a[t + half];
            o[t] = o[t] | o[t + half];
        }
        sync_threads();
        half /= 2;
    }
    if t == 0 {
        ands[block_idx_x()] = a[0];
        ors[block_idx_x()] = o[0];
    }
}

/// Digit `d`'s one in packed word `q`: the 16 per-digit counts of a thread (at most
/// 1024 each, so a 16-bit field never carries into the next) four to a word.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn one_in(d: usize, q: usize) -> u64 {
    if d / 4 == q {
        1u64 << (16 * (d % 4))
    } else {
        0
    }
}

/// The digit of `key` at `shift`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn digit(key: u64, shift: u32) -> usize {
    ((key >> shift) & 15u64) as usize
}

/// Thread `t`'s packed digit counts of its four keys (`keys[base..base + 4]`, those
/// present), word `q` of the four.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn thread_counts(keys: &[u64], base: usize, shift: u32, q: usize) -> u64 {
    let mut w: u64 = 0;
    let mut k: usize = 0;
    while k < 4 {
        if base + k < keys.len() {
            w += one_in(digit(keys[base + k], shift), q);
        }
        k += 1;
    }
    w
}

/// Radix pass 1: block `b` counts the digits (at `shift`) of its tile of keys into
/// `counts[d · blocks + b]` — digit-major, so that an exclusive scan of `counts` is
/// where each block's keys of each digit go.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_counts(keys: &[u64], shift: u32, counts: &mut [u32]) {
    let mut part = shared_array::<u64, 1024>();
    let t = thread_idx_x();
    let base = block_idx_x() * 1024 + t * 4;
    let mut q: usize = 0;
    while q < 4 {
        part[q * 256 + t] = thread_counts(keys, base, shift, q);
        q += 1;
    }
    sync_threads();
    let mut half: usize = 128;
    while half > 0 {
        if t < half {
            q = 0;
            while q < 4 {
                part[q * 256 + t] += part[q * 256 + t + half];
                q += 1;
            }
        }
        sync_threads();
        half /= 2;
    }
    if t < 16 {
        let w = part[(t / 4) * 256];
        counts[t * grid_dim_x() + block_idx_x()] = ((w >> (16 * (t % 4))) & 0xFFFFu64) as u32;
    }
}

/// Between the radix passes: `starts` = the exclusive prefix sums of `counts` (digit-
/// major, so each block's start for each digit), in one block of 1024 threads — each
/// totals a contiguous chunk, the chunk totals are scanned across the block, each chunk
/// is rescanned from its offset. A few hundred counts per thread even for tens of
/// millions of keys, and no trip to the host between the passes.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_starts(counts: &[u32], starts: &mut [u64]) {
    let mut part = shared_array::<u64, 1024>();
    let t = thread_idx_x();
    let chunk = (counts.len() + 1023) / 1024;
    let first = t * chunk;
    let mut sum: u64 = 0;
    let mut i = first;
    while i < first + chunk && i < counts.len() {
        sum += counts[i] as u64;
        i += 1;
    }
    part[t] = sum;
    sync_threads();
    let mut off: usize = 1;
    while off < 1024 {
        let mut add: u64 = 0;
        if t >= off {
            add = part[t - off];
        }
        sync_threads();
        part[t] += add;
        sync_threads();
        off *= 2;
    }
    let mut run: u64 = part[t] - sum;
    i = first;
    while i < first + chunk && i < counts.len() {
        starts[i] = run;
        run += counts[i] as u64;
        i += 1;
    }
}

/// Radix pass 2: block `b` moves its tile of keys (and their indices) to their places
/// for the digit at `shift`: `starts[d · blocks + b]` (pass 1's counts, scanned) plus
/// the number of keys of digit d before it in the tile — the threads' packed counts
/// scanned across the block, then each thread's own keys in order.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn radix_scatter(keys: &[u64], index: &[u32], shift: u32, starts: &[u64], keys_out: &mut [u64], index_out: &mut [u32]) {
    let mut part = shared_array::<u64, 1024>();
    let t = thread_idx_x();
    let b = block_idx_x();
    let base = b * 1024 + t * 4;
    let mut q: usize = 0;
    while q < 4 {
        part[q * 256 + t] = thread_counts(keys, base, shift, q);
        q += 1;
    }
    sync_threads();
    // The packed counts, scanned across the block (Hillis–Steele, inclusive).
    let mut off: usize = 1;
    while off < 256 {
        let mut a0: u64 = 0;
        let mut a1: u64 = 0;
        let mut a2: u64 = 0;
        let mut a3: u64 = 0;
        if t >= off {
            a0 = part[t - off];
            a1 = part[256 + t - off];
            a2 = part[512 + t - off];
            a3 = part[768 + t - off];
        }
        sync_threads();
        part[t] += a0;
        part[256 + t] += a1;
        part[512 + t] += a2;
        part[768 + t] += a3;
        sync_threads();
        off *= 2;
    }
    // The keys of each digit before this thread's, then its own, one by one.
    let mut k: usize = 0;
    while k < 4 {
        if base + k < keys.len() {
            let key = keys[base + k];
            let d = digit(key, shift);
            let q = d / 4;
            let packed = part[q * 256 + t] - thread_counts(keys, base, shift, q);
            let mut own: u64 = 0;
            let mut j: usize = 0;
            while j < k {
                own += one_in(digit(keys[base + j], shift), q);
                j += 1;
            }
            let before = ((packed + own) >> (16 * (d % 4))) & 0xFFFFu64;
            let at = (starts[d * grid_dim_x() + b] + before) as usize;
            keys_out[at] = key;
            index_out[at] = index[base + k];
        }
        k += 1;
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

/// Key types of [`Device::sort_by_key`]: f16, bf16, f32, f64 (NaNs last), i8, i16, i32, i64, u8, u16, u32, u64.
pub trait SortKey: DType {
    /// The launch that writes the sort keys of `x`, and their indices.
    #[doc(hidden)]
    fn pairs_call(x: &GpuRef<Self>, keys: &mut GpuRef<u64>, index: &mut GpuRef<u32>) -> KernelCall;
}

/// Value types of [`Device::sort_by_key`] (and key types, for gathering them back):
/// f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64.
pub trait SortValue: DType {
    /// The launch of `out[i] = src[index[i]]`.
    #[doc(hidden)]
    fn gather_call(src: &GpuRef<Self>, index: &GpuRef<u32>, out: &GpuRef<Self>) -> KernelCall;
}

macro_rules! sort_keys {
    ($pairs:ident: $($k:ty $(= $flip:expr)?),*) => {
        $(impl SortKey for $k {
            fn pairs_call(x: &GpuRef<Self>, keys: &mut GpuRef<u64>, index: &mut GpuRef<u32>) -> KernelCall {
                let cfg = LaunchConfig::for_elements(keys.len(), 256);
                $pairs::call::<$k>(cfg, x, $($flip,)? keys, index)
            }
        })*
    };
}

macro_rules! sort_values {
    ($gather:ident: $($v:ty),*) => {
        $(impl SortValue for $v {
            fn gather_call(src: &GpuRef<Self>, index: &GpuRef<u32>, out: &GpuRef<Self>) -> KernelCall {
                let mut out = out.clone();
                let cfg = LaunchConfig::for_elements(out.len(), 256);
                $gather::call::<$v>(cfg, src, index, &mut out)
            }
        })*
    };
}

sort_keys!(float_sort_keys: half::f16, half::bf16, f32, f64);
// Widened to i64, a u32 is never negative: flipping the top bit keeps its order too; a
// u64's bits are its order already.
sort_keys!(int_sort_keys: i8 = TOP, i16 = TOP, i32 = TOP, i64 = TOP, u8 = TOP, u16 = TOP, u32 = TOP, u64 = 0);
sort_values!(gather_float: half::f16, half::bf16, f32, f64);
sort_values!(gather_int: i8, i16, i32, i64, u8, u16, u32, u64);

/// A radix sort ready to run: its passes' launches, and the buffer they leave the
/// sorted order in.
struct Order {
    passes: KernelSequence,
    index: GpuRef<u32>,
}

impl Device {
    /// Sorts `keys` in place, ascending and stable (equal keys keep their order; NaNs
    /// last), and puts `values` (as many elements; another buffer, or a view of the
    /// keys' buffer lying apart from them) in the same order.
    /// Keys and values: f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64. Buffers or views.
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
        // Views of one buffer (then of one element type) that lie apart are welcome:
        // no launch below takes both, each reads or writes its own window.
        if keys.overlaps(values) {
            let (kw, vw) = (keys.window(), values.window());
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "sort_by_key: the keys (elements {kw:?}) and the values (elements {vw:?}) are overlapping views \
                     of one buffer; pass views that lie apart, or separate buffers"
                ))
                .arg("values")
                .mismatch("a window apart from the keys'", "an overlapping one"),
            ));
        }
        let Some(order) = self.sort_launches(keys, "sort_by_key").await? else {
            return Ok(());
        };
        let (kc, vc) = futures::try_join!(self.alloc::<K>(n), self.alloc::<V>(n))?;
        futures::try_join!(self.copy(keys, &kc), self.copy(values, &vc))?;
        // The passes and both gathers: one sequence, waited for once.
        let Order { passes, index } = order;
        self.launch_all(
            passes
                .then(K::gather_call(&kc, &index, keys))
                .then(V::gather_call(&vc, &index, values)),
        )
        .await
    }

    /// Sorts `keys` in place, ascending and stable (NaNs last), as
    /// [`Device::sort_by_key`] without values.
    pub async fn sort<K: SortKey + SortValue>(&self, keys: &GpuRef<K>) -> Result<(), GpuError> {
        let Some(Order { passes, index }) = self.sort_launches(keys, "sort").await? else {
            return Ok(());
        };
        let kc = self.alloc::<K>(keys.len()).await?;
        self.copy(keys, &kc).await?;
        self.launch_all(passes.then(K::gather_call(&kc, &index, keys))).await
    }

    /// The stable ascending order of `keys` (left as they are): a new buffer whose
    /// element i is the index (in `keys`) of the i-th smallest key, equal keys in their
    /// order, NaNs last — `torch.argsort(stable=True)`. `InvalidArgument` for an empty
    /// view (there is no buffer of no elements).
    pub async fn argsort<K: SortKey>(&self, keys: &GpuRef<K>) -> Result<GpuRef<u32>, GpuError> {
        let order = self.sort_launches(keys, "argsort").await?;
        if let Some(Order { passes, index }) = order {
            self.launch_all(passes).await?;
            return Ok(index);
        }
        Err(GpuError::InvalidArgument(
            Invalid::new("argsort of no keys: the order would be an empty buffer")
                .arg("keys")
                .mismatch("at least one key", 0),
        ))
    }

    /// The radix sort, up to its passes: the checks, every buffer, the keys' 64-bit forms
    /// (and which of their digits vary), then the passes' launches — not yet run — and
    /// the buffer they leave the stable ascending order of `keys` in (`None` for no
    /// keys). The caller appends what uses the order and runs it all as one sequence.
    /// `what` names the call in errors.
    async fn sort_launches<K: SortKey>(&self, keys: &GpuRef<K>, what: &str) -> Result<Option<Order>, GpuError> {
        let n = keys.len();
        if n >= (u32::MAX / 2) as usize {
            return Err(GpuError::Unsupported(format!(
                "{what} of {n} elements: sorts take fewer than 2^31 (32-bit indices)"
            )));
        }
        if n == 0 {
            return Ok(None); // (an empty view): nothing to order
        }
        let blocks = n.div_ceil(TILE);
        // Every buffer of the sort, asked for together (independent asks in flight at
        // once: one round trip's wait, not eight).
        let (mut keys_a, mut index_a, mut keys_b, mut index_b, mut counts, mut starts, mut ands, mut ors) = futures::try_join!(
            self.alloc::<u64>(n),
            self.alloc::<u32>(n),
            self.alloc::<u64>(n),
            self.alloc::<u32>(n),
            self.alloc::<u32>(DIGITS * blocks),
            self.alloc::<u64>(DIGITS * blocks),
            self.scratch::<u64>(blocks),
            self.scratch::<u64>(blocks),
        )?;
        let shape = LaunchConfig {
            grid: (blocks as u32, 1, 1),
            block: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let one_block = LaunchConfig {
            grid: (1, 1, 1),
            block: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        // The keys' 64-bit forms and the bits in which some two differ (an AND and an OR
        // of all keys: per block on the device, the blocks combined here).
        self.launch_all([
            K::pairs_call(keys, &mut keys_a, &mut index_a),
            key_bits::call(shape, &keys_a, &mut ands, &mut ors),
        ])
        .await?;
        let (ands, ors) = futures::try_join!(self.download(&ands), self.download(&ors))?;
        let varying = ands.iter().fold(u64::MAX, |a, k| a & k) ^ ors.iter().fold(0, |a, k| a | k);
        // Every pass's three launches: the stream orders them.
        let mut passes = KernelSequence::new();
        for pass in 0..DIGITS as u32 {
            let shift = 4 * pass;
            if (varying >> shift) & 15 == 0 {
                continue; // every key has the same digit here: the order stands
            }
            passes = passes
                .then(radix_counts::call(shape, &keys_a, shift, &mut counts))
                .then(radix_starts::call(one_block, &counts, &mut starts))
                .then(radix_scatter::call(
                    shape,
                    &keys_a,
                    &index_a,
                    shift,
                    &starts,
                    &mut keys_b,
                    &mut index_b,
                ));
            std::mem::swap(&mut keys_a, &mut keys_b);
            std::mem::swap(&mut index_a, &mut index_b);
        }
        Ok(Some(Order { passes, index: index_a }))
    }
}
