//! The `#[kernel]` instantiations one CUDA context has loaded, shared by everything that
//! launches in it: the device's kernel actors, every `ActorGpu`, launches on a
//! caller's stream. A function loaded in a context runs on any of its streams, so one
//! compile serves them all; a miss compiles (or reads the disk cache) and loads on a
//! thread of its own ([`OnceLoads`]), so a cold compile never holds up a launch of a
//! kernel already loaded.

use std::any::TypeId;
use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use super::once_loads::{Lookup, OnceLoads};
use crate::error::GpuError;

/// A loaded instantiation.
#[derive(Clone)]
pub(crate) struct Loaded {
    /// Keeps the function's module loaded.
    _module: Arc<CudaModule>,
    pub(crate) function: CudaFunction,
    /// No NVRTC run was needed (the image came from the disk cache).
    pub(crate) from_disk: bool,
}

/// The loaded kernels of one context.
pub(crate) struct KernelCache {
    ctx: Arc<CudaContext>,
    /// `sm_XY` of the context's device.
    arch: String,
    /// The disk cache (`None`: the default directory).
    cache_dir: Option<PathBuf>,
    loads: OnceLoads<TypeId, Loaded>,
}

impl KernelCache {
    /// An empty cache for `ctx`.
    pub(crate) fn new(ctx: Arc<CudaContext>, arch: String, cache_dir: Option<PathBuf>) -> Self {
        KernelCache {
            ctx,
            arch,
            cache_dir,
            loads: OnceLoads::new("nvrtc"),
        }
    }

    /// Instantiation `id` (kernel `name`, CUDA source from `source`, called only on a
    /// miss): loaded, or the compile and load in progress.
    pub(crate) fn lookup(
        &self,
        id: TypeId,
        name: &str,
        source: impl FnOnce() -> String,
    ) -> Result<Lookup<Loaded>, GpuError> {
        self.loads.get(id, || {
            let (ctx, arch, dir, name, source) = (
                self.ctx.clone(),
                self.arch.clone(),
                self.cache_dir.clone(),
                name.to_string(),
                source(),
            );
            move || load(&ctx, &arch, dir.as_deref(), &name, &source)
        })
    }
}

/// Compiles (or reads from the disk cache) and loads one instantiation.
fn load(
    ctx: &Arc<CudaContext>,
    arch: &str,
    dir: Option<&std::path::Path>,
    name: &str,
    source: &str,
) -> Result<Loaded, GpuError> {
    let (image, from_disk) = crate::nvrtc_cache::compile_cached(source, arch, &[], dir)?;
    let module = ctx.load_module(Ptx::from_binary(image))?;
    let function = module
        .load_function(name)
        .map_err(|e| GpuError::invalid(format!("kernel `{name}` is not in its generated module ({e})")))?;
    crate::launch::allow_dynamic_shared(&function, ctx)?;
    Ok(Loaded {
        _module: module,
        function,
        from_disk,
    })
}
