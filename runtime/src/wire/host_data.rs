//! `HostData<T>`: the elements an upload or write carries — an owned vector, or (in an
//! isolated device's worker) a view of the shared-memory arena the user process filled,
//! which the worker uploads from directly instead of copying it into a vector first.

use std::sync::Arc;

use super::arena::Arena;
use super::{Bulk, Reader, Wire, Writer};
use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// Host elements on their way to a device buffer (reads as a `&[T]`).
pub struct HostData<T>(Repr<T>);

enum Repr<T> {
    /// Elements owned by the message.
    Owned(Vec<T>),
    /// `len` elements at `offset` of a request arena, leased by the user process until
    /// the request is answered (it writes nothing there meanwhile).
    Shared {
        arena: Arc<Arena>,
        offset: usize,
        len: usize,
        _t: std::marker::PhantomData<T>,
    },
}

impl<T> From<Vec<T>> for HostData<T> {
    fn from(v: Vec<T>) -> Self {
        HostData(Repr::Owned(v))
    }
}

/// Borrowed elements are copied into the message (an upload returns before the caller
/// could change them).
impl<T: Copy> From<&[T]> for HostData<T> {
    fn from(v: &[T]) -> Self {
        HostData(Repr::Owned(v.to_vec()))
    }
}

impl<T: Copy> From<&mut [T]> for HostData<T> {
    fn from(v: &mut [T]) -> Self {
        HostData(Repr::Owned(v.to_vec()))
    }
}

impl<T: Copy> From<&Vec<T>> for HostData<T> {
    fn from(v: &Vec<T>) -> Self {
        HostData(Repr::Owned(v.clone()))
    }
}

impl<T, const N: usize> From<[T; N]> for HostData<T> {
    fn from(v: [T; N]) -> Self {
        HostData(Repr::Owned(v.into()))
    }
}

impl<T: Copy, const N: usize> From<&[T; N]> for HostData<T> {
    fn from(v: &[T; N]) -> Self {
        HostData(Repr::Owned(v.to_vec()))
    }
}

impl<T> From<Box<[T]>> for HostData<T> {
    fn from(v: Box<[T]>) -> Self {
        HostData(Repr::Owned(v.into()))
    }
}

impl<T: DTypeBase> std::ops::Deref for HostData<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.0 {
            Repr::Owned(v) => v,
            Repr::Shared { arena, offset, len, .. } => {
                // SAFETY: `take` checked that the range lies inside the mapping and is
                // aligned for `T`; every bit pattern is a valid dtype value; the user
                // process keeps the range leased, unwritten, until this request's reply,
                // and the view lives no longer than the request (it owns the `Arc`).
                unsafe { std::slice::from_raw_parts(arena.ptr().add(*offset) as *const T, *len) }
            }
        }
    }
}

impl<T: DTypeBase> Wire for HostData<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_bulk(super::as_bytes(self));
        Ok(())
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        match Bulk::take(r)? {
            Bulk::Shared { arena, offset, len } => {
                let size = std::mem::size_of::<T>();
                arena.check(offset, len)?;
                if len % size != 0 || offset % std::mem::align_of::<T>() != 0 {
                    return Err(GpuError::invalid(format!(
                        "shared range {offset}+{len} does not hold aligned {} elements",
                        T::NAME
                    )));
                }
                Ok(HostData(Repr::Shared {
                    arena,
                    offset,
                    len: len / size,
                    _t: std::marker::PhantomData,
                }))
            }
            inline => Ok(HostData(Repr::Owned(inline.into_vec()?))),
        }
    }
}
