//! NCCL communicators and grouped calls, below what cudarc's safe layer offers.
//!
//! Why not cudarc's `Comm`: a world of this process drives all its communicators from one
//! thread, so their calls must sit in one NCCL group (`ncclGroupStart` … `ncclGroupEnd`)
//! — NCCL enqueues the work only at the group's end. cudarc's `Comm` records each
//! buffer's "used here" event as its call returns (inside the group, so before the work
//! exists) and its `Group` covers one communicator. [`Group`] here takes each buffer's
//! address through cudarc's event tracking (the communicator's stream waits for the
//! buffer's last writer) and keeps the guards until after `ncclGroupEnd`, so the events
//! it records cover the collective itself: every later use of the buffer, on any stream,
//! is ordered after it.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use cudarc::driver::{CudaStream, SyncOnDrop};
use cudarc::nccl::{result, sys, NcclType};

use crate::error::{GpuError, Lib};

/// True if NCCL's library can be loaded (cudarc panics on first use when it cannot).
pub(crate) fn nccl_present() -> bool {
    // SAFETY: only tries to open the shared library; no NCCL call is made.
    unsafe { sys::is_culib_present() }
}

/// The classified error of an NCCL status, with NCCL's own description.
pub(crate) fn nccl_error(e: result::NcclError) -> GpuError {
    // SAFETY: `ncclGetErrorString` returns a pointer to a static NUL-terminated string
    // for every status value (NCCL's documented contract); it is only read here.
    let msg = unsafe {
        let p = sys::ncclGetErrorString(e.0);
        if p.is_null() {
            format!("{:?}", e.0)
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    GpuError::Library {
        lib: Lib::Nccl,
        code: e.0 as i32,
        msg,
    }
}

/// The identity of one communicator clique, made by one rank and handed to every other
/// (in other processes: through the world's rendezvous) before they join it.
#[derive(Clone, Copy)]
pub(crate) struct UniqueId(sys::ncclUniqueId);

impl UniqueId {
    /// A fresh identity (NCCL opens its bootstrap listener here).
    pub(crate) fn new() -> Result<Self, GpuError> {
        result::get_uniqueid().map(UniqueId).map_err(nccl_error)
    }

    /// Its 128 bytes, for the wire.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        self.0.internal.iter().map(|&c| c as u8).collect()
    }

    /// The identity whose bytes another rank sent.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self, GpuError> {
        let mut internal = [0 as c_char; 128];
        if bytes.len() != internal.len() {
            return Err(GpuError::invalid(format!(
                "an NCCL unique id of {} bytes (128 expected)",
                bytes.len()
            )));
        }
        for (d, &b) in internal.iter_mut().zip(bytes) {
            *d = b as c_char;
        }
        Ok(UniqueId(sys::ncclUniqueId { internal }))
    }
}

/// One rank's NCCL communicator and the stream its calls are enqueued on.
pub(crate) struct Communicator {
    raw: sys::ncclComm_t,
    stream: Arc<CudaStream>,
}

// SAFETY: an NCCL communicator is a heap object NCCL may be called on from any thread,
// one call at a time (NCCL's thread-safety rules). `Communicator` is only used through
// `&mut`/owned access or behind the world's mutex, so no two threads call it at once.
unsafe impl Send for Communicator {}

impl Communicator {
    /// The stream the communicator's work runs on (buffers are ordered for it).
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// One communicator per stream, a clique of this process (`ncclCommInitAll`): rank
    /// `i` on `streams[i]`'s GPU, which must all differ (NCCL allows one rank per GPU).
    pub(crate) fn init_all(streams: Vec<Arc<CudaStream>>) -> Result<Vec<Communicator>, GpuError> {
        let ordinals: Vec<i32> = streams.iter().map(|s| s.context().ordinal() as i32).collect();
        let n = i32::try_from(streams.len()).map_err(|_| GpuError::invalid("too many ranks"))?;
        let mut raws: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); streams.len()];
        // SAFETY: `raws` and `ordinals` hold `n` elements each and outlive the call, which
        // writes one communicator per element of `raws`.
        unsafe { result::comm_init_all(raws.as_mut_ptr(), n, ordinals.as_ptr()) }.map_err(nccl_error)?;
        Ok(raws
            .into_iter()
            .zip(streams)
            .map(|(raw, stream)| Communicator { raw, stream })
            .collect())
    }

    /// This process's rank `rank` of a clique of `size` named by `id` (`ncclCommInitRank`):
    /// returns once every rank has joined (NCCL's bootstrap), so it runs on a thread of
    /// its own, never an actor's or the async runtime's.
    pub(crate) fn init_rank(stream: Arc<CudaStream>, id: UniqueId, rank: usize, size: usize) -> Result<Self, GpuError> {
        let (rank, size) = (
            i32::try_from(rank).map_err(|_| GpuError::invalid("rank out of range"))?,
            i32::try_from(size).map_err(|_| GpuError::invalid("world size out of range"))?,
        );
        stream.context().bind_to_thread()?;
        let mut raw: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `raw` outlives the call, which writes the new communicator into it; the
        // stream's context is current on this thread, which selects the rank's GPU.
        unsafe { result::comm_init_rank(&mut raw, size, id.0, rank) }.map_err(nccl_error)?;
        Ok(Communicator { raw, stream })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // Abort rather than destroy: destroying waits for work in flight, which a lost
        // peer never completes; a world drops its communicators only once its collectives
        // have resolved (or failed).
        // SAFETY: `raw` came from a successful init and is dropped exactly once here.
        if let Err(e) = unsafe { result::comm_abort(self.raw) } {
            tracing::warn!("NCCL communicator abort failed: {}", nccl_error(e));
        }
    }
}

/// A buffer's address on a communicator's stream, and the guard that records the use.
pub(crate) struct Addr<'a> {
    ptr: u64,
    _record: Option<SyncOnDrop<'a>>,
}

impl<'a> Addr<'a> {
    /// A buffer's address ordered for `comm`'s stream (a guard from cudarc's `device_ptr`
    /// or `device_ptr_mut` for that stream), its use recorded when the group ends.
    pub(crate) fn new(ptr: u64, record: SyncOnDrop<'a>) -> Self {
        Addr {
            ptr,
            _record: Some(record),
        }
    }

    /// Another address inside a buffer some other `Addr` of the same group orders.
    pub(crate) fn within(ptr: u64) -> Self {
        Addr { ptr, _record: None }
    }
}

/// One NCCL call of a rank, as [`Group::enqueue`] takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    AllReduce(sys::ncclRedOp_t),
    Broadcast { root: usize },
    AllGather,
    ReduceScatter(sys::ncclRedOp_t),
    Send { to: usize },
    Recv { from: usize },
}

/// One NCCL group: the calls of every local rank of one collective, enqueued together
/// at [`Group::end`], after which the buffers' events are recorded.
pub(crate) struct Group<'a> {
    addrs: Vec<Addr<'a>>,
    open: bool,
}

impl<'a> Group<'a> {
    /// Opens a group (`ncclGroupStart`).
    pub(crate) fn start() -> Result<Self, GpuError> {
        result::group_start().map_err(nccl_error)?;
        Ok(Group {
            addrs: Vec::new(),
            open: true,
        })
    }

    /// Enqueues `op` on `comm`: `count` elements (per rank: a reduce-scatter's result,
    /// an all-gather's contribution) from `send` into `recv` — the same buffer when
    /// `recv` is `None` (in place; a send's or a receive's one buffer).
    pub(crate) fn enqueue<T: NcclType>(
        &mut self,
        comm: &Communicator,
        op: Op,
        send: Addr<'a>,
        recv: Option<Addr<'a>>,
        count: usize,
    ) -> Result<(), GpuError> {
        let (s, r) = (
            send.ptr as *mut c_void,
            recv.as_ref().map_or(send.ptr, |r| r.ptr) as *mut c_void,
        );
        let (dt, c, st) = (
            T::as_nccl_type(),
            comm.raw,
            comm.stream.cu_stream() as sys::cudaStream_t,
        );
        let peer = |p: usize| i32::try_from(p).map_err(|_| GpuError::invalid(format!("no rank {p}")));
        // SAFETY: both addresses are live device buffers of `comm`'s GPU holding what
        // `op` reads and writes of `count` elements (checked by the caller: equal lengths
        // on every rank, ranks × `count` where gathered or scattered), kept alive and
        // ordered by the guards this group holds until the work is enqueued; `c` is a live
        // communicator and `st` its stream; roots and peers were checked to be ranks.
        unsafe {
            match op {
                Op::AllReduce(red) => result::all_reduce(s, r, count, dt, red, c, st),
                Op::Broadcast { root } => result::broadcast(s, r, count, dt, peer(root)?, c, st),
                Op::AllGather => result::all_gather(s, r, count, dt, c, st),
                Op::ReduceScatter(red) => result::reduce_scatter(s, r, count, dt, red, c, st),
                Op::Send { to } => result::send(s, count, dt, peer(to)?, c, st),
                Op::Recv { from } => result::recv(s, count, dt, peer(from)?, c, st),
            }
        }
        .map_err(nccl_error)?;
        self.addrs.push(send);
        self.addrs.extend(recv);
        Ok(())
    }

    /// Enqueues the group's work (`ncclGroupEnd`), then records every buffer's use.
    pub(crate) fn end(mut self) -> Result<(), GpuError> {
        self.open = false;
        let r = result::group_end().map_err(nccl_error);
        drop(std::mem::take(&mut self.addrs));
        r.map(|_| ())
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        // A group left by an error still ends, so NCCL's group depth stays balanced; the
        // calls already in it run (each was valid), and their buffers' uses are recorded.
        if self.open {
            let _ = result::group_end();
        }
    }
}
