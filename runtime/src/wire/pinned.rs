//! The pinned arena of an isolated device: one shared-memory arena that the user process
//! and every worker of the device map, carved into page-aligned ranges — the memory of
//! the device's pinned buffers (`host/shared.rs` types them). The user fills or reads a
//! buffer in place; the worker page-locks the range it copies through
//! (`cuMemHostRegister`), so an upload or a download is one DMA straight from or into
//! the user's memory — no copy through the request arena, none in the worker.
//!
//! The arena belongs to the device, not to a worker: a new worker (after a fault) maps
//! the same one, so a buffer outlives the worker it was last used with. A range is held
//! by the user's buffer, and by each request carrying it until its reply hands it back;
//! with its last holder it goes to the arena's cache of free ranges (by length, up to a
//! byte budget, as the in-process pinned pool keeps buffers: the worker's page-locking of
//! a range is then reused), or back to the arena.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::arena::Arena;
use crate::error::GpuError;

/// Ranges start at page boundaries: the worker page-locks each range on its own, and two
/// ranges sharing a page could not both be registered.
const PAGE: usize = 4096;

/// `bytes` rounded up to whole pages.
fn pages(bytes: usize) -> Option<usize> {
    bytes.max(1).checked_next_multiple_of(PAGE)
}

/// The user-process side of an isolated device's pinned arena: the ranges handed out
/// and the free ones kept for reuse.
pub(crate) struct PinnedArena {
    arena: Arc<Arena>,
    /// Ranges alive, by offset: a reply naming one hands back the range its request
    /// carried.
    live: Mutex<HashMap<usize, Weak<SharedRange>>>,
    /// Free ranges by length in whole pages (their offsets), and the bytes they hold.
    cache: Mutex<(HashMap<usize, Vec<usize>>, u64)>,
    max_cached_bytes: u64,
}

impl PinnedArena {
    /// A new arena of `bytes` (sparse: pages exist once touched) keeping up to
    /// `max_cached_bytes` of free ranges for reuse.
    pub(crate) fn create(bytes: usize, max_cached_bytes: u64) -> Result<Arc<Self>, GpuError> {
        Ok(Arc::new(PinnedArena {
            arena: Arena::create_aligned("atomr-pinned", bytes, PAGE)?,
            live: Mutex::new(HashMap::new()),
            cache: Mutex::new((HashMap::new(), 0)),
            max_cached_bytes,
        }))
    }

    /// The arena's descriptor (every worker of the device inherits it).
    #[cfg(linux)]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        self.arena.fd()
    }

    /// A range of `bytes`, contents unspecified (zeros, or what an earlier buffer left
    /// there): a free one of that length, else a new one; `OutOfMemory` when the arena
    /// has no room.
    pub(crate) fn lease(self: &Arc<Self>, bytes: usize) -> Result<Arc<SharedRange>, GpuError> {
        let span = pages(bytes).ok_or(GpuError::OutOfMemory {
            requested_bytes: bytes as u64,
        })?;
        let cached = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let offset = cache.0.get_mut(&span).and_then(Vec::pop);
            if offset.is_some() {
                cache.1 -= span as u64;
            }
            offset
        };
        let offset = match cached {
            Some(offset) => offset,
            None => {
                // Free ranges of other lengths may be what stands in the way: back to
                // the arena with them, then once more.
                let lease = match self.arena.lease(span) {
                    Some(l) => Some(l),
                    None if self.flush_cache() => self.arena.lease(span),
                    None => None,
                };
                let lease = lease.ok_or(GpuError::OutOfMemory {
                    requested_bytes: bytes as u64,
                })?;
                lease.keep().0 // returned by the range's `Drop`
            }
        };
        let range = Arc::new(SharedRange {
            arena: self.arena.clone(),
            offset,
            bytes,
            owner: Some(self.clone()),
        });
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(offset, Arc::downgrade(&range));
        Ok(range)
    }

    /// The range at `offset` of `bytes`, which a request in flight holds: what its reply
    /// names.
    pub(crate) fn find(&self, offset: usize, bytes: usize) -> Result<Arc<SharedRange>, GpuError> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(&offset)
            .and_then(Weak::upgrade)
            .filter(|r| r.bytes == bytes)
            .ok_or_else(|| {
                GpuError::invalid(format!(
                    "the worker named pinned range {offset}+{bytes}, which no request of this device holds"
                ))
            })
    }

    /// Whether `range` is one of this arena's.
    pub(crate) fn owns(&self, range: &SharedRange) -> bool {
        Arc::ptr_eq(&self.arena, &range.arena)
    }

    /// Returns every cached free range to the arena; whether there was any.
    fn flush_cache(&self) -> bool {
        let drained: Vec<(usize, Vec<usize>)> = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.1 = 0;
            cache.0.drain().collect()
        };
        let any = drained.iter().any(|(_, offsets)| !offsets.is_empty());
        for (span, offsets) in drained {
            for offset in offsets {
                self.arena.release(offset, span);
            }
        }
        any
    }

    /// Takes back a range no one holds: into the cache while it has room, else to the
    /// arena.
    fn give_back(&self, offset: usize, bytes: usize) {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).remove(&offset);
        // A range's length was checked when it was leased.
        let Some(span) = pages(bytes) else { return };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.1 + span as u64 <= self.max_cached_bytes {
            cache.1 += span as u64;
            cache.0.entry(span).or_default().push(offset);
        } else {
            drop(cache);
            self.arena.release(offset, span);
        }
    }
}

/// One range of a device's pinned arena. In the user process it returns to the arena
/// when its last holder drops it; in a worker it is a view of the worker's mapping.
pub(crate) struct SharedRange {
    arena: Arc<Arena>,
    offset: usize,
    bytes: usize,
    /// The user process's arena the range returns to (`None` in a worker).
    owner: Option<Arc<PinnedArena>>,
}

impl SharedRange {
    /// A range a user process named, in a worker's mapping `arena` of it: checked to
    /// start at a page and to lie inside, with the rest of its last page.
    pub(crate) fn in_worker(arena: &Arc<Arena>, offset: usize, bytes: usize) -> Result<Arc<Self>, GpuError> {
        if offset % PAGE != 0 {
            return Err(GpuError::invalid(format!(
                "pinned range at {offset} does not start at a page"
            )));
        }
        let span = pages(bytes).ok_or_else(|| GpuError::invalid(format!("a pinned range of {bytes} bytes")))?;
        arena.check(offset, span)?;
        Ok(Arc::new(SharedRange {
            arena: arena.clone(),
            offset,
            bytes,
            owner: None,
        }))
    }

    /// Where the range starts in the arena, and its length in bytes.
    pub(crate) fn place(&self) -> (usize, usize) {
        (self.offset, self.bytes)
    }

    /// Whether this is the user process's side of the range (a worker's is a view).
    pub(crate) fn in_user_process(&self) -> bool {
        self.owner.is_some()
    }

    /// The range's first byte in this process's mapping (page-aligned), for reading.
    pub(crate) fn ptr(&self) -> *const u8 {
        // SAFETY: the offset lies inside the mapping (handed out by the arena, or
        // checked by `in_worker`).
        unsafe { self.arena.ptr().add(self.offset) }
    }

    /// The range's first byte in this process's mapping, for writing.
    pub(crate) fn ptr_mut(&self) -> *mut u8 {
        // SAFETY: as in `ptr`.
        unsafe { self.arena.ptr_mut().add(self.offset) }
    }

    /// The whole pages the range spans in this process's mapping (the arena hands out
    /// whole pages): what a worker page-locks.
    pub(crate) fn pages(&self) -> (*const u8, usize) {
        (self.ptr(), pages(self.bytes).expect("checked when the range was made"))
    }
}

impl Drop for SharedRange {
    fn drop(&mut self) {
        if let Some(owner) = &self.owner {
            owner.give_back(self.offset, self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_pages_found_while_held_and_reused_once_dropped() {
        let arena = PinnedArena::create(1 << 20, 8192).unwrap();
        let a = arena.lease(4000).unwrap();
        let b = arena.lease(80).unwrap();
        let (oa, ba) = a.place();
        let (ob, _) = b.place();
        assert_eq!((oa % PAGE, ob % PAGE, ba), (0, 0, 4000));
        assert_ne!(oa, ob);
        assert!(a.in_user_process());
        let found = arena.find(oa, ba).unwrap();
        assert!(Arc::ptr_eq(&found, &a));
        drop(found);
        assert!(arena.find(oa, ba + 1).is_err(), "another length is another range");
        // A worker's view of the range is the same memory.
        // SAFETY: the range holds 4000 bytes, this process's only user of them.
        unsafe { a.ptr_mut().write_bytes(7, 4000) };
        let view = SharedRange::in_worker(&arena.arena, oa, ba).unwrap();
        assert!(!view.in_user_process());
        // SAFETY: as above.
        assert_eq!(unsafe { *view.ptr().add(3999) }, 7);
        drop(view);
        drop(a);
        assert!(arena.find(oa, ba).is_err(), "dropped: gone");
        let c = arena.lease(4096).unwrap();
        assert_eq!(c.place().0, oa, "a free range of its length is reused");
        // Over the cache's budget: back to the arena.
        let big = arena.lease(3 * PAGE).unwrap();
        let at = big.place().0;
        drop(big);
        assert_eq!(arena.lease(PAGE).unwrap().place().0, at, "carved anew");
        drop((b, c));
        assert!(matches!(arena.lease(2 << 20), Err(GpuError::OutOfMemory { .. })));
        // Cached free ranges give way to a lease the arena could not make otherwise.
        let whole = arena.lease((1 << 20) - PAGE).unwrap();
        drop(whole);
        assert!(arena.lease(3 * PAGE).is_ok(), "the cached range returned to the arena");
    }

    #[test]
    fn a_worker_checks_the_ranges_it_is_named() {
        let arena = PinnedArena::create(1 << 16, 0).unwrap();
        let a = &arena.arena;
        assert!(SharedRange::in_worker(a, 100, 8).is_err(), "not at a page");
        assert!(SharedRange::in_worker(a, 1 << 16, 8).is_err(), "past the end");
        assert!(SharedRange::in_worker(a, (1 << 16) - PAGE, PAGE + 1).is_err());
        assert!(SharedRange::in_worker(a, usize::MAX - PAGE + 1, 1).is_err());
        assert!(SharedRange::in_worker(a, (1 << 16) - PAGE, PAGE).is_ok());
    }
}
