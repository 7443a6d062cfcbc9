//! `PinnedPool`: a device's free pinned host buffers, kept for reuse up to a byte budget,
//! and made ahead of first use when the configuration asks.
//!
//! Pinning is a driver call that locks pages (milliseconds for the 8 MiB staging buffers
//! of `write_slice` and owned-`Vec` copies), so a buffer returns here when dropped. Free
//! buffers of the built-in element types — every bit pattern a value
//! (`DTypeBase::EVERY_BIT_PATTERN`) — are kept by size in bytes, so one freed by an `f32`
//! copy serves the next `f64` one of the same size; buffers of any other type are kept
//! for that type alone. `DeviceConfig::pinned_initial_buffers` pins staging buffers when
//! the device starts, so that not even the first large copy pins.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{HostMem, PinnedBuf};
use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// Bytes per staging buffer of the copies from and to ordinary memory
/// (`device/host_copies.rs`) — large enough that a transfer's fixed cost (~10 µs) is
/// small against its 0.15 ms at 55 GB/s, small enough that the first transfer starts
/// early — and the size of the buffers `DeviceConfig::pinned_initial_buffers` makes.
pub(crate) const STAGING_BYTES: usize = 8 << 20;

/// Where a free buffer is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// Any built-in element type: stored as bytes (`HostMem<u8>`).
    Bytes(usize),
    /// Any other: its type and length.
    Typed(TypeId, usize),
}

impl Key {
    fn of<T: DTypeBase>(len: usize) -> Key {
        if T::EVERY_BIT_PATTERN {
            Key::Bytes(len * std::mem::size_of::<T>())
        } else {
            Key::Typed(TypeId::of::<T>(), len)
        }
    }
}

/// Free buffers by key, and the bytes they hold.
#[derive(Default)]
struct Free {
    lists: HashMap<Key, Vec<Box<dyn Any + Send>>>,
    bytes: u64,
}

/// Free buffers, by size (or element type and length), up to a byte budget.
pub(crate) struct PinnedPool {
    free: Mutex<Free>,
    max_cached_bytes: u64,
}

impl PinnedPool {
    pub(crate) fn new(max_cached_bytes: u64) -> Arc<Self> {
        Arc::new(PinnedPool {
            free: Mutex::new(Free::default()),
            max_cached_bytes,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Free> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` elements of `T`: a free one of the pool (its contents zeroed
    /// when `zeroed`, else what its last user left — valid values all the same: a
    /// buffer changes type only between types of which every bit pattern is a value),
    /// or a new one from `make` (zeroed when asked).
    pub(crate) fn buffer<T: DTypeBase>(
        self: &Arc<Self>,
        len: usize,
        zeroed: bool,
        make: impl FnOnce() -> Result<HostMem<T>, GpuError>,
    ) -> Result<PinnedBuf<T>, GpuError> {
        let mem = match self.take::<T>(len) {
            Some(mut mem) => {
                if zeroed {
                    mem.fill_default()?;
                }
                mem
            }
            None => make()?,
        };
        Ok(PinnedBuf::new(mem, self.clone()))
    }

    /// A cached buffer of exactly `len` elements of `T` (or, for a built-in type, of
    /// their size in bytes), if one is free.
    pub(crate) fn take<T: DTypeBase>(&self, len: usize) -> Option<HostMem<T>> {
        let key = Key::of::<T>(len);
        let boxed = {
            let mut free = self.lock();
            let boxed = free.lists.get_mut(&key)?.pop()?;
            free.bytes -= (len * std::mem::size_of::<T>()) as u64;
            boxed
        };
        match key {
            Key::Bytes(_) => boxed.downcast::<HostMem<u8>>().ok()?.recast::<T>().ok(),
            Key::Typed(..) => boxed.downcast::<HostMem<T>>().ok().map(|b| *b),
        }
    }

    /// Keeps a dropped buffer, within the budget (else it is freed — unpinned — here).
    pub(crate) fn give_back<T: DTypeBase>(&self, mem: HostMem<T>) {
        let len = mem.len();
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        let key = Key::of::<T>(len);
        let boxed: Box<dyn Any + Send> = match key {
            Key::Bytes(_) => match mem.recast::<u8>() {
                Ok(b) => Box::new(b),
                Err(_) => return, // never pooled (an isolated device's range)
            },
            Key::Typed(..) => Box::new(mem),
        };
        let mut free = self.lock();
        if free.bytes + bytes > self.max_cached_bytes {
            return;
        }
        free.bytes += bytes;
        free.lists.entry(key).or_default().push(boxed);
    }

    /// Pins staging buffers (`STAGING_BYTES` each, from `make`) until `count` of them
    /// are free, within the budget: `DeviceConfig::pinned_initial_buffers`, at each
    /// (re)start of the device.
    pub(crate) fn prefill(
        &self,
        count: usize,
        mut make: impl FnMut() -> Result<HostMem<u8>, GpuError>,
    ) -> Result<(), GpuError> {
        let key = Key::Bytes(STAGING_BYTES);
        let have = self.lock().lists.get(&key).map_or(0, Vec::len);
        for _ in have..count {
            self.give_back(make()?);
        }
        Ok(())
    }

    /// Bytes held by free buffers.
    pub(crate) fn cached_bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::{HostMem, PinnedPool, STAGING_BYTES};
    use crate::host::PlainMem;

    #[test]
    fn a_buffer_freed_as_one_builtin_type_serves_another_of_its_size() {
        let pool = PinnedPool::new(1 << 30);
        let mut b = pool
            .buffer::<f32>(1024, true, || Ok(HostMem::Plain(PlainMem::zeroed(1024))))
            .unwrap();
        b.as_mut_slice().unwrap().fill(1.5);
        drop(b);
        assert_eq!(pool.cached_bytes(), 4096);
        // 512 f64s are the same 4 KiB: reused (zeroed, as asked), not made.
        let d = pool.buffer::<f64>(512, true, || panic!("made anew")).unwrap();
        assert_eq!(pool.cached_bytes(), 0);
        assert!(d.as_slice().unwrap().iter().all(|v| *v == 0.0));
        // Another size is made anew.
        let made = std::cell::Cell::new(false);
        let _ = pool
            .buffer::<f64>(100, false, || {
                made.set(true);
                Ok(HostMem::Plain(PlainMem::zeroed(100)))
            })
            .unwrap();
        assert!(made.get());
    }

    #[test]
    fn prefill_tops_up_to_the_count_within_the_budget() {
        let pool = PinnedPool::new(3 * STAGING_BYTES as u64);
        let made = std::cell::Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            Ok(HostMem::Plain(PlainMem::zeroed(STAGING_BYTES)))
        };
        pool.prefill(2, make).unwrap();
        assert_eq!((made.get(), pool.cached_bytes()), (2, 2 * STAGING_BYTES as u64));
        pool.prefill(2, make).unwrap();
        assert_eq!(made.get(), 2, "already there: nothing made");
        let f32s = pool.take::<f32>(STAGING_BYTES / 4).expect("a staging buffer as f32s");
        assert_eq!(f32s.len(), STAGING_BYTES / 4);
        pool.give_back(f32s);
        assert_eq!(pool.cached_bytes(), 2 * STAGING_BYTES as u64);
    }
}
