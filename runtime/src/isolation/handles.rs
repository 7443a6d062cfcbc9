//! How handles and the library actors' argument types cross to a GPU worker.
//!
//! A `GpuRef` crosses as the worker's buffer id: the worker keeps the buffer in its
//! table while the user process holds a handle (a [`RemoteBuf`]), and frees it when the
//! last handle is dropped. A `#[kernel]` launch crosses as the kernel's registered name
//! and dtypes plus its arguments: the worker is the same executable, so it finds the
//! same kernel in its own registry (the emulated body included).

use std::any::TypeId;
use std::sync::Weak;

use super::link::LinkShared;
use super::wire::{wire_enum, wire_struct, Reader, Side, Wire, WorkerCtx, Writer};
use crate::dtype::{DTypeBase, FloatDType};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::host::PinnedBuf;
use crate::kernel::blas::{Batch, Gemm, Gemv};
use crate::kernel::dsl::registry::{registered, KernelInstance};
use crate::kernel::dsl::KernelCall;
use crate::kernel::fft::FftShape;
use crate::memory::{Advice, Location};
use crate::module::LaunchConfig;

/// The user-process side of an isolated device's buffer: its id in the worker. Dropping
/// it (with the last `GpuRef` clone) frees the worker's buffer.
pub(crate) struct RemoteBuf {
    pub(crate) id: u64,
    pub(crate) instance: u64,
    pub(crate) link: Weak<LinkShared>,
}

impl Drop for RemoteBuf {
    fn drop(&mut self) {
        if let Some(link) = self.link.upgrade() {
            link.free(self.id);
        }
    }
}

impl WorkerCtx {
    /// Holds one more user handle to `r`.
    fn export<T: DTypeBase>(&self, r: &GpuRef<T>) {
        let mut m = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(r.id()).or_insert_with(|| (Box::new(r.clone()), 0)).1 += 1;
    }

    /// The user process dropped a handle to buffer `id`.
    pub(crate) fn release(&self, id: u64) {
        let mut m = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get_mut(&id) {
            e.1 -= 1;
            if e.1 == 0 {
                m.remove(&id);
            }
        }
    }

    fn lookup<T: DTypeBase>(&self, id: u64) -> Result<GpuRef<T>, GpuError> {
        let m = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        let (any, _) = m.get(&id).ok_or_else(|| {
            GpuError::InvalidArgument(format!("no buffer #{id} in the worker (freed, or never handed out)"))
        })?;
        any.downcast_ref::<GpuRef<T>>()
            .cloned()
            .ok_or_else(|| GpuError::InvalidArgument(format!("worker buffer #{id} is not a {} buffer", T::NAME)))
    }
}

impl<T: DTypeBase> Wire for GpuRef<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match w.side {
            Side::Client(c) => {
                let Some(remote) = self.remote() else {
                    return Err(GpuError::InvalidArgument(format!(
                        "buffer #{} belongs to an in-process device, not to isolated device {}",
                        self.id(),
                        c.device_id
                    )));
                };
                if remote.instance != c.instance {
                    return Err(GpuError::InvalidArgument(format!(
                        "buffer #{} lives on another device (device {}), not on this isolated device {}",
                        self.id(),
                        self.device_id(),
                        c.device_id
                    )));
                }
                if self.generation() != c.generation {
                    return Err(GpuError::Stale {
                        buffer_generation: self.generation(),
                        device_generation: c.generation,
                    });
                }
                let id = remote.id;
                w.keep.push(Box::new(self.clone()));
                w.put_u64(id);
            }
            Side::Worker(wc) => {
                wc.export(self);
                w.put_u64(self.id());
                w.put_u64(self.len() as u64);
            }
        }
        Ok(())
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let id = r.take_u64()?;
        match r.side {
            Side::Worker(wc) => wc.lookup(id),
            Side::Client(c) => {
                let len = r.take_usize()?;
                Ok(GpuRef::new_remote(
                    c.device_id,
                    c.generation,
                    len,
                    RemoteBuf {
                        id,
                        instance: c.instance,
                        link: c.link.clone(),
                    },
                ))
            }
        }
    }
}

/// Host buffers of the worker's pinned pool: they live in the worker process.
fn pinned_unsupported() -> GpuError {
    GpuError::Unsupported(
        "pinned host buffers on an isolated device (they would live in the worker process): use upload / download, \
         which move data through shared memory"
            .into(),
    )
}

impl<T: DTypeBase> Wire for PinnedBuf<T> {
    fn put(&self, _: &mut Writer<'_>) -> Result<(), GpuError> {
        Err(pinned_unsupported())
    }
    fn take(_: &mut Reader<'_>) -> Result<Self, GpuError> {
        Err(pinned_unsupported())
    }
}

impl<A: Wire, B: Wire, C: Wire> Wire for (A, B, C) {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        self.0.put(w)?;
        self.1.put(w)?;
        self.2.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok((A::take(r)?, B::take(r)?, C::take(r)?))
    }
}

impl<T: Wire> Wire for Option<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match self {
            None => {
                w.put_u8(0);
                Ok(())
            }
            Some(v) => {
                w.put_u8(1);
                v.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(match r.take_u8()? {
            0 => None,
            _ => Some(T::take(r)?),
        })
    }
}

wire_struct!(Gemm<T: FloatDType> { transa, transb, m, n, k, alpha, beta, lda, ldb, ldc });
wire_struct!(Gemv<T: FloatDType> { trans, m, n, alpha, beta, lda });
wire_struct!(Batch {
    count,
    stride_a,
    stride_b,
    stride_c
});
wire_struct!(FftShape { dims, batch });
wire_struct!(LaunchConfig {
    grid,
    block,
    shared_mem_bytes
});
wire_enum!(Location { Location::Device, Location::Host });

impl Wire for Vec<usize> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u64(self.len() as u64);
        self.iter().try_for_each(|v| v.put(w))
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let n = r.take_usize()?;
        // Each element takes 8 bytes: a count beyond the payload fails at its first read
        // instead of reserving memory for it.
        (0..n).map(|_| usize::take(r)).collect()
    }
}

impl Wire for Advice {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match self {
            Advice::ReadMostly(on) => {
                w.put_u8(0);
                on.put(w)
            }
            Advice::PreferredLocation(l) => {
                w.put_u8(1);
                l.put(w)
            }
            Advice::AccessedBy(l, on) => {
                w.put_u8(2);
                l.put(w)?;
                on.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(match r.take_u8()? {
            0 => Advice::ReadMostly(bool::take(r)?),
            1 => Advice::PreferredLocation(<Option<Location> as Wire>::take(r)?),
            2 => Advice::AccessedBy(Location::take(r)?, bool::take(r)?),
            t => return Err(GpuError::InvalidArgument(format!("{t} is not an Advice"))),
        })
    }
}

/// The registered kernel instance a launch or preload names: (kernel name, dtypes).
fn instance_of(id: TypeId) -> Result<(&'static str, &'static KernelInstance), GpuError> {
    registered()
        .flat_map(|reg| reg.instances.iter().map(move |i| (reg.name, i)))
        .find(|(_, i)| (i.id)() == id)
        .ok_or_else(|| {
            GpuError::Unsupported(
                "a kernel instantiation that is not registered (a dtype outside its bounds' list) on an isolated device"
                    .into(),
            )
        })
}

fn put_instance(id: TypeId, w: &mut Writer<'_>) -> Result<&'static KernelInstance, GpuError> {
    let (name, inst) = instance_of(id)?;
    name.to_string().put(w)?;
    inst.dtypes.to_string().put(w)?;
    Ok(inst)
}

fn take_instance(r: &mut Reader<'_>) -> Result<&'static KernelInstance, GpuError> {
    let name = String::take(r)?;
    let dtypes = String::take(r)?;
    registered()
        .filter(|reg| reg.name == name)
        .flat_map(|reg| reg.instances.iter())
        .find(|i| i.dtypes == dtypes)
        .ok_or_else(|| {
            GpuError::InvalidArgument(format!(
                "the worker has no kernel `{name}` for dtypes `{dtypes}` (is it the same executable?)"
            ))
        })
}

impl Wire for TypeId {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        put_instance(*self, w).map(|_| ())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok((take_instance(r)?.id)())
    }
}

/// One argument of a `#[kernel]` launch, as read by the worker.
enum WireArg {
    Buffer(u64),
    Scalar(Vec<u8>),
}

/// The arguments of a `#[kernel]` launch read by the worker, consumed in parameter
/// order by the kernel's generated `call_from_wire`.
pub struct WireArgs<'a> {
    items: std::vec::IntoIter<WireArg>,
    ctx: &'a WorkerCtx,
}

impl WireArgs<'_> {
    fn next(&mut self) -> Result<WireArg, GpuError> {
        self.items
            .next()
            .ok_or_else(|| GpuError::InvalidArgument("a kernel launch with too few arguments".into()))
    }

    /// The next argument, a buffer of `T`. Used by generated code.
    #[doc(hidden)]
    pub fn buffer<T: DTypeBase>(&mut self) -> Result<GpuRef<T>, GpuError> {
        match self.next()? {
            WireArg::Buffer(id) => self.ctx.lookup(id),
            WireArg::Scalar(_) => Err(GpuError::InvalidArgument(
                "a scalar where the kernel takes a buffer".into(),
            )),
        }
    }

    /// The next argument, a scalar (a dtype or a `#[derive(KernelArg)]` struct of
    /// them: plain numbers, for which every bit pattern is a value). Used by generated
    /// code.
    #[doc(hidden)]
    pub fn scalar<V: cudarc::driver::DeviceRepr + Copy + 'static>(&mut self) -> Result<V, GpuError> {
        match self.next()? {
            WireArg::Scalar(b) if std::any::TypeId::of::<V>() == TypeId::of::<bool>() && b.len() == 1 && b[0] > 1 => {
                Err(GpuError::InvalidArgument(format!("{} is not a bool", b[0])))
            }
            WireArg::Scalar(b) if b.len() == std::mem::size_of::<V>() => {
                // SAFETY: `b` holds exactly `size_of::<V>()` bytes written from a `V` by
                // the same executable (`put` below), and kernel scalars are plain numbers.
                Ok(unsafe { std::ptr::read_unaligned(b.as_ptr() as *const V) })
            }
            WireArg::Scalar(b) => Err(GpuError::InvalidArgument(format!(
                "a {}-byte scalar where the kernel takes {} bytes",
                b.len(),
                std::mem::size_of::<V>()
            ))),
            WireArg::Buffer(_) => Err(GpuError::InvalidArgument(
                "a buffer where the kernel takes a scalar".into(),
            )),
        }
    }

    /// Skips a buffer's length argument (the launcher recomputes it). Used by
    /// generated code.
    #[doc(hidden)]
    pub fn skip(&mut self) -> Result<(), GpuError> {
        self.next().map(|_| ())
    }
}

impl Wire for KernelCall {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        put_instance(self.id, w)?;
        self.cfg.put(w)?;
        self.args.put_wire(w)
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let inst = take_instance(r)?;
        let cfg = LaunchConfig::take(r)?;
        let Side::Worker(ctx) = r.side else {
            return Err(GpuError::InvalidArgument(
                "a kernel launch sent to the user process".into(),
            ));
        };
        let n = r.take_usize()?;
        let mut items = Vec::new();
        for _ in 0..n {
            items.push(match r.take_u8()? {
                0 => WireArg::Buffer(r.take_u64()?),
                1 => WireArg::Scalar(r.take_bytes_owned()?),
                t => return Err(GpuError::InvalidArgument(format!("unknown kernel argument tag {t}"))),
            });
        }
        let mut args = WireArgs {
            items: items.into_iter(),
            ctx,
        };
        (inst.from_wire)(cfg, &mut args)
    }
}

/// A buffer argument of a launch, on the wire: its id (checked like any `GpuRef`).
pub(crate) fn put_buffer_arg<T: DTypeBase>(r: &GpuRef<T>, w: &mut Writer<'_>) -> Result<(), GpuError> {
    w.put_u8(0);
    r.put(w)
}

/// A scalar argument of a launch, on the wire: its bytes.
pub(crate) fn put_scalar_arg(bytes: &[u8], w: &mut Writer<'_>) {
    w.put_u8(1);
    w.put_bytes(bytes);
}
