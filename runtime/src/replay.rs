//! `replay`: a deterministic-replay harness. A [`Recorder`] attached to a [`Device`]
//! journals every request made to it — through any clone of the handle, from any task —
//! one JSON line each: the request as the wire frame an isolated device's worker would
//! receive (buffer contents exact, buffers named by journal ids), and its answer as a
//! BLAKE3 hash of the encoded reply. [`replay`] reads the journal into a fresh device,
//! re-issues the requests in order and compares every answer: a bit-identical run, or the
//! first place it diverged.
//!
//! Nothing here lists operations: the journal entries are the frames the macros generate
//! for every `#[gpu_actor(wire)]` handler, so each library operation — allocation,
//! copies, BLAS, RNG, FFT, solvers, `#[kernel]` launches, managed memory — is journalled
//! as soon as its handler exists. Not journalled (a replay stops there with
//! `Unsupported`, saying why): raw CUDA modules, events and graphs (their actors stay
//! in-process), pinned host buffers, and buffers made before the recording began.
//! Answers that report the device's state (free memory, whether a kernel was cached;
//! `#[handler(volatile)]`) are compared for success only.
//!
//! Results are bit-identical on the same backend and GPU model with the same library
//! versions (cuBLAS picks its kernels per GPU; the CPU device's GEMM is deterministic
//! per thread count); the RNG replays exactly because the journal records its seeds.
//! The replay runs one request at a time: a recording of concurrent tasks replays as
//! the order its requests reached the device, which gives the same results for a
//! program whose tasks order their shared buffers (as they must anyway).
//!
//! Each line is flushed as it is written, so a journal cut short by a crash replays up
//! to the crash. Recording costs a copy and a hash of every request's data and every
//! answer on the thread that sends or answers it.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;

use crate::device::route::Routed;
use crate::device::Device;
use crate::error::GpuError;
use crate::wire::journal::{answer_ok, digest, Book, Journal, JournalFrame, Line};
use crate::wire::{Reader, Side, Wire, Writer};

pub use crate::wire::journal::{FORMAT, VERSION};

/// Records the requests sent to a device while it lives: created on a device, it
/// journals every request to that device (through any clone of the handle) until
/// [`Recorder::finish`] or drop. One recorder per device at a time.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let path = std::env::temp_dir().join(format!("atomr-doc-journal-{}.jsonl", std::process::id()));
/// let recorder = Recorder::create(&dev, &path).await?;
/// let x = dev.upload(vec![1.0f32, 2.0]).await?;
/// dev.scal(3.0, &x).await?;
/// assert_eq!(dev.download(&x).await?, vec![3.0, 6.0]);
/// recorder.finish()?;
/// // Later, anywhere: the same requests on a fresh device, every answer compared.
/// let other = ActorSystem::new("replay");
/// let fresh = Device::open(&other, DeviceConfig::cpu()).await?;
/// let report = replay(&path, &fresh).await?;
/// assert!(report.is_bit_identical());
/// # other.shutdown().await;
/// # std::fs::remove_file(&path).ok();
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Recorder {
    device: Device,
    journal: Arc<Journal>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recorder({:?})", self.device)
    }
}

impl Recorder {
    /// Starts a journal at `path` (truncating it) of the requests to `device` from now
    /// on. Buffers made earlier cannot be named by the journal: make them after.
    pub async fn create(device: &Device, path: impl AsRef<Path>) -> Result<Recorder, GpuError> {
        let info = device.ready().await?;
        let backend = format!("{:?}", info.backend);
        let journal = device
            .journal_slot()
            .attach(|| Journal::create(path.as_ref(), &backend))?;
        Ok(Recorder {
            device: device.clone(),
            journal,
        })
    }

    /// The device being recorded.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Stops recording, notes the buffers freed since the last note, and reports whether
    /// every line was written (a full disk fails the journal, never a request). Answers
    /// to requests still in flight are appended when they come.
    pub fn finish(self) -> Result<(), GpuError> {
        self.device.journal_slot().detach(&self.journal);
        self.journal.finish()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.device.journal_slot().detach(&self.journal);
    }
}

/// Where a replay first answered differently from the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The journal line (1-based) of the answer that differed.
    pub line: usize,
    /// The request (`Actor::handler<dtype>`).
    pub request: String,
    /// The hash of the recorded answer.
    pub recorded: String,
    /// The hash of this replay's answer.
    pub replayed: String,
    /// The replay's answer when it was an error.
    pub replayed_error: Option<GpuError>,
}

/// What a replay did.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// Requests re-issued.
    pub operations: usize,
    /// Answers compared with the recording (bit for bit, or for success alone where the
    /// answer reports the device's state).
    pub answers_checked: usize,
    /// The first answer that differed (the replay stops there).
    pub divergence: Option<Divergence>,
    /// Why the journal's last line was not read, when it could not be: a recording cut
    /// short by a crash or a full disk ends in a torn line, and the replay ends before it.
    pub torn_end: Option<String>,
}

impl ReplayReport {
    /// True if every answer matched the journal.
    pub fn is_bit_identical(&self) -> bool {
        self.divergence.is_none()
    }
}

/// A replayed request's answer, until the journal's answer line is read.
struct Replayed {
    what: String,
    check: bool,
    bytes: Vec<u8>,
}

/// Replays the journal at `path` into `device` (a fresh one: the journal's buffers are
/// made anew) and compares every recorded answer.
pub async fn replay(path: impl AsRef<Path>, device: &Device) -> Result<ReplayReport, GpuError> {
    let file = std::fs::File::open(path.as_ref())
        .map_err(|e| GpuError::io(format!("opening journal {}", path.as_ref().display()), e))?;
    let book = Book::replaying();
    let mut answers: HashMap<u64, Replayed> = HashMap::new();
    let mut report = ReplayReport {
        operations: 0,
        answers_checked: 0,
        divergence: None,
        torn_end: None,
    };
    let mut lines = std::io::BufReader::new(file).lines().enumerate().peekable();
    while let Some((i, text)) = lines.next() {
        let n = i + 1;
        // A line that cannot be read or parsed ends the recording when it is the last
        // (written in part before a crash); anywhere else the journal is corrupt.
        // (A line that cannot be read elsewhere is an `Io` error, one that does not parse
        // `InvalidArgument`.)
        let parsed = text
            .map_err(|e| GpuError::io(format!("reading journal line {n}"), e))
            .and_then(|t| match t.trim().is_empty() {
                true => Ok(None),
                false => serde_json::from_str::<Line>(&t)
                    .map(|l| Some((l, t)))
                    .map_err(|e| GpuError::invalid(format!("journal line {n}: {e}"))),
            });
        let (line, text) = match parsed {
            Ok(Some(parsed)) => parsed,
            Ok(None) => continue,
            Err(e) if n > 1 && lines.peek().is_none() => {
                tracing::warn!(error = %e, "the journal ends in a torn line: replayed up to it");
                report.torn_end = Some(e.to_string());
                break;
            }
            Err(e) => return Err(e),
        };
        let at = |e: GpuError| GpuError::invalid(format!("journal line {n}: {e}"));
        match (n, line) {
            (1, Line::Begin { format, version, .. }) if format == FORMAT && version == VERSION => {}
            (1, _) => {
                return Err(GpuError::invalid(format!(
                    "not a version-{VERSION} {FORMAT} (first line: {text})"
                )))
            }
            (_, Line::Begin { .. }) => return Err(GpuError::invalid(format!("journal line {n}: a second begin"))),
            (
                _,
                Line::Request {
                    seq,
                    what,
                    check,
                    frame,
                },
            ) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(&frame)
                    .map_err(|e| GpuError::invalid(format!("journal line {n}: bad frame: {e}")))?;
                let bytes = reissue(device, &book, seq, &bytes).await.map_err(|e| match e {
                    GpuError::InvalidArgument(_) => at(e),
                    e => e,
                })?;
                report.operations += 1;
                answers.insert(seq, Replayed { what, check, bytes });
            }
            (_, Line::Unjournalled { what, why, .. }) => {
                return Err(GpuError::Unsupported(format!(
                    "journal line {n}: `{what}` ran while recording but was not journalled ({why}), so the replay \
                     cannot go past it"
                )))
            }
            (_, Line::Answer { seq, ok, blake3 }) => {
                let r = answers
                    .remove(&seq)
                    .ok_or_else(|| GpuError::invalid(format!("journal line {n}: an answer to no request ({seq})")))?;
                report.answers_checked += 1;
                let replayed = digest(&r.bytes);
                let same = if r.check {
                    replayed == blake3
                } else {
                    answer_ok(&r.bytes) == ok
                };
                if !same {
                    let frame = JournalFrame::answer(&book, seq);
                    let replayed_error = (!answer_ok(&r.bytes))
                        .then(|| GpuError::take(&mut Reader::new(&r.bytes[1..], Side::Journal(&frame))).ok())
                        .flatten();
                    report.divergence = Some(Divergence {
                        line: n,
                        request: r.what,
                        recorded: blake3,
                        replayed,
                        replayed_error,
                    });
                    break;
                }
            }
            (_, Line::Free { ids }) => book.lock().unwrap_or_else(|p| p.into_inner()).free(&ids),
        }
    }
    Ok(report)
}

/// Decodes one journalled request (its buffers the replay's), sends it to `device` and
/// returns its answer encoded as the recording encoded it.
async fn reissue(device: &Device, book: &std::sync::Mutex<Book>, seq: u64, frame: &[u8]) -> Result<Vec<u8>, GpuError> {
    let request = JournalFrame::request(book, seq);
    let (routed, wait) = Routed::decode(&mut Reader::new(frame, Side::Journal(&request)))?;
    device.submit_routed(routed).await;
    let timeout = device.config().request_timeout;
    let encode = tokio::time::timeout(timeout, wait.0)
        .await
        .map_err(|_| GpuError::Timeout(timeout))?;
    let answer = JournalFrame::answer(book, seq);
    let mut w = Writer::new(Side::Journal(&answer));
    encode(&mut w);
    Ok(w.bytes)
}
