//! `World` and `Rank`: a group of devices and each member's handle to its collectives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::exchange::{Answer, Call, Compute, Data, Exchange, Key};
use super::reduce::{reduce, CollectiveScalar, ReduceOp};
use crate::backend::state::{BackendKind, Status};
use crate::device::Device;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

/// A group of devices of this process that run collectives together, one [`Rank`] each
/// (in the order given). See the module docs for the semantics.
pub struct World {
    ranks: Vec<Rank>,
}

/// What the ranks of a world share.
struct Shared {
    devices: Vec<Device>,
    exchange: Exchange,
    deadline: Duration,
}

/// One member of a [`World`]: its device, and its collectives. Every rank must call the
/// same collectives in the same order (each from its own task or actor: a collective
/// resolves only when every rank has called it). Cheap to clone; clones are the same
/// rank and share its order.
#[derive(Clone)]
pub struct Rank {
    index: usize,
    shared: Arc<Shared>,
    /// The number of this rank's next collective, and of its next message to / from each
    /// peer.
    counters: Arc<Mutex<Counters>>,
}

#[derive(Default)]
struct Counters {
    collectives: u64,
    sent: HashMap<usize, u64>,
    received: HashMap<usize, u64>,
}

impl World {
    /// A world over `devices` (two or more, or one), rank `i` on `devices[i]`. A world
    /// with a GPU member is `Unsupported` until NCCL communicators are built (README).
    /// Each collective waits at most the first device's `request_timeout` for the other
    /// ranks.
    pub async fn new(devices: &[Device]) -> Result<World, GpuError> {
        if devices.is_empty() {
            return Err(GpuError::invalid("a world needs at least one device"));
        }
        for (i, d) in devices.iter().enumerate() {
            if d.ready().await?.backend == BackendKind::Cuda {
                return Err(GpuError::Unsupported(format!(
                    "rank {i} is a GPU ({d:?}): worlds of GPUs run on NCCL communicators, not built yet; worlds of CPU devices work"
                )));
            }
            if devices[..i].iter().any(|o| o.same_device(d)) {
                return Err(GpuError::invalid(format!(
                    "rank {i} is the device of an earlier rank: one rank per device"
                )));
            }
        }
        let shared = Arc::new(Shared {
            devices: devices.to_vec(),
            exchange: Exchange::new(),
            deadline: devices[0].config().request_timeout,
        });
        let ranks = (0..devices.len())
            .map(|index| Rank {
                index,
                shared: shared.clone(),
                counters: Default::default(),
            })
            .collect();
        Ok(World { ranks })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// Rank `i`'s handle.
    pub fn rank(&self, i: usize) -> Rank {
        self.ranks[i].clone()
    }

    /// Every rank's handle, in order.
    pub fn ranks(&self) -> Vec<Rank> {
        self.ranks.clone()
    }
}

impl std::fmt::Debug for Rank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rank({} of {} on {:?})", self.index, self.size(), self.device())
    }
}

impl Rank {
    /// This rank's number, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of ranks of its world.
    pub fn size(&self) -> usize {
        self.shared.devices.len()
    }

    /// This rank's device: the one its buffers belong to.
    pub fn device(&self) -> &Device {
        &self.shared.devices[self.index]
    }

    /// `recv` = `send` combined by `op` over every rank (element by element); equal
    /// lengths on every rank.
    pub async fn all_reduce<T: CollectiveScalar>(
        &self,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        op: ReduceOp,
    ) -> Result<(), GpuError> {
        let local = same_len(send, recv.len(), "recv");
        self.collective(
            call::<T>("all_reduce", send.len(), Some(op), None),
            send,
            recv,
            local,
            |c, parts| {
                let out = reduce(c.op.expect("an op"), &typed::<T>(&parts));
                parts.iter().map(|_| Box::new(out.clone()) as Data).collect()
            },
        )
        .await
    }

    /// `recv` on every rank = `send` of rank `root` (each rank passes a `send` of the
    /// same length; only the root's is read).
    pub async fn broadcast<T: CollectiveScalar>(
        &self,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        root: usize,
    ) -> Result<(), GpuError> {
        let local = same_len(send, recv.len(), "recv").and(self.check_rank(root, "root"));
        self.collective(
            call::<T>("broadcast", send.len(), None, Some(root)),
            send,
            recv,
            local,
            |c, parts| {
                let root = &typed::<T>(&parts)[c.root.expect("a root")];
                parts.iter().map(|_| Box::new(root.to_vec()) as Data).collect()
            },
        )
        .await
    }

    /// `recv` (`size` × `send.len()`) = every rank's `send`, in rank order.
    pub async fn all_gather<T: CollectiveScalar>(&self, send: &GpuRef<T>, recv: &GpuRef<T>) -> Result<(), GpuError> {
        let local = same_len(recv, send.len() * self.size(), "recv");
        self.collective(
            call::<T>("all_gather", send.len(), None, None),
            send,
            recv,
            local,
            |_, parts| {
                let all: Vec<T> = typed::<T>(&parts).concat();
                parts.iter().map(|_| Box::new(all.clone()) as Data).collect()
            },
        )
        .await
    }

    /// `send` (`size` × `recv.len()` on every rank) combined by `op` over the ranks; rank
    /// `r` gets block `r` of the result.
    pub async fn reduce_scatter<T: CollectiveScalar>(
        &self,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        op: ReduceOp,
    ) -> Result<(), GpuError> {
        let local = same_len(send, recv.len() * self.size(), "send");
        self.collective(
            call::<T>("reduce_scatter", send.len(), Some(op), None),
            send,
            recv,
            local,
            |c, parts| {
                let out = reduce(c.op.expect("an op"), &typed::<T>(&parts));
                let block = out.len() / parts.len();
                (0..parts.len())
                    .map(|r| Box::new(out[r * block..(r + 1) * block].to_vec()) as Data)
                    .collect()
            },
        )
        .await
    }

    /// Sends `buf` to rank `to`, whose matching [`Rank::recv`] (its next from this rank)
    /// takes a buffer of the same length; resolves once it was received.
    pub async fn send<T: CollectiveScalar>(&self, buf: &GpuRef<T>, to: usize) -> Result<(), GpuError> {
        // A peer that is no rank (or this one) has no meeting to fail: the error is this
        // caller's alone, and no counter moves.
        self.check_rank(to, "to").and_then(|()| self.not_self(to))?;
        let n = self.next(|c| c.sent.entry(to).or_default());
        let key = Key::PointToPoint {
            from: self.index,
            to,
            n,
        };
        let data = self.device().download(buf).await.map(|v| Box::new(v) as Data);
        let answer = self.shared.exchange.meet(
            key,
            0,
            2,
            call::<T>("send/recv", buf.len(), None, None),
            data,
            pass::<T>,
        );
        self.wait(answer, key, 2).await.map(|_| ())
    }

    /// Receives into `buf` the next message rank `from` sends this rank (same length).
    pub async fn recv<T: CollectiveScalar>(&self, buf: &GpuRef<T>, from: usize) -> Result<(), GpuError> {
        self.check_rank(from, "from").and_then(|()| self.not_self(from))?;
        let n = self.next(|c| c.received.entry(from).or_default());
        let key = Key::PointToPoint {
            from,
            to: self.index,
            n,
        };
        let data = Ok(Box::new(Vec::<T>::new()) as Data);
        let answer = self.shared.exchange.meet(
            key,
            1,
            2,
            call::<T>("send/recv", buf.len(), None, None),
            data,
            pass::<T>,
        );
        let got = self.wait(answer, key, 2).await?;
        self.device()
            .write(buf, *got.downcast::<Vec<T>>().expect("a Vec of T"))
            .await
    }

    /// One collective: this rank's data (or why it has none) to the meeting, its part of
    /// the result into `recv`.
    async fn collective<T: CollectiveScalar>(
        &self,
        call: Call,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        local: Result<(), GpuError>,
        compute: Compute,
    ) -> Result<(), GpuError> {
        let n = self.next(|c| &mut c.collectives);
        let key = Key::Collective(n);
        let data = match local {
            Ok(()) => self.device().download(send).await.map(|v| Box::new(v) as Data),
            Err(e) => Err(e),
        };
        let answer = self
            .shared
            .exchange
            .meet(key, self.index, self.size(), call, data, compute);
        let part = self.wait(answer, key, self.size()).await?;
        self.device()
            .write(recv, *part.downcast::<Vec<T>>().expect("a Vec of T"))
            .await
    }

    /// Takes this rank's next number from the counter `which` picks.
    fn next(&self, which: impl FnOnce(&mut Counters) -> &mut u64) -> u64 {
        let mut c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let n = which(&mut c);
        *n += 1;
        *n - 1
    }

    /// Waits for the meeting's answer — failing it for every party when a member's
    /// device is lost or the deadline passes.
    async fn wait(&self, mut answer: Answer, key: Key, parties: usize) -> Result<Data, GpuError> {
        let deadline = tokio::time::sleep(self.shared.deadline);
        tokio::pin!(deadline);
        let mut states: Vec<_> = self.shared.devices.iter().map(|d| d.watch_state()).collect();
        loop {
            if let Some(e) = self.lost_member(&states) {
                self.shared.exchange.abandon(key, parties, e);
            }
            let changed = futures::future::select_all(states.iter_mut().map(|s| Box::pin(s.changed())));
            // The answer first: one already in is never traded for a timeout.
            tokio::select! {
                biased;
                r = &mut answer => {
                    return r.unwrap_or_else(|_| Err(GpuError::Internal(format!("{key:?}: the meeting was dropped"))));
                }
                _ = changed => {}
                _ = &mut deadline => {
                    let e = GpuError::Timeout(self.shared.deadline);
                    self.shared.exchange.abandon(key, parties, e.clone());
                    return Err(e);
                }
            }
        }
    }

    /// The error of the first member whose device is lost, if any.
    fn lost_member(&self, states: &[tokio::sync::watch::Receiver<crate::device::DeviceState>]) -> Option<GpuError> {
        states.iter().enumerate().find_map(|(i, s)| match &s.borrow().status {
            Status::Lost(e) => Some(GpuError::DeviceLost(format!(
                "rank {i} of the world ({:?}) is lost: {e}",
                self.shared.devices[i]
            ))),
            _ => None,
        })
    }

    fn check_rank(&self, r: usize, what: &str) -> Result<(), GpuError> {
        if r < self.size() {
            Ok(())
        } else {
            Err(GpuError::InvalidArgument(
                Invalid::new(format!("{what} {r} is not a rank of a world of {}", self.size()))
                    .mismatch(format_args!("a rank below {}", self.size()), format_args!("{r}")),
            ))
        }
    }

    fn not_self(&self, peer: usize) -> Result<(), GpuError> {
        if peer == self.index {
            Err(GpuError::invalid(format!(
                "rank {peer} sending to itself: copy instead"
            )))
        } else {
            Ok(())
        }
    }
}

/// The call as every party describes it.
fn call<T: CollectiveScalar>(what: &'static str, len: usize, op: Option<ReduceOp>, root: Option<usize>) -> Call {
    Call {
        what,
        dtype: T::NAME,
        len,
        op,
        root,
    }
}

/// `Ok` if `buf` holds `want` elements, else the `InvalidArgument` naming `what`.
fn same_len<T: CollectiveScalar>(buf: &GpuRef<T>, want: usize, what: &str) -> Result<(), GpuError> {
    if buf.len() == want {
        Ok(())
    } else {
        Err(GpuError::InvalidArgument(Invalid::length(
            format!(
                "a collective's {what} of {} elements where {want} are needed",
                buf.len()
            ),
            what,
            want,
            buf.len(),
        )))
    }
}

/// The parties' data as slices of `T`.
fn typed<T: CollectiveScalar>(parts: &[Data]) -> Vec<&[T]> {
    parts
        .iter()
        .map(|p| p.downcast_ref::<Vec<T>>().expect("a Vec of T").as_slice())
        .collect()
}

/// A send/receive: the receiver (party 1) gets the sender's data.
fn pass<T: CollectiveScalar>(_: &Call, mut parts: Vec<Data>) -> Vec<Data> {
    let sent = parts.swap_remove(0);
    vec![Box::new(Vec::<T>::new()) as Data, sent]
}
