//! What a library actor is built from: the device's shared state, the generation it
//! serves, and — on a GPU — where its stream comes from and how it waits.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::backend::engine::Engine;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
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
}

/// Captured by a library actor's props, so each restart builds a fresh core.
#[derive(Clone)]
pub(crate) struct LibrarySeed {
    pub(crate) shared: Arc<DeviceShared>,
    pub(crate) generation: u64,
    pub(crate) cuda: Option<CudaSeed>,
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
            }),
        };
        LibrarySeed {
            shared,
            generation,
            cuda,
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

    /// A stream (per the device's stream strategy) and the completer, on a GPU; `None`
    /// on the CPU device.
    pub(crate) fn cuda_stream(&self) -> Result<Option<(Arc<CudaStream>, Completer)>, GpuError> {
        match &self.cuda {
            None => Ok(None),
            Some(c) => Ok(Some((c.streams.take()?, c.completer.clone()))),
        }
    }
}
