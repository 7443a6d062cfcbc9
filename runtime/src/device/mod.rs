//! The device tier: a stable `DeviceActor` over a restartable `ContextActor`, and the
//! `Device` handle users hold.
//!
//! Requests take the short path straight to the inner actor that serves them while the
//! device is ready; while the inner tier (re)starts they queue in the `DeviceActor`
//! (bounded: `Backpressure` beyond `queue_capacity`); once the device is lost every
//! request fails at once with `DeviceLost`.

mod actor_gpu;
mod bounds;
pub(crate) mod context_actor;
mod dense_to_csr;
pub(crate) mod device_actor;
mod graph_api;
mod host_copies;
mod observability_api;
pub(crate) mod origin;
mod pool;
mod precompile;
mod reduce_api;
pub(crate) mod route;
mod scan_api;
mod scratch;
mod solver_api;
mod sort_api;
mod sort_host;
mod sparse_api;
mod surface;
pub(crate) mod test_hooks;
mod warm;

use std::sync::Arc;

use tokio::sync::{oneshot, watch};

pub use self::actor_gpu::ActorGpu;
pub use self::bounds::*;
pub use self::precompile::{precompile_all, precompile_all_with, PrecompileStep, PrecompileSummary};
pub use self::reduce_api::Reduce;
pub use self::scan_api::Scan;
pub use self::solver_api::Svd;
pub use self::sort_api::{SortKey, SortValue};
pub use crate::backend::config::{BackendChoice, DeviceConfig, IsolationConfig, Libraries};
pub use crate::backend::state::{BackendKind, DeviceInfo, DeviceState, Status};

use self::context_actor::*;
use self::device_actor::{DeviceActor, DeviceActorMsg};
use self::route::{Inner, Routable, Routed};
use crate::actor::{ActorRef, ActorSystem, Reply};
use crate::backend::state::DeviceShared;
use crate::error::GpuError;
use crate::event::{EventActorMsg, GpuEvent};
use crate::gpu_ref::GpuRef;
use crate::host::PinnedBuf;
use crate::kernel::dsl::registry::KernelInstance;
use crate::launch::{KernelArgs, LaunchConfig};
use crate::library::kernels::KernelActorMsg;
use crate::library::modules::ModuleActorMsg;
use crate::module::{KernelSource, ModuleImage, ModuleRef};

/// The longest busy stretch of a caller's reply spin between two yields
/// ([`DeviceConfig::reply_spin`]): long enough that a reply arriving within it is seen at
/// once, short enough that the caller's thread still serves its other tasks.
const REPLY_SPIN_SLICE: std::time::Duration = std::time::Duration::from_micros(10);

/// Counts a request as in flight for as long as it lives (also when its future is
/// dropped half-way).
struct InFlight<'a>(&'a DeviceShared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a DeviceShared) -> Self {
        let n = shared.in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        shared.metrics.in_flight.set(n as f64);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let n = self.0.in_flight.fetch_sub(1, std::sync::atomic::Ordering::Relaxed) - 1;
        self.0.metrics.in_flight.set(n as f64);
    }
}

/// A handle to one device (a GPU, or the CPU device). Cheap to clone; every method is a
/// typed request to the device's actors.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// let dev = Device::open(&system, DeviceConfig::cpu()).await?; // or ::auto(), ::cuda(0)
/// let info = dev.ready().await?;
/// println!("{} ({:?})", info.name, info.backend);
/// let a = dev.upload(vec![1.0f64, 2.0, 3.0, 4.0]).await?; // 2×2, column-major
/// let c = dev.alloc::<f64>(4).await?;
/// dev.gemm(Gemm::<f64>::new(2, 2, 2), &a, &a, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![7.0, 10.0, 15.0, 22.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Device {
    outer: ActorRef<DeviceActorMsg>,
    shared: Arc<DeviceShared>,
    state: watch::Receiver<DeviceState>,
    system: ActorSystem,
    /// In-place library actors for calls from outside any actor, `library_pool` of them
    /// (`Device::serve_in_place`), shared by every clone of this handle.
    in_place: Arc<[actor_gpu::GpuSlot]>,
    /// Small buffers the runtime's library calls lend themselves, shared by every clone.
    scratch: Arc<scratch::ScratchPool>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.outer.path())
    }
}

impl Device {
    /// Starts a device under `system` (as the top-level actor `device-<id>`) and returns
    /// at once; requests made before the inner tier is ready are queued.
    pub fn start(system: &ActorSystem, config: DeviceConfig) -> Result<Device, GpuError> {
        config.check_pinned()?;
        if let Some(e) = config.isolation.as_ref().and_then(|_| crate::isolation::unavailable()) {
            return Err(e);
        }
        let name = format!("device-{}", config.device_id);
        let shared = DeviceShared::new(config);
        let s2 = shared.clone();
        let props = DeviceActor::gpu_props(move || DeviceActor::new(s2.clone()))
            .supervise_children(DeviceActor::inner_strategy(&shared.config))
            .mailbox(shared.config.mailbox_capacity);
        let outer = system.spawn(props, &name)?;
        let in_place = (0..shared.config.library_pool.max(1))
            .map(|_| actor_gpu::GpuSlot::new())
            .collect();
        Ok(Device {
            outer,
            state: shared.state.subscribe(),
            shared,
            system: system.clone(),
            in_place,
            scratch: Arc::default(),
        })
    }

    /// Starts a device and waits until it is ready (or has failed to start) and, with
    /// `DeviceConfig::warm_up` (the default), until its libraries are warm
    /// ([`Device::warm_up`]), so that no first call pays their initialisation.
    pub async fn open(system: &ActorSystem, config: DeviceConfig) -> Result<Device, GpuError> {
        let d = Device::start(system, config)?;
        d.ready().await?;
        if d.config().warm_up {
            d.warm_up().await;
        }
        Ok(d)
    }

    /// Waits until the device serves requests; the error if it is lost instead.
    pub async fn ready(&self) -> Result<DeviceInfo, GpuError> {
        let s = self.wait_state(|s| !matches!(s.status, Status::Starting)).await?;
        s.info.ok_or_else(|| GpuError::DeviceLost("no device info".into()))
    }

    /// Waits (within the request timeout) for a state that satisfies `pred`, or for the
    /// device to be lost (then its error).
    async fn wait_state(&self, pred: impl Fn(&DeviceState) -> bool) -> Result<DeviceState, GpuError> {
        let mut rx = self.state.clone();
        let timeout = self.shared.config.request_timeout;
        let s = {
            let wait = rx.wait_for(|s| pred(s) || matches!(s.status, Status::Lost(_)));
            match tokio::time::timeout(timeout, wait).await {
                Ok(Ok(s)) => s.clone(),
                Ok(Err(_)) => return Err(GpuError::DeviceLost("device state closed".into())),
                Err(_) => return Err(GpuError::Timeout(timeout)),
            }
        };
        match s.status {
            Status::Lost(e) => Err(e),
            _ => Ok(s),
        }
    }

    /// The latest published state (generation, status, info).
    pub fn state(&self) -> DeviceState {
        self.state.borrow().clone()
    }

    /// A receiver that sees every state change (generation bumps, loss).
    pub fn watch_state(&self) -> watch::Receiver<DeviceState> {
        self.state.clone()
    }

    /// The device's configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.shared.config
    }

    /// The stable address of the device (the outer tier).
    pub fn id(&self) -> usize {
        self.shared.config.device_id
    }

    /// Whether `other` is a handle to this very device (not merely the same ordinal).
    pub(crate) fn same_device(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Whether the device is a GPU (a CUDA context is ready): what decides if its
    /// threads and callers spin for GPU work and if there are libraries to warm.
    fn on_gpu(&self) -> bool {
        matches!(
            self.shared.state.borrow().info.as_ref().map(|i| i.backend),
            Some(crate::backend::state::BackendKind::Cuda)
        )
    }

    /// Sends a request to the inner actor it is for (the short path when ready, through
    /// the `DeviceActor` otherwise) and awaits its reply.
    pub(crate) async fn call<M: Routable, R: Send + 'static>(
        &self,
        make: impl FnOnce(Reply<Result<R, GpuError>>) -> M,
    ) -> Result<R, GpuError> {
        let _counted = InFlight::enter(&self.shared);
        let started = self.shared.metrics.on.then(std::time::Instant::now);
        let (reply, rx) = Reply::pair();
        // Counts the request at a pooled library actor until its reply is in.
        let _busy = self.submit(make(reply).route()).await?;
        let r = self.await_reply(rx).await;
        self.record_request(started);
        r
    }

    /// Records a request's seconds since `started` (`None`: metrics are off).
    fn record_request(&self, started: Option<std::time::Instant>) {
        if let Some(t) = started {
            self.shared.metrics.request_seconds.record(t.elapsed().as_secs_f64());
        }
    }

    /// Counts a request in flight until the guard drops: an `ActorGpu`'s call in place,
    /// which does not pass through [`Device::call`].
    pub(crate) fn counted(&self) -> impl Drop + '_ {
        InFlight::enter(&self.shared)
    }

    /// Requests made through this device's handles that have not been answered yet
    /// (queued, running or waiting for the GPU): what `PlacementActor` balances.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn submit(&self, routed: Routed) -> Result<Option<pool::Busy>, GpuError> {
        // A `Recorder` journals the request (as the wire frame a worker would get) and
        // sees its answer; every routed operation is journalled so, none by hand.
        let routed = match self.shared.journal.get() {
            Some(j) => j.request(|w, tap| routed.journal(w, tap)),
            None => routed,
        };
        let inner = {
            let s = self.state.borrow();
            if let Status::Lost(e) = &s.status {
                let e = GpuError::lost(self.id(), e);
                routed.fail(e.clone());
                return Err(e);
            }
            s.inner.clone()
        };
        let origin = origin::current();
        let routed = match inner.as_ref().map(|i| i.get::<Inner>()) {
            Some(Inner::Local(_)) => match self.serve_in_place(routed) {
                Ok(reply) => {
                    if let Some(reply) = reply {
                        reply.await;
                    }
                    return Ok(None);
                }
                Err(routed) => routed,
            },
            _ => routed,
        };
        // Boxed: the hop to an actor costs microseconds, while its future held inline
        // would make every call's future (the in-place ones too) kilobytes larger.
        Box::pin(self.forward(routed, inner, origin)).await
    }

    /// Sends a request that did not run in place to the actor that serves it.
    async fn forward(
        &self,
        routed: Routed,
        inner: Option<crate::backend::state::RouteSlot>,
        origin: u64,
    ) -> Result<Option<pool::Busy>, GpuError> {
        match inner {
            // Straight to the inner actor (or the isolated device's worker) — for every
            // library: the FFT, RNG, solver and graph actors used to go through the
            // `DeviceActor`, an extra ask of ~25 µs and more per call (BENCHMARKS.md).
            Some(inner) => routed.send_to(inner.get(), origin).await,
            None => {
                let timeout = self.shared.config.request_timeout;
                self.outer
                    .ask_try(|reply| DeviceActorMsg::Submit { routed, origin, reply }, timeout)
                    .await
                    .map(|()| None)
            }
        }
    }

    async fn await_reply<R>(&self, mut rx: oneshot::Receiver<Result<R, GpuError>>) -> Result<R, GpuError> {
        let no_reply = || {
            self.shared
                .lost()
                .map(|e| GpuError::lost(self.id(), &e))
                .unwrap_or_else(|| GpuError::NoReply(self.outer.path().to_string()))
        };
        // Spin (yielding to other tasks) before parking: a thread parked for the length
        // of a GPU operation wakes tens of microseconds late (BENCHMARKS.md). On a GPU
        // only: the CPU device's work runs on this machine's cores, which a spinning
        // caller would take from it.
        let spin = if self.on_gpu() {
            self.shared.config.reply_spin
        } else {
            std::time::Duration::ZERO
        };
        if !spin.is_zero() {
            let until = std::time::Instant::now() + spin;
            // Yield first, so that futures polled after this one by the same task (the
            // other asks of a `join_all`) are sent before this one starts to spin. Then
            // short busy slices between yields: a yield costs a scheduler turn (on
            // tokio's multi-thread runtime an I/O poll, a system call), which would add
            // itself to the reply's latency; the caller's other tasks wait at most one
            // slice.
            let mut slice = std::time::Duration::ZERO;
            loop {
                let mut got = None;
                crate::dispatcher::spin::spin_until(slice, || {
                    got = match rx.try_recv() {
                        Ok(r) => Some(r),
                        Err(oneshot::error::TryRecvError::Closed) => Some(Err(no_reply())),
                        Err(oneshot::error::TryRecvError::Empty) => None,
                    };
                    got.is_some()
                });
                if let Some(r) = got {
                    return r;
                }
                let now = std::time::Instant::now();
                if now >= until {
                    break;
                }
                tokio::task::yield_now().await;
                slice = (until - now).min(REPLY_SPIN_SLICE);
            }
        }
        let timeout = self.shared.config.request_timeout;
        match self.system.deadlines().run(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(no_reply()),
            Err(_) => Err(GpuError::Timeout(timeout)),
        }
    }

    /// A pinned host buffer of `len` zeroed elements from the device's pool (plain memory
    /// on the CPU device). Dropping it returns it to the pool. An isolated device's is
    /// shared memory its worker page-locks: its copies are one DMA from or into it too.
    pub async fn pinned<T: DType>(&self, len: usize) -> Result<PinnedBuf<T>, GpuError> {
        if self.shared.config.isolation.is_some() {
            return self.isolated_pinned(len, true);
        }
        self.call(|reply| <T as ContextActorPinnedDType>::__into_msg(len, true, reply))
            .await
    }

    /// An isolated device's pinned buffer: made here, in the user process, from the
    /// device's shared arena (or its pool), not in the worker.
    fn isolated_pinned<T: DType>(&self, len: usize, zeroed: bool) -> Result<PinnedBuf<T>, GpuError> {
        if let Some(e) = self.shared.lost() {
            return Err(e);
        }
        crate::backend::engine::check_pinned_len::<T>(len, self.shared.config.pinned_buffer_max_bytes)?;
        let range = self.shared.shared_pinned()?.lease(len * std::mem::size_of::<T>())?;
        let mut mem = crate::host::SharedHost::new(range, len);
        if zeroed {
            // The range may hold an earlier buffer's data.
            mem.as_mut_slice().fill(T::default());
        }
        Ok(PinnedBuf::shared(mem))
    }

    /// A pinned host buffer of `len` elements whose contents are unspecified (what its
    /// last user left, or zeros): for a caller that overwrites it at once, as a staging
    /// buffer for an upload or the target of a download. Skips `pinned`'s zero fill,
    /// which on a large buffer costs as much as the copy it stages.
    pub async fn pinned_scratch<T: DType>(&self, len: usize) -> Result<PinnedBuf<T>, GpuError> {
        if self.shared.config.isolation.is_some() {
            return self.isolated_pinned(len, false);
        }
        self.call(|reply| <T as ContextActorPinnedDType>::__into_msg(len, false, reply))
            .await
    }

    /// Loads a CUDA C++ module on this device: from the context's memory, else from the
    /// kernel disk cache, else compiled by NVRTC for the device's architecture (and
    /// cached). `Unsupported` on the CPU device.
    pub async fn load_module(&self, source: KernelSource) -> Result<ModuleRef, GpuError> {
        self.call(|reply| ModuleActorMsg::LoadSource { source, reply }).await
    }

    /// Loads a prebuilt CUBIN or PTX image (`ModuleImage::read` takes it from a file)
    /// with the `extern "C"` kernels named in `kernels`. `Unsupported` on the CPU device.
    pub async fn load_module_image(&self, image: ModuleImage, kernels: &[&str]) -> Result<ModuleRef, GpuError> {
        let kernels = kernels.iter().map(|k| k.to_string()).collect();
        self.call(|reply| ModuleActorMsg::LoadImage { image, kernels, reply })
            .await
    }

    /// Launches `kernel` of `module` on the device and resolves when it has finished.
    /// Buffers are checked (device, generation, a written window apart from every other
    /// view of its buffer) and the launch dimensions against the device's limits before
    /// anything is enqueued.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and type (a raw
    /// CUDA C++ signature cannot be checked); `#[kernel]` launchers will do this for you.
    pub async unsafe fn launch(
        &self,
        module: &ModuleRef,
        kernel: &str,
        cfg: LaunchConfig,
        args: KernelArgs,
    ) -> Result<(), GpuError> {
        let (module, kernel) = (module.clone(), kernel.to_string());
        self.call(|reply| ModuleActorMsg::Launch {
            module,
            kernel,
            cfg,
            args,
            reply,
        })
        .await
    }

    /// Launches `kernel` of `module` in thread-block clusters (`cuLaunchKernelEx`) and
    /// resolves when it has finished. Checked like [`Device::launch`], plus the cluster
    /// shape (`LaunchSpec`); `Unsupported` before compute capability 9.0 and on the CPU
    /// device.
    ///
    /// # Safety
    /// As for [`Device::launch`]: `args` must match the kernel's parameter list.
    pub async unsafe fn launch_cluster(
        &self,
        module: &ModuleRef,
        kernel: &str,
        spec: crate::hopper::LaunchSpec,
        args: KernelArgs,
    ) -> Result<(), GpuError> {
        let (module, kernel) = (module.clone(), kernel.to_string());
        self.call(|reply| ModuleActorMsg::LaunchCluster {
            module,
            kernel,
            spec,
            args,
            reply,
        })
        .await
    }

    /// Compiles (or loads from the disk cache) one registered kernel instantiation (an
    /// entry of `kernel::dsl::registered()`) into the device without launching it, so
    /// its first launch waits for no compile; `true` if no NVRTC run was needed.
    /// [`precompile_all`] does this for every registered kernel.
    pub async fn preload(&self, instance: &'static KernelInstance) -> Result<bool, GpuError> {
        let (id, name, source) = ((instance.id)(), instance.entry.to_string(), (instance.source)());
        self.call(|reply| KernelActorMsg::Preload {
            id,
            name,
            source,
            reply,
        })
        .await
    }

    /// Records `event` after the last write of each buffer in `after` (whichever actor's
    /// stream wrote it): the event completes when those writes have.
    pub async fn record_event<T: DType>(&self, event: &GpuEvent, after: &[&GpuRef<T>]) -> Result<(), GpuError> {
        let after = crate::event::AfterWrites(after.iter().fold(KernelArgs::new(), |a, r| a.buf(r)));
        let event = event.clone();
        self.call(|reply| EventActorMsg::Record { event, after, reply }).await
    }

    /// Bytes of free pinned buffers the pool holds.
    pub fn pinned_pool_bytes(&self) -> u64 {
        self.shared.pinned.cached_bytes()
    }

    /// Hands a request to the device as `call` does, without waiting for its reply
    /// (which goes to the request's own channel). An isolated device's worker serves
    /// decoded requests through this.
    pub(crate) async fn submit_routed(&self, routed: Routed) {
        let _ = self.submit(routed).await;
    }

    /// The process id of an isolated device's current worker; `None` for an in-process
    /// device, or while the worker (re)starts.
    pub fn worker_pid(&self) -> Option<u32> {
        self.with_route(|r| match r {
            Some(Inner::Worker(link)) => Some(link.pid()),
            _ => None,
        })
    }

    /// The process id of an isolated device's warm standby worker, once it is ready
    /// (`IsolationConfig::standby`); `None` in-process, while it starts, or without one.
    pub fn standby_pid(&self) -> Option<u32> {
        match self.shared.standby_pid.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Requests an isolated device's worker has not answered yet (0 in-process).
    pub fn worker_pending(&self) -> usize {
        self.with_route(|r| match r {
            Some(Inner::Worker(link)) => link.pending(),
            _ => 0,
        })
    }

    /// Runs `f` on the current route (`None` while the inner tier is not ready).
    fn with_route<R>(&self, f: impl FnOnce(Option<&Inner>) -> R) -> R {
        f(self.state.borrow().inner.as_ref().map(|r| r.get::<Inner>()))
    }

    /// The `ActorGpu` numbered `origin` is gone: an isolated device's worker drops the
    /// stream and handles it served that actor's requests with.
    pub(crate) fn close_origin(&self, origin: u64) {
        self.with_route(|r| {
            if let Some(Inner::Worker(link)) = r {
                link.close_origin(origin);
            }
        })
    }

    /// Where a `Recorder` attaches its journal.
    pub(crate) fn journal_slot(&self) -> &crate::wire::journal::JournalSlot {
        &self.shared.journal
    }

    /// Stops the device; queued and later requests fail with `DeviceLost`.
    pub async fn stop(&self) {
        self.outer.stop();
        self.outer.terminated().await;
    }
}
