//! `KernelActor`: runs `#[kernel]` launches of one device — on a GPU it launches on its
//! own stream the functions of the generation's kernel cache (compiled, or read from the
//! disk cache, once per instantiation, off this actor's thread); on the CPU device it runs
//! the kernel's emulated form.
//! Written with `#[gpu_actor]`.

pub(crate) mod reduce;
pub(crate) mod scan;
pub(crate) mod sort;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;
use cudarc::driver::{CudaFunction, CudaStream, DeviceSlice};

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Region};
use crate::kernel::dsl::launch::{KernelCall, KernelSequence};
use crate::kernel::once_loads::Lookup;
use crate::launch::with_host_buffers;
use crate::library::seed::{CudaSeed, LibrarySeed};
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};

enum KernelEngine {
    Cpu,
    Cuda {
        cuda: Box<CudaSeed>,
        stream: Arc<CudaStream>,
        completer: Completer,
        /// The functions this core has launched: found without the shared cache's lock
        /// on every later launch (its modules stay loaded while the seed holds the cache).
        seen: HashMap<TypeId, CudaFunction>,
    },
}

/// The kernel launcher of one generation of a device (a kernel actor's, or an
/// `ActorGpu`'s).
pub(crate) struct KernelCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: KernelEngine,
}

impl Core for KernelCore {
    const WHAT: &'static str = "kernel actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match (&seed.cuda, seed.cuda_stream()?) {
            (Some(cuda), Some((stream, completer))) => KernelEngine::Cuda {
                cuda: Box::new(cuda.clone()),
                stream,
                completer,
                seen: HashMap::new(),
            },
            _ => KernelEngine::Cpu,
        };
        Ok(KernelCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

/// Enqueues one launch of `f` on `stream`, timed on the timeline.
fn enqueue(
    shared: &Arc<DeviceShared>,
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    call: &KernelCall,
) -> Result<(), GpuError> {
    let device = shared.config.device_id;
    // SAFETY: the call was built by a `#[kernel]` launcher, whose Rust signature generated
    // both this argument list and the kernel's C++ parameter list (checked at compile
    // time); arguments were validated and the launch dimensions checked against the
    // device before this is called.
    gpu_timed(stream, device, "kernel", call.name, || unsafe {
        crate::launch::enqueue(stream, f, call.cfg, &call.args)
    })
    .map_err(|e| shared.observe(e))
}

impl KernelCore {
    /// Launches and resolves when the kernel has finished.
    fn launch(&mut self, call: KernelCall) -> Result<Deferred<()>, GpuError> {
        self.run(call, true)
    }

    /// Enqueues on this core's stream and resolves once enqueued (at once, unless the
    /// instantiation is still compiling): for a caller that launches many and then waits
    /// once ([`KernelCore::synchronize`]), as raw CUDA code does.
    pub(crate) fn enqueue(&mut self, call: KernelCall) -> Result<Deferred<()>, GpuError> {
        self.run(call, false)
    }

    /// Resolves when everything enqueued on this core's stream so far has finished.
    pub(crate) fn synchronize(&mut self) -> Deferred<()> {
        match &self.engine {
            KernelEngine::Cpu => Deferred::Now(()),
            KernelEngine::Cuda { stream, completer, .. } => self.shared.deferred(completer.done(stream)),
        }
    }

    fn run(&mut self, call: KernelCall, wait: bool) -> Result<Deferred<()>, GpuError> {
        self.run_all(vec![call], wait)
    }

    /// Runs `calls` one after another on this core's stream and resolves when the last
    /// has finished.
    fn launch_all(&mut self, calls: KernelSequence) -> Result<Deferred<()>, GpuError> {
        self.run_all(calls.0, true)
    }

    /// Runs `calls` in order, then reads `out` back once they have finished: a pass and
    /// the read back of what it wrote in one request (a reduction's partials).
    fn launch_then_read<T: DTypeBase>(
        &mut self,
        calls: KernelSequence,
        out: GpuRef<T>,
    ) -> Result<Deferred<Vec<T>>, GpuError> {
        out.validate(self.shared.config.device_id, self.generation)?;
        let ran = self.run_all(calls.0, true)?;
        let shared = self.shared.clone();
        let read = move || -> Result<Vec<T>, GpuError> {
            let held = out.lock();
            match held.region() {
                Region::Cpu(v) => Ok(v.to_vec()),
                Region::Cuda(v) => {
                    let stream = v.stream().clone();
                    stream.clone_dtoh(&v).map_err(|e| shared.observe(e.into()))
                }
            }
        };
        Ok(match ran {
            Deferred::Now(()) => Deferred::Now(read()?),
            ran => Deferred::later(async move {
                ran.resolve().await?;
                // The launches have finished: the copy has nothing to wait for.
                read()
            }),
        })
    }

    /// Enqueues `calls` in order on this core's stream and resolves when the last has
    /// finished (`wait`) or once all are enqueued: every call validated before any is
    /// enqueued (a bad one refuses them all); instantiations still compiling (on threads
    /// of their own) are awaited first — this actor goes on with its other launches
    /// meanwhile — and then all are enqueued without a wait between them.
    fn run_all(&mut self, calls: Vec<KernelCall>, wait: bool) -> Result<Deferred<()>, GpuError> {
        let _span =
            tracing::debug_span!("kernel", name = calls.first().map(|c| c.name), launches = calls.len()).entered();
        for call in &calls {
            call.args.validate(self.shared.config.device_id, self.generation)?;
        }
        match &mut self.engine {
            KernelEngine::Cpu => {
                for call in &calls {
                    call.check_launch(&crate::kernel::dsl::grid::LIMITS)?;
                }
                for call in &calls {
                    let _timed = cpu_op(self.shared.config.device_id, "kernel", call.name);
                    with_host_buffers(&call.args, |bufs| (call.emulate)(&bufs))?;
                }
                Ok(Deferred::Now(()))
            }
            KernelEngine::Cuda {
                cuda,
                stream,
                completer,
                seen,
            } => {
                let mut loading = Vec::new();
                for call in &calls {
                    call.check_launch(&cuda.limits)?;
                    if seen.contains_key(&call.id) || loading.iter().any(|(id, _)| *id == call.id) {
                        continue;
                    }
                    match cuda
                        .kernels
                        .lookup(call.id, call.name, call.source)
                        .map_err(|e| self.shared.observe(e))?
                    {
                        Lookup::Ready(l) => {
                            seen.insert(call.id, l.function.clone());
                        }
                        Lookup::Pending(l) => loading.push((call.id, l)),
                    }
                }
                let done = move |shared: &Arc<DeviceShared>, stream: &Arc<CudaStream>, completer: &Completer| {
                    if wait {
                        shared.deferred(completer.done(stream))
                    } else {
                        Deferred::Now(())
                    }
                };
                if loading.is_empty() {
                    for call in &calls {
                        enqueue(&self.shared, stream, &seen[&call.id], call)?;
                    }
                    return Ok(done(&self.shared, stream, completer));
                }
                let (shared, stream, completer) = (self.shared.clone(), stream.clone(), completer.clone());
                let mut functions: HashMap<TypeId, CudaFunction> = calls
                    .iter()
                    .filter_map(|c| seen.get(&c.id).map(|f| (c.id, f.clone())))
                    .collect();
                Ok(Deferred::later(async move {
                    for (id, l) in loading {
                        functions.insert(id, l.await.map_err(|e| shared.observe(e))?.function);
                    }
                    for call in &calls {
                        enqueue(&shared, &stream, &functions[&call.id], call)?;
                    }
                    done(&shared, &stream, &completer).resolve().await
                }))
            }
        }
    }

    fn preload(&mut self, id: TypeId, name: &str, source: String) -> Result<Deferred<bool>, GpuError> {
        match &mut self.engine {
            KernelEngine::Cpu => Ok(Deferred::Now(true)),
            KernelEngine::Cuda { cuda, .. } => {
                let shared = self.shared.clone();
                match cuda
                    .kernels
                    .lookup(id, name, || source)
                    .map_err(|e| shared.observe(e))?
                {
                    Lookup::Ready(l) => Ok(Deferred::Now(l.from_disk)),
                    Lookup::Pending(loading) => Ok(Deferred::later(async move {
                        loading.await.map(|l| l.from_disk).map_err(|e| shared.observe(e))
                    })),
                }
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

    /// Runs launches one after another on the device's kernel actor's stream and
    /// resolves when the last has finished: one round trip for a chain of kernels, each
    /// ordered after the one before by the stream (`KernelSequence`: made from a `Vec`
    /// or an array of the kernels' generated `call`s). Every call is validated before
    /// any runs; a bad one refuses the whole sequence.
    #[handler(device(name = launch_all, into(calls)))]
    fn launch_all(&mut self, calls: KernelSequence) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.launch_all(calls)
    }

    /// Runs launches in order on the kernel actor's stream, then reads `out` (a small
    /// buffer they wrote) back once they have finished: one request where a launch and a
    /// download would be two — a reduction's pass and its partials.
    #[handler(dtypes(any), device(name = launch_then_read, into(calls)))]
    fn launch_then_read<T: DTypeBase>(
        &mut self,
        calls: KernelSequence,
        out: GpuRef<T>,
    ) -> Result<Deferred<Vec<T>>, GpuError> {
        self.0.core()?.launch_then_read(calls, out)
    }

    /// Compiles (or loads from the disk cache) and loads an instantiation without
    /// launching it; `true` if no NVRTC run was needed.
    #[handler(volatile)]
    fn preload(&mut self, id: TypeId, name: String, source: String) -> Result<Deferred<bool>, GpuError> {
        self.0.core()?.preload(id, &name, source)
    }
}
