//! `DeviceState`: the generation and status of a device, published to watchers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::config::{BackendChoice, DeviceConfig};
use crate::error::GpuError;
use crate::host::PinnedPool;

/// Where a device is in its life.
#[derive(Debug, Clone)]
pub enum Status {
    /// The inner tier is being built (or rebuilt); requests queue in the `DeviceActor`.
    Starting,
    /// Serving.
    Ready,
    /// Gone for this process (a sticky fault, or the inner tier stopped for good).
    Lost(GpuError),
}

/// Which backend a running device uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BackendKind {
    /// A CUDA GPU.
    Cuda,
    /// The emulated CPU device.
    Cpu,
}

/// What a device is.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// CUDA or CPU.
    pub backend: BackendKind,
    /// The GPU's name, or `"CPU device"`.
    pub name: String,
    /// Device memory in bytes (the CPU device's limit on the CPU).
    pub total_memory: u64,
    /// Compute capability of a GPU.
    pub compute_capability: Option<(i32, i32)>,
}

impl DeviceInfo {
    /// The NVRTC target of a GPU (`"sm_90"`); `None` on the CPU device.
    pub fn arch(&self) -> Option<String> {
        self.compute_capability.map(crate::nvrtc_cache::sm_arch)
    }
}

/// Where a ready device's requests go — the device tier's route to its inner actors or
/// to an isolated device's worker — held type-erased, so that this floor names no actor.
/// Cloned on every request: one reference count.
#[derive(Clone)]
pub(crate) struct RouteSlot(Arc<dyn std::any::Any + Send + Sync>);

impl RouteSlot {
    /// Holds `route`.
    pub(crate) fn new<R: std::any::Any + Send + Sync>(route: R) -> Self {
        RouteSlot(Arc::new(route))
    }

    /// The route, as the type the device tier stored.
    pub(crate) fn get<R: std::any::Any>(&self) -> &R {
        self.0
            .downcast_ref()
            .expect("only the device tier sets a route, always of its one type")
    }
}

/// A snapshot of a device's state.
#[derive(Clone)]
pub struct DeviceState {
    /// Bumped on every (re)build of the inner tier; buffers of older generations are
    /// stale.
    pub generation: u64,
    /// Starting, ready or lost.
    pub status: Status,
    /// Known once the inner tier has started.
    pub info: Option<DeviceInfo>,
    /// Set while the device is ready.
    pub(crate) inner: Option<RouteSlot>,
}

/// State shared by a device's client handle and its two tiers.
pub(crate) struct DeviceShared {
    pub(crate) config: DeviceConfig,
    /// Unique per device started in this process (isolated devices check their
    /// `GpuRef`s against it: two of them may share an ordinal and a generation).
    pub(crate) instance: u64,
    generation: AtomicU64,
    pub(crate) state: watch::Sender<DeviceState>,
    /// Bytes handed out by the CPU device.
    pub(crate) cpu_used: AtomicU64,
    /// Free pinned host buffers.
    pub(crate) pinned: Arc<PinnedPool>,
    /// Requests sent through this device's handles and not answered yet: its real queue
    /// depth, for placement. Written by callers on every request, so on a cache line of
    /// its own: the actors read `config` on every request too.
    pub(crate) in_flight: OwnLine<std::sync::atomic::AtomicUsize>,
    /// Set (before the state says so) once the device is lost: what every handler checks
    /// first, without taking the state's lock — a line callers take on every request.
    lost: std::sync::atomic::AtomicBool,
    /// The replay journal recording this device's requests, if one is.
    pub(crate) journal: crate::wire::journal::JournalSlot,
    /// The process id of an isolated device's warm standby worker (0: none ready).
    pub(crate) standby_pid: std::sync::atomic::AtomicU32,
    /// The device's metric handles (`DeviceConfig::metrics`).
    pub(crate) metrics: crate::observability::DeviceMetrics,
    /// An isolated device's pinned buffers: made with its first worker (which inherits
    /// the arena, as every later one does) or its first pinned buffer.
    shared_pinned: std::sync::Mutex<Option<Arc<crate::wire::PinnedArena>>>,
}

/// A value on a cache line (128 bytes: two lines with the adjacent-line prefetch) of its
/// own, so that threads writing it do not slow threads reading its neighbours.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct OwnLine<T>(pub(crate) T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl DeviceShared {
    pub(crate) fn new(config: DeviceConfig) -> Arc<Self> {
        let (state, _) = watch::channel(DeviceState {
            generation: 0,
            status: Status::Starting,
            info: None,
            inner: None,
        });
        static INSTANCES: AtomicU64 = AtomicU64::new(1);
        let backend = match config.backend {
            BackendChoice::Cuda => "cuda",
            BackendChoice::Cpu => "cpu",
            BackendChoice::Auto => "auto",
        };
        let metrics = crate::observability::DeviceMetrics::new(
            config.metrics,
            config.device_id,
            backend,
            config.isolation.is_some(),
        );
        Arc::new(DeviceShared {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            pinned: PinnedPool::new(config.pinned_pool_bytes),
            config,
            generation: AtomicU64::new(0),
            state,
            cpu_used: AtomicU64::new(0),
            in_flight: OwnLine::default(),
            lost: std::sync::atomic::AtomicBool::new(false),
            journal: Default::default(),
            standby_pid: Default::default(),
            metrics,
            shared_pinned: Default::default(),
        })
    }

    /// An isolated device's pinned memory (made on first use).
    pub(crate) fn shared_pinned(&self) -> Result<Arc<crate::wire::PinnedArena>, GpuError> {
        let mut slot = self.shared_pinned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = &*slot {
            return Ok(s.clone());
        }
        let bytes = self.config.isolation.as_ref().map_or(0, |i| i.pinned_arena_bytes);
        let s = crate::wire::PinnedArena::create(bytes, self.config.pinned_pool_bytes)?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Starts a new generation (called by each new inner tier).
    pub(crate) fn next_generation(&self) -> u64 {
        let g = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        if g > 1 {
            self.metrics.rebuilds.increment(1);
        }
        g
    }

    /// The error every request gets once the device is lost, if it is.
    pub(crate) fn lost(&self) -> Option<GpuError> {
        if !self.lost.load(Ordering::Acquire) {
            return None;
        }
        match &self.state.borrow().status {
            Status::Lost(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// Marks the device lost for good; the first cause wins.
    pub(crate) fn mark_lost(&self, cause: GpuError) {
        self.state.send_if_modified(|s| {
            self.lost.store(true, Ordering::Release);
            if matches!(s.status, Status::Lost(_)) {
                return false;
            }
            tracing::error!(device = self.config.device_id, %cause, "device lost");
            s.status = Status::Lost(cause.clone());
            s.inner = None;
            self.metrics.lost.set(1.0);
            self.metrics.ready.set(0.0);
            true
        });
    }

    /// Publishes a change unless the device is lost (a lost device stays lost).
    pub(crate) fn publish(&self, f: impl FnOnce(&mut DeviceState)) {
        self.state.send_if_modified(|s| {
            if matches!(s.status, Status::Lost(_)) {
                return false;
            }
            f(s);
            self.metrics.generation.set(s.generation as f64);
            self.metrics
                .ready
                .set(if matches!(s.status, Status::Ready) { 1.0 } else { 0.0 });
            true
        });
    }

    /// An actor's core, unless the device is lost or the core never started.
    pub(crate) fn usable<'a, C>(&self, core: &'a mut Option<C>, what: &str) -> Result<&'a mut C, GpuError> {
        if let Some(e) = self.lost() {
            return Err(GpuError::lost(self.config.device_id, &e));
        }
        core.as_mut().ok_or_else(|| {
            GpuError::DeviceLost(format!(
                "the {what} of device {} failed to start",
                self.config.device_id
            ))
        })
    }

    /// Wraps GPU work in flight as a `Deferred`, its errors classified against the
    /// device's state.
    pub(crate) fn deferred(
        self: &Arc<Self>,
        fut: impl std::future::Future<Output = Result<(), GpuError>> + Send + 'static,
    ) -> crate::actor::Deferred<()> {
        let shared = self.clone();
        crate::actor::Deferred::later(async move { fut.await.map_err(|e| shared.observe(e)) })
    }

    /// Records `e` if it poisons the device, and passes it on. Any other error on a
    /// device already lost becomes `DeviceLost`: after a sticky fault every library fails
    /// with its own generic status (cuBLAS: EXECUTION_FAILED), and the caller should see
    /// the real cause.
    pub(crate) fn observe(&self, e: GpuError) -> GpuError {
        if e.is_sticky() {
            self.mark_lost(e.clone());
            return e;
        }
        match self.lost() {
            Some(cause) => GpuError::DeviceLost(format!("{e}; the device is lost: {}", cause.as_cause())),
            None => e,
        }
    }
}
