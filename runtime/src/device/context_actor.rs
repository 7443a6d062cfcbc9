//! `ContextActor`: the inner, restartable tier. Owns the context (or the CPU device) for
//! one generation and the library actors made in it. Written with `#[gpu_actor]`: one
//! generic handler per operation, expanded to every dtype.

use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;

use super::pool::Pool;
use super::route::{Inner, InnerRefs, LibraryRefs};
use crate::actor::{Context, Deferred, Failure};
use crate::backend::engine::ContextCore;
use crate::backend::state::{DeviceShared, RouteSlot, Status};
use crate::dispatcher::{Dispatcher, GpuDispatcher};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::event::{EventActor, EventActorRef};
use crate::gpu_ref::GpuRef;
use crate::graph::{GraphActor, GraphActorRef};
use crate::host::{PinnedBuf, Uploaded};
use crate::library::catalog::Lib;
use crate::library::kernels::{KernelActor, KernelActorRef};
use crate::library::modules::{ModuleActor, ModuleActorRef};
use crate::library::seed::LibrarySeed;
use crate::library::shell::Library;
use crate::memory::{Advice, Location};
use crate::stream::Lane;
use crate::wire::HostData;

/// The inner tier of one device.
pub struct ContextActor {
    shared: Arc<DeviceShared>,
    core: Option<ContextCore>,
}

impl ContextActor {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        ContextActor { shared, core: None }
    }

    /// Starts a library actor on a GPU thread of its own, so its waits never stall the
    /// context actor or the other libraries.
    fn spawn_library<A: crate::actor::Actor>(
        &self,
        ctx: &mut Context<Self>,
        name: &str,
        props: crate::actor::Props<A>,
        idle_spin: std::time::Duration,
    ) -> Result<crate::actor::ActorRef<A::Msg>, GpuError> {
        let thread = GpuDispatcher::new(&format!("{name}-{}", self.shared.config.device_id))?;
        thread.set_idle_spin(idle_spin);
        ctx.spawn_child(
            props.dispatcher(thread).mailbox(self.shared.config.mailbox_capacity),
            name,
        )
    }

    /// Starts a pool of `DeviceConfig::library_pool` actors of one library, each on a
    /// thread of its own (`name`, `name-1`, …): the first builds its core as it starts,
    /// the others on first use (a device used by one caller at a time never makes them).
    #[allow(clippy::too_many_arguments)]
    fn spawn_pool<A: crate::actor::Actor, C: crate::library::shell::Core + 'static, R>(
        &self,
        ctx: &mut Context<Self>,
        name: &str,
        seed: &LibrarySeed,
        spin: std::time::Duration,
        wrap: fn(Library<C>) -> A,
        props: fn(Box<dyn Fn() -> A + Send + Sync>) -> crate::actor::Props<A>,
        client: fn(crate::actor::ActorRef<A::Msg>) -> R,
    ) -> Result<Pool<R>, GpuError> {
        let members = (0..self.shared.config.library_pool.max(1))
            .map(|i| {
                let seed = seed.clone();
                let make: Box<dyn Fn() -> A + Send + Sync> = if i == 0 {
                    Box::new(move || wrap(Library::new(seed.clone())))
                } else {
                    Box::new(move || wrap(Library::lazy(seed.clone())))
                };
                let member = if i == 0 {
                    name.to_string()
                } else {
                    format!("{name}-{i}")
                };
                self.spawn_library(ctx, &member, props(make), spin).map(client)
            })
            .collect::<Result<Vec<R>, GpuError>>()?;
        Ok(Pool::new(members))
    }

    /// The idle spin of the device's GPU threads with `engine`: the configured one on a
    /// GPU; none on the CPU device, whose threads do the work themselves and have no GPU
    /// to wait for.
    fn idle_spin(&self, engine: &crate::backend::engine::Engine) -> std::time::Duration {
        match engine {
            crate::backend::engine::Engine::Cuda(_) => self.shared.config.idle_spin,
            crate::backend::engine::Engine::Cpu => std::time::Duration::ZERO,
        }
    }

    /// The core, unless the device is lost or the core never started.
    fn core(&mut self) -> Result<&mut ContextCore, GpuError> {
        self.shared.usable(&mut self.core, "context")
    }
}

/// Writes `ContextActor::spawn_libraries` from the table of optional libraries.
macro_rules! spawn_libraries {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, $device:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
        bounds { $($bounds:tt)* }
    })*) => {
        impl ContextActor {
            /// Starts the actors of every library this device serves (`Lib::on`: built
            /// in and asked for), each a pool or one actor as the table says.
            fn spawn_libraries(
                &self,
                ctx: &mut Context<Self>,
                seed: &LibrarySeed,
                spin: std::time::Duration,
            ) -> Result<LibraryRefs, GpuError> {
                let libs = self.shared.config.libraries;
                Ok(LibraryRefs {
                    $($field: if Lib::$variant.on(&libs) {
                        Some(spawn_libraries!(@spawn $pool, self, ctx, seed, spin, $field, crate::library::$field::$actor, crate::library::$field::$client))
                    } else {
                        None
                    },)*
                })
            }
        }
    };
    (@spawn pooled, $me:ident, $ctx:ident, $seed:ident, $spin:ident, $field:ident, $actor:path, $client:path) => {{
        use $actor as A;
        use $client as C;
        $me.spawn_pool($ctx, stringify!($field), $seed, $spin, A, A::gpu_props, C::new)?
    }};
    (@spawn single, $me:ident, $ctx:ident, $seed:ident, $spin:ident, $field:ident, $actor:path, $client:path) => {{
        use $actor as A;
        use $client as C;
        let seed = $seed.clone();
        let props = A::gpu_props(move || A(Library::new(seed.clone())));
        C::new($me.spawn_library($ctx, stringify!($field), props, $spin)?)
    }};
}

crate::libraries::library_table!(spawn_libraries {});

#[gpu_actor(crate = crate, wire, device)]
impl ContextActor {
    /// Builds the context, bumps the generation, starts the library actors and
    /// publishes the device as ready.
    #[pre_start]
    async fn start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        if let Some(d) = self.shared.config.start_delay {
            tokio::time::sleep(d).await;
        }
        let core = ContextCore::build(self.shared.clone()).map_err(|e| self.shared.observe(e))?;
        let seed = LibrarySeed::from_engine(self.shared.clone(), core.generation, &core.engine);
        let spin = self.idle_spin(&core.engine);
        if let Dispatcher::Gpu(own) = ctx.dispatcher() {
            own.set_idle_spin(spin);
        }
        let libs = self.spawn_libraries(ctx, &seed, spin)?;
        let kernel = self.spawn_pool(
            ctx,
            "kernel",
            &seed,
            spin,
            KernelActor,
            KernelActor::gpu_props,
            KernelActorRef::new,
        )?;
        let module = {
            let seed = seed.clone();
            let props = ModuleActor::gpu_props(move || ModuleActor(Library::new(seed.clone())));
            ModuleActorRef::new(self.spawn_library(ctx, "module", props, spin)?)
        };
        let event = {
            let seed = seed.clone();
            let props = EventActor::gpu_props(move || EventActor(Library::new(seed.clone())));
            EventActorRef::new(self.spawn_library(ctx, "event", props, spin)?)
        };
        let graph = {
            let seed = seed.clone();
            let props = GraphActor::gpu_props(move || GraphActor(Library::new(seed.clone())));
            GraphActorRef::new(self.spawn_library(ctx, "graph", props, spin)?)
        };
        let (generation, info) = (core.generation, core.info.clone());
        tracing::info!(device = self.shared.config.device_id, generation, name = %info.name, "device ready");
        let me = ContextActorRef::new(ctx.self_ref().clone());
        self.shared.publish(|s| {
            s.generation = generation;
            s.status = Status::Ready;
            s.info = Some(info);
            s.inner = Some(RouteSlot::new(Inner::Local(InnerRefs {
                ctx: me,
                libs,
                kernel,
                module,
                event,
                graph,
                seed,
            })));
        });
        self.core = Some(core);
        Ok(())
    }

    /// Marks the device as starting while the context is rebuilt.
    #[pre_restart]
    async fn rebuilding(&mut self, _ctx: &mut Context<Self>, failure: &Failure) -> Result<(), GpuError> {
        tracing::warn!(device = self.shared.config.device_id, %failure, "rebuilding the context");
        self.shared.publish(|s| {
            s.status = Status::Starting;
            s.inner = None;
        });
        Ok(())
    }

    /// Allocates `len` zeroed elements of `T`.
    #[handler(dtypes(any), device)]
    fn alloc<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.core()?.alloc::<T>(len)
    }

    /// Allocates `len` elements of `T` whose contents are unspecified until written
    /// (`torch.empty`): for a buffer a launch fills before anything reads it, where
    /// zeroing would be a wasted pass over its memory. Every element is some value of
    /// `T` all the same (its bit patterns all are: element types that have others are
    /// zeroed). Zeroed on the CPU device.
    #[handler(dtypes(any), device)]
    fn alloc_uninit<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.core()?.alloc_uninit::<T>(len)
    }

    /// Allocates `len` zeroed elements of managed (unified) memory: a `GpuRef` every
    /// device operation takes, that the host also reads and writes in place
    /// (`GpuRef::with_host`). An ordinary buffer on the CPU device.
    #[handler(dtypes(any), device)]
    fn alloc_managed<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.core()?.alloc_managed::<T>(len)
    }

    /// Moves a managed buffer's pages to `to` ahead of use, after its last writer;
    /// resolves when they are there. `InvalidArgument` for a buffer that is not managed;
    /// nothing to do on the CPU device.
    #[handler(dtypes(any), device)]
    fn prefetch<T: DTypeBase>(&mut self, buffer: GpuRef<T>, to: Location) -> Result<Deferred<()>, GpuError> {
        self.core()?.prefetch(&buffer, to)
    }

    /// Tells the driver how a managed buffer is used. `InvalidArgument` for a buffer that
    /// is not managed; nothing to do on the CPU device.
    #[handler(dtypes(any), device)]
    fn advise<T: DTypeBase>(&mut self, buffer: GpuRef<T>, advice: Advice) -> Result<(), GpuError> {
        self.core()?.advise(&buffer, advice)
    }

    /// Allocates a buffer holding `data`, as one message (`Device::upload` stages large
    /// ones through pinned buffers instead).
    #[handler(dtypes(any), device(name = upload_message, into(data), internal))]
    fn upload<T: DTypeBase>(&mut self, data: HostData<T>) -> Result<Deferred<GpuRef<T>>, GpuError> {
        self.core()?.upload(&data)
    }

    /// Overwrites `dst` with `data`, as one message (`Device::write` stages large writes).
    #[handler(dtypes(any), device(name = write_message, into(data), internal))]
    fn write<T: DTypeBase>(&mut self, dst: GpuRef<T>, data: HostData<T>) -> Result<Deferred<()>, GpuError> {
        self.core()?.write(&dst, &data)
    }

    /// Copies a buffer to the host (device → host), as one message (`Device::download`
    /// stages large ones).
    #[handler(dtypes(any), device(name = download_message, internal))]
    fn download<T: DTypeBase>(&mut self, src: GpuRef<T>) -> Result<Deferred<Vec<T>>, GpuError> {
        self.core()?.download(&src)
    }

    /// Copies `src` into `dst` on the device (equal lengths).
    #[handler(dtypes(any), device)]
    fn copy<T: DTypeBase>(&mut self, src: GpuRef<T>, dst: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.core()?.copy(&src, &dst)
    }

    /// Copies `src`, a buffer of another GPU device of this process (`src_device` at
    /// `src_generation`), into `dst` (same length): what `Device::copy_to` asks of the
    /// receiving device.
    #[handler(dtypes(any))]
    fn copy_from_peer<T: DTypeBase>(
        &mut self,
        src: GpuRef<T>,
        src_device: usize,
        src_generation: u64,
        dst: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.core()?.copy_from_peer(&src, src_device, src_generation, &dst)
    }

    /// A pinned host buffer from the pool: zero-filled, or (`zeroed == false`) with the
    /// contents of its last use, for a caller that overwrites it at once.
    #[handler(dtypes(any))]
    fn pinned<T: DTypeBase>(&mut self, len: usize, zeroed: bool) -> Result<PinnedBuf<T>, GpuError> {
        self.core()?.pinned::<T>(len, zeroed)
    }

    /// Uploads a pinned buffer into a new device buffer (an asynchronous full-speed copy)
    /// and hands the pinned buffer back for reuse.
    #[handler(dtypes(any), device)]
    fn upload_pinned<T: DTypeBase>(&mut self, buf: PinnedBuf<T>) -> Result<Deferred<Uploaded<T>>, GpuError> {
        self.core()?.upload_pinned(buf)
    }

    /// Copies a pinned buffer into `dst` (same length) and hands the buffer back.
    #[handler(dtypes(any), device)]
    fn write_pinned<T: DTypeBase>(
        &mut self,
        dst: GpuRef<T>,
        buf: PinnedBuf<T>,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.core()?.write_pinned(&dst, buf)
    }

    /// Copies the first `len` elements of `buf` into `dst[offset..offset + len]` and hands
    /// the buffer back: one chunk of a staged write (`Device::write_slice`).
    #[handler(dtypes(any))]
    fn write_pinned_at<T: DTypeBase>(
        &mut self,
        dst: GpuRef<T>,
        offset: usize,
        buf: PinnedBuf<T>,
        len: usize,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.core()?.write_pinned_at(&dst, offset, buf, len)
    }

    /// Copies `src[offset..offset + len]` into the start of `buf` and hands it back: one
    /// chunk of a staged download (`Device::download_into`).
    #[handler(dtypes(any))]
    fn download_pinned_at<T: DTypeBase>(
        &mut self,
        src: GpuRef<T>,
        offset: usize,
        buf: PinnedBuf<T>,
        len: usize,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.core()?.download_pinned_at(&src, offset, buf, len)
    }

    /// Downloads `src` into a pinned buffer of the same length and hands it back.
    #[handler(dtypes(any), device)]
    fn download_pinned<T: DTypeBase>(
        &mut self,
        src: GpuRef<T>,
        buf: PinnedBuf<T>,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.core()?.download_pinned(&src, buf)
    }

    /// A stream of this context for a world's NCCL communicator (`multi_device`).
    #[handler]
    fn lane(&mut self) -> Result<Lane, GpuError> {
        self.core()?.lane()
    }

    /// This device's context as other libraries see it — cudarc's context and a stream
    /// of its own (none on the CPU device), and the current generation — to lend buffers
    /// to cudarc, raw CUDA or DLPack consumers and to take theirs ([`crate::interop`]).
    /// `Unsupported` on an isolated device, whose memory lives in its worker process.
    #[handler(device)]
    fn interop(&mut self) -> Result<crate::interop::Interop, GpuError> {
        self.core()?.interop()
    }

    /// Fault drill (`TestHooks::inject_fault`): the device behaves as if its stream had
    /// reported the sticky CUDA error `code` (700, 719, …) — lost, every pending and later
    /// request failing with typed errors; an isolated device's worker then reports the
    /// fault and is replaced. The CPU device has no faults of its own: this is how tests
    /// exercise recovery there. A code that is not sticky is an `InvalidArgument`.
    #[handler]
    fn inject_fault(&mut self, code: i32) -> Result<(), GpuError> {
        let e = GpuError::from_cuda_code(code, format!("injected fault (CUDA error {code})"), 0);
        if !e.is_sticky() {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "CUDA error {code} does not poison a context: inject a sticky one (700, 719, …)"
                ))
                .arg("code")
                .mismatch("a sticky CUDA error code", code),
            ));
        }
        Err(self.shared.observe(e))
    }

    /// Free and total memory of the device, in bytes.
    #[handler(device, volatile)]
    fn memory(&mut self) -> Result<(u64, u64), GpuError> {
        self.core()?.memory()
    }
}
