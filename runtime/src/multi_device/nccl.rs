//! The collectives of a world of GPUs: one NCCL communicator per member, each on a
//! stream of its member's context ([`Lane`]).
//!
//! The ranks still meet in the exchange — which checks that they called the same
//! collective with the same lengths and element type, so a disagreement is a typed error
//! rather than an NCCL hang — and the last arrival enqueues every rank's call in one NCCL
//! group, from one thread (what NCCL requires of a process driving several GPUs). Each
//! rank then waits for its own stream. Buffers stay on their GPUs: no host copy.
//!
//! The communicators belong to the generations of the members' contexts they were made
//! in. When a member is rebuilt, collectives in flight fail (its buffers are stale, and
//! each rank's wait watches the generations) and the next collective re-forms the world:
//! new lanes, new communicators.

use std::sync::{Arc, Mutex};

use super::exchange::{Call, Compute, Data, Kind};
use super::reduce::{CollectiveScalar, ReduceOp};
use crate::device::context_actor::ContextActorMsg;
use crate::device::Device;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Locked};
use crate::stream::Lane;
use crate::sys::nccl::{Addr, Communicator, Group, Op, UniqueId};
use cudarc::nccl::sys::ncclRedOp_t;

/// The communicators of a world of GPUs, re-formed after a member's rebuild.
pub(crate) struct NcclWorld {
    devices: Vec<Device>,
    formed: tokio::sync::Mutex<Option<Arc<Formed>>>,
}

/// One formation: the members' lanes and communicators, of the generations they were
/// made in.
pub(crate) struct Formed {
    lanes: Vec<Lane>,
    comms: Mutex<Vec<Communicator>>,
    device_ids: Vec<usize>,
}

/// What a rank brings to a meeting: the formation it called in and its buffers.
pub(crate) struct NcclPart<T: CollectiveScalar> {
    pub(crate) formed: Arc<Formed>,
    pub(crate) send: GpuRef<T>,
    pub(crate) recv: GpuRef<T>,
}

impl NcclWorld {
    /// The communicators of a world over `devices` (formed on first use).
    pub(crate) fn new(devices: Vec<Device>) -> Self {
        NcclWorld {
            devices,
            formed: tokio::sync::Mutex::new(None),
        }
    }

    /// The current formation: made anew when there is none yet or a member's generation
    /// moved since (the old communicators are aborted first).
    pub(crate) async fn formed(&self) -> Result<Arc<Formed>, GpuError> {
        let devices = &self.devices;
        let mut slot = self.formed.lock().await;
        if let Some(f) = slot.as_ref() {
            if devices
                .iter()
                .zip(&f.lanes)
                .all(|(d, l)| d.state().generation == l.generation)
            {
                return Ok(f.clone());
            }
        }
        *slot = None;
        let mut lanes = Vec::with_capacity(devices.len());
        for d in devices.iter() {
            lanes.push(d.call(|reply| ContextActorMsg::Lane { reply }).await?);
        }
        let streams = lanes.iter().map(|l| l.stream.clone()).collect();
        // `ncclCommInitAll` blocks until every communicator is up: off the async runtime.
        let comms = off_thread(move || Communicator::init_all(streams)).await?;
        let f = Arc::new(Formed {
            lanes,
            comms: Mutex::new(comms),
            device_ids: devices.iter().map(Device::id).collect(),
        });
        *slot = Some(f.clone());
        Ok(f)
    }
}

impl Formed {
    /// Resolves when the work enqueued so far on rank `rank`'s lane is done.
    pub(crate) async fn done(&self, rank: usize) -> Result<(), GpuError> {
        let lane = &self.lanes[rank];
        lane.completer.done(&lane.stream).await
    }
}

/// Runs `f` on a thread of its own and awaits its result.
async fn off_thread<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, GpuError> + Send + 'static,
) -> Result<R, GpuError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("nccl-init".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| GpuError::io("start an NCCL init thread", e))?;
    rx.await
        .unwrap_or_else(|_| Err(GpuError::Internal("the NCCL init thread panicked".into())))
}

/// The computation of a call on `T` whose parties are ranks `ranks`: checks every
/// buffer against its rank's device and the formation's generation, then enqueues each
/// rank's NCCL call in one group.
pub(crate) fn compute<T: CollectiveScalar>(ranks: Vec<usize>, size: usize) -> Compute {
    Box::new(move |call, parts| {
        let parts: Vec<&NcclPart<T>> = parts
            .iter()
            .map(|p| p.downcast_ref::<NcclPart<T>>().expect("an NcclPart of T"))
            .collect();
        let formed = &parts[0].formed;
        if let Some(p) = parts.iter().position(|p| !Arc::ptr_eq(&p.formed, formed)) {
            return Err(GpuError::DeviceLost(format!(
                "rank {} called after the world re-formed (a member was rebuilt) and another before: call again",
                ranks[p]
            )));
        }
        for (p, &r) in parts.iter().zip(&ranks) {
            for buf in [&p.send, &p.recv] {
                buf.validate(formed.device_ids[r], formed.lanes[r].generation)?;
            }
        }
        let comms = formed.comms.lock().unwrap_or_else(|e| e.into_inner());
        let mut held: Vec<_> = parts.iter().map(|p| hold(&p.send, &p.recv)).collect();
        let mut group = Group::start()?;
        for (i, bufs) in held.iter_mut().enumerate() {
            let sender = matches!(call.kind, Kind::SendRecv { .. }) && i == 0;
            enqueue::<T>(&mut group, &comms[ranks[i]], call, size, sender, bufs)?;
        }
        group.end()?;
        Ok(parts.iter().map(|_| Box::new(()) as Data).collect())
    })
}

/// A party's buffers locked: send, and recv unless it is the same buffer (then `shift`:
/// recv's window's byte offset from send's, zero in place). The rank checked that two
/// windows of one buffer are the same or disjoint.
struct Held<'b, T> {
    send: Locked<'b, T>,
    recv: Option<Locked<'b, T>>,
    shift: i64,
}

fn hold<'b, T: CollectiveScalar>(send: &'b GpuRef<T>, recv: &'b GpuRef<T>) -> Held<'b, T> {
    if send.same_buffer(recv) {
        let size = std::mem::size_of::<T>() as i64;
        Held {
            send: send.lock(),
            recv: None,
            shift: (recv.offset() as i64 - send.offset() as i64) * size,
        }
    } else {
        // In buffer-id order, as every operation locks its operands (`gpu_ref::operands`).
        let (send, recv) = if send.id() < recv.id() {
            let s = send.lock();
            (s, recv.lock())
        } else {
            let r = recv.lock();
            (send.lock(), r)
        };
        Held {
            send,
            recv: Some(recv),
            shift: 0,
        }
    }
}

/// Enqueues one rank's part of `call` (in a world of `size`) on `comm`, in `group`.
fn enqueue<'a, T: CollectiveScalar>(
    group: &mut Group<'a>,
    comm: &'a Communicator,
    call: &Call,
    size: usize,
    sender: bool,
    held: &'a mut Held<'_, T>,
) -> Result<(), GpuError> {
    let cpu = |_| GpuError::invalid("a CPU buffer in a world of GPUs");
    let Held { send, recv, shift } = held;
    let (send, recv) = match recv {
        Some(r) => {
            let (p, rec) = send.address(comm.stream(), false).map_err(cpu)?;
            let (q, rec_q) = r.address(comm.stream(), true).map_err(cpu)?;
            (Addr::new(p, rec), Some(Addr::new(q, rec_q)))
        }
        // One buffer for both, written (but for a sender's own read): one ordering, in
        // place or at recv's window.
        None => {
            let (p, rec) = send.address(comm.stream(), !sender).map_err(cpu)?;
            let recv = (*shift != 0).then(|| Addr::within(p.wrapping_add_signed(*shift)));
            (Addr::new(p, rec), recv)
        }
    };
    let (op, count) = match call.kind {
        Kind::AllReduce(op) => (Op::AllReduce(red_op(op)), call.len),
        Kind::Broadcast { root } => (Op::Broadcast { root }, call.len),
        Kind::AllGather => (Op::AllGather, call.len),
        Kind::ReduceScatter(op) => (Op::ReduceScatter(red_op(op)), call.len / size),
        Kind::SendRecv { to, .. } if sender => (Op::Send { to }, call.len),
        Kind::SendRecv { from, .. } => (Op::Recv { from }, call.len),
    };
    group.enqueue::<T>(comm, op, send, recv, count)
}

/// NCCL's reduction for a [`ReduceOp`].
fn red_op(op: ReduceOp) -> ncclRedOp_t {
    match op {
        ReduceOp::Sum => ncclRedOp_t::ncclSum,
        ReduceOp::Max => ncclRedOp_t::ncclMax,
        ReduceOp::Min => ncclRedOp_t::ncclMin,
        ReduceOp::Avg => ncclRedOp_t::ncclAvg,
    }
}

/// This process's one rank of a world of GPUs spread over processes: its communicator
/// joined the clique the coordinator named. Not re-formed after a rebuild of its device
/// (every process would have to join a new clique): the world must be joined again.
pub(crate) struct NcclRank {
    lane: Lane,
    comm: Mutex<Communicator>,
    device_id: usize,
}

impl NcclRank {
    /// Rank `rank` of `size` on `device`, in the clique `id` (returns once every rank
    /// joined it).
    pub(crate) async fn join(device: &Device, id: UniqueId, rank: usize, size: usize) -> Result<Self, GpuError> {
        let lane = device.call(|reply| ContextActorMsg::Lane { reply }).await?;
        let stream = lane.stream.clone();
        let comm = off_thread(move || Communicator::init_rank(stream, id, rank, size)).await?;
        Ok(NcclRank {
            lane,
            comm: Mutex::new(comm),
            device_id: device.id(),
        })
    }

    /// The generation of the device this rank's communicator belongs to.
    pub(crate) fn generation(&self) -> u64 {
        self.lane.generation
    }

    /// Enqueues this rank's part of `call` (every rank agreed to it) on its communicator.
    pub(crate) fn launch<T: CollectiveScalar>(
        &self,
        call: &Call,
        size: usize,
        sender: bool,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
    ) -> Result<(), GpuError> {
        for buf in [send, recv] {
            buf.validate(self.device_id, self.lane.generation)?;
        }
        let comm = self.comm.lock().unwrap_or_else(|e| e.into_inner());
        let mut held = hold(send, recv);
        let mut group = Group::start()?;
        enqueue::<T>(&mut group, &comm, call, size, sender, &mut held)?;
        group.end()
    }

    /// Resolves when the work enqueued so far on this rank's lane is done.
    pub(crate) async fn done(&self) -> Result<(), GpuError> {
        self.lane.completer.done(&self.lane.stream).await
    }
}
