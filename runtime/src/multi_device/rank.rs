//! `World` and `Rank`: a group of devices and each member's handle to its collectives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::exchange::{Answer, Call, Data, Exchange, Key, Kind};
#[cfg(feature = "nccl")]
use super::nccl::{self, NcclPart, NcclRank, NcclWorld};
use super::reduce::{CollectiveScalar, ReduceOp};
use super::remote::{Client, Codec};
use super::rendezvous::{Joined, Rendezvous};
use crate::backend::state::{BackendKind, Status};
use crate::device::Device;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

/// A group of devices of this process that run collectives together, one [`Rank`] each
/// (in the order given). See the module docs for the semantics.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// use atomr_accel_cuda_runtime::multi_device::{ReduceOp, World};
/// let mut devices = vec![];
/// for device_id in 0..2 {
///     devices.push(Device::open(&system, DeviceConfig { device_id, ..DeviceConfig::cpu() }).await?);
/// }
/// let world = World::new(&devices).await?;
/// let ranks = world.ranks().into_iter().map(|rank| {
///     tokio::spawn(async move {
///         let x = rank.device().upload(vec![rank.index() as f32 + 1.0; 4]).await?;
///         let total = rank.device().alloc::<f32>(4).await?;
///         rank.all_reduce(&x, &total, ReduceOp::Sum).await?;
///         rank.device().download(&total).await
///     })
/// });
/// for rank in ranks.collect::<Vec<_>>() {
///     assert_eq!(rank.await.expect("the rank's task")?, vec![3.0; 4]); // 1 + 2
/// }
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct World {
    ranks: Vec<Rank>,
}

/// What the ranks of a world in this process share.
struct Shared {
    size: usize,
    /// The device of each rank of this process, by rank (`None`: another process's).
    devices: Vec<Option<Device>>,
    meeting: Meeting,
    deadline: Duration,
    plane: Plane,
}

/// Where the ranks' calls meet.
enum Meeting {
    /// In this process: every rank's, or (rank 0 of a world spread over processes) this
    /// one's and those the coordinator serves.
    Here(Arc<Exchange>),
    /// At rank 0's process, through this process's connection.
    Remote(Arc<Client>),
}

/// Where the data of collectives moves.
enum Plane {
    /// Through the host: a world of CPU devices.
    Host,
    /// NCCL between the GPUs of this process, every rank's call enqueued by the last
    /// arrival.
    #[cfg(feature = "nccl")]
    Nccl(NcclWorld),
    /// NCCL from this process's one rank of a world spread over processes, enqueued once
    /// the coordinator saw every rank call the same.
    #[cfg(feature = "nccl")]
    NcclRank(NcclRank),
}

impl Meeting {
    async fn meet(&self, key: Key, party: &Party, call: Call, data: Result<Data, GpuError>, codec: Codec) -> Answer {
        self.meet_with(key, party, call, data, codec, (codec.compute)()).await
    }

    async fn meet_with(
        &self,
        key: Key,
        party: &Party,
        call: Call,
        data: Result<Data, GpuError>,
        codec: Codec,
        compute: super::exchange::Compute,
    ) -> Answer {
        match self {
            Meeting::Here(x) => x.meet(key, party.index, party.of, call, data, compute),
            Meeting::Remote(c) => c.meet(key, party.index, party.of, call, data, codec).await,
        }
    }

    async fn abandon(&self, key: Key, parties: usize, e: GpuError) {
        match self {
            Meeting::Here(x) => x.abandon(key, parties, e),
            Meeting::Remote(c) => c.abandon(key, parties, e).await,
        }
    }
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
    /// A world over `devices` (one or more), rank `i` on `devices[i]`, each a different
    /// device. When every rank is a GPU of this process (an in-process device, each on
    /// a GPU of its own) the collectives run on NCCL communicators, formed here.
    /// Otherwise — CPU devices, isolated devices (whose contexts live in worker
    /// processes, out of NCCL's reach), or a mix — they run through the host: each
    /// rank's send buffer is downloaded, the last arrival combines them, and each rank
    /// writes its part back (correct, at the speed of host copies; [`Rank::on_nccl`]
    /// says which). Each collective waits at most the first device's `request_timeout`
    /// for the other ranks.
    pub async fn new(devices: &[Device]) -> Result<World, GpuError> {
        if devices.is_empty() {
            return Err(GpuError::invalid("a world needs at least one device"));
        }
        let mut in_process_gpus = 0;
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].iter().any(|o| o.same_device(d)) {
                return Err(GpuError::invalid(format!(
                    "rank {i} is the device of an earlier rank: one rank per device"
                )));
            }
            if d.ready().await?.backend == BackendKind::Cuda && d.config().isolation.is_none() {
                in_process_gpus += 1;
            }
        }
        let plane = if in_process_gpus == devices.len() {
            if let Some((j, i)) = (0..devices.len())
                .flat_map(|i| (0..i).map(move |j| (j, i)))
                .find(|&(j, i)| devices[j].config().device_id == devices[i].config().device_id)
            {
                return Err(GpuError::invalid(format!(
                    "ranks {j} and {i} are both on GPU {}: NCCL runs one rank per GPU",
                    devices[i].config().device_id
                )));
            }
            nccl_plane(devices).await?
        } else {
            Plane::Host
        };
        let shared = Arc::new(Shared {
            size: devices.len(),
            devices: devices.iter().cloned().map(Some).collect(),
            meeting: Meeting::Here(Arc::new(Exchange::new())),
            deadline: devices[0].config().request_timeout,
            plane,
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

    /// This process's rank of a world spread over processes (and hosts), on `device`:
    /// every process calls `join` with the same [`Rendezvous`] address and size and its
    /// own rank. Rank 0's process holds the meetings; a world of GPUs moves its data on
    /// NCCL between the processes (one GPU each), a world of CPU (or isolated) devices through rank 0.
    /// Resolves once every rank has joined (and, for GPUs, the NCCL clique is up), or
    /// fails after the device's `request_timeout`. A world spread over processes does not
    /// re-form after its device is rebuilt: join a new one.
    pub async fn join(device: &Device, rendezvous: &Rendezvous) -> Result<Rank, GpuError> {
        // An isolated device's context lives in a worker process, out of NCCL's reach:
        // it joins a world whose collectives run through the host.
        let gpu = device.ready().await?.backend == BackendKind::Cuda && device.config().isolation.is_none();
        if gpu {
            nccl_ready()?;
        }
        let deadline = device.config().request_timeout;
        let (joined, id) = rendezvous.join(gpu, nccl_unique_id, deadline).await?;
        let plane = match id {
            Some(id) => nccl_rank_plane(device, rendezvous, &id, deadline).await?,
            None => Plane::Host,
        };
        let meeting = match joined {
            Joined::Coordinator(x) => Meeting::Here(x),
            Joined::Member(c) => Meeting::Remote(c),
        };
        let mut devices = vec![None; rendezvous.size];
        devices[rendezvous.rank] = Some(device.clone());
        Ok(Rank {
            index: rendezvous.rank,
            shared: Arc::new(Shared {
                size: rendezvous.size,
                devices,
                meeting,
                deadline,
                plane,
            }),
            counters: Default::default(),
        })
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
        self.shared.size
    }

    /// This rank's device: the one its buffers belong to.
    pub fn device(&self) -> &Device {
        self.shared.devices[self.index].as_ref().expect("a rank's own device")
    }

    /// True if the world's collectives run on NCCL (a world of in-process GPUs), false if
    /// through the host (CPU devices, isolated devices, or a mix).
    pub fn on_nccl(&self) -> bool {
        !matches!(self.shared.plane, Plane::Host)
    }

    /// `recv` = `send` combined by `op` over every rank (element by element); equal
    /// lengths on every rank. `send` and `recv` may be the same buffer (in place).
    pub async fn all_reduce<T: CollectiveScalar>(
        &self,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        op: ReduceOp,
    ) -> Result<(), GpuError> {
        let local = same_len(send, recv.len(), "recv");
        self.collective(call::<T>(Kind::AllReduce(op), send.len()), send, recv, local)
            .await
    }

    /// `recv` on every rank = `send` of rank `root` (each rank passes a `send` of the
    /// same length; only the root's is read). `send` and `recv` may be the same buffer.
    pub async fn broadcast<T: CollectiveScalar>(
        &self,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        root: usize,
    ) -> Result<(), GpuError> {
        let local = same_len(send, recv.len(), "recv").and(self.check_rank(root, "root"));
        self.collective(call::<T>(Kind::Broadcast { root }, send.len()), send, recv, local)
            .await
    }

    /// `recv` (`size` × `send.len()`) = every rank's `send`, in rank order.
    pub async fn all_gather<T: CollectiveScalar>(&self, send: &GpuRef<T>, recv: &GpuRef<T>) -> Result<(), GpuError> {
        let local = same_len(recv, send.len() * self.size(), "recv");
        self.collective(call::<T>(Kind::AllGather, send.len()), send, recv, local)
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
        self.collective(call::<T>(Kind::ReduceScatter(op), send.len()), send, recv, local)
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
        let kind = Kind::SendRecv { from: self.index, to };
        self.meet(
            key,
            Party::sender(self.index, to),
            call::<T>(kind, buf.len()),
            buf,
            buf,
            Ok(()),
        )
        .await
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
        let kind = Kind::SendRecv { from, to: self.index };
        self.meet(
            key,
            Party::receiver(from, self.index),
            call::<T>(kind, buf.len()),
            buf,
            buf,
            Ok(()),
        )
        .await
    }

    /// One collective of every rank: the next collective meeting.
    async fn collective<T: CollectiveScalar>(
        &self,
        call: Call,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        local: Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        let local = local.and_then(|()| windows_fit(&call.kind, self.index, send, recv));
        let key = Key::Collective(self.next(|c| &mut c.collectives));
        let party = Party {
            index: self.index,
            of: self.size(),
            ranks: (0..self.size()).collect(),
            contributes: true,
            receives: true,
        };
        self.meet(key, party, call, send, recv, local).await
    }

    /// This rank's part of meeting `key`: its data (or why it has none) to the meeting,
    /// then its part of the result into `recv` — on the host, or (NCCL) enqueued on its
    /// lane by the last arrival, waited for here.
    async fn meet<T: CollectiveScalar>(
        &self,
        key: Key,
        party: Party,
        call: Call,
        send: &GpuRef<T>,
        recv: &GpuRef<T>,
        local: Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        let generations: Vec<Option<u64>> = self
            .shared
            .devices
            .iter()
            .map(|d| d.as_ref().map(|d| d.state().generation))
            .collect();
        let meeting = &self.shared.meeting;
        match &self.shared.plane {
            Plane::Host => {
                let data = match local {
                    Ok(()) if party.contributes => self.device().download(send).await.map(|v| Box::new(v) as Data),
                    Ok(()) => Ok(Box::new(Vec::<T>::new()) as Data),
                    Err(e) => Err(e),
                };
                let answer = meeting.meet(key, &party, call, data, Codec::host::<T>()).await;
                let part = self.wait(answer, key, party.of, &generations).await?;
                if !party.receives {
                    return Ok(());
                }
                self.device()
                    .write(recv, *part.downcast::<Vec<T>>().expect("a Vec of T"))
                    .await
            }
            #[cfg(feature = "nccl")]
            Plane::Nccl(nccl) => {
                let formed = match local {
                    Ok(()) => nccl.formed().await,
                    Err(e) => Err(e),
                };
                let data = formed.as_ref().map(|f| {
                    Box::new(NcclPart {
                        formed: f.clone(),
                        send: send.clone(),
                        recv: recv.clone(),
                    }) as Data
                });
                let compute = nccl::compute::<T>(party.ranks.clone(), self.size());
                let answer = meeting
                    .meet_with(
                        key,
                        &party,
                        call,
                        data.map_err(|e| e.clone()),
                        Codec::control(),
                        compute,
                    )
                    .await;
                self.wait(answer, key, party.of, &generations).await?;
                formed?.done(self.index).await
            }
            #[cfg(feature = "nccl")]
            Plane::NcclRank(rank) => {
                let local = local.and_then(|()| self.same_generation(rank));
                let data = local.map(|()| Box::new(()) as Data);
                let answer = meeting.meet(key, &party, call.clone(), data, Codec::control()).await;
                self.wait(answer, key, party.of, &generations).await?;
                let sender = matches!(call.kind, Kind::SendRecv { .. }) && party.index == 0;
                rank.launch::<T>(&call, self.size(), sender, send, recv)?;
                rank.done().await
            }
        }
    }

    /// `Ok` while this rank's device is of the generation its communicator was made in.
    #[cfg(feature = "nccl")]
    fn same_generation(&self, rank: &NcclRank) -> Result<(), GpuError> {
        let now = self.device().state().generation;
        if now == rank.generation() {
            Ok(())
        } else {
            Err(GpuError::DeviceLost(format!(
                "rank {}'s device was rebuilt (generation {} → {now}) since it joined: a world spread over processes does not re-form, join a new one",
                self.index,
                rank.generation()
            )))
        }
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
    async fn wait(
        &self,
        mut answer: Answer,
        key: Key,
        parties: usize,
        generations: &[Option<u64>],
    ) -> Result<Data, GpuError> {
        let deadline = tokio::time::sleep(self.shared.deadline);
        tokio::pin!(deadline);
        let mut states: Vec<_> = self
            .shared
            .devices
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((i, d.as_ref()?.watch_state())))
            .collect();
        loop {
            if let Some(e) = self.lost_member(&states, generations) {
                self.shared.meeting.abandon(key, parties, e).await;
            }
            let changed = futures::future::select_all(states.iter_mut().map(|(_, s)| Box::pin(s.changed())));
            // The answer first: one already in is never traded for a timeout.
            tokio::select! {
                biased;
                r = &mut answer => {
                    return r.unwrap_or_else(|_| Err(GpuError::Internal(format!("{key:?}: the meeting was dropped"))));
                }
                _ = changed => {}
                _ = &mut deadline => {
                    let e = GpuError::Timeout(self.shared.deadline);
                    self.shared.meeting.abandon(key, parties, e.clone()).await;
                    return Err(e);
                }
            }
        }
    }

    /// The error of the first member whose device is lost, or was rebuilt since the
    /// collective began (at `generations`), if any.
    fn lost_member(
        &self,
        states: &[(usize, tokio::sync::watch::Receiver<crate::device::DeviceState>)],
        generations: &[Option<u64>],
    ) -> Option<GpuError> {
        states.iter().find_map(|&(i, ref s)| {
            let s = s.borrow();
            let device = self.shared.devices[i].as_ref().expect("a rank of this process");
            match &s.status {
                Status::Lost(e) => Some(GpuError::DeviceLost(format!(
                    "rank {i} of the world ({device:?}) is lost: {e}"
                ))),
                _ if Some(s.generation) != generations[i] => Some(GpuError::DeviceLost(format!(
                    "rank {i} of the world ({device:?}) was rebuilt during the collective (generation {:?} → {}): its buffers are gone",
                    generations[i], s.generation
                ))),
                _ => None,
            }
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
fn call<T: CollectiveScalar>(kind: Kind, len: usize) -> Call {
    Call {
        kind,
        dtype: T::NAME.into(),
        len,
    }
}

/// A rank's place in one meeting.
struct Party {
    /// Its index among the parties, and their number.
    index: usize,
    of: usize,
    /// The rank of each party.
    ranks: Vec<usize>,
    /// Whether its send buffer's contents go in, and the result comes back into recv.
    contributes: bool,
    receives: bool,
}

impl Party {
    /// A send/recv's sender, rank `from`: party 0 of 2.
    fn sender(from: usize, to: usize) -> Party {
        Party {
            index: 0,
            of: 2,
            ranks: vec![from, to],
            contributes: true,
            receives: false,
        }
    }

    /// A send/recv's receiver, rank `to`: party 1 of 2.
    fn receiver(from: usize, to: usize) -> Party {
        Party {
            index: 1,
            of: 2,
            ranks: vec![from, to],
            contributes: false,
            receives: true,
        }
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

/// Whether a collective of `kind` may take `send` and `recv` on rank `rank`: apart, the
/// same view (in place), or NCCL's in-place layouts — an all-gather's `send` this rank's
/// block of `recv`, a reduce-scatter's `recv` this rank's block of `send` (what
/// sharded-parameter training passes: the shard is a view of the whole). Any other
/// overlap is an `InvalidArgument`: the collective would read what it writes.
fn windows_fit<T: CollectiveScalar>(
    kind: &Kind,
    rank: usize,
    send: &GpuRef<T>,
    recv: &GpuRef<T>,
) -> Result<(), GpuError> {
    if !send.overlaps(recv) || send.window() == recv.window() {
        return Ok(());
    }
    // `part` is block `rank` of `whole` (lengths are checked beside, against the world).
    let block_of =
        |whole: &GpuRef<T>, part: &GpuRef<T>| whole.window().start + rank * part.len() == part.window().start;
    let (fits, expected) = match kind {
        Kind::AllGather => (block_of(recv, send), format!("send as block {rank} of recv")),
        Kind::ReduceScatter(_) => (block_of(send, recv), format!("recv as block {rank} of send")),
        _ => (false, "send's own window".to_string()),
    };
    if fits {
        return Ok(());
    }
    Err(GpuError::InvalidArgument(
        crate::error::Invalid::new(format!(
            "send (elements {:?} of the buffer) and recv (elements {:?}) overlap in no layout a collective \
             can run in place: pass one view for both, disjoint views, or (all-gather / reduce-scatter) the \
             rank's block of the other",
            send.window(),
            recv.window()
        ))
        .arg("recv")
        .mismatch(
            format!("{expected}, or elements apart from it"),
            "a partly overlapping window",
        ),
    ))
}

/// `Ok` when a world of GPUs can form here: the build has NCCL's bindings (the `nccl`
/// feature) and the library is on the library path.
fn nccl_ready() -> Result<(), GpuError> {
    #[cfg(feature = "nccl")]
    if crate::sys::nccl::nccl_present() {
        return Ok(());
    }
    if !cfg!(feature = "nccl") {
        return Err(GpuError::without_feature("a world of GPUs", "nccl", crate::CRATE));
    }
    Err(GpuError::Unsupported(
        "a world of GPUs needs NCCL (libnccl.so.2, e.g. the nvidia-nccl-cu13 wheel's lib/) on the library path".into(),
    ))
}

/// The plane of a world of this process's GPUs: one NCCL clique, formed.
async fn nccl_plane(devices: &[Device]) -> Result<Plane, GpuError> {
    nccl_ready()?;
    #[cfg(feature = "nccl")]
    {
        let nccl = NcclWorld::new(devices.to_vec());
        nccl.formed().await?;
        Ok(Plane::Nccl(nccl))
    }
    #[cfg(not(feature = "nccl"))]
    {
        let _ = devices;
        Err(GpuError::without_feature("a world of GPUs", "nccl", crate::CRATE))
    }
}

/// A new NCCL clique's id, as the coordinator of a world spread over processes hands
/// it to every rank.
fn nccl_unique_id() -> Result<Vec<u8>, GpuError> {
    #[cfg(feature = "nccl")]
    {
        crate::sys::nccl::UniqueId::new().map(|id| id.to_bytes())
    }
    #[cfg(not(feature = "nccl"))]
    {
        Err(GpuError::without_feature("a world of GPUs", "nccl", crate::CRATE))
    }
}

/// This process's rank of an NCCL clique spread over processes, joined within `deadline`.
async fn nccl_rank_plane(
    device: &Device,
    rendezvous: &Rendezvous,
    id: &[u8],
    deadline: Duration,
) -> Result<Plane, GpuError> {
    #[cfg(feature = "nccl")]
    {
        let id = crate::sys::nccl::UniqueId::from_bytes(id)?;
        let join = NcclRank::join(device, id, rendezvous.rank, rendezvous.size);
        let rank = tokio::time::timeout(deadline, join)
            .await
            .map_err(|_| GpuError::Timeout(deadline))??;
        Ok(Plane::NcclRank(rank))
    }
    #[cfg(not(feature = "nccl"))]
    {
        let _ = (device, rendezvous, id, deadline);
        Err(GpuError::without_feature("a world of GPUs", "nccl", crate::CRATE))
    }
}
