//! The arguments of a launch on the wire: each a buffer (its remote id and window,
//! checked like any `GpuRef`) or a scalar (its bytes). A `#[kernel]` launch's are read
//! back in parameter order by the kernel's generated `call_from_wire` in the worker,
//! which knows their types; `launch/wire.rs` adds each buffer's element type and access
//! for a raw module's launch.

use std::any::TypeId;

use super::remote::BufferOnWire;
use super::{Reader, Side, Wire, Writer};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;

/// One argument of a `#[kernel]` launch, as read by the worker.
enum WireArg {
    Buffer(BufferOnWire),
    Scalar(Vec<u8>),
}

/// The arguments of a `#[kernel]` launch read by the worker, consumed in parameter
/// order by the kernel's generated `call_from_wire`.
pub struct WireArgs<'a> {
    items: std::vec::IntoIter<WireArg>,
    side: Side<'a>,
}

impl WireArgs<'_> {
    fn next(&mut self) -> Result<WireArg, GpuError> {
        self.items
            .next()
            .ok_or_else(|| GpuError::invalid("a kernel launch with too few arguments"))
    }

    /// The next argument, a buffer of `T`. Used by generated code.
    #[doc(hidden)]
    pub fn buffer<T: DTypeBase>(&mut self) -> Result<GpuRef<T>, GpuError> {
        match self.next()? {
            WireArg::Buffer(b) => b.resolve(self.side),
            WireArg::Scalar(_) => Err(GpuError::invalid("a scalar where the kernel takes a buffer")),
        }
    }

    /// The next argument, a scalar (a dtype or a `#[derive(KernelArg)]` struct of
    /// them: plain numbers, for which every bit pattern is a value). Used by generated
    /// code.
    #[doc(hidden)]
    pub fn scalar<V: cudarc::driver::DeviceRepr + Copy + 'static>(&mut self) -> Result<V, GpuError> {
        match self.next()? {
            WireArg::Scalar(b) if std::any::TypeId::of::<V>() == TypeId::of::<bool>() && b.len() == 1 && b[0] > 1 => {
                Err(GpuError::invalid(format!("{} is not a bool", b[0])))
            }
            WireArg::Scalar(b) if b.len() == std::mem::size_of::<V>() => {
                // SAFETY: `b` holds exactly `size_of::<V>()` bytes written from a `V` by
                // the same executable (`put` below), and kernel scalars are plain numbers.
                Ok(unsafe { std::ptr::read_unaligned(b.as_ptr() as *const V) })
            }
            WireArg::Scalar(b) => Err(GpuError::invalid(format!(
                "a {}-byte scalar where the kernel takes {} bytes",
                b.len(),
                std::mem::size_of::<V>()
            ))),
            WireArg::Buffer(_) => Err(GpuError::invalid("a buffer where the kernel takes a scalar")),
        }
    }

    /// Skips a buffer's length argument (the launcher recomputes it). Used by
    /// generated code.
    #[doc(hidden)]
    pub fn skip(&mut self) -> Result<(), GpuError> {
        self.next().map(|_| ())
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

/// Reads the arguments of a launch (in the worker).
pub(crate) fn take_launch_args<'a>(r: &mut Reader<'a>) -> Result<WireArgs<'a>, GpuError> {
    if let Side::Client(_) = r.side {
        return Err(GpuError::invalid("a kernel launch sent to the user process"));
    }
    let n = r.take_usize()?;
    let mut items = Vec::new();
    for _ in 0..n {
        items.push(match r.take_u8()? {
            0 => WireArg::Buffer(BufferOnWire::take(r)?),
            1 => WireArg::Scalar(r.take_bytes_owned()?),
            t => return Err(GpuError::invalid(format!("unknown kernel argument tag {t}"))),
        });
    }
    Ok(WireArgs {
        items: items.into_iter(),
        side: r.side,
    })
}
