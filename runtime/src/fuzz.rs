//! Fuzzing of every decoder that reads bytes from outside the process: worker frames
//! and the wire encoding of requests (as a worker decodes them, bulk descriptors
//! included, and as a replay decodes a journal's), the world's rendezvous frames, and
//! kernel-cache entries. Each runs on arbitrary inputs and on inputs shaped like real
//! ones, and must end in a value or a typed error: no panic, no abort, and no single
//! allocation above [`CAP`] (the test binary's allocator records the largest one made
//! on the fuzzing thread).
//!
//! `proptest` on stable, bounded in time: 20 000 inputs per decoder by default
//! (`PROPTEST_CASES` sets another count), a few seconds each on two cores.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use crate::device::route::Routed;
use crate::wire::arena::Arena;
use crate::wire::journal::{Book, JournalFrame};
use crate::wire::{Bulk, Reader, Side, WorkerCtx};

/// The largest single allocation a decoder may make for an input of at most
/// [`MAX_INPUT`] bytes (the shared arenas below are 1 MiB: a bulk descriptor may name
/// all of one).
const CAP: usize = 2 << 20;

/// The longest input tried.
const MAX_INPUT: usize = 4096;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest request made on a thread while it is
/// watched.
struct Tracking;

impl Tracking {
    fn note(size: usize) {
        let _ = WATCHING.try_with(|w| {
            if w.get() {
                let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
            }
        });
    }
}

// SAFETY: every call is passed to the system allocator unchanged; the bookkeeping only
// reads and writes thread-local cells of its own, which allocate nothing.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Tracking::note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Tracking::note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Tracking::note(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Runs `f` watching this thread's allocations; fails if one exceeded [`CAP`].
fn within_cap<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, TestCaseError> {
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    let largest = LARGEST.with(Cell::get);
    prop_assert!(largest <= CAP, "{what}: an allocation of {largest} bytes (cap {CAP})");
    Ok(r)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Arbitrary bytes, and bytes that start like a real encoding (small counts, a tag of
/// the right width) so that decoders get past their first checks.
fn inputs() -> impl Strategy<Value = Vec<u8>> {
    let shaped = (
        0u16..40,
        proptest::collection::vec(prop_oneof![Just(0u64), Just(1), 0u64..64, any::<u64>()], 0..12),
        proptest::collection::vec(any::<u8>(), 0..256),
    )
        .prop_map(|(tag, words, tail)| {
            let mut b = tag.to_le_bytes().to_vec();
            for w in words {
                b.extend_from_slice(&w.to_le_bytes());
            }
            b.extend_from_slice(&tail);
            b
        });
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..MAX_INPUT), shaped]
}

/// A worker's decoding state over 1 MiB arenas, made once per test.
fn worker() -> WorkerCtx {
    let arena = |name| Arena::create(name, 1 << 20).expect("a shared arena");
    WorkerCtx {
        buffers: Mutex::new(Default::default()),
        events: Mutex::new(Default::default()),
        graphs: Mutex::new(Default::default()),
        modules: Mutex::new(Default::default()),
        requests: arena("fuzz-requests"),
        replies: arena("fuzz-replies"),
        pinned: arena("fuzz-pinned"),
    }
}

proptest! {
    #![proptest_config(config())]

    /// The worker link's frames: `[u64 length][kind][u64 id][payload]`.
    #[test]
    fn worker_frames(bytes in inputs()) {
        within_cap("frame::read", || {
            let mut r = &bytes[..];
            while crate::wire::frame::read(&mut r).is_ok() {}
        })?;
    }

    /// A request as a worker decodes it: the origin, then the routed message — every
    /// actor's generated decoder, launch arguments, bulk descriptors into the arenas.
    #[test]
    fn requests_in_a_worker(bytes in inputs()) {
        thread_local!(static CTX: Arc<WorkerCtx> = Arc::new(worker()));
        CTX.with(|ctx| within_cap("Routed::decode (worker)", || {
            let mut r = Reader::new(&bytes, Side::Worker(ctx));
            let _ = r.take_u64().and_then(|_| Routed::decode(&mut r));
        }))?;
    }

    /// Bulk element data as a worker reads it: inline or a range of its arena.
    #[test]
    fn bulk_descriptors(bytes in inputs()) {
        thread_local!(static CTX: Arc<WorkerCtx> = Arc::new(worker()));
        CTX.with(|ctx| within_cap("Bulk", || {
            let mut r = Reader::new(&bytes, Side::Worker(ctx));
            let _ = Bulk::take(&mut r).and_then(|b| b.into_vec::<f64>());
        }))?;
    }

    /// A journal's request frame as a replay decodes it.
    #[test]
    fn journal_frames(bytes in inputs(), seq in any::<u64>()) {
        let book = Book::replaying();
        within_cap("Routed::decode (journal)", || {
            let frame = JournalFrame::request(&book, seq);
            let _ = Routed::decode(&mut Reader::new(&bytes, Side::Journal(&frame)));
        })?;
    }

    /// A journal's lines as text.
    #[test]
    fn journal_lines(text in "\\PC{0,512}") {
        within_cap("journal line", || {
            let _ = serde_json::from_str::<crate::wire::journal::Line>(&text);
        })?;
    }

    /// The rendezvous's frames, whatever limit the reader sets for their payloads.
    #[test]
    fn rendezvous_frames(bytes in inputs(), limit in prop_oneof![Just(0u64), 0u64..4096, Just(u64::MAX)]) {
        within_cap("read_frame", || {
            let mut r = &bytes[..];
            let read = crate::multi_device::remote::read_frame(&mut r, |_| limit);
            let _ = futures::executor::block_on(read);
        })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: config().cases / 10, ..config() })]

    /// Kernel-cache entries with arbitrary contents: a miss or the image put there, never
    /// something else (each case writes a file, so a tenth as many).
    #[test]
    fn kernel_cache_entries(bytes in proptest::collection::vec(any::<u8>(), 0..MAX_INPUT)) {
        thread_local!(static CACHE: crate::nvrtc_cache::KernelCache = {
            let dir = std::env::temp_dir().join(format!("atomr-fuzz-cache-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            crate::nvrtc_cache::KernelCache::open(dir).expect("a cache")
        });
        CACHE.with(|c| within_cap("KernelCache::get", || -> Result<(), TestCaseError> {
            let path = c.dir().join("fuzzed.bin");
            std::fs::write(&path, &bytes).expect("write an entry");
            if let Some(image) = c.get("fuzzed") {
                // Only a well-formed entry is accepted, and its image is what it holds.
                prop_assert!(bytes.len() > 40 && bytes.ends_with(&image));
            }
            Ok(())
        }))??;
    }
}
