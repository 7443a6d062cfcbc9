//! What a library actor is built from: the device's shared state, the generation it
//! serves, and — on a GPU — where its stream comes from and how it waits.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::completion::Completer;
use crate::device::core::Engine;
use crate::device::state::DeviceShared;
use crate::error::GpuError;
use crate::stream::StreamSource;

/// Captured by a library actor's props, so each restart builds a fresh core.
#[derive(Clone)]
pub(crate) struct LibrarySeed {
    pub(crate) shared: Arc<DeviceShared>,
    pub(crate) generation: u64,
    cuda: Option<(Arc<StreamSource>, Completer)>,
}

impl LibrarySeed {
    pub(crate) fn from_engine(shared: Arc<DeviceShared>, generation: u64, engine: &Engine) -> Self {
        let cuda = match engine {
            Engine::Cpu => None,
            Engine::Cuda(c) => Some((c.streams.clone(), c.completer.clone())),
        };
        LibrarySeed {
            shared,
            generation,
            cuda,
        }
    }

    /// A stream (per the device's stream strategy) and the completer, on a GPU; `None`
    /// on the CPU device.
    pub(crate) fn cuda_stream(&self) -> Result<Option<(Arc<CudaStream>, Completer)>, GpuError> {
        match &self.cuda {
            None => Ok(None),
            Some((streams, completer)) => Ok(Some((streams.take()?, completer.clone()))),
        }
    }
}
