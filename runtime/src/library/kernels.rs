//! `KernelActor`: runs `#[kernel]` launches of one device — on a GPU it compiles (or
//! loads from the disk cache) each instantiation once, keeps the loaded function, and
//! launches on its own stream; on the CPU device it runs the kernel's emulated form.
//! Written with `#[gpu_actor]`.

use std::any::TypeId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::kernel::dsl::launch::KernelCall;
use crate::launch::with_host_buffers;
use crate::library::seed::{CudaSeed, LibrarySeed};
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};

/// A loaded instantiation.
struct Loaded {
    _module: Arc<CudaModule>,
    function: CudaFunction,
}

enum KernelEngine {
    Cpu,
    Cuda {
        cuda: Box<CudaSeed>,
        stream: Arc<CudaStream>,
        completer: Completer,
        loaded: HashMap<TypeId, Loaded>,
    },
}

/// The kernel launcher of one generation of a device.
pub(crate) struct KernelCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: KernelEngine,
    cache_dir: Option<PathBuf>,
}

impl Core for KernelCore {
    const WHAT: &'static str = "kernel actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match (&seed.cuda, seed.cuda_stream()?) {
            (Some(cuda), Some((stream, completer))) => KernelEngine::Cuda {
                cuda: Box::new(cuda.clone()),
                stream,
                completer,
                loaded: HashMap::new(),
            },
            _ => KernelEngine::Cpu,
        };
        Ok(KernelCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
            cache_dir: seed.shared.config.kernel_cache_dir.clone(),
        })
    }
}

impl KernelCore {
    /// The loaded function of instantiation `id`, compiling `source()` on a miss.
    fn function(
        cuda: &CudaSeed,
        loaded: &mut HashMap<TypeId, Loaded>,
        cache_dir: Option<&std::path::Path>,
        id: TypeId,
        name: &str,
        source: impl FnOnce() -> String,
    ) -> Result<(bool, CudaFunction), GpuError> {
        if let Some(l) = loaded.get(&id) {
            return Ok((true, l.function.clone()));
        }
        let (image, from_cache) = crate::nvrtc_cache::compile_cached(&source(), &cuda.arch, &[], cache_dir)?;
        let module = cuda.ctx.load_module(Ptx::from_binary(image))?;
        let function = module
            .load_function(name)
            .map_err(|e| GpuError::invalid(format!("kernel `{name}` is not in its generated module ({e})")))?;
        crate::launch::allow_dynamic_shared(&function, &cuda.ctx)?;
        loaded.insert(
            id,
            Loaded {
                _module: module,
                function: function.clone(),
            },
        );
        Ok((from_cache, function))
    }

    fn launch(&mut self, call: KernelCall) -> Result<Deferred<()>, GpuError> {
        let _span =
            tracing::debug_span!("kernel", name = call.name, grid = ?call.cfg.grid, block = ?call.cfg.block).entered();
        call.args.validate(self.shared.config.device_id, self.generation)?;
        match &mut self.engine {
            KernelEngine::Cpu => {
                let _timed = cpu_op(self.shared.config.device_id, "kernel", call.name);
                // `run_grid` checks the launch against the CPU device's limits.
                let emulate = call.emulate;
                with_host_buffers(&call.args, |bufs| emulate(&bufs))?;
                Ok(Deferred::Now(()))
            }
            KernelEngine::Cuda {
                cuda,
                stream,
                completer,
                loaded,
            } => {
                call.cfg.validate(&cuda.limits)?;
                let (_, f) = Self::function(cuda, loaded, self.cache_dir.as_deref(), call.id, call.name, call.source)
                    .map_err(|e| self.shared.observe(e))?;
                let device = self.shared.config.device_id;
                // SAFETY: the call was built by a `#[kernel]` launcher, whose Rust
                // signature generated both this argument list and the kernel's C++
                // parameter list (checked at compile time); arguments were validated and
                // the launch dimensions checked against the device above.
                gpu_timed(stream, device, "kernel", call.name, || unsafe {
                    crate::launch::enqueue(stream, &f, call.cfg, &call.args)
                })
                .map_err(|e| self.shared.observe(e))?;
                Ok(self.shared.deferred(completer.done(stream)))
            }
        }
    }

    fn preload(&mut self, id: TypeId, name: &str, source: String) -> Result<bool, GpuError> {
        match &mut self.engine {
            KernelEngine::Cpu => Ok(true),
            KernelEngine::Cuda { cuda, loaded, .. } => {
                Self::function(cuda, loaded, self.cache_dir.as_deref(), id, name, || source)
                    .map(|(hit, _)| hit)
                    .map_err(|e| self.shared.observe(e))
            }
        }
    }
}

/// The kernel actor of a device.
pub struct KernelActor(pub(crate) Library<KernelCore>);

#[gpu_actor(crate = crate, wire, device)]
impl KernelActor {
    /// Takes a stream of its own (per the device's stream strategy).
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// Runs one `#[kernel]` launch (built by a kernel's generated `launch` function) on
    /// the device's kernel actor; resolves when the kernel has finished.
    #[handler(device(name = launch_kernel))]
    fn launch(&mut self, call: KernelCall) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.launch(call)
    }

    /// Compiles (or loads from the disk cache) and loads an instantiation without
    /// launching it; `true` if no NVRTC run was needed.
    #[handler(volatile)]
    fn preload(&mut self, id: TypeId, name: String, source: String) -> Result<bool, GpuError> {
        self.0.core()?.preload(id, &name, source)
    }
}
