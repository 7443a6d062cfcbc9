//! Device buffers the runtime's own library calls use for a moment — a reduction's
//! per-block partials, a scan's tile totals, a sort's spare keys and look-back states —
//! kept per `Device` for the next call.
//!
//! Why: each such call is a few awaited steps (allocate, launch, read back), and the
//! allocation is a round trip to the device's context actor (~10–20 µs on the H200) for
//! a buffer that the previous call just let go — at a million keys a sort's whole GPU
//! time is of that order. A buffer handed back here is taken by the next call of the
//! same element type and length instead. Reuse is safe without waiting: every use of a
//! buffer is ordered after the previous ones by its stream tracking, so a launch on a
//! reused buffer runs after whatever the last user enqueued on it, even if that user's
//! future was dropped half-way. A buffer of an older generation (the context was
//! rebuilt) is dropped instead of handed out. What is kept is bounded — per buffer
//! ([`KEEP_ONE`]) and in all ([`KEEP_TOTAL`]) — so a device never holds more than a
//! few tens of megabytes for it; the rest goes back to the device's memory pool.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::{DType, Device};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

/// Buffers above this many bytes are not kept: a call that large runs long enough that
/// an allocation's round trip is noise, and its memory is better returned to the pool.
const KEEP_ONE: usize = 16 << 20;

/// The most bytes a device keeps in all: a buffer that would take the kept total past
/// this is freed instead.
const KEEP_TOTAL: usize = 64 << 20;

/// Free buffers kept per element type and length: as many as calls in flight at once.
const PER_SIZE: usize = 4;

/// Kept buffers (each a `GpuRef<T>`, boxed) by element type, length and owner (see
/// [`Device::owned_scratch`]; "" for any).
type Kept = HashMap<(TypeId, usize, &'static str), Vec<Box<dyn Any + Send>>>;

/// Free scratch buffers by element type and length.
#[derive(Default)]
pub(crate) struct ScratchPool {
    free: Mutex<Free>,
}

/// The kept buffers and their bytes.
#[derive(Default)]
struct Free {
    kept: Kept,
    bytes: usize,
}

impl ScratchPool {
    fn take<T: DType>(&self, len: usize, owner: &'static str) -> Option<GpuRef<T>> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let boxed = free.kept.get_mut(&(TypeId::of::<T>(), len, owner))?.pop()?;
        let buf = boxed.downcast::<GpuRef<T>>().ok().map(|b| *b)?;
        free.bytes -= buf.num_bytes();
        Some(buf)
    }

    fn give_back<T: DType>(&self, buf: GpuRef<T>, owner: &'static str) {
        let size = buf.num_bytes();
        if buf.is_view() || size > KEEP_ONE {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.bytes + size > KEEP_TOTAL {
            return;
        }
        let list = free.kept.entry((TypeId::of::<T>(), buf.len(), owner)).or_default();
        if list.len() < PER_SIZE {
            list.push(Box::new(buf));
            free.bytes += size;
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

/// A scratch buffer, back to its device's [`ScratchPool`] when dropped.
pub(crate) struct Scratch<T: DType> {
    buf: Option<GpuRef<T>>,
    pool: Arc<ScratchPool>,
    owner: &'static str,
}

impl<T: DType> std::ops::Deref for Scratch<T> {
    type Target = GpuRef<T>;
    fn deref(&self) -> &GpuRef<T> {
        self.buf.as_ref().expect("present until dropped")
    }
}

impl<T: DType> std::ops::DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut GpuRef<T> {
        self.buf.as_mut().expect("present until dropped")
    }
}

impl<T: DType> Drop for Scratch<T> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.give_back(buf, self.owner);
        }
    }
}

impl Device {
    /// A scratch buffer of `len` elements (contents unspecified): a kept one of this
    /// generation, else a new allocation, not zeroed.
    pub(crate) async fn scratch<T: DType>(&self, len: usize) -> Result<Scratch<T>, GpuError> {
        self.owned_scratch("", len).await
    }

    /// As [`Device::scratch`], kept apart for `owner`: a buffer whose contents its next
    /// user relies on (zeros when new, else what the same owner's kernels left: a float
    /// scan's look-back states, told apart by their epoch) is never handed to another.
    pub(crate) async fn owned_scratch<T: DType>(
        &self,
        owner: &'static str,
        len: usize,
    ) -> Result<Scratch<T>, GpuError> {
        let pool = self.scratch.clone();
        let generation = self.state().generation;
        let buf = match pool.take::<T>(len, owner).filter(|b| b.generation() == generation) {
            Some(b) => b,
            // Any caller's buffer comes uninitialized: its contents are unspecified
            // anyway (a kept one holds its last user's), and zeroing costs a pass over
            // it — at 64M keys a sort's spare buffers are 768 MiB of memset. An owned
            // one starts as zeros, which its owner relies on.
            None if owner.is_empty() => self.alloc_uninit::<T>(len).await?,
            None => self.alloc::<T>(len).await?,
        };
        Ok(Scratch {
            buf: Some(buf),
            pool,
            owner,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::actor::ActorSystem;
    use crate::device::test_hooks::TestHooks;
    use crate::device::{Device, DeviceConfig};

    #[tokio::test]
    async fn a_buffer_comes_back_for_the_next_call_of_its_type_and_length() {
        let sys = ActorSystem::new("scratch");
        let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
        let id = {
            let s = d.scratch::<f64>(100).await.unwrap();
            s.id()
        };
        assert_eq!(d.scratch::<f64>(100).await.unwrap().id(), id, "reused");
        assert_ne!(d.scratch::<f32>(100).await.unwrap().id(), id, "another type");
        assert_ne!(d.scratch::<f64>(101).await.unwrap().id(), id, "another length");
        // Held at once, two calls get two buffers.
        let (a, b) = (
            d.scratch::<f64>(100).await.unwrap(),
            d.scratch::<f64>(100).await.unwrap(),
        );
        assert_ne!(a.id(), b.id());
        drop((a, b));
        // After a rebuild the kept buffers are stale: new ones are made.
        d.rebuild().await.unwrap();
        let fresh = d.scratch::<f64>(100).await.unwrap();
        assert_ne!(fresh.id(), id);
        assert_eq!(fresh.generation(), d.state().generation);
        // A sort's spare keys at a million are kept; buffers past `KEEP_ONE` are not.
        let spare = d.scratch::<u32>(1 << 20).await.unwrap().id();
        assert_eq!(d.scratch::<u32>(1 << 20).await.unwrap().id(), spare);
        let big = d.scratch::<f64>((super::KEEP_ONE / 8) + 1).await.unwrap().id();
        assert_ne!(d.scratch::<f64>((super::KEEP_ONE / 8) + 1).await.unwrap().id(), big);
        sys.shutdown().await;
    }

    #[tokio::test]
    async fn what_is_kept_stays_within_its_total() {
        let sys = ActorSystem::new("scratch-total");
        let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
        let len = super::KEEP_ONE / 4; // one KEEP_ONE of u32s each
        let held: Vec<_> = futures::future::try_join_all((0..super::PER_SIZE).map(|_| d.scratch::<u32>(len)))
            .await
            .unwrap();
        let more: Vec<_> = futures::future::try_join_all((0..super::PER_SIZE).map(|_| d.scratch::<u32>(len - 1)))
            .await
            .unwrap();
        drop(held);
        drop(more);
        let kept = d.scratch.kept_bytes();
        assert!(kept <= super::KEEP_TOTAL, "{kept} bytes kept");
        assert_eq!(kept, super::KEEP_TOTAL, "kept until the total is reached");
        // Taking one back lowers the count by its bytes.
        let one = d.scratch::<u32>(len).await.unwrap();
        assert_eq!(d.scratch.kept_bytes(), kept - one.num_bytes());
        sys.shutdown().await;
    }
}
