//! `ContextCore`: what the inner tier owns — the CUDA context (or the CPU device), its
//! stream and completion — and the memory operations on it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, CudaView, CudaViewMut, DeviceSlice};

use super::config::BackendChoice;
use super::staging;
use super::state::{BackendKind, DeviceInfo, DeviceShared};
use crate::actor::Deferred;
use crate::completion::{Completer, CompletionStrategy};
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{with_operands, GpuRef, Region, RegionMut, Storage};
use crate::host::SharedHost;
use crate::host::{HostMem, PinnedBuf, PlainMem, Uploaded, STAGING_BYTES};
use crate::launch::LaunchLimits;
use crate::memory::{Advice, Location};
use crate::observability::{cpu_op, gpu_timed};
use crate::stream::{Lane, StreamSource};
use crate::sys::pinned::{copy_device_to_host, copy_host_to_device, HostRegistrations, PinnedMem};

/// The CUDA side of a context.
pub(crate) struct CudaEngine {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) streams: Arc<StreamSource>,
    pub(crate) completer: Completer,
    pub(crate) limits: LaunchLimits,
    /// `sm_XY` of the device.
    pub(crate) arch: String,
    /// An isolated device's pinned buffers, page-locked in its worker as they are used.
    pub(crate) registered: HostRegistrations,
}

/// CUDA or the CPU device.
pub(crate) enum Engine {
    Cpu,
    Cuda(Box<CudaEngine>),
}

/// The inner tier's state for one generation.
pub(crate) struct ContextCore {
    pub(crate) shared: Arc<DeviceShared>,
    pub(crate) generation: u64,
    pub(crate) engine: Engine,
    pub(crate) info: DeviceInfo,
}

impl ContextCore {
    /// Builds the backend for a new generation, on the inner tier's own thread.
    pub(crate) fn build(shared: Arc<DeviceShared>) -> Result<ContextCore, GpuError> {
        let config = &shared.config;
        let use_cuda = match config.backend {
            BackendChoice::Cpu => false,
            BackendChoice::Cuda => true,
            BackendChoice::Auto => crate::sys::cuda_device_usable(config.device_id),
        };
        let (engine, info) = if use_cuda {
            if !crate::sys::cuda_driver_present() {
                return Err(GpuError::DeviceLost("no CUDA driver (libcuda) on this machine".into()));
            }
            let ctx = CudaContext::new(config.device_id)?;
            let streams = Arc::new(StreamSource::new(ctx.clone(), config.streams)?);
            let stream = streams.take()?;
            let completer = Completer::new(&ctx, config.completion, config.op_timeout)?;
            let cc = ctx.compute_capability()?;
            let info = DeviceInfo {
                backend: BackendKind::Cuda,
                name: ctx.name()?,
                total_memory: ctx.total_mem()? as u64,
                compute_capability: Some(cc),
            };
            let limits = LaunchLimits::of(&ctx)?;
            (
                Engine::Cuda(Box::new(CudaEngine {
                    registered: HostRegistrations::new(ctx.clone()),
                    ctx,
                    stream,
                    streams,
                    completer,
                    limits,
                    arch: info.arch().unwrap_or_default(),
                })),
                info,
            )
        } else {
            let info = DeviceInfo {
                backend: BackendKind::Cpu,
                name: "CPU device".into(),
                total_memory: config.cpu_memory_limit,
                compute_capability: None,
            };
            (Engine::Cpu, info)
        };
        // Staging buffers pinned ahead of the first copy that needs them
        // (`DeviceConfig::pinned_initial_buffers`; topped up at each restart).
        let made = shared.pinned.prefill(config.pinned_initial_buffers, || match &engine {
            Engine::Cpu => Ok(HostMem::Plain(PlainMem::zeroed(STAGING_BYTES))),
            Engine::Cuda(c) => Ok(HostMem::Pinned(PinnedMem::zeroed(&c.ctx, STAGING_BYTES)?)),
        });
        made?;
        let generation = shared.next_generation();
        Ok(ContextCore {
            shared,
            generation,
            engine,
            info,
        })
    }

    /// The device id buffers are checked against.
    pub(crate) fn device_id(&self) -> usize {
        self.shared.config.device_id
    }

    /// Validates a buffer for use on this device and generation.
    pub(crate) fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.device_id(), self.generation)
    }

    /// The CUDA engine; an error if a CUDA buffer meets the CPU device (impossible once
    /// `check` passed, since generations and device ids are per backend instance).
    fn cuda(&self) -> Result<&CudaEngine, GpuError> {
        match &self.engine {
            Engine::Cuda(c) => Ok(c),
            Engine::Cpu => Err(GpuError::invalid("a CUDA buffer on the CPU device")),
        }
    }

    /// The context's stream, shared (so that `&mut self` stays free meanwhile).
    fn cuda_stream(&self) -> Result<Arc<CudaStream>, GpuError> {
        Ok(self.cuda()?.stream.clone())
    }

    fn observe(&self, e: impl Into<GpuError>) -> GpuError {
        self.shared.observe(e.into())
    }

    /// Completion of everything enqueued so far on the context's stream.
    fn done(&self) -> Deferred<()> {
        match &self.engine {
            Engine::Cpu => Deferred::Now(()),
            Engine::Cuda(c) => self.shared.deferred(c.completer.done(&c.stream)),
        }
    }

    /// Allocates `len` zeroed elements.
    pub(crate) fn alloc<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.alloc_filled(len, true)
    }

    /// Allocates `len` elements, not zeroed on a GPU where every bit pattern of `T` is a
    /// value (see `sys::uninit`); zeroed otherwise and on the CPU device.
    pub(crate) fn alloc_uninit<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        self.alloc_filled(len, false)
    }

    /// Allocates `len` elements, zeroed unless `zeroed` is false and `T` allows it.
    fn alloc_filled<T: DTypeBase>(&mut self, len: usize, zeroed: bool) -> Result<GpuRef<T>, GpuError> {
        let bytes = checked_bytes::<T>(len)?;
        let storage = match &self.engine {
            Engine::Cpu => {
                let shared = self.shared.clone();
                let limit = shared.config.cpu_memory_limit;
                let used = shared.cpu_used.fetch_add(bytes, Ordering::SeqCst);
                if used.saturating_add(bytes) > limit {
                    shared.cpu_used.fetch_sub(bytes, Ordering::SeqCst);
                    return Err(GpuError::OutOfMemory { requested_bytes: bytes });
                }
                let mut v = Vec::new();
                if v.try_reserve_exact(len).is_err() {
                    shared.cpu_used.fetch_sub(bytes, Ordering::SeqCst);
                    return Err(GpuError::OutOfMemory { requested_bytes: bytes });
                }
                v.resize(len, T::default());
                let on_drop: Box<dyn Fn(u64) + Send + Sync> = Box::new(move |b| {
                    shared.cpu_used.fetch_sub(b, Ordering::SeqCst);
                });
                return Ok(GpuRef::new(
                    self.device_id(),
                    self.generation,
                    len,
                    Storage::Cpu(v.into()),
                    Some(on_drop),
                ));
            }
            Engine::Cuda(c) => match (!zeroed)
                .then(|| crate::sys::uninit::alloc_uninit::<T>(&c.stream, len))
                .flatten()
                .unwrap_or_else(|| c.stream.alloc_zeros::<T>(len))
            {
                Ok(s) => Storage::Cuda(s),
                Err(e) => {
                    let e = GpuError::from(e);
                    return Err(self.observe(match e {
                        GpuError::OutOfMemory { .. } => GpuError::OutOfMemory { requested_bytes: bytes },
                        other => other,
                    }));
                }
            },
        };
        Ok(GpuRef::new(self.device_id(), self.generation, len, storage, None))
    }

    /// Allocates `len` zeroed elements of managed memory (host-addressable); on the CPU
    /// device, an ordinary buffer (all of its memory is host memory).
    pub(crate) fn alloc_managed<T: DTypeBase>(&mut self, len: usize) -> Result<GpuRef<T>, GpuError> {
        let bytes = checked_bytes::<T>(len)?;
        let Engine::Cuda(c) = &self.engine else {
            return self.alloc::<T>(len);
        };
        let slice = crate::sys::managed::alloc_managed::<T>(&c.stream, len).map_err(|e| {
            self.observe(match e {
                GpuError::OutOfMemory { .. } => GpuError::OutOfMemory { requested_bytes: bytes },
                other => other,
            })
        })?;
        Ok(GpuRef::new_managed(self.device_id(), self.generation, len, slice))
    }

    /// The address of a managed buffer's memory, for prefetch and advice; `None` on the
    /// CPU device (where both are no-ops).
    fn managed_address<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<Option<u64>, GpuError> {
        self.check(r)?;
        let Engine::Cuda(c) = &self.engine else {
            return Ok(None);
        };
        if !r.is_managed() {
            return Err(GpuError::invalid(format!(
                "buffer #{} is not managed memory (allocate it with alloc_managed)",
                r.id()
            )));
        }
        let mut s = r.lock();
        // Taking the address on the context's stream also orders what follows there
        // after the buffer's last writer.
        let (ptr, _recorded) = s.address(&c.stream, false)?;
        Ok(Some(ptr))
    }

    /// Moves a managed buffer's pages to `to`, ordered after its last writer.
    pub(crate) fn prefetch<T: DTypeBase>(&mut self, r: &GpuRef<T>, to: Location) -> Result<Deferred<()>, GpuError> {
        let Some(ptr) = self.managed_address(r)? else {
            return Ok(Deferred::Now(()));
        };
        let c = self.cuda()?;
        crate::sys::managed::prefetch(ptr, r.num_bytes(), to, &c.stream).map_err(|e| self.observe(e))?;
        Ok(self.done())
    }

    /// Applies a usage hint to a managed buffer.
    pub(crate) fn advise<T: DTypeBase>(&mut self, r: &GpuRef<T>, advice: Advice) -> Result<(), GpuError> {
        let Some(ptr) = self.managed_address(r)? else {
            return Ok(());
        };
        let device = self.device_id() as i32;
        crate::sys::managed::advise(ptr, r.num_bytes(), advice, device).map_err(|e| self.observe(e))
    }

    /// Allocates and fills a buffer from host data.
    pub(crate) fn upload<T: DTypeBase>(&mut self, data: &[T]) -> Result<Deferred<GpuRef<T>>, GpuError> {
        let r = self.alloc::<T>(data.len())?;
        {
            let mut s = r.lock();
            match s.region_mut() {
                RegionMut::Cpu(v) => {
                    let _timed = cpu_op(self.device_id(), "copy", format!("htod<{}>", T::NAME));
                    v.copy_from_slice(data)
                }
                RegionMut::Cuda(mut dst) => self.htod(data, &mut dst)?,
            }
        }
        Ok(self.then(r))
    }

    /// Overwrites a buffer with host data of the same length.
    pub(crate) fn write<T: DTypeBase>(&mut self, dst: &GpuRef<T>, data: &[T]) -> Result<Deferred<()>, GpuError> {
        self.check(dst)?;
        if data.len() != dst.len() {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!("write of {} elements into a buffer of {}", data.len(), dst.len()),
                "data",
                dst.len(),
                data.len(),
            )));
        }
        match dst.lock().region_mut() {
            RegionMut::Cpu(v) => {
                let _timed = cpu_op(self.device_id(), "copy", format!("htod<{}>", T::NAME));
                v.copy_from_slice(data)
            }
            RegionMut::Cuda(mut d) => self.htod(data, &mut d)?,
        }
        Ok(self.done())
    }

    /// Copies a buffer back to the host.
    pub(crate) fn download<T: DTypeBase>(&mut self, src: &GpuRef<T>) -> Result<Deferred<Vec<T>>, GpuError> {
        self.check(src)?;
        let s = src.lock();
        match s.region() {
            Region::Cpu(v) => {
                let _timed = cpu_op(self.device_id(), "copy", format!("dtoh<{}>", T::NAME));
                Ok(Deferred::Now(v.to_vec()))
            }
            Region::Cuda(d) => Ok(Deferred::Now(self.dtoh(&d)?)),
        }
    }

    /// Device-to-device copy of equal-length buffers.
    pub(crate) fn copy<T: DTypeBase>(&mut self, src: &GpuRef<T>, dst: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.check(src)?;
        self.copy_into(src, dst)
    }

    /// Copies `src`, a buffer of another GPU device of this process (checked here against
    /// that device's ordinal and generation as the caller read them), into `dst` of this
    /// device, on this context's stream: cudarc orders it after both buffers' pending work
    /// and makes it a peer copy between two contexts (direct once peer access is on, which
    /// this turns on where the pair has it).
    pub(crate) fn copy_from_peer<T: DTypeBase>(
        &mut self,
        src: &GpuRef<T>,
        src_device: usize,
        src_generation: u64,
        dst: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        src.validate(src_device, src_generation)?;
        self.copy_into(src, dst)
    }

    /// Copies `src` (checked by the caller: this device's, or a peer's) into `dst` of this
    /// device, of the same length.
    fn copy_into<T: DTypeBase>(&self, src: &GpuRef<T>, dst: &GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.check(dst)?;
        if src.len() != dst.len() {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!("copy of {} elements into a buffer of {}", src.len(), dst.len()),
                "dst",
                src.len(),
                dst.len(),
            )));
        }
        if src.same_buffer(dst) && src.window() == dst.window() {
            return Ok(Deferred::Now(()));
        }
        // Views of one buffer must not overlap (`with_operands` checks).
        with_operands([src], dst, |[s], d| self.copy_region(s, d))??;
        Ok(self.done())
    }

    /// Copies one locked window into another on this context's stream (the source may
    /// be a peer GPU's: peer access is enabled first where the driver offers it).
    fn copy_region<T: DTypeBase>(&self, src: Region<'_, T>, dst: RegionMut<'_, T>) -> Result<(), GpuError> {
        match (src, dst) {
            (Region::Cpu(a), RegionMut::Cpu(b)) => {
                let _timed = cpu_op(self.device_id(), "copy", format!("dtod<{}>", T::NAME));
                b.copy_from_slice(a)
            }
            (Region::Cuda(a), RegionMut::Cuda(mut b)) => {
                let c = self.cuda()?;
                let peer = a.stream().context();
                if peer.cu_ctx() != c.ctx.cu_ctx()
                    && crate::sys::peer::can_access_peer(peer.ordinal(), c.ctx.ordinal())?
                {
                    crate::sys::peer::enable_peer_access(&c.ctx, peer).map_err(|e| self.observe(e))?;
                }
                gpu_timed(
                    &c.stream,
                    self.device_id(),
                    "copy",
                    format!("dtod<{}>", T::NAME),
                    || c.stream.memcpy_dtod(&a, &mut b),
                )
                .map_err(|e| self.observe(GpuError::from(e)))?;
            }
            _ => return Err(GpuError::invalid("copy between a CPU and a CUDA buffer")),
        }
        Ok(())
    }

    /// A pinned host buffer of `len` zeroed elements, from the pool when one is free.
    pub(crate) fn pinned<T: DTypeBase>(&mut self, len: usize, zeroed: bool) -> Result<PinnedBuf<T>, GpuError> {
        check_pinned_len::<T>(len, self.shared.config.pinned_buffer_max_bytes)?;
        let pool = self.shared.pinned.clone();
        let made = pool.buffer(len, zeroed, || match &self.engine {
            Engine::Cpu => Ok(HostMem::Plain(PlainMem::zeroed(len))),
            Engine::Cuda(c) => Ok(HostMem::Pinned(PinnedMem::zeroed(&c.ctx, len)?)),
        });
        made.map_err(|e| self.observe(e))
    }

    /// Allocates a device buffer and copies a pinned buffer into it asynchronously; the
    /// pinned buffer comes back with the result once the copy is done.
    pub(crate) fn upload_pinned<T: DTypeBase>(
        &mut self,
        mut buf: PinnedBuf<T>,
    ) -> Result<Deferred<Uploaded<T>>, GpuError> {
        let r = self.alloc::<T>(buf.len())?;
        self.enqueue_pinned_write(&r, 0, buf.len(), &mut buf)?;
        Ok(self.then((r, buf)))
    }

    /// Copies a pinned buffer into an existing device buffer of the same length.
    pub(crate) fn write_pinned<T: DTypeBase>(
        &mut self,
        dst: &GpuRef<T>,
        buf: PinnedBuf<T>,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.check(dst)?;
        if dst.len() != buf.len() {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!(
                    "write of a pinned buffer of {} elements into a buffer of {}: the lengths must match",
                    buf.len(),
                    dst.len()
                ),
                "buf",
                dst.len(),
                buf.len(),
            )));
        }
        let len = buf.len();
        self.write_pinned_at(dst, 0, buf, len)
    }

    /// Copies the first `len` elements of a pinned buffer into `dst[offset..offset + len]`
    /// asynchronously; the pinned buffer comes back once the copy is done. What a staged
    /// write from a caller's slice sends per chunk (`Device::write_slice`).
    pub(crate) fn write_pinned_at<T: DTypeBase>(
        &mut self,
        dst: &GpuRef<T>,
        offset: usize,
        mut buf: PinnedBuf<T>,
        len: usize,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.check(dst)?;
        in_range(offset, len, dst.len(), buf.len())?;
        self.enqueue_pinned_write(dst, offset, len, &mut buf)?;
        Ok(self.then(buf))
    }

    fn enqueue_pinned_write<T: DTypeBase>(
        &self,
        dst: &GpuRef<T>,
        offset: usize,
        len: usize,
        buf: &mut PinnedBuf<T>,
    ) -> Result<(), GpuError> {
        let mut d = dst.lock();
        match (buf.mem_mut(), d.region_mut()) {
            (HostMem::Plain(v), RegionMut::Cpu(out)) => out[offset..offset + len].copy_from_slice(&v[..len]),
            (HostMem::Pinned(p), RegionMut::Cuda(mut out)) => {
                let mut range = out.slice_mut(offset..offset + len);
                p.copy_to_device(&self.cuda()?.stream, &mut range)
                    .map_err(|e| self.observe(e))?;
            }
            (HostMem::Shared(s), _) if s.in_user_process() => return Err(isolated_pinned_elsewhere()),
            (HostMem::Shared(s), RegionMut::Cpu(out)) => {
                out[offset..offset + len].copy_from_slice(&s.as_slice()[..len])
            }
            (HostMem::Shared(s), RegionMut::Cuda(mut out)) => {
                let c = self.cuda()?;
                page_lock(c, s);
                let mut range = out.slice_mut(offset..offset + len);
                // SAFETY: the pinned buffer (and so its range) is held until the stream
                // has passed the copy (the caller answers with it from `then`), and
                // nobody writes the range meanwhile (the user's buffer is in this request).
                unsafe { copy_host_to_device(&c.stream, &s.as_slice()[..len], &mut range) }
                    .map_err(|e| self.observe(e))?;
            }
            _ => return Err(GpuError::invalid("a pinned buffer of another backend")),
        }
        Ok(())
    }

    /// Copies `src[offset..offset + len]` into the first `len` elements of a pinned buffer
    /// asynchronously; the pinned buffer comes back once the copy is done.
    pub(crate) fn download_pinned_at<T: DTypeBase>(
        &mut self,
        src: &GpuRef<T>,
        offset: usize,
        mut buf: PinnedBuf<T>,
        len: usize,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.check(src)?;
        in_range(offset, len, src.len(), buf.len())?;
        {
            let s = src.lock();
            match (s.region(), buf.mem_mut()) {
                (Region::Cpu(v), HostMem::Plain(dst)) => dst[..len].copy_from_slice(&v[offset..offset + len]),
                (Region::Cuda(d), HostMem::Pinned(p)) => {
                    p.copy_from_device(&self.cuda()?.stream, &d.slice(offset..offset + len))
                        .map_err(|e| self.observe(e))?;
                }
                (_, HostMem::Shared(s)) if s.in_user_process() => return Err(isolated_pinned_elsewhere()),
                (Region::Cpu(v), HostMem::Shared(dst)) => {
                    dst.as_mut_slice()[..len].copy_from_slice(&v[offset..offset + len])
                }
                (Region::Cuda(d), HostMem::Shared(dst)) => {
                    let c = self.cuda()?;
                    page_lock(c, dst);
                    // SAFETY: as for an upload: the buffer is held, untouched by the host,
                    // until the stream has passed the copy.
                    unsafe {
                        copy_device_to_host(
                            &c.stream,
                            &d.slice(offset..offset + len),
                            &mut dst.as_mut_slice()[..len],
                        )
                    }
                    .map_err(|e| self.observe(e))?;
                }
                _ => return Err(GpuError::invalid("a pinned buffer of another backend")),
            }
        }
        Ok(self.then(buf))
    }

    /// Copies a device buffer into a pinned buffer of the same length asynchronously; the
    /// pinned buffer comes back once the copy is done.
    pub(crate) fn download_pinned<T: DTypeBase>(
        &mut self,
        src: &GpuRef<T>,
        buf: PinnedBuf<T>,
    ) -> Result<Deferred<PinnedBuf<T>>, GpuError> {
        self.check(src)?;
        if src.len() != buf.len() {
            return Err(GpuError::InvalidArgument(Invalid::length(
                format!(
                    "download of {} elements into a pinned buffer of {}: the lengths must match",
                    src.len(),
                    buf.len()
                ),
                "buf",
                src.len(),
                buf.len(),
            )));
        }
        let len = buf.len();
        self.download_pinned_at(src, 0, buf, len)
    }

    /// Returns `value` once the context's stream has finished the work enqueued so far.
    fn then<R: Send + 'static>(&self, value: R) -> Deferred<R> {
        self.done().map(move |()| value)
    }

    /// A new stream of this context and a completer for it ([`Lane`]); the CPU device has
    /// no stream to give (`Unsupported`).
    pub(crate) fn lane(&self) -> Result<Lane, GpuError> {
        let Engine::Cuda(c) = &self.engine else {
            return Err(GpuError::Unsupported("the CPU device has no CUDA stream".into()));
        };
        let stream = crate::sys::graph::new_stream(&c.ctx).map_err(|e| self.observe(e))?;
        let completer = Completer::new(&c.ctx, CompletionStrategy::Spin, c.completer.deadline())?;
        Ok(Lane {
            stream,
            completer,
            generation: self.generation,
        })
    }

    /// The handle other libraries use this generation through: a new stream of the
    /// context on a GPU, none on the CPU device.
    pub(crate) fn interop(&self) -> Result<crate::interop::Interop, GpuError> {
        let stream = match &self.engine {
            Engine::Cpu => None,
            Engine::Cuda(c) => Some(crate::sys::graph::new_stream(&c.ctx).map_err(|e| self.observe(e))?),
        };
        Ok(crate::interop::Interop::new(self.device_id(), self.generation, stream))
    }

    /// Enqueues the copy of pageable `data` into `dst`: through two pinned staging buffers
    /// of the pool from two chunks up (`staging.rs`), else cudarc's pageable copy.
    fn htod<T: DTypeBase>(&mut self, data: &[T], dst: &mut CudaViewMut<'_, T>) -> Result<(), GpuError> {
        let stream = self.cuda_stream()?;
        let staged = self.staging::<T>(data.len());
        let r = gpu_timed(
            &stream,
            self.device_id(),
            "copy",
            format!("htod<{}>", T::NAME),
            || match staged {
                Some(mut bufs) => staging::htod(&mut bufs, &stream, data, dst),
                None => stream.memcpy_htod(data, dst).map_err(GpuError::from),
            },
        );
        r.map_err(|e| self.observe(e))
    }

    /// Copies `src` into a new (pageable) `Vec`, as `htod` chooses; returns when done
    /// (cudarc's pageable copy synchronises the stream before returning).
    fn dtoh<T: DTypeBase>(&mut self, src: &CudaView<'_, T>) -> Result<Vec<T>, GpuError> {
        let stream = self.cuda_stream()?;
        let staged = self.staging::<T>(src.len());
        let r = gpu_timed(
            &stream,
            self.device_id(),
            "copy",
            format!("dtoh<{}>", T::NAME),
            || match staged {
                Some(mut bufs) => staging::dtoh(&mut bufs, &stream, src),
                None => stream.clone_dtoh(src).map_err(GpuError::from),
            },
        );
        r.map_err(|e| self.observe(e))
    }

    /// Two staging buffers of a chunk each, from the pool, for a copy of `len` elements
    /// worth staging; `None` (the caller copies pageable) below two chunks or when the
    /// buffers cannot be had (a `pinned_buffer_max_bytes` under a chunk, pinned memory
    /// exhausted).
    fn staging<T: DTypeBase>(&mut self, len: usize) -> Option<[PinnedBuf<T>; 2]> {
        if !staging::stages::<T>(len) {
            return None;
        }
        let n = staging::chunk_len::<T>();
        Some([self.pinned::<T>(n, false).ok()?, self.pinned::<T>(n, false).ok()?])
    }

    /// Free and total device memory in bytes.
    pub(crate) fn memory(&self) -> Result<(u64, u64), GpuError> {
        match &self.engine {
            Engine::Cpu => {
                let limit = self.shared.config.cpu_memory_limit;
                Ok((limit - self.shared.cpu_used.load(Ordering::SeqCst).min(limit), limit))
            }
            Engine::Cuda(c) => {
                let (free, total) = c.ctx.mem_get_info().map_err(|e| self.observe(e))?;
                Ok((free as u64, total as u64))
            }
        }
    }
}

/// `Ok` if `offset..offset + len` lies in a device buffer of `buffer` elements and `len`
/// fits a pinned buffer of `pinned`.
fn in_range(offset: usize, len: usize, buffer: usize, pinned: usize) -> Result<(), GpuError> {
    if offset.checked_add(len).is_some_and(|end| end <= buffer) && len <= pinned {
        return Ok(());
    }
    Err(GpuError::InvalidArgument(Invalid::new(format!(
        "a copy of {len} elements at {offset} of a buffer of {buffer}, through a pinned buffer of {pinned}"
    ))))
}

/// `len * size_of::<T>()` with the checks every allocation needs.
/// What an isolated device's pinned buffer gets on an in-process device.
fn isolated_pinned_elsewhere() -> GpuError {
    GpuError::invalid(
        "a pinned buffer of an isolated device used with another device: take pinned buffers from the device \
         that copies them (Device::pinned)",
    )
}

/// Page-locks a worker's view of a pinned buffer (its range of the shared arena) with
/// the context, once; should the driver refuse, the copy still runs, from pageable
/// memory (slower, as correct).
fn page_lock<T: DTypeBase>(c: &CudaEngine, s: &SharedHost<T>) {
    let (ptr, bytes) = s.range().pages();
    if let Err(e) = c.registered.ensure(ptr, bytes) {
        tracing::warn!(%e, bytes, "page-locking a pinned buffer of the user process failed; copying it pageable");
    }
}

/// Checks the length of a pinned buffer asked for: at least one element, and at most
/// `cap` bytes (`DeviceConfig::pinned_buffer_max_bytes`).
pub(crate) fn check_pinned_len<T>(len: usize, cap: u64) -> Result<(), GpuError> {
    let bytes = checked_bytes::<T>(len)?;
    if bytes > cap {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "a pinned buffer of {bytes} bytes is over DeviceConfig::pinned_buffer_max_bytes ({cap}): raise it, or \
                 stage through smaller buffers (write_slice, download_into)"
            ))
            .arg("len")
            .mismatch(
                format_args!("≤ {} elements", cap / std::mem::size_of::<T>() as u64),
                len,
            ),
        ));
    }
    Ok(())
}

pub(crate) fn checked_bytes<T>(len: usize) -> Result<u64, GpuError> {
    if len == 0 {
        return Err(GpuError::InvalidArgument(
            Invalid::new("zero-length buffers are not allocated: ask for at least one element")
                .arg("len")
                .mismatch("≥ 1", 0),
        ));
    }
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .map(|b| b as u64)
        .ok_or_else(|| {
            GpuError::InvalidArgument(
                Invalid::new(format!("{len} elements overflow the address space"))
                    .arg("len")
                    .mismatch(
                        format_args!("≤ {} elements", isize::MAX as usize / std::mem::size_of::<T>()),
                        len,
                    ),
            )
        })
}
