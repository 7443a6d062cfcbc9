//! The replay journal's side of the wire: a request is journalled as the very frame an
//! isolated device's worker would receive — written by the same generated
//! [`WireMessage`](super::WireMessage) code — with its buffers named by journal ids
//! instead of worker ids, and its answer as a BLAKE3 hash of the encoded reply. So every
//! operation that crosses to a worker is journalled, with nothing listed by hand.
//!
//! A buffer's journal id is `seq << 16 | k`: the `k`-th buffer in the answer to request
//! `seq`. That is the same in a recording (where answers arrive in any order) and in its
//! replay (one request at a time), so ids inside answers hash alike.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{Side, Wire, Writer};
use crate::actor::Reply;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

/// The journal's format name, on its first line.
pub const FORMAT: &str = "atomr-accel-cuda journal";

/// The journal's format version: 5 adds the FP8 element types (renumbering the
/// per-dtype messages after them), matmuls and the `eigh` options; 4 GEMV strides, 3
/// writes each buffer with its window (views), 2 journals wire frames, 1 listed
/// operations by hand.
pub const VERSION: u32 = 5;

/// One line of a journal (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Line {
    /// The first line.
    Begin {
        format: String,
        version: u32,
        backend: String,
    },
    /// A request, as its wire frame (base64).
    Request {
        seq: u64,
        /// `Actor::handler<dtype>`, for a reader of the journal.
        what: String,
        /// Whether a replay compares the answer bit for bit (not for answers that
        /// report the device's state, such as free memory).
        check: bool,
        frame: String,
    },
    /// A request that could not be journalled (a pinned host buffer, a buffer from
    /// before the recording, a raw module, an event, a graph): it ran, but a replay
    /// stops here.
    Unjournalled { seq: u64, what: String, why: String },
    /// The answer to request `seq`: whether it succeeded and the hash of its encoding.
    Answer { seq: u64, ok: bool, blake3: String },
    /// Buffers no handle names any more: a replay frees them too.
    Free { ids: Vec<u64> },
}

impl Line {
    /// The line as JSON text.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("journal lines are plain data")
    }
}

/// What the generated `WireMessage::journal` reports about one request.
pub struct Journalled {
    /// `Actor::handler<dtype>`.
    pub what: &'static str,
    /// Whether a replay compares the answer bit for bit (`#[handler(volatile)]` says no).
    pub checked: bool,
    /// Whether the request could be written (why not, if not).
    pub written: Result<(), GpuError>,
}

/// A buffer the journal has named.
enum Held {
    /// Replaying: the buffer itself (a boxed `GpuRef<T>`), kept until the journal frees it.
    Buffer(Box<dyn std::any::Any + Send + Sync>, u64),
    /// Recording: whether any handle to it lives (the journal must not keep it alive).
    Probe(Box<dyn Fn() -> bool + Send + Sync>, u64),
}

impl Held {
    fn live_id(&self) -> u64 {
        match self {
            Held::Buffer(_, id) | Held::Probe(_, id) => *id,
        }
    }
}

/// The buffers a journal names, both ways.
pub(crate) struct Book {
    /// Buffer id in this process → journal id.
    names: HashMap<u64, u64>,
    /// Journal id → the buffer.
    held: HashMap<u64, Held>,
    /// Replaying (keep buffers) or recording (probe them).
    replaying: bool,
    /// Recording: sweep for dropped buffers once this many are held.
    sweep_at: usize,
}

impl Book {
    /// The book of a recording.
    pub(crate) fn recording() -> Mutex<Book> {
        Mutex::new(Book {
            names: HashMap::new(),
            held: HashMap::new(),
            replaying: false,
            sweep_at: 64,
        })
    }

    /// The book of a replay.
    pub(crate) fn replaying() -> Mutex<Book> {
        Mutex::new(Book {
            replaying: true,
            ..Book::recording().into_inner().expect("fresh")
        })
    }

    /// Recording: forgets the buffers no handle names any more and returns their ids
    /// (at most once per doubling of the book, so the cost per request stays constant).
    fn sweep(&mut self, force: bool) -> Vec<u64> {
        if !force && self.held.len() < self.sweep_at {
            return vec![];
        }
        let dead: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, h)| matches!(h, Held::Probe(alive, _) if !alive()))
            .map(|(id, _)| *id)
            .collect();
        for id in &dead {
            if let Some(h) = self.held.remove(id) {
                self.names.remove(&h.live_id());
            }
        }
        self.sweep_at = (2 * self.held.len()).max(64);
        dead
    }

    /// Replaying: drops the buffers a recording saw go.
    pub(crate) fn free(&mut self, ids: &[u64]) {
        for id in ids {
            if let Some(h) = self.held.remove(id) {
                self.names.remove(&h.live_id());
            }
        }
    }
}

/// The journal's view of one frame: which request it belongs to and whether it is the
/// request or its answer. What [`Side::Journal`] carries.
pub(crate) struct JournalFrame<'a> {
    book: &'a Mutex<Book>,
    seq: u64,
    answer: bool,
    next: AtomicU32,
}

impl<'a> JournalFrame<'a> {
    /// The frame of request `seq`.
    pub(crate) fn request(book: &'a Mutex<Book>, seq: u64) -> Self {
        JournalFrame {
            book,
            seq,
            answer: false,
            next: AtomicU32::new(0),
        }
    }

    /// The frame of the answer to request `seq`.
    pub(crate) fn answer(book: &'a Mutex<Book>, seq: u64) -> Self {
        JournalFrame {
            answer: true,
            ..JournalFrame::request(book, seq)
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The journal id of `r`: known already, or (in an answer) named now.
    pub(crate) fn name<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<u64, GpuError> {
        let mut book = self.book();
        if let Some(&id) = book.names.get(&r.id()) {
            return Ok(id);
        }
        if !self.answer {
            return Err(GpuError::Unsupported(format!(
                "buffer #{} was made before the recording began or by another device, so the journal cannot \
                 name it",
                r.id()
            )));
        }
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if k > u16::MAX as u32 {
            return Err(GpuError::Unsupported(
                "an answer with more than 65536 buffers cannot be journalled".into(),
            ));
        }
        let id = (self.seq << 16) | k as u64;
        let held = if book.replaying {
            Held::Buffer(Box::new(r.clone()), r.id())
        } else {
            Held::Probe(Box::new(r.liveness()), r.id())
        };
        book.names.insert(r.id(), id);
        book.held.insert(id, held);
        Ok(id)
    }

    /// Replaying: the buffer with journal id `id`.
    pub(crate) fn lookup<T: DTypeBase>(&self, id: u64) -> Result<GpuRef<T>, GpuError> {
        let book = self.book();
        match book.held.get(&id) {
            Some(Held::Buffer(any, _)) => any
                .downcast_ref::<GpuRef<T>>()
                .cloned()
                .ok_or_else(|| GpuError::invalid(format!("journal buffer {id} is not a {} buffer", T::NAME))),
            Some(Held::Probe(..)) => Err(GpuError::invalid("a recording does not read its own requests back")),
            None => Err(GpuError::invalid(format!(
                "journal buffer {id} does not exist (never made, or freed earlier in the journal)"
            ))),
        }
    }
}

/// A recording in progress: the file, the buffers it names, the next request number.
pub(crate) struct Journal {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
    book: Mutex<Book>,
    seq: AtomicU64,
    /// The first write that failed; later lines are skipped (the device keeps serving).
    failed: Mutex<Option<String>>,
    broken: AtomicBool,
}

impl Journal {
    /// A journal at `path` (truncated) whose first line names `backend`. It holds every
    /// byte uploaded while it records, so it is private to this user (0600, also when
    /// it already existed), and a symbolic link at `path` is refused rather than followed.
    pub(crate) fn create(path: &std::path::Path, backend: &str) -> Result<Arc<Journal>, GpuError> {
        let failed = |e| GpuError::io(format!("creating journal {}", path.display()), e);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let file = options.open(path).map_err(failed)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(failed)?;
        }
        let j = Arc::new(Journal {
            out: Mutex::new(std::io::BufWriter::new(file)),
            book: Book::recording(),
            seq: AtomicU64::new(1),
            failed: Mutex::new(None),
            broken: AtomicBool::new(false),
        });
        j.write(&Line::Begin {
            format: FORMAT.into(),
            version: VERSION,
            backend: backend.into(),
        });
        j.result()?;
        Ok(j)
    }

    /// Appends one line and flushes it, so a journal cut short by a crash replays up to
    /// the crash.
    fn write(&self, line: &Line) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let r = out
            .write_all(line.to_json().as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if let Err(e) = r {
            self.broken.store(true, Ordering::Relaxed);
            *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        }
    }

    /// Whether every line so far was written.
    pub(crate) fn result(&self) -> Result<(), GpuError> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(e) => Err(GpuError::io("writing the journal", e)),
        }
    }

    /// Journals one request: `write` encodes it (through the generated
    /// `WireMessage::journal`, which also hands its reply to the [`ReplyTap`]) and
    /// returns it with what it is. Buffers no handle names any more are freed first.
    pub(crate) fn request<M>(self: &Arc<Self>, write: impl FnOnce(&mut Writer<'_>, &ReplyTap) -> (M, Journalled)) -> M {
        let dead = self.book.lock().unwrap_or_else(|p| p.into_inner()).sweep(false);
        if !dead.is_empty() {
            self.write(&Line::Free { ids: dead });
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let frame = JournalFrame::request(&self.book, seq);
        let mut w = Writer::new(Side::Journal(&frame));
        let tap = ReplyTap {
            journal: self.clone(),
            seq,
        };
        let (msg, j) = write(&mut w, &tap);
        // Before the request is delivered: its answer's line cannot come first.
        self.write(&match j.written {
            Ok(()) => Line::Request {
                seq,
                what: j.what.into(),
                check: j.checked,
                frame: base64::engine::general_purpose::STANDARD.encode(&w.bytes),
            },
            Err(e) => Line::Unjournalled {
                seq,
                what: j.what.into(),
                why: e.to_string(),
            },
        });
        msg
    }

    /// Writes the buffers freed since the last sweep, flushes, and waits until the data
    /// is on disk (`sync_data`): a recording said finished survives a crash after it.
    pub(crate) fn finish(&self) -> Result<(), GpuError> {
        let dead = self.book.lock().unwrap_or_else(|p| p.into_inner()).sweep(true);
        if !dead.is_empty() {
            self.write(&Line::Free { ids: dead });
        }
        self.result()?;
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.get_ref()
            .sync_data()
            .map_err(|e| GpuError::io("syncing the journal", e))
    }
}

/// Where a device holds the journal recording its requests, if one is. Checked on
/// every request: one relaxed load while none is.
#[derive(Default)]
pub(crate) struct JournalSlot {
    on: AtomicBool,
    journal: Mutex<Option<Arc<Journal>>>,
}

impl JournalSlot {
    /// The journal recording now, if any.
    pub(crate) fn get(&self) -> Option<Arc<Journal>> {
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        self.journal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts recording into the journal `make` creates; an error (and no journal made)
    /// if another journal records already.
    pub(crate) fn attach(
        &self,
        make: impl FnOnce() -> Result<Arc<Journal>, GpuError>,
    ) -> Result<Arc<Journal>, GpuError> {
        let mut slot = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(GpuError::invalid(
                "this device is being recorded already: finish that Recorder first",
            ));
        }
        let j = make()?;
        *slot = Some(j.clone());
        self.on.store(true, Ordering::Release);
        Ok(j)
    }

    /// Stops recording into `j` (if it is the one recording).
    pub(crate) fn detach(&self, j: &Arc<Journal>) {
        let mut slot = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, j)) {
            *slot = None;
            self.on.store(false, Ordering::Release);
        }
    }
}

/// The hash a journal records for an encoded answer.
pub(crate) fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Whether an encoded answer (`Result<R, GpuError>` on the wire) is a success.
pub(crate) fn answer_ok(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0)
}

/// Routes the answer of a journalled request through the journal on its way to the
/// asker. Used by generated code.
pub struct ReplyTap {
    journal: Arc<Journal>,
    seq: u64,
}

impl ReplyTap {
    /// `reply`, with the journal seeing its answer first: encoded as a worker would
    /// (buffers named as journal ids), its hash journalled. Used by generated code.
    #[doc(hidden)]
    pub fn wrap<R: Wire>(&self, reply: Reply<Result<R, GpuError>>) -> Reply<Result<R, GpuError>> {
        let (journal, seq) = (self.journal.clone(), self.seq);
        reply.tapped(move |v: &Result<R, GpuError>| {
            let frame = JournalFrame::answer(&journal.book, seq);
            let mut w = Writer::new(Side::Journal(&frame));
            // A result always encodes (a value that cannot becomes its error).
            let _ = v.put(&mut w);
            journal.write(&Line::Answer {
                seq,
                ok: answer_ok(&w.bytes),
                blake3: digest(&w.bytes),
            });
        })
    }
}
