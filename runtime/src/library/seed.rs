//! What a library actor (or an `ActorGpu`'s in-place one) is built from: the device's shared state,
//! the generation it serves, and — on a GPU — where its stream comes from, how it waits
//! and the kernels its context has loaded.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::backend::engine::Engine;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::kernel::cache::KernelCache;
use crate::launch::LaunchLimits;
use crate::stream::StreamSource;

/// The CUDA side of a seed.
#[derive(Clone)]
pub(crate) struct CudaSeed {
    pub(crate) streams: Arc<StreamSource>,
    pub(crate) completer: Completer,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) limits: LaunchLimits,
    /// `sm_XY` of the device.
    pub(crate) arch: String,
    /// The `#[kernel]` instantiations loaded in this generation's context, shared by
    /// every kernel actor and `ActorGpu` of it (one compile each, off their threads).
    pub(crate) kernels: Arc<KernelCache>,
    /// Where this generation's LU factorizations wrote pivots, shared by every solver of
    /// it — the device's solver actor and each in-place one — since a factorization and
    /// the solve that uses its pivots may run on different ones (a task that moved
    /// between threads, a busy slot).
    pub(crate) pivots: Arc<std::sync::Mutex<crate::library::pivots::PivotLedger>>,
    /// The stream every core built from this seed enqueues on (an `ActorGpu`: its
    /// BLAS, FFT, RNG, solver and kernel work in one stream order); `None`: each core
    /// takes its own from `streams`.
    pub(crate) stream: Option<Arc<CudaStream>>,
}

/// Captured by a library actor's props, so each restart builds a fresh core.
#[derive(Clone)]
pub(crate) struct LibrarySeed {
    pub(crate) shared: Arc<DeviceShared>,
    pub(crate) generation: u64,
    pub(crate) cuda: Option<CudaSeed>,
    /// The seed of a random generator built from this seed (`None`: the device's
    /// default); an actor's own GPU gets a seed of its own, so two actors do not draw the
    /// same numbers.
    pub(crate) rng_seed: Option<u64>,
}

impl LibrarySeed {
    pub(crate) fn from_engine(shared: Arc<DeviceShared>, generation: u64, engine: &Engine) -> Self {
        let cuda = match engine {
            Engine::Cpu => None,
            Engine::Cuda(c) => Some(CudaSeed {
                streams: c.streams.clone(),
                completer: c.completer.clone(),
                ctx: c.ctx.clone(),
                limits: c.limits,
                arch: c.arch.clone(),
                kernels: Arc::new(KernelCache::new(
                    c.ctx.clone(),
                    c.arch.clone(),
                    shared.config.kernel_cache_dir.clone(),
                )),
                pivots: Arc::default(),
                stream: None,
            }),
        };
        LibrarySeed {
            shared,
            generation,
            cuda,
            rng_seed: None,
        }
    }

    /// As [`LibrarySeed::cuda_stream`], with a completer that never waits inside the
    /// request: the device's own unless it is `Blocking`, else a `Spin` one (a task on
    /// this actor's thread). For actors whose work runs long — a factorization — and
    /// that must keep taking (and enqueuing) requests meanwhile.
    pub(crate) fn cuda_stream_off_thread(&self) -> Result<Option<(Arc<CudaStream>, Completer)>, GpuError> {
        let Some((stream, completer)) = self.cuda_stream()? else {
            return Ok(None);
        };
        if !completer.blocks_caller() {
            return Ok(Some((stream, completer)));
        }
        let ctx = stream.context().clone();
        let polled = Completer::new(&ctx, crate::completion::CompletionStrategy::Spin, completer.deadline())?;
        Ok(Some((stream, polled)))
    }

    /// A stream and the completer, on a GPU (the seed's own stream for an `ActorGpu`, else one
    /// per the device's stream strategy); `None` on the CPU device.
    pub(crate) fn cuda_stream(&self) -> Result<Option<(Arc<CudaStream>, Completer)>, GpuError> {
        match &self.cuda {
            None => Ok(None),
            Some(c) => {
                let stream = match &c.stream {
                    Some(s) => s.clone(),
                    None => c.streams.take()?,
                };
                Ok(Some((stream, c.completer.clone())))
            }
        }
    }

    /// This seed with one stream of its own (per the device's stream strategy) that
    /// every core built from it shares: an `ActorGpu`'s. The CPU device has no streams.
    pub(crate) fn with_own_stream(&self) -> Result<LibrarySeed, GpuError> {
        let mut seed = self.clone();
        if let Some(c) = &mut seed.cuda {
            c.stream = Some(c.streams.take()?);
        }
        Ok(seed)
    }
}
