//! The wire format of isolated devices: how a request to an inner actor, and its reply,
//! cross between the user process and its GPU worker — frames, shared-memory arenas,
//! element data and remote buffer ids. Shared vocabulary: it names no actor; each type
//! that crosses implements [`Wire`] where it is defined.
//!
//! `#[gpu_actor(wire)]` generates [`WireMessage`] for an actor's message enum: a tag per
//! variant, then each field through [`Wire`]. The reply channel does not cross: the
//! sender keeps it in a [`ReplySlot`] that decodes the answer, the worker makes a fresh
//! one and sends the answer back through a [`ReplyWait`]. Plain values are written
//! little-endian; element buffers (`Vec<T>`) go through a shared-memory arena when they
//! are large; `GpuRef`s cross as the worker's buffer ids. Everything read is checked: a
//! frame that does not decode is an error for that request, never a crash.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

pub(crate) mod arena;
pub(crate) mod frame;
mod host_data;
pub(crate) mod journal;
mod launch_args;
mod pinned;
mod remote;

pub use self::host_data::HostData;
pub use self::journal::{Journalled, ReplyTap};
pub(crate) use self::launch_args::{put_buffer_arg, put_scalar_arg, take_launch_args};
pub use self::launch_args::{DynArgs, WireArgs};
pub(crate) use self::pinned::{PinnedArena, SharedRange};
pub(crate) use self::remote::{put_remote_object, BufferOnWire, RemoteObject};
use crate::gpu_ref::BufferOwner;

use self::arena::{Arena, Lease};
use crate::actor::Reply;
use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// Buffers at least this large go through shared memory (smaller ones inline).
const BULK_MIN: usize = 32 << 10;

/// What the user-process side of one worker incarnation knows while encoding requests
/// and decoding replies.
pub(crate) struct ClientCtx {
    pub(crate) device_id: usize,
    /// Unique per `Device` started in this process (two isolated devices may share an
    /// ordinal and a generation number).
    pub(crate) instance: u64,
    /// The device generation this worker serves: set when it starts serving (a warm
    /// standby is made before its generation is known).
    pub(crate) generation: std::sync::atomic::AtomicU64,
    pub(crate) link: Weak<dyn BufferOwner>,
    pub(crate) requests: Arc<Arena>,
    pub(crate) replies: Arc<Arena>,
    /// The device's pinned buffers (shared with each of its workers).
    pub(crate) pinned: Arc<PinnedArena>,
}

impl ClientCtx {
    /// The generation this worker serves.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// A buffer handed to the user process (a `GpuRef<T>`) and how many handles to it it
/// was given.
pub(crate) type Exported = (Box<dyn Any + Send + Sync>, usize);

/// What the worker knows while decoding requests and encoding replies.
pub(crate) struct WorkerCtx {
    /// The buffers the user process holds handles to, by id: a `GpuRef<T>` and how many
    /// handles to it the user process was given.
    pub(crate) buffers: Mutex<HashMap<u64, Exported>>,
    /// The events the user process holds handles to, by id (their own numbering, apart
    /// from the buffers'), and how many handles it was given.
    pub(crate) events: Mutex<HashMap<u64, Exported>>,
    /// The graphs the user process holds handles to (their own numbering too).
    pub(crate) graphs: Mutex<HashMap<u64, Exported>>,
    /// The raw modules handed to the user process (kept for the worker's life, as a
    /// context keeps its modules).
    pub(crate) modules: Mutex<HashMap<u64, Exported>>,
    pub(crate) requests: Arc<Arena>,
    pub(crate) replies: Arc<Arena>,
    /// This worker's mapping of the device's pinned arena.
    pub(crate) pinned: Arc<Arena>,
}

/// Who is encoding or decoding: the two ends of an isolated device's link, or the
/// replay journal (recording a request, or reading one back).
#[derive(Clone, Copy)]
pub(crate) enum Side<'a> {
    Client(&'a ClientCtx),
    Worker(&'a WorkerCtx),
    Journal(&'a journal::JournalFrame<'a>),
}

/// Encodes one frame's payload.
pub struct Writer<'a> {
    pub(crate) bytes: Vec<u8>,
    pub(crate) side: Side<'a>,
    /// Shared-memory ranges holding this frame's bulk data.
    pub(crate) leases: Vec<Lease>,
    /// Handles the request uses, kept alive until its reply (so dropping the last user
    /// handle cannot free a buffer the worker has yet to see).
    pub(crate) keep: Vec<Box<dyn Any + Send>>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(side: Side<'a>) -> Self {
        Writer {
            bytes: Vec::with_capacity(128),
            side,
            leases: vec![],
            keep: vec![],
        }
    }

    /// Writes a variant tag. Used by generated code.
    #[doc(hidden)]
    pub fn put_tag(&mut self, tag: u16) {
        self.bytes.extend_from_slice(&tag.to_le_bytes());
    }

    pub(crate) fn put_u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    pub(crate) fn put_u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn put_bytes(&mut self, b: &[u8]) {
        self.put_u64(b.len() as u64);
        self.bytes.extend_from_slice(b);
    }

    /// Bulk bytes: through this side's arena when large and there is room, else inline.
    pub(crate) fn put_bulk(&mut self, b: &[u8]) {
        let arena = match self.side {
            Side::Client(c) => &c.requests,
            Side::Worker(w) => &w.replies,
            // The journal holds everything inline.
            Side::Journal(_) => {
                self.put_u8(0);
                self.put_bytes(b);
                return;
            }
        };
        if b.len() >= BULK_MIN {
            if let Some(mut lease) = arena.lease(b.len()) {
                lease.fill(b);
                self.put_u8(1);
                self.put_u64(lease.offset() as u64);
                self.put_u64(b.len() as u64);
                self.leases.push(lease);
                return;
            }
        }
        self.put_u8(0);
        self.put_bytes(b);
    }

    fn mark(&self) -> (usize, usize, usize) {
        (self.bytes.len(), self.leases.len(), self.keep.len())
    }

    fn reset(&mut self, m: (usize, usize, usize)) {
        self.bytes.truncate(m.0);
        self.leases.truncate(m.1);
        self.keep.truncate(m.2);
    }
}

/// Decodes one frame's payload.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    pub(crate) side: Side<'a>,
    /// Reply-arena ranges read, for the user process to release.
    pub(crate) released: Vec<(usize, usize)>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], side: Side<'a>) -> Self {
        Reader {
            bytes,
            pos: 0,
            side,
            released: vec![],
        }
    }

    fn take_slice(&mut self, n: usize) -> Result<&'a [u8], GpuError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                GpuError::invalid(format!(
                    "truncated message: {n} more bytes wanted at {} of {}",
                    self.pos,
                    self.bytes.len()
                ))
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Reads a variant tag. Used by generated code.
    #[doc(hidden)]
    pub fn take_tag(&mut self) -> Result<u16, GpuError> {
        Ok(u16::from_le_bytes(self.take_slice(2)?.try_into().expect("2 bytes")))
    }

    pub(crate) fn take_u8(&mut self) -> Result<u8, GpuError> {
        Ok(self.take_slice(1)?[0])
    }

    pub(crate) fn take_u64(&mut self) -> Result<u64, GpuError> {
        Ok(u64::from_le_bytes(self.take_slice(8)?.try_into().expect("8 bytes")))
    }

    pub(crate) fn take_usize(&mut self) -> Result<usize, GpuError> {
        let v = self.take_u64()?;
        usize::try_from(v).map_err(|_| GpuError::invalid(format!("{v} does not fit a usize")))
    }

    pub(crate) fn take_bytes(&mut self) -> Result<&'a [u8], GpuError> {
        let n = self.take_usize()?;
        self.take_slice(n)
    }

    pub(crate) fn take_bytes_owned(&mut self) -> Result<Vec<u8>, GpuError> {
        Ok(self.take_bytes()?.to_vec())
    }
}

/// A value that crosses to or from a GPU worker.
pub trait Wire: Sized + Send + 'static {
    /// Appends the value.
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError>;
    /// Reads a value written by `put` (in the other process).
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError>;
}

impl<T: DTypeBase> Wire for T {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        self.write_le(&mut w.bytes);
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(T::read_le(r.take_slice(std::mem::size_of::<T>())?))
    }
}

impl Wire for () {
    fn put(&self, _: &mut Writer<'_>) -> Result<(), GpuError> {
        Ok(())
    }
    fn take(_: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(())
    }
}

impl Wire for bool {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(*self as u8);
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        match r.take_u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(GpuError::invalid(format!("{v} is not a bool"))),
        }
    }
}

impl Wire for usize {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u64(*self as u64);
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        r.take_usize()
    }
}

impl Wire for String {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_bytes(self.as_bytes());
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        String::from_utf8(r.take_bytes()?.to_vec()).map_err(|_| GpuError::invalid("a string that is not UTF-8"))
    }
}

impl<A: Wire, B: Wire> Wire for (A, B) {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        self.0.put(w)?;
        self.1.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok((A::take(r)?, B::take(r)?))
    }
}

/// Element buffers: the raw bytes, through shared memory when large.
impl<T: DTypeBase> Wire for Vec<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_bulk(as_bytes(self));
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Bulk::take(r)?.into_vec()
    }
}

impl<A: Wire, B: Wire, C: Wire> Wire for (A, B, C) {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        self.0.put(w)?;
        self.1.put(w)?;
        self.2.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok((A::take(r)?, B::take(r)?, C::take(r)?))
    }
}

impl<T: Wire> Wire for Option<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match self {
            None => {
                w.put_u8(0);
                Ok(())
            }
            Some(v) => {
                w.put_u8(1);
                v.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(match r.take_u8()? {
            0 => None,
            _ => Some(T::take(r)?),
        })
    }
}

/// Lists of values other than elements (those cross as bulk bytes): the count, then
/// each value.
macro_rules! wire_list {
    ($($t:ty),*) => {$(
        impl Wire for Vec<$t> {
            fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
                w.put_u64(self.len() as u64);
                self.iter().try_for_each(|v| v.put(w))
            }
            fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
                let n = r.take_usize()?;
                // Each value takes at least 8 bytes: a count beyond the payload fails at
                // its first read instead of reserving memory for it.
                (0..n).map(|_| <$t>::take(r)).collect()
            }
        }
    )*};
}
wire_list!(usize, String);

/// Where bulk bytes written by [`Writer::put_bulk`] are.
pub(crate) enum Bulk<'a> {
    Inline(&'a [u8]),
    Shared {
        arena: Arc<Arena>,
        offset: usize,
        len: usize,
    },
}

impl<'a> Bulk<'a> {
    pub(crate) fn take(r: &mut Reader<'a>) -> Result<Self, GpuError> {
        match r.take_u8()? {
            0 => Ok(Bulk::Inline(r.take_bytes()?)),
            1 => {
                let offset = r.take_usize()?;
                let len = r.take_usize()?;
                let arena = match r.side {
                    Side::Client(c) => {
                        // The user process releases reply ranges once read (whether or
                        // not the copy works: the range is done with).
                        r.released.push((offset, len));
                        c.replies.clone()
                    }
                    Side::Worker(w) => w.requests.clone(),
                    Side::Journal(_) => return Err(GpuError::invalid("shared-memory data in a journal")),
                };
                // Checked here, before anything is allocated for the data it names.
                arena.check(offset, len)?;
                Ok(Bulk::Shared { arena, offset, len })
            }
            t => Err(GpuError::invalid(format!("unknown bulk encoding {t}"))),
        }
    }

    /// The bytes as elements of `T`, copied into a vector.
    pub(crate) fn into_vec<T: DTypeBase>(self) -> Result<Vec<T>, GpuError> {
        let n = crate::dtype::whole_elements::<T>(self.len(), "bulk data")?;
        let mut out = vec![T::default(); n];
        self.copy_to(as_bytes_mut(&mut out))?;
        Ok(out)
    }

    fn len(&self) -> usize {
        match self {
            Bulk::Inline(b) => b.len(),
            Bulk::Shared { len, .. } => *len,
        }
    }

    fn copy_to(&self, out: &mut [u8]) -> Result<(), GpuError> {
        match self {
            Bulk::Inline(b) => {
                out.copy_from_slice(b);
                Ok(())
            }
            Bulk::Shared { arena, offset, len } => arena.read(*offset, *len, out),
        }
    }
}

/// The bytes of a dtype slice.
pub(crate) fn as_bytes<T: DTypeBase>(v: &[T]) -> &[u8] {
    // SAFETY: every dtype is plain old data without padding (primitives, half floats,
    // `Complex` of two equal floats, `repr(C)`), so all its bytes are initialised; the
    // slice covers exactly the vector's elements.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: DTypeBase>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; and every bit pattern is a valid dtype value
    // (`ValidAsZeroBits` plain numbers), so writing arbitrary bytes keeps them valid.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// Errors cross as JSON: rare, small, and every variant round-trips exactly.
impl Wire for GpuError {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        let json = serde_json::to_vec(self).map_err(|e| GpuError::Internal(format!("encoding an error: {e}")))?;
        w.put_bytes(&json);
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        serde_json::from_slice(r.take_bytes()?).map_err(|e| GpuError::invalid(format!("an undecodable error: {e}")))
    }
}

impl<R: Wire> Wire for Result<R, GpuError> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        let m = w.mark();
        let r = match self {
            Ok(v) => {
                w.put_u8(0);
                v.put(w)
            }
            Err(e) => {
                w.put_u8(1);
                e.put(w)
            }
        };
        if let Err(e) = r {
            // The value cannot cross (a pinned buffer, say): its asker gets why.
            w.reset(m);
            w.put_u8(1);
            e.put(w)?;
        }
        Ok(())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        match r.take_u8()? {
            0 => Ok(Ok(R::take(r)?)),
            1 => Ok(Err(GpuError::take(r)?)),
            t => Err(GpuError::invalid(format!("unknown result tag {t}"))),
        }
    }
}

/// Implements [`Wire`] for a plain struct field by field (all fields `Wire`).
macro_rules! wire_struct {
    ($ty:ident $(<$g:ident: $b:path>)? { $($f:ident),* $(,)? }) => {
        impl$(<$g: $b>)? $crate::wire::Wire for $ty$(<$g>)? {
            fn put(&self, w: &mut $crate::wire::Writer<'_>) -> Result<(), $crate::GpuError> {
                $( $crate::wire::Wire::put(&self.$f, w)?; )*
                Ok(())
            }
            fn take(r: &mut $crate::wire::Reader<'_>) -> Result<Self, $crate::GpuError> {
                Ok($ty { $( $f: $crate::wire::Wire::take(r)?, )* })
            }
        }
    };
}
pub(crate) use wire_struct;

/// Implements [`Wire`] for a field-less enum by variant index.
macro_rules! wire_enum {
    ($ty:ty { $($v:path),* $(,)? }) => {
        impl $crate::wire::Wire for $ty {
            fn put(&self, w: &mut $crate::wire::Writer<'_>) -> Result<(), $crate::GpuError> {
                let all = [$($v),*];
                let i = all.iter().position(|v| v == self).expect("every variant is listed");
                $crate::wire::Wire::put(&(i as u64), w)
            }
            fn take(r: &mut $crate::wire::Reader<'_>) -> Result<Self, $crate::GpuError> {
                let all = [$($v),*];
                let i: u64 = $crate::wire::Wire::take(r)?;
                all.get(i as usize).copied().ok_or_else(|| {
                    $crate::GpuError::invalid(format!("{i} is not a {}", stringify!($ty)))
                })
            }
        }
    };
}
pub(crate) use wire_enum;

/// Where the answer to one encoded request goes: decodes it and answers the asker.
pub struct ReplySlot(Option<Answer>);

/// Decodes a reply (or takes an error) and answers the asker; the callback sees an
/// error answer first.
type Answer = Box<dyn FnOnce(Result<&mut Reader<'_>, GpuError>, &dyn Fn(&GpuError)) + Send>;

impl ReplySlot {
    /// The slot of an ask. Used by generated code.
    #[doc(hidden)]
    pub fn new<R: Wire>(reply: Reply<Result<R, GpuError>>) -> Self {
        ReplySlot(Some(Box::new(
            move |r: Result<&mut Reader<'_>, GpuError>, seen: &dyn Fn(&GpuError)| {
                let v = r.and_then(|r| <Result<R, GpuError>>::take(r)).unwrap_or_else(Err);
                if let Err(e) = &v {
                    seen(e);
                }
                reply.send(v);
            },
        )))
    }

    /// A `tell`: nobody waits for an answer. Used by generated code.
    #[doc(hidden)]
    pub fn tell() -> Self {
        ReplySlot(None)
    }

    /// Answers the asker from a reply payload, or with an error; `seen` sees an error
    /// answer before the asker does.
    pub(crate) fn answer(self, r: Result<&mut Reader<'_>, GpuError>, seen: &dyn Fn(&GpuError)) {
        if let Some(f) = self.0 {
            f(r, seen)
        }
    }
}

/// How the worker waits for the answer to a decoded request and encodes it.
pub struct ReplyWait(pub(crate) BoxFuture<'static, Encode>);

/// Writes an answer into a reply frame.
pub(crate) type Encode = Box<dyn FnOnce(&mut Writer<'_>) + Send>;

impl ReplyWait {
    /// Waits on the receiver of a fresh reply channel. Used by generated code.
    #[doc(hidden)]
    pub fn new<R: Wire>(rx: oneshot::Receiver<Result<R, GpuError>>) -> Self {
        ReplyWait(Box::pin(async move {
            let v = rx
                .await
                .unwrap_or_else(|_| Err(GpuError::NoReply("the worker's inner actor".into())));
            Box::new(move |w: &mut Writer<'_>| {
                // A result always encodes (a failing value becomes its error).
                let _ = v.put(w);
            }) as Encode
        }))
    }

    /// A `tell`: nothing to answer. Used by generated code.
    #[doc(hidden)]
    pub fn tell() -> Self {
        ReplyWait(Box::pin(async { Box::new(|_: &mut Writer<'_>| {}) as Encode }))
    }
}

/// A message enum that crosses to a GPU worker: generated by `#[gpu_actor(wire)]`.
pub trait WireMessage: Sized + Send + 'static {
    /// Writes the message; `None` when a field could not be encoded (its asker has been
    /// answered with the error).
    fn encode(self, w: &mut Writer<'_>) -> Option<ReplySlot>;
    /// Writes the message as `encode` does for the replay journal, keeping it: returns
    /// it with its reply passing through `tap` (when it could be written), and what it is.
    fn journal(self, w: &mut Writer<'_>, tap: &ReplyTap) -> (Self, Journalled);
    /// Reads a message, with a fresh reply channel whose answer `ReplyWait` encodes.
    fn decode(r: &mut Reader<'_>) -> Result<(Self, ReplyWait), GpuError>;
}

wire_enum!(crate::memory::Location { crate::memory::Location::Device, crate::memory::Location::Host });

impl Wire for crate::memory::Advice {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match self {
            crate::memory::Advice::ReadMostly(on) => {
                w.put_u8(0);
                on.put(w)
            }
            crate::memory::Advice::PreferredLocation(l) => {
                w.put_u8(1);
                l.put(w)
            }
            crate::memory::Advice::AccessedBy(l, on) => {
                w.put_u8(2);
                l.put(w)?;
                on.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(match r.take_u8()? {
            0 => crate::memory::Advice::ReadMostly(<bool as Wire>::take(r)?),
            1 => crate::memory::Advice::PreferredLocation(<Option<crate::memory::Location> as Wire>::take(r)?),
            2 => {
                crate::memory::Advice::AccessedBy(<crate::memory::Location as Wire>::take(r)?, <bool as Wire>::take(r)?)
            }
            t => return Err(GpuError::invalid(format!("{t} is not an Advice"))),
        })
    }
}
