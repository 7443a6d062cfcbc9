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

/// One argument of a `#[kernel]` launch, as read by the worker (or assembled in this
/// process by [`DynArgs`]).
enum WireArg {
    Buffer(BufferOnWire),
    Scalar(Vec<u8>),
    /// A buffer of this process: a boxed `GpuRef<T>`.
    Local(Box<dyn std::any::Any + Send>),
}

/// The arguments of a `#[kernel]` launch read by the worker, consumed in parameter
/// order by the kernel's generated `call_from_wire`.
pub struct WireArgs<'a> {
    items: std::vec::IntoIter<WireArg>,
    /// Where wire buffers resolve; `None` for arguments of this process ([`DynArgs`]).
    side: Option<Side<'a>>,
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
            WireArg::Buffer(b) => match self.side {
                Some(side) => b.resolve(side),
                None => Err(GpuError::invalid("a wire buffer among a launch's local arguments")),
            },
            WireArg::Local(b) => b.downcast::<GpuRef<T>>().map(|b| *b).map_err(|_| {
                GpuError::InvalidArgument(
                    crate::error::Invalid::new(format!(
                        "a buffer of another element type where the kernel takes {}",
                        T::NAME
                    ))
                    .mismatch(format_args!("a buffer of {}", T::NAME), "another element type"),
                )
            }),
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
                "{} bytes of scalar where the kernel takes {} bytes",
                b.len(),
                std::mem::size_of::<V>()
            ))),
            WireArg::Buffer(_) | WireArg::Local(_) => {
                Err(GpuError::invalid("a buffer where the kernel takes a scalar"))
            }
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
        side: Some(r.side),
    })
}

/// The arguments of a launch assembled at run time, in the kernel's parameter order: what
/// a binding that knows a kernel only by name (Python's `Device.launch`) passes to
/// [`launch_by_name`](crate::kernel::dsl::registry::launch_by_name). Each is checked
/// against the parameter's type when the call is built: a buffer of another element
/// type, or a scalar of another size, is an `InvalidArgument`.
#[derive(Default)]
pub struct DynArgs {
    items: Vec<WireArg>,
}

impl std::fmt::Debug for DynArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DynArgs({} items)", self.items.len())
    }
}

impl DynArgs {
    /// No arguments yet.
    pub fn new() -> Self {
        DynArgs::default()
    }

    /// A buffer parameter (`&[T]` or `&mut [T]`).
    pub fn buffer<T: DTypeBase>(&mut self, r: &GpuRef<T>) -> &mut Self {
        self.items.push(WireArg::Local(Box::new(r.clone())));
        // Its length parameter, which the launcher recomputes.
        self.items
            .push(WireArg::Scalar((r.len() as u64).to_le_bytes().to_vec()));
        self
    }

    /// A scalar parameter: its bytes, little-endian (4 for an `f32`, 8 for an `f64`, …).
    pub fn scalar(&mut self, bytes: &[u8]) -> &mut Self {
        self.items.push(WireArg::Scalar(bytes.to_vec()));
        self
    }

    /// The arguments as the generated `call_from_wire` reads them.
    pub(crate) fn into_wire(self) -> WireArgs<'static> {
        WireArgs {
            items: self.items.into_iter(),
            side: None,
        }
    }
}

impl WireArgs<'_> {
    /// Arguments left unread after the kernel read its parameters: a launch with too
    /// many is refused.
    pub(crate) fn remaining(&self) -> usize {
        self.items.len()
    }
}
