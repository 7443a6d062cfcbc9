//! A raw module's launch arguments on the wire (and an event's list of buffers): each
//! buffer as a `#[kernel]` launch writes it, then its element type and whether the launch
//! writes it, so the worker rebuilds the [`KernelArgs`] as they were — the kernel's
//! parameter types are unknown there; scalars as their bytes; a tensor map of an
//! isolated device's buffer as what it encodes, encoded again in the worker.

use super::{Arg, KernelArgs};
use crate::error::GpuError;
use crate::wire::{BufferOnWire, Reader, Side, Wire, Writer};

/// Writes `args` with each buffer's element type and access (after the buffer as a
/// `#[kernel]` launch writes it); only its buffers when `buffers_only`.
fn put_typed(args: &KernelArgs, w: &mut Writer<'_>, buffers_only: bool) -> Result<(), GpuError> {
    let items: Vec<&Arg> = args
        .items
        .iter()
        .filter(|a| !buffers_only || matches!(a, Arg::Buffer(_)))
        .collect();
    items.len().put(w)?;
    for a in items {
        match a {
            Arg::Buffer(b) => {
                b.put_wire(w)?;
                b.dtype_name().to_string().put(w)?;
                b.writes().put(w)?;
            }
            Arg::Scalar(s) => s.put_wire(w)?,
        }
    }
    Ok(())
}

/// Reads what [`put_typed`] wrote back into arguments (in the worker); a scalar is an
/// error unless `scalars`.
fn take_typed(r: &mut Reader<'_>, scalars: bool) -> Result<KernelArgs, GpuError> {
    if let Side::Client(_) = r.side {
        return Err(GpuError::invalid("launch arguments sent to the user process"));
    }
    let n = r.take_usize()?;
    let mut args = KernelArgs::new();
    for _ in 0..n {
        args = match r.take_u8()? {
            0 => {
                let b = BufferOnWire::take(r)?;
                let (name, writes) = (String::take(r)?, bool::take(r)?);
                typed_buffer(args, b, &name, writes, r.side)?
            }
            1 if scalars => args.bytes(r.take_bytes_owned()?)?,
            super::tensor_map_arg::TENSOR_MAP_TAG if scalars => super::tensor_map_arg::take_tensor_map(args, r)?,
            1 | super::tensor_map_arg::TENSOR_MAP_TAG => {
                return Err(GpuError::invalid("a scalar in a list of buffers"))
            }
            t => return Err(GpuError::invalid(format!("unknown kernel argument tag {t}"))),
        };
    }
    Ok(args)
}

/// Adds buffer `b` of element type `name` to `args`, read or written.
fn typed_buffer(
    args: KernelArgs,
    b: BufferOnWire,
    name: &str,
    writes: bool,
    side: Side<'_>,
) -> Result<KernelArgs, GpuError> {
    crate::dtype::with_dtype_named!(any, name, D => {
        let r = b.resolve::<D>(side)?;
        Ok(if writes { args.buf_mut(&r) } else { args.buf(&r) })
    });
    Err(GpuError::invalid(format!("`{name}` is not an element type")))
}

/// The buffers of `args` (each with its element type): a list of buffers of mixed types,
/// such as the buffers an event is recorded after.
pub(crate) fn put_buffer_list(args: &KernelArgs, w: &mut Writer<'_>) -> Result<(), GpuError> {
    put_typed(args, w, true)
}

/// Reads a list written by [`put_buffer_list`] into arguments (buffers only).
pub(crate) fn take_buffer_list(r: &mut Reader<'_>) -> Result<KernelArgs, GpuError> {
    take_typed(r, false)
}

/// A raw module's launch arguments cross whole: buffers with their element types and
/// access, scalars as bytes (plain numbers and `#[derive(KernelArg)]` structs; another
/// scalar type is `Unsupported`, its padding unreadable).
impl Wire for KernelArgs {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        put_typed(self, w, false)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        take_typed(r, true)
    }
}
