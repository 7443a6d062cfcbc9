//! `ActorGpu`: the GPU as one actor sees it — a stream of its own and, made on first use,
//! its own cuBLAS / cuFFT / cuRAND / cuSOLVER handles and kernel launcher bound to that
//! stream (like PyTorch's handle per stream).
//!
//! Why: through the `Device`, every caller's GEMM goes to the device's BLAS actors and
//! every `#[kernel]` launch to its kernel actors, so two independent actors queue on the
//! same few streams. An actor that owns an `ActorGpu` enqueues its library calls and
//! launches in place, on its own thread and stream — no hop to another actor — and
//! independent actors overlap on the GPU. Buffers shared between actors stay ordered as
//! everywhere: each buffer's last writer is an event later readers' streams wait on.
//!
//! The library operations are written by `#[gpu_actor(device)]` from the library actors'
//! handlers (`<actor>_actor_gpu_surface!`, expanded below), with the same names and
//! arguments as the `Device` methods; every other `Device` method (allocation, copies,
//! events, graphs) is reached through `Deref`. A context rebuild gives the next call a new
//! stream and handles (generation as everywhere); an actor that restarts gets a fresh
//! `ActorGpu` from its factory. On an isolated device, or while the device (re)starts,
//! the methods are the `Device`'s (README: what is missing).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use super::route::{Inner, Routed};
use super::Device;
use crate::actor::{Actor, Props};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::library::blas::matmul::{Epilogue, Matmul, MatmulBuffer};
use crate::library::blas::Gemm;
use crate::library::catalog::Lib;
use crate::library::kernels::KernelActor;
use crate::library::rng::DEFAULT_SEED;
use crate::library::seed::LibrarySeed;
use crate::library::shell::Library;

use super::bounds::{BlasScalar, DType};
use crate::dtype::Complex;
use crate::kernel::dsl::{KernelCall, KernelSequence};

/// Hands each thread that calls a `Device` its first in-place slot (`HOME_SLOT`).
static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's first in-place slot (modulo a device's slot count).
    static HOME_SLOT: std::cell::OnceCell<usize> = const { std::cell::OnceCell::new() };
}

/// Numbers the `ActorGpu`s of the process (each a stream of its own, and its own random
/// sequence).
static NEXT: AtomicU64 = AtomicU64::new(1);

/// One actor's GPU on a device: its own stream and library handles (see the module
/// docs). Made by [`Device::actor_gpu`], or handed to the factory of an actor spawned
/// with the generated `<Actor>Ref::spawn_on`.
pub struct ActorGpu {
    device: Device,
    slot: GpuSlot,
    /// Whether a call went to an isolated device marked as this actor's (whose worker
    /// then holds a stream for it until this is dropped).
    sent_out: AtomicBool,
}

impl std::fmt::Debug for ActorGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorGpu({} on {:?})", self.slot.id, self.device)
    }
}

/// A request served in place: the future that sends its reply when the GPU is done.
pub(crate) type Served = Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! in_place {
    (
        $($field:ident: $actor:ident, $variant:ident;)*
        @libraries
        $($(#[$ldoc:meta])* $lvariant:ident: $lfield:ident {
            $lactor:ident, $lmsg:ident, $lclient:ident, $pool:ident, $device:ident, wire($ltag:literal), $what:literal,
            $feature:literal, $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
            bounds { $($bounds:tt)* }
        })*
    ) => {
        /// The in-place library actors of one `ActorGpu`, for the generation they were
        /// built in.
        pub(crate) struct Local {
            /// The seed (with the actor's own stream) of the current generation; `None`
            /// before the first call.
            seed: Option<LibrarySeed>,
            $($field: Option<$actor>,)*
            $($lfield: Option<crate::library::$lfield::$lactor>,)*
        }

        impl Local {
            /// No library actor built yet, for `seed`'s generation.
            fn new(seed: Option<LibrarySeed>) -> Self {
                Local {
                    seed,
                    $($field: None,)*
                    $($lfield: None,)*
                }
            }

            /// Whether `routed` is for a library actor that runs in place here (others —
            /// allocation, copies, modules, events, graphs — go to the device at once,
            /// without taking a slot or making its stream).
            fn runs_in_place(routed: &Routed) -> bool {
                matches!(routed, $(Routed::$variant(_))|* $(| Routed::$lvariant(_))*)
            }

            /// Whether `routed`, a `Device` call, runs in place: as
            /// [`Local::runs_in_place`], less the `by_message` libraries'
            /// (`device_in_place!`).
            fn device_runs_in_place(routed: &Routed) -> bool {
                match routed {
                    $(Routed::$lvariant(_) => crate::libraries::device_in_place!($device),)*
                    other => Self::runs_in_place(other),
                }
            }

            /// Runs a request in place, on this actor's stream (an isolated device's
            /// worker serving a user actor's requests); a request of no in-place handler is given back
            /// (as is, not boxed: one request, handed on once).
            #[allow(clippy::result_large_err)]
            pub(crate) fn serve(&mut self, routed: Routed) -> Result<Option<Served>, Routed> {
                match routed {
                    $(Routed::$variant(m) => match self.$field() {
                        Ok(actor) => actor.__serve(m).map_err(Routed::$variant),
                        Err(e) => {
                            m.fail(e);
                            Ok(None)
                        }
                    },)*
                    $(Routed::$lvariant(m) => match self.$lfield() {
                        Ok(actor) => actor.__serve(m).map_err(Routed::$lvariant),
                        Err(e) => {
                            m.fail(e);
                            Ok(None)
                        }
                    },)*
                    other => Err(other),
                }
            }

            // The seed is cloned only to build an actor: a clone per call (a dozen
            // reference counts, taken and dropped) was ~9% of an in-place launch's host
            // time (a profile over a do-nothing driver).
            $(
                pub(crate) fn $field(&mut self) -> Result<&mut $actor, GpuError> {
                    if self.$field.is_none() {
                        self.$field = Some($actor(Library::lazy(self.seed()?)));
                    }
                    Ok(self.$field.as_mut().expect("just built"))
                }
            )*

            $(
                /// The in-place actor of this library, built on first use from the seed;
                /// a library the device does not serve is `Unsupported`, as on the `Device`.
                pub(crate) fn $lfield(&mut self) -> Result<&mut crate::library::$lfield::$lactor, GpuError> {
                    let seed = self.seed.as_ref().ok_or_else(Local::no_seed)?;
                    Lib::$lvariant.check(&seed.shared.config.libraries)?;
                    if self.$lfield.is_none() {
                        self.$lfield = Some(crate::library::$lfield::$lactor(Library::lazy(self.seed()?)));
                    }
                    Ok(self.$lfield.as_mut().expect("just built"))
                }
            )*
        }

        $(crate::library::$lfield::$gsurf!(crate::library::$lfield, via = $lfield; $($set = crate::device::$bound),*);)*
    };
}

crate::libraries::library_table!(in_place {
    kernel: KernelActor, Kernel;
});
crate::library::kernels::kernel_actor_actor_gpu_surface!(crate::library::kernels, via = kernel; any = DType);

impl Local {
    /// The seed of the current generation (a clone for a library built from it).
    fn seed(&self) -> Result<LibrarySeed, GpuError> {
        self.seed.clone().ok_or_else(Local::no_seed)
    }

    /// The error of a use before the seed was set (a bug of ours, not the caller's).
    fn no_seed() -> GpuError {
        GpuError::Internal("an ActorGpu used before its seed".into())
    }
}

/// An `ActorGpu` without its device: its number and its in-place library actors. The
/// `Device` keeps a few of its own, so that a library call from outside any actor runs
/// in place too (`Device::serve_in_place`).
pub(crate) struct GpuSlot {
    id: u64,
    local: Mutex<Local>,
}

impl GpuSlot {
    /// A slot with a new number.
    pub(crate) fn new() -> Self {
        Self::with_id(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn with_id(id: u64) -> Self {
        GpuSlot {
            id,
            local: Mutex::new(Local::new(None)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The in-place library actors, current for `device`'s generation (rebuilt, with a
    /// new stream, after a context rebuild); `None` when the device is not in this
    /// process or not ready, or while a `Recorder` journals it, so the call goes to the
    /// `Device` — and, unless `wait`, while another caller holds them. The guard is held
    /// only while a call enqueues.
    fn local<'a>(&'a self, device: &Device, wait: bool) -> Result<Option<MutexGuard<'a, Local>>, GpuError> {
        if let Some(e) = device.shared.lost() {
            return Err(GpuError::lost(device.id(), &e));
        }
        // While a `Recorder` journals the device, every call goes through it, so the
        // journal holds this actor's work too.
        if device.shared.journal.get().is_some() {
            return Ok(None);
        }
        let mut local = if wait {
            self.lock()
        } else {
            match self.local.try_lock() {
                Ok(l) => l,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return Ok(None),
            }
        };
        let have = local.seed.as_ref().map(|s| s.generation);
        let fresh = route_seed(device, |seed| (have != Some(seed.generation)).then(|| seed.clone()));
        match fresh {
            None => Ok(None),
            Some(None) => Ok(Some(local)),
            Some(Some(seed)) => {
                let mut seed = seed.with_own_stream()?;
                seed.rng_seed = Some(DEFAULT_SEED ^ self.id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                *local = Local::new(Some(seed));
                Ok(Some(local))
            }
        }
    }
}

/// Runs `f` on the seed of `device`'s current route when the device is in this process
/// and ready.
fn route_seed<R>(device: &Device, f: impl FnOnce(&LibrarySeed) -> R) -> Option<R> {
    device.with_route(|r| match r {
        Some(Inner::Local(refs)) => Some(f(&refs.seed)),
        _ => None,
    })
}

impl ActorGpu {
    fn new(device: Device) -> Self {
        Self::with_id(device, NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn with_id(device: Device, id: u64) -> Self {
        ActorGpu {
            device,
            slot: GpuSlot::with_id(id),
            sent_out: AtomicBool::new(false),
        }
    }

    /// Runs a `Device` call marked as this actor's (`device::origin`): on an
    /// isolated device, the worker serves it on a stream of this actor's own.
    pub(crate) async fn as_origin<F: Future>(&self, call: F) -> F::Output {
        self.sent_out.store(true, Ordering::Relaxed);
        super::origin::on(self.slot.id, call).await
    }

    /// Serves a request of a user actor's `ActorGpu` in an isolated device's worker: in place
    /// on this `ActorGpu`'s stream when its handler runs in place, else by the device.
    pub(crate) async fn serve(&self, routed: Routed) {
        let rest = match self.local() {
            Err(e) => {
                routed.fail(e);
                return;
            }
            Ok(None) => Err(routed),
            Ok(Some(mut local)) => local.serve(routed),
        };
        match rest {
            Ok(Some(reply)) => {
                let _counted = self.device.counted();
                reply.await
            }
            Ok(None) => {}
            Err(routed) => self.device.submit_routed(routed).await,
        }
    }

    /// The device this GPU belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A number of its own in the process: a restarted actor's new `ActorGpu` has a new
    /// one (and a new stream).
    pub fn id(&self) -> u64 {
        self.slot.id
    }

    /// The generation its stream and handles belong to (`None` before the first call on
    /// an in-process device): a context rebuild moves it on at the next call.
    pub fn generation(&self) -> Option<u64> {
        self.slot.lock().seed.as_ref().map(|s| s.generation)
    }

    /// Whether calls run in place (the device is in this process and ready, and no
    /// `Recorder` journals it); `false`: they go to the `Device`.
    pub fn in_place(&self) -> bool {
        self.device.shared.journal.get().is_none() && route_seed(&self.device, |_| ()).is_some()
    }

    super::surface::gemm_shorthand!();

    /// Enqueues a `#[kernel]` launch on this actor's stream and resolves once it is
    /// enqueued — at once, unless the instantiation is still compiling — without waiting
    /// for the kernel (what a generated `enqueue` sends). For launching many and waiting
    /// once with [`ActorGpu::synchronize`]; a failure of the kernel itself surfaces there.
    /// Not in place (an isolated device, a device starting or journalled), it is the
    /// `Device`'s launch, which resolves when the kernel has finished.
    pub async fn enqueue_kernel(&self, call: KernelCall) -> Result<(), GpuError> {
        let work = {
            match self.local()? {
                Some(mut local) => Ok(local.kernel()?.0.core()?.enqueue(call)?),
                // Boxed, as in the generated methods: a rare path kept out of the future.
                None => Err(Box::pin(self.device.launch_kernel(call))),
            }
        };
        match work {
            Ok(enqueued) => enqueued.resolve().await,
            Err(request) => self.as_origin(request).await,
        }
    }

    /// Resolves when all work this actor enqueued on its stream has finished (nothing to
    /// wait for when its calls were not in place: each was awaited).
    pub async fn synchronize(&self) -> Result<(), GpuError> {
        let done = {
            match self.local()? {
                Some(mut local) => Some(local.kernel()?.0.core()?.synchronize()),
                None => None,
            }
        };
        match done {
            Some(d) => d.resolve().await,
            None => Ok(()),
        }
    }

    /// The in-place library actors (see [`GpuSlot::local`]), waiting for the lock if
    /// another task of this actor holds it. Used by the generated methods.
    pub(crate) fn local(&self) -> Result<Option<MutexGuard<'_, Local>>, GpuError> {
        self.slot.local(&self.device, true)
    }
}

impl Drop for ActorGpu {
    fn drop(&mut self) {
        if self.sent_out.load(Ordering::Relaxed) {
            self.device.close_origin(self.slot.id);
        }
    }
}

impl std::ops::Deref for ActorGpu {
    type Target = Device;

    /// Every `Device` method an `ActorGpu` does not run in place itself (allocation,
    /// uploads and downloads, events, graphs): an actor needs one handle.
    fn deref(&self) -> &Device {
        &self.device
    }
}

impl crate::kernel::dsl::LaunchTarget for ActorGpu {
    fn launch_kernel(&self, call: KernelCall) -> impl std::future::Future<Output = Result<(), GpuError>> + Send {
        ActorGpu::launch_kernel(self, call)
    }
}

impl Device {
    /// A GPU of its own for one actor (or task) on this device: a stream and library
    /// handles made on first use (see [`ActorGpu`]). `<Actor>Ref::spawn_on` hands one to
    /// each incarnation of an actor.
    pub fn actor_gpu(&self) -> ActorGpu {
        ActorGpu::new(self.clone())
    }

    /// The `ActorGpu` an isolated device's worker serves the user `ActorGpu` numbered
    /// `origin` with: the same number, so its random sequence is the one the user's `ActorGpu` would draw in
    /// process.
    pub(crate) fn origin_gpu(&self, origin: u64) -> ActorGpu {
        ActorGpu::with_id(self.clone(), origin)
    }

    /// On the GPU, a library request runs in place on a free slot of the device's own
    /// (`GpuSlot`): enqueued on the caller's thread, no hop to a library actor, which is
    /// what a task awaiting small launches or GEMMs one by one pays most for (BENCHMARKS.md,
    /// "Independent actors on one GPU"). Given back — for the library actors — when every
    /// slot is busy, off the GPU (the CPU device's work would run on the caller's
    /// thread), while journalled, and for a `by_message` library's requests (the RNG's:
    /// one device sequence) and those of no in-place handler (those of no in-place
    /// library actor at once, before a slot is taken).
    #[allow(clippy::result_large_err)] // the request handed back as is, once
    pub(crate) fn serve_in_place(&self, routed: Routed) -> Result<Option<Served>, Routed> {
        if !Local::device_runs_in_place(&routed) {
            return Err(routed);
        }
        match self.in_place_local() {
            Err(e) => {
                routed.fail(e);
                Ok(None)
            }
            Ok(Some(mut local)) => local.serve(routed),
            Ok(None) => Err(routed),
        }
    }

    /// The in-place library actors of a free slot of the device's own, for a call from
    /// outside any actor (the generated `Device` methods call their handler on it
    /// directly; [`Device::serve_in_place`] serves a message on it); `None` off the GPU
    /// (the CPU device's work would run on the caller's thread), while journalled or not
    /// ready, and when every slot is busy. The guard is held only while a call enqueues.
    pub(crate) fn in_place_local(&self) -> Result<Option<MutexGuard<'_, Local>>, GpuError> {
        if !self.on_gpu() {
            return Ok(None);
        }
        // Each thread starts at a slot of its own (round robin over the threads that
        // ask), so that independent callers' work lands on separate streams — starting
        // every caller at the first free slot put nearly all on the first (its lock is
        // held only while enqueueing): 8 tasks' launches at 0.42x raw on the H200.
        let n = self.in_place.len();
        let home = HOME_SLOT.with(|h| *h.get_or_init(|| NEXT_HOME.fetch_add(1, Ordering::Relaxed)));
        for k in 0..n {
            if let Some(local) = self.in_place[(home + k) % n].local(self, false)? {
                return Ok(Some(local));
            }
        }
        Ok(None)
    }

    /// Waits for a call run in place from a `Device` method, counted in flight (what
    /// placement balances) and timed as a request until it is done.
    pub(crate) async fn resolve_in_place<R: Send + 'static>(
        &self,
        work: crate::actor::Deferred<R>,
    ) -> Result<R, GpuError> {
        let _counted = self.counted();
        let started = self.shared.metrics.on.then(std::time::Instant::now);
        let r = work.resolve().await;
        self.record_request(started);
        r
    }

    /// `props` on a thread of the actor's own (a `GpuDispatcher` that spins
    /// `DeviceConfig::idle_spin` for work on a GPU before parking), kept across restarts:
    /// the thread an `ActorGpu`'s handles are used from. Used by `spawn_on`.
    pub fn pin<A: Actor>(&self, props: Props<A>) -> Result<Props<A>, GpuError> {
        let thread = GpuDispatcher::new(&format!("actor-gpu-{}", self.id()))?;
        if self.on_gpu() {
            thread.set_idle_spin(self.shared.config.idle_spin);
        }
        Ok(props.dispatcher(thread))
    }
}
