//! Sorting as a library call: `Device::sort_by_key` sorts a buffer of keys in place,
//! ascending and stable (equal keys keep their order; NaNs last), and permutes a buffer
//! of values alike; `Device::sort` sorts keys alone, `Device::argsort` gives their
//! order. The radix sort itself — its kernels, the radix forms of each key type, how
//! values ride along, the launches of each pass — is in `library/kernels/sort.rs`; here
//! the buffers are found (from the device's scratch pool), the CPU device's large sorts
//! go to the host (`sort_host.rs`), and the launches are sent.

use crate::device::DType;
use crate::device::Device;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::KernelSequence;
use crate::library::kernels::sort::{radix_tiles, Radix, RadixBits, RadixBuffers, RadixKey, RadixValue, CARRY_NONE};

/// Key types of [`Device::sort_by_key`]: f16, bf16, f32, f64 (NaNs last), i8, i16, i32,
/// i64, u8, u16, u32, u64.
#[diagnostic::on_unimplemented(message = "`{Self}` is not a sort key: keys are f16, bf16, f32, f64, i8–i64 or u8–u64")]
pub trait SortKey: DType + RadixKey<Bits: DType> {}

/// Value types of [`Device::sort_by_key`]: f16, bf16, f32, f64, i8, i16, i32, i64, u8,
/// u16, u32, u64.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a sort value: values are f16, bf16, f32, f64, i8–i64 or u8–u64"
)]
pub trait SortValue: DType + RadixValue {}

macro_rules! sort_types {
    ($($t:ty),*) => {$(
        impl SortKey for $t {}
        impl SortValue for $t {}
    )*};
}

sort_types!(half::f16, half::bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

impl Device {
    /// Sorts `keys` in place, ascending and stable (equal keys keep their order; NaNs
    /// last), and puts `values` (as many elements; another buffer, or a view of the
    /// keys' buffer lying apart from them) in the same order.
    /// Keys and values: f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64. Buffers or views.
    pub async fn sort_by_key<K: SortKey, V: SortValue>(
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
        if n == 0 {
            return Ok(()); // (empty views): nothing to order
        }
        if self.sorts_on_host(n) {
            return self.host_sort(keys, Some(values)).await;
        }
        // Every buffer at once (independent asks in flight together: one round trip's
        // wait, none where the scratch pool has them), then one sequence of launches,
        // waited for once.
        if V::CARRIED {
            // Integer values ride along as the passes' payload, the last pass writing
            // them; the keys come back from their radix forms.
            let (mut radix, spare) = futures::try_join!(self.radix(keys, "sort_by_key", true), self.scratch::<V>(n))?;
            let unbits = K::unbits_call(radix.bits(), keys);
            if let Some(passes) = V::carried(&mut radix, values, (*spare).clone()) {
                return self.launch_all(radix.written_back(passes, unbits)).await;
            }
        }
        // Otherwise through the sorted order: the values gathered by it from a copy.
        let ((sorted_keys, order), mut vc) =
            futures::try_join!(self.keys_by_order(keys, "sort_by_key"), self.alloc_uninit::<V>(n))?;
        let mut sequence = KernelSequence::new().then(V::copy_call(values, &mut vc));
        sequence.0.extend(sorted_keys.0);
        self.launch_all(sequence.then(V::gather_call(&vc, &order, values)))
            .await
    }

    /// Sorts `keys` in place, ascending and stable (NaNs last), as
    /// [`Device::sort_by_key`] without values.
    pub async fn sort<K: SortKey>(&self, keys: &GpuRef<K>) -> Result<(), GpuError> {
        if keys.is_empty() {
            return Ok(());
        }
        if self.sorts_on_host(keys.len()) {
            return self.host_sort::<K, K>(keys, None).await;
        }
        // Keys only through the passes, then back from their radix forms.
        let (mut radix, none_a, none_b) = futures::try_join!(
            self.radix(keys, "sort", true),
            self.scratch::<u32>(1),
            self.scratch::<u32>(1)
        )?;
        let unbits = K::unbits_call(radix.bits(), keys);
        let [a, b] = &mut [(*none_a).clone(), (*none_b).clone()];
        let placeholder = a.clone();
        let passes = radix.passes(&placeholder, CARRY_NONE, a, b);
        self.launch_all(radix.written_back(passes, unbits)).await
    }

    /// The stable ascending order of `keys` (left as they are): a new buffer whose
    /// element i is the index (in `keys`) of the i-th smallest key, equal keys in their
    /// order, NaNs last — `torch.argsort(stable=True)`. `InvalidArgument` for an empty
    /// view (there is no buffer of no elements).
    pub async fn argsort<K: SortKey>(&self, keys: &GpuRef<K>) -> Result<GpuRef<u32>, GpuError> {
        if keys.is_empty() {
            return Err(GpuError::InvalidArgument(
                Invalid::new("argsort of no keys: the order would be an empty buffer")
                    .arg("keys")
                    .mismatch("at least one key", 0),
            ));
        }
        if self.sorts_on_host(keys.len()) {
            let order = self.host_order(keys).await?;
            return self.upload(order).await;
        }
        let (mut radix, mut index) =
            futures::try_join!(self.radix(keys, "argsort", false), self.alloc_pair::<u32>(keys.len()))?;
        self.launch_all(radix.order(&mut index)).await?;
        let [sorted, _] = index;
        Ok(sorted)
    }

    /// Two buffers of `n` elements, asked for together, not zeroed (every buffer of a
    /// sort is written before it is read).
    async fn alloc_pair<T: DType>(&self, n: usize) -> Result<[GpuRef<T>; 2], GpuError> {
        let (a, b) = futures::try_join!(self.alloc_uninit::<T>(n), self.alloc_uninit::<T>(n))?;
        Ok([a, b])
    }

    /// The launches that sort `keys` in place through their stable order (as the radix
    /// passes' payload), and the buffer they leave that order in.
    async fn keys_by_order<K: SortKey>(
        &self,
        keys: &GpuRef<K>,
        what: &str,
    ) -> Result<(KernelSequence, GpuRef<u32>), GpuError> {
        let (mut radix, mut index) =
            futures::try_join!(self.radix(keys, what, true), self.alloc_pair::<u32>(keys.len()))?;
        let sequence = radix.order(&mut index);
        let [order, _] = index;
        let unbits = K::unbits_call(radix.bits(), keys);
        Ok((radix.written_back(sequence, unbits), order))
    }

    /// A radix sort of (non-empty) `keys` up to its passes: the checks, its buffers, and
    /// the launches that write the keys' radix forms and count their digits. `what` names
    /// the call in errors. `sorts_keys`: the keys are to be sorted in place (not so for
    /// `argsort`), so keys that are their own radix forms are the passes' first input
    /// and last output.
    async fn radix<K: SortKey>(
        &self,
        keys: &GpuRef<K>,
        what: &str,
        sorts_keys: bool,
    ) -> Result<Radix<K::Bits>, GpuError> {
        let n = keys.len();
        if n >= (u32::MAX / 2) as usize {
            return Err(GpuError::Unsupported(format!(
                "{what} of {n} elements: sorts take fewer than 2^31 (32-bit indices)"
            )));
        }
        let tiles = radix_tiles(n);
        // Every buffer but the caller's keys from the scratch pool: at a million keys an
        // allocation's round trip would be a tenth of the sort. The look-back states are
        // the sort's own: zeroed when new; a reused one — only ever this kernel's, for as
        // many tiles — is told apart by the epoch.
        let own = K::as_bits(keys).filter(|_| sorts_keys);
        let bits = async {
            match &own {
                Some(k) => Ok((k.clone(), None)),
                None => self.scratch::<K::Bits>(n).await.map(|b| ((*b).clone(), Some(b))),
            }
        };
        let ((bits, bits_kept), spare, hist, status, no_floats_a, no_floats_b) = futures::try_join!(
            bits,
            self.scratch::<K::Bits>(n),
            self.scratch::<u32>(256 * K::Bits::PASSES as usize),
            self.owned_scratch::<u64>("radix sort", 1 + 256 * tiles),
            self.scratch::<f32>(1),
            self.scratch::<f32>(1),
        )?;
        let bufs = RadixBuffers {
            bits,
            spare: (*spare).clone(),
            hist: (*hist).clone(),
            status: (*status).clone(),
            no_floats: [(*no_floats_a).clone(), (*no_floats_b).clone()],
            kept: vec![
                Box::new(spare),
                Box::new(hist),
                Box::new(status),
                Box::new(no_floats_a),
                Box::new(no_floats_b),
                Box::new(bits_kept),
            ],
        };
        Ok(Radix::new(keys, sorts_keys, bufs))
    }
}
