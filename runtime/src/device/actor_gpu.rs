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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::route::{Inner, Routed};
use super::Device;
use crate::actor::{Actor, Props};
use crate::dispatcher::GpuDispatcher;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::library::blas::{Batch, BlasActor, Gemm, Gemv};
use crate::library::fft::{FftActor, FftShape};
use crate::library::kernels::KernelActor;
use crate::library::rng::{RngActor, DEFAULT_SEED};
use crate::library::seed::LibrarySeed;
use crate::library::shell::Library;
use crate::library::solver::SolverActor;

use super::bounds::{Blas1Scalar, BlasScalar, FftScalar, RandomScalar, SolverScalar};
use crate::dtype::Complex;
use crate::kernel::dsl::KernelCall;

/// Numbers the `ActorGpu`s of the process (each a stream of its own, and its own random
/// sequence).
static NEXT: AtomicU64 = AtomicU64::new(1);

/// One actor's GPU on a device: its own stream and library handles (see the module
/// docs). Made by [`Device::actor_gpu`], or handed to the factory of an actor spawned
/// with the generated `<Actor>Ref::spawn_on`.
pub struct ActorGpu {
    device: Device,
    id: u64,
    local: Mutex<Local>,
    /// Whether a call went to an isolated device marked as this actor's (whose worker
    /// then holds a stream for it until this is dropped).
    sent_out: AtomicBool,
}

impl std::fmt::Debug for ActorGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorGpu({} on {:?})", self.id, self.device)
    }
}

/// The in-place library actors of one `ActorGpu`, for the generation they were built in.
pub(crate) struct Local {
    /// The seed (with the actor's own stream) of the current generation; `None` before
    /// the first call.
    seed: Option<LibrarySeed>,
    blas: Option<BlasActor>,
    rng: Option<RngActor>,
    fft: Option<FftActor>,
    solver: Option<SolverActor>,
    kernel: Option<KernelActor>,
}

/// An accessor of one in-place library actor, built on first use from the seed; a
/// library the device was configured without is `Unsupported`, as on the `Device`.
/// A request served in place: the future that sends its reply when the GPU is done.
type Served = Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! in_place {
    ($($field:ident: $actor:ident, $variant:ident, $enabled:expr, $what:literal;)*) => {
        impl Local {
            /// Runs a request in place, on this actor's stream (an isolated device's
            /// worker serving a user actor's requests); a request of no in-place handler is given back
            /// (as is, not boxed: one request, handed on once).
            #[allow(clippy::result_large_err)]
            fn serve(&mut self, routed: Routed) -> Result<Option<Served>, Routed> {
                match routed {
                    $(Routed::$variant(m) => match self.$field() {
                        Ok(actor) => actor.__serve(m).map_err(Routed::$variant),
                        Err(e) => {
                            m.fail(e);
                            Ok(None)
                        }
                    },)*
                    other => Err(other),
                }
            }

            $(
                pub(crate) fn $field(&mut self) -> Result<&mut $actor, GpuError> {
                    let seed = self
                        .seed
                        .as_ref()
                        .ok_or_else(|| GpuError::Internal("an ActorGpu used before its seed".into()))?;
                    let enabled: fn(&crate::backend::config::Libraries) -> bool = $enabled;
                    if !enabled(&seed.shared.config.libraries) {
                        return Err(super::route::disabled($what));
                    }
                    if self.$field.is_none() {
                        self.$field = Some($actor(Library::lazy(seed.clone())));
                    }
                    Ok(self.$field.as_mut().expect("just built"))
                }
            )*
        }
    };
}

in_place! {
    blas: BlasActor, Blas, |l| l.blas, "BLAS";
    rng: RngActor, Rng, |l| l.rng, "RNG";
    fft: FftActor, Fft, |l| l.fft, "FFT";
    solver: SolverActor, Solver, |l| l.solver, "the solver";
    kernel: KernelActor, Kernel, |_| true, "the kernel launcher";
}

crate::library::blas::blas_actor_actor_gpu_surface!(via = blas; float = BlasScalar, blas1 = Blas1Scalar);
crate::library::rng::rng_actor_actor_gpu_surface!(via = rng; blas1 = RandomScalar);
crate::library::fft::fft_actor_actor_gpu_surface!(via = fft; blas1 = FftScalar);
crate::library::solver::solver_actor_actor_gpu_surface!(via = solver; blas1 = SolverScalar);
crate::library::kernels::kernel_actor_actor_gpu_surface!(via = kernel);

impl Local {
    /// No library actor built yet, for `seed`'s generation.
    fn new(seed: Option<LibrarySeed>) -> Self {
        Local {
            seed,
            blas: None,
            rng: None,
            fft: None,
            solver: None,
            kernel: None,
        }
    }
}

impl ActorGpu {
    fn new(device: Device) -> Self {
        Self::with_id(device, NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn with_id(device: Device, id: u64) -> Self {
        ActorGpu {
            device,
            id,
            local: Mutex::new(Local::new(None)),
            sent_out: AtomicBool::new(false),
        }
    }

    /// Runs a `Device` call marked as this actor's (`device::origin`): on an
    /// isolated device, the worker serves it on a stream of this actor's own.
    pub(crate) async fn as_origin<F: Future>(&self, call: F) -> F::Output {
        self.sent_out.store(true, Ordering::Relaxed);
        super::origin::on(self.id, call).await
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
        self.id
    }

    /// The generation its stream and handles belong to (`None` before the first call on
    /// an in-process device): a context rebuild moves it on at the next call.
    pub fn generation(&self) -> Option<u64> {
        self.lock().seed.as_ref().map(|s| s.generation)
    }

    /// Whether calls run in place (the device is in this process and ready, and no
    /// `Recorder` journals it); `false`: they go to the `Device`.
    pub fn in_place(&self) -> bool {
        self.device.shared.journal.get().is_none() && self.with_route_seed(|_| ()).is_some()
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
                None => Err(self.device.launch_kernel(call)),
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

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the seed of the current route when the device is in this process and
    /// ready.
    fn with_route_seed<R>(&self, f: impl FnOnce(&LibrarySeed) -> R) -> Option<R> {
        self.device.with_route(|r| match r {
            Some(Inner::Local(refs)) => Some(f(&refs.seed)),
            _ => None,
        })
    }

    /// The in-place library actors, current for the device's generation (rebuilt, with a
    /// new stream, after a context rebuild); `None` when the device is not in this
    /// process or not ready, or while a `Recorder` journals it, so the call goes to the
    /// `Device`. Used by the generated methods; the guard is held only while a call
    /// enqueues.
    pub(crate) fn local(&self) -> Result<Option<MutexGuard<'_, Local>>, GpuError> {
        if let Some(e) = self.device.shared.lost() {
            return Err(GpuError::lost(self.device.id(), &e));
        }
        // While a `Recorder` journals the device, every call goes through it, so the
        // journal holds this actor's work too.
        if self.device.shared.journal.get().is_some() {
            return Ok(None);
        }
        let mut local = self.lock();
        let have = local.seed.as_ref().map(|s| s.generation);
        let fresh = self.with_route_seed(|seed| (have != Some(seed.generation)).then(|| seed.clone()));
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

impl Drop for ActorGpu {
    fn drop(&mut self) {
        if self.sent_out.load(Ordering::Relaxed) {
            self.device.close_origin(self.id);
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
