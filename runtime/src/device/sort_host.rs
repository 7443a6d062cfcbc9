//! The CPU device's sort of many keys, on the host. The radix sort's `#[kernel]`s run
//! on the CPU device through the emulation, whose warp votes make a million keys take
//! seconds; past [`HOST_SORT_ABOVE`] keys the CPU device sorts as its other libraries
//! compute (BLAS through the `gemm` crate, FFT through `rustfft`): natively, with the
//! same result — the keys' radix forms (the order the kernels sort by: -0 as +0, NaNs
//! last) ordered by a stable sort. Fewer keys still go through the kernels, which the
//! CPU device's tests thereby check where no GPU is.

use super::sort_api::SortKey;
use crate::backend::state::BackendKind;
use crate::device::{DType, Device};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

/// On the CPU device, sorts of more keys than this run on the host.
pub(super) const HOST_SORT_ABOVE: usize = 1 << 16;

impl Device {
    /// Whether a sort of `n` keys runs on the host: the CPU device, more than
    /// [`HOST_SORT_ABOVE`] keys.
    pub(super) fn sorts_on_host(&self, n: usize) -> bool {
        n > HOST_SORT_ABOVE && self.state().info.is_some_and(|i| i.backend == BackendKind::Cpu)
    }

    /// The stable ascending order of `keys` (their radix forms), computed on the host —
    /// on a blocking thread: a million keys take tens of milliseconds, which would stall
    /// the caller's runtime worker and every task queued behind it.
    pub(super) async fn host_order<K: SortKey>(&self, keys: &GpuRef<K>) -> Result<Vec<u32>, GpuError> {
        let keys = self.download(keys).await?;
        tokio::task::spawn_blocking(move || {
            let forms: Vec<u64> = keys.into_iter().map(K::radix_form).collect();
            let mut order: Vec<u32> = (0..forms.len() as u32).collect();
            order.sort_by_key(|&i| forms[i as usize]); // stable: equal keys keep their order
            order
        })
        .await
        .map_err(|e| GpuError::Internal(format!("host sort task failed: {e}")))
    }

    /// `buf`'s elements put in `order` (element i becomes the one at `order[i]`).
    pub(super) async fn host_permute<T: DType>(&self, buf: &GpuRef<T>, order: &[u32]) -> Result<(), GpuError> {
        let data = self.download(buf).await?;
        let sorted: Vec<T> = order.iter().map(|&i| data[i as usize]).collect();
        self.write_slice(buf, &sorted).await
    }

    /// [`Device::sort_by_key`] on the host (`values` as `keys` when there are none).
    pub(super) async fn host_sort<K: SortKey, V: DType>(
        &self,
        keys: &GpuRef<K>,
        values: Option<&GpuRef<V>>,
    ) -> Result<(), GpuError> {
        let order = self.host_order(keys).await?;
        self.host_permute(keys, &order).await?;
        match values {
            Some(v) => self.host_permute(v, &order).await,
            None => Ok(()),
        }
    }
}
