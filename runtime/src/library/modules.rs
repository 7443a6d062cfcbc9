//! `ModuleActor`: the device's raw CUDA modules — CUDA C++ compiled through the disk
//! cache, or prebuilt CUBIN / PTX from disk or memory — loaded once per generation and
//! launched on the actor's own stream with validated arguments. Written with
//! `#[gpu_actor(wire)]`: on an isolated device the modules live in the worker, the
//! user process holds their numbers. (`#[kernel]` launches go to the `KernelActor`, which knows their
//! signatures; these launches are `unsafe` at the `Device` API.)

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
use crate::hopper::{enqueue_cluster, LaunchSpec};
use crate::launch::{KernelArgs, LaunchConfig};
use crate::library::seed::{CudaSeed, LibrarySeed};
use crate::library::shell::{Core, Library};
use crate::module::{KernelSource, ModuleImage, ModuleRef};
use crate::nvrtc_cache::{compile_cached, KernelKey};
use crate::observability::gpu_timed;

/// A module and its looked-up kernels.
struct LoadedModule {
    _module: Arc<CudaModule>,
    functions: HashMap<String, CudaFunction>,
}

enum ModuleEngine {
    Cpu,
    Cuda {
        cuda: Box<CudaSeed>,
        stream: Arc<CudaStream>,
        completer: Completer,
        /// By module id, and by content key (the in-memory layer in front of the disk
        /// cache: loading the same code twice gives the same module).
        modules: HashMap<u64, LoadedModule>,
        by_key: HashMap<String, ModuleRef>,
    },
}

/// The modules of one generation of a device.
pub(crate) struct ModuleCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: ModuleEngine,
    cache_dir: Option<PathBuf>,
}

impl Core for ModuleCore {
    const WHAT: &'static str = "module actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match (&seed.cuda, seed.cuda_stream()?) {
            (Some(cuda), Some((stream, completer))) => ModuleEngine::Cuda {
                cuda: Box::new(cuda.clone()),
                stream,
                completer,
                modules: HashMap::new(),
                by_key: HashMap::new(),
            },
            _ => ModuleEngine::Cpu,
        };
        Ok(ModuleCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
            cache_dir: seed.shared.config.kernel_cache_dir.clone(),
        })
    }
}

fn cpu_unsupported() -> GpuError {
    GpuError::Unsupported(
        "raw CUDA modules run on a GPU only; on the CPU device write the kernel with #[kernel], which is emulated"
            .into(),
    )
}

impl ModuleCore {
    /// Loads the module `key` names, producing its image with `image` on a miss.
    fn load(
        &mut self,
        key: String,
        kernels: &[String],
        image: impl FnOnce(&CudaSeed) -> Result<(Ptx, bool), GpuError>,
    ) -> Result<ModuleRef, GpuError> {
        let (device, generation) = ((self.shared.config.device_id, self.shared.instance), self.generation);
        let ModuleEngine::Cuda {
            cuda, modules, by_key, ..
        } = &mut self.engine
        else {
            return Err(cpu_unsupported());
        };
        // The kernel list is part of the key: the same code loaded for other entry points
        // is another lookup.
        let key = format!("{key}|{}", kernels.join(","));
        if let Some(m) = by_key.get(&key) {
            return Ok(m.clone());
        }
        let (image, from_cache) = image(cuda)?;
        let module = cuda.ctx.load_module(image).map_err(|e| self.shared.observe(e.into()))?;
        let mut functions = HashMap::new();
        for name in kernels {
            let f = module.load_function(name).map_err(|e| {
                GpuError::invalid(format!(
                    "kernel `{name}` is not in the module ({e}); declare it `extern \"C\" __global__`"
                ))
            })?;
            crate::launch::allow_dynamic_shared(&f, &cuda.ctx)?;
            functions.insert(name.clone(), f);
        }
        let m = ModuleRef::new(device, generation, kernels.to_vec(), from_cache);
        modules.insert(
            m.id,
            LoadedModule {
                _module: module,
                functions,
            },
        );
        by_key.insert(key, m.clone());
        Ok(m)
    }

    fn load_source(&mut self, src: &KernelSource) -> Result<ModuleRef, GpuError> {
        let ModuleEngine::Cuda { cuda, .. } = &self.engine else {
            return Err(cpu_unsupported());
        };
        let key = KernelKey {
            source: &src.source,
            options: &src.options,
            arch: &cuda.arch,
            nvrtc_version: crate::sys::nvrtc_version()?,
        }
        .hash();
        let dir = self.cache_dir.clone();
        self.load(key, &src.kernels, |cuda| {
            let (image, hit) = compile_cached(&src.source, &cuda.arch, &src.options, dir.as_deref())?;
            Ok((Ptx::from_binary(image), hit))
        })
    }

    fn load_image(&mut self, image: ModuleImage, kernels: &[String]) -> Result<ModuleRef, GpuError> {
        let key = match &image {
            ModuleImage::Cubin(b) => format!("cubin:{}", blake3::hash(b).to_hex()),
            ModuleImage::Ptx(p) => format!("ptx:{}", blake3::hash(p.as_bytes()).to_hex()),
        };
        self.load(key, kernels, |_| {
            Ok(match image {
                ModuleImage::Cubin(b) => (Ptx::from_binary(b), true),
                ModuleImage::Ptx(p) => (Ptx::from_src(p), true),
            })
        })
    }

    /// Launches `kernel` of `m`: a plain grid, or in clusters when `cluster` is given.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameter list in number, order and type.
    unsafe fn launch(
        &mut self,
        m: &ModuleRef,
        kernel: &str,
        cfg: LaunchConfig,
        cluster: Option<(u32, u32, u32)>,
        args: KernelArgs,
    ) -> Result<Deferred<()>, GpuError> {
        let _span =
            tracing::debug_span!("kernel", name = kernel, grid = ?cfg.grid, block = ?cfg.block, ?cluster).entered();
        let device_id = self.shared.config.device_id;
        if m.device_id != device_id || m.instance != self.shared.instance {
            return Err(GpuError::invalid(format!(
                "module #{} of device {} (another Device) launched on device {device_id}",
                m.id, m.device_id
            )));
        }
        if m.generation != self.generation {
            return Err(GpuError::Stale {
                buffer_generation: m.generation,
                device_generation: self.generation,
            });
        }
        args.validate(device_id, self.generation)?;
        let ModuleEngine::Cuda {
            cuda,
            stream,
            completer,
            modules,
            ..
        } = &self.engine
        else {
            return Err(cpu_unsupported());
        };
        match cluster {
            None => cfg.validate(&cuda.limits)?,
            Some(c) => LaunchSpec::new(cfg, c).validate(&cuda.limits)?,
        }
        let f = modules
            .get(&m.id)
            .and_then(|lm| lm.functions.get(kernel))
            .ok_or_else(|| GpuError::invalid(format!("kernel `{kernel}` was not loaded with this module")))?;
        // SAFETY: the caller guarantees the arguments match the kernel's parameters;
        // they were validated and the launch dimensions checked above.
        let r = gpu_timed(stream, device_id, "module", kernel, || match cluster {
            None => unsafe { crate::launch::enqueue(stream, f, cfg, &args) },
            // SAFETY: as above; the cluster shape was validated too.
            Some(c) => unsafe { enqueue_cluster(stream, f, &LaunchSpec::new(cfg, c), &args) },
        });
        r.map_err(|e| self.shared.observe(e))?;
        Ok(self.shared.deferred(completer.done(stream)))
    }
}

/// The module actor of a device.
pub struct ModuleActor(pub(crate) Library<ModuleCore>);

#[gpu_actor(crate = crate, wire)]
impl ModuleActor {
    /// Takes a stream of its own (per the device's stream strategy).
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// Loads CUDA C++ (memory layer, disk cache, or NVRTC).
    #[handler]
    fn load_source(&mut self, source: KernelSource) -> Result<ModuleRef, GpuError> {
        self.0.core()?.load_source(&source)
    }

    /// Loads a prebuilt CUBIN or PTX image.
    #[handler]
    fn load_image(&mut self, image: ModuleImage, kernels: Vec<String>) -> Result<ModuleRef, GpuError> {
        self.0.core()?.load_image(image, &kernels)
    }

    /// Launches a kernel of a loaded module.
    #[handler]
    fn launch(
        &mut self,
        module: ModuleRef,
        kernel: String,
        cfg: LaunchConfig,
        args: KernelArgs,
    ) -> Result<Deferred<()>, GpuError> {
        let core = self.0.core()?;
        // SAFETY: this message is built only by `Device::launch`, an `unsafe fn` whose
        // caller guarantees that the arguments match the kernel's parameters.
        unsafe { core.launch(&module, &kernel, cfg, None, args) }
    }

    /// Launches a kernel of a loaded module in thread-block clusters.
    #[handler]
    fn launch_cluster(
        &mut self,
        module: ModuleRef,
        kernel: String,
        spec: LaunchSpec,
        args: KernelArgs,
    ) -> Result<Deferred<()>, GpuError> {
        let core = self.0.core()?;
        // SAFETY: built only by `Device::launch_cluster`, an `unsafe fn` with the same
        // contract as `Device::launch`.
        unsafe { core.launch(&module, &kernel, spec.config, Some(spec.cluster), args) }
    }
}
