//! Buffers shared between processes of one machine: CUDA IPC on a GPU, a shared memory
//! file on the CPU device (so the protocol runs, and is tested, without a GPU).
//!
//! The exporting process allocates with [`Interop::alloc_shareable`] (CUDA cannot export
//! memory of the stream-ordered pool every other buffer comes from), sends the bytes of
//! [`GpuRef::export_ipc`]'s handle by any means (a socket, a pipe, a file), and the other
//! process opens them with [`Interop::open_ipc`]: a `GpuRef` of its own device over the
//! same memory, no copy.
//!
//! Lifetime and ordering are the program's, as with CUDA IPC itself:
//! - the exporter keeps its buffer alive until every importer has dropped its handle
//!   (then the importer's memory is unmapped; the exporter's is freed after);
//! - `export_ipc` waits for the buffer's pending work, so an importer that opens the handle
//!   afterwards sees it; later writes on either side are ordered by the program (finish
//!   them — a download, say — then tell the other process).
//!
//! Typed errors: a handle of this very process (use the buffer itself), of another GPU,
//! of another element type, malformed bytes, or stale (its buffer dropped, its process
//! gone) are each an `InvalidArgument` saying which.
//!
//! Stale is told by a *liveness file*: every shareable buffer holds a small shared memory
//! file open, named in its handle by descriptor and inode; the opener checks that the
//! exporter still holds it. CUDA alone cannot tell: `cuIpcOpenMemHandle` still opens the
//! handle of an allocation its exporter has freed (seen on an H100, driver 580), which
//! would map memory that may belong to something else by then.

use std::sync::Arc;

use super::Interop;
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::sys::ipc::{Opened, Shareable, HANDLE_BYTES};
use crate::wire::arena::Arena;

/// First bytes of an encoded handle.
const MAGIC: &[u8; 8] = b"ATOMRIPC";
/// The encoding's version.
const VERSION: u8 = 1;
/// Longest element-type name in a handle.
const MAX_DTYPE: usize = 16;

/// Where the shared memory is.
#[derive(Clone, PartialEq, Eq)]
enum Memory {
    /// A CUDA IPC handle of the GPU with this UUID, alive while the exporting process
    /// holds descriptor `fd` (the buffer's liveness file) of inode `inode`.
    Cuda {
        uuid: [u8; 16],
        handle: [u8; HANDLE_BYTES],
        fd: i32,
        inode: u64,
    },
    /// A shared memory file the exporting process holds open as descriptor `fd`, with
    /// inode `inode` (so a descriptor number reused after the buffer went is told apart).
    Host { fd: i32, inode: u64 },
}

/// What another process needs to open a shared buffer: plain bytes
/// ([`IpcHandle::to_bytes`]) to send any way the program likes.
#[derive(Clone, PartialEq, Eq)]
pub struct IpcHandle {
    pid: u32,
    dtype: String,
    /// Bytes from the allocation's start to the first element.
    offset: u64,
    /// Elements.
    len: u64,
    memory: Memory,
}

impl std::fmt::Debug for IpcHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.memory {
            Memory::Cuda { .. } => "CUDA",
            Memory::Host { .. } => "host",
        };
        write!(
            f,
            "IpcHandle({kind}, {} × {} at +{} from process {})",
            self.len, self.dtype, self.offset, self.pid
        )
    }
}

impl IpcHandle {
    /// Elements of the shared buffer.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never true: a shared buffer holds at least one element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element type's name (`"f32"`, …).
    pub fn dtype(&self) -> &str {
        &self.dtype
    }

    /// The handle as bytes, to send to another process.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(match self.memory {
            Memory::Cuda { .. } => 1,
            Memory::Host { .. } => 2,
        });
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.push(self.dtype.len() as u8);
        out.extend_from_slice(self.dtype.as_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        match &self.memory {
            Memory::Cuda {
                uuid,
                handle,
                fd,
                inode,
            } => {
                out.extend_from_slice(uuid);
                out.extend_from_slice(handle);
                out.extend_from_slice(&fd.to_le_bytes());
                out.extend_from_slice(&inode.to_le_bytes());
            }
            Memory::Host { fd, inode } => {
                out.extend_from_slice(&fd.to_le_bytes());
                out.extend_from_slice(&inode.to_le_bytes());
            }
        }
        out
    }

    /// A handle from bytes another process sent: every field checked, anything else an
    /// `InvalidArgument` (never a panic: the bytes come from outside).
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle, GpuError> {
        let mut r = Bytes(bytes);
        if r.take(8)? != MAGIC {
            return Err(malformed("it does not start with ATOMRIPC"));
        }
        if r.u8()? != VERSION {
            return Err(malformed("another encoding version"));
        }
        let kind = r.u8()?;
        let pid = u32::from_le_bytes(r.array()?);
        let n = r.u8()? as usize;
        if n == 0 || n > MAX_DTYPE {
            return Err(malformed("no element type"));
        }
        let dtype = std::str::from_utf8(r.take(n)?)
            .map_err(|_| malformed("an element type that is not UTF-8"))?
            .to_string();
        let offset = u64::from_le_bytes(r.array()?);
        let len = u64::from_le_bytes(r.array()?);
        if len == 0 {
            return Err(malformed("no elements"));
        }
        let memory = match kind {
            1 => Memory::Cuda {
                uuid: r.array()?,
                handle: r.array()?,
                fd: i32::from_le_bytes(r.array()?),
                inode: u64::from_le_bytes(r.array()?),
            },
            2 => Memory::Host {
                fd: i32::from_le_bytes(r.array()?),
                inode: u64::from_le_bytes(r.array()?),
            },
            _ => return Err(malformed("an unknown kind of memory")),
        };
        if !r.0.is_empty() {
            return Err(malformed("bytes after its end"));
        }
        Ok(IpcHandle {
            pid,
            dtype,
            offset,
            len,
            memory,
        })
    }
}

/// A cursor over untrusted bytes.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], GpuError> {
        if self.0.len() < n {
            return Err(malformed("it is cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, GpuError> {
        Ok(self.take(1)?[0])
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], GpuError> {
        Ok(self.take(N)?.try_into().expect("N bytes taken"))
    }
}

fn malformed(why: &str) -> GpuError {
    GpuError::InvalidArgument(Invalid::new(format!("not an IPC handle of this crate: {why}")).arg("handle"))
}

impl Interop {
    /// `len` zeroed elements another process can open ([`GpuRef::export_ipc`]): device
    /// memory from `cuMemAlloc` on a GPU (not the stream-ordered pool, which CUDA cannot
    /// export), a shared memory file on the CPU device. Every device operation takes it.
    pub fn alloc_shareable<T: DTypeBase>(&self, len: usize) -> Result<GpuRef<T>, GpuError> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                GpuError::InvalidArgument(Invalid::new(format!("{len} elements of {}", T::NAME)).arg("len"))
            })?;
        match &self.stream {
            Some(stream) => {
                let memory = SharedGpu {
                    memory: Shareable::alloc(stream.context(), bytes)?,
                    alive: Arena::create("atomr-ipc-alive", 1)?,
                };
                let base = memory.memory.base;
                // SAFETY: `len` zeroed elements (a valid value of every dtype) of a live
                // allocation the buffer owns through `memory`.
                unsafe { self.from_raw_parts::<T, _>(base, len, memory) }
            }
            None => {
                let arena = Arena::create("atomr-ipc", bytes)?;
                let ptr = arena.ptr_mut() as u64;
                // SAFETY: a zero-filled shared mapping of `bytes` bytes, page-aligned, kept
                // mapped by the buffer through `arena`.
                unsafe { self.from_raw_parts::<T, _>(ptr, len, arena) }
            }
        }
    }

    /// Opens a buffer another process exported: a `GpuRef` of this device over the same
    /// memory, closed when its last handle goes. `InvalidArgument` for a handle of this
    /// process, of another GPU or element type, or stale.
    pub fn open_ipc<T: DTypeBase>(&self, handle: &IpcHandle) -> Result<GpuRef<T>, GpuError> {
        if handle.dtype != T::NAME {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "an IPC handle of {} elements, opened as {}",
                    handle.dtype,
                    T::NAME
                ))
                .arg("T")
                .mismatch(T::NAME, &handle.dtype),
            ));
        }
        if handle.pid == std::process::id() {
            return Err(GpuError::InvalidArgument(
                Invalid::new("an IPC handle this process exported: use the buffer itself (clone its GpuRef)")
                    .arg("handle"),
            ));
        }
        let bytes = handle
            .len
            .checked_mul(std::mem::size_of::<T>() as u64)
            .and_then(|b| b.checked_add(handle.offset))
            .ok_or_else(|| malformed("its range overflows"))?;
        match (&handle.memory, &self.stream) {
            (
                Memory::Cuda {
                    uuid,
                    handle: h,
                    fd,
                    inode,
                },
                Some(stream),
            ) => {
                if *uuid != crate::sys::ipc::uuid(stream.context())? {
                    return Err(GpuError::InvalidArgument(
                        Invalid::new(format!(
                            "an IPC handle of another GPU than device {}: open it on the GPU it came from",
                            self.device_id()
                        ))
                        .arg("handle"),
                    ));
                }
                alive(handle.pid, *fd, *inode)?;
                let opened = Opened::open(stream.context(), h)?;
                let first = opened.base + handle.offset;
                // SAFETY: the exporter's elements of `T` (checked by name), alive while it
                // keeps its buffer (the documented contract); `from_raw_parts` checks the
                // range against the opened allocation.
                unsafe { self.from_raw_parts::<T, _>(first, handle.len as usize, opened) }
            }
            (Memory::Host { fd, inode }, None) => {
                let arena = alive(handle.pid, *fd, *inode)?;
                if bytes > arena.len() as u64 {
                    return Err(malformed("its range runs past the shared memory"));
                }
                let first = arena.ptr_mut() as u64 + handle.offset;
                // SAFETY: inside the mapping (checked above), elements of `T` (by name),
                // mapped while the buffer holds `arena`.
                unsafe { self.from_raw_parts::<T, _>(first, handle.len as usize, arena) }
            }
            (Memory::Cuda { .. }, None) => Err(GpuError::InvalidArgument(
                Invalid::new("a GPU's IPC handle opened on the CPU device").arg("handle"),
            )),
            (Memory::Host { .. }, Some(_)) => Err(GpuError::InvalidArgument(
                Invalid::new("a CPU device's IPC handle opened on a GPU").arg("handle"),
            )),
        }
    }
}

/// A GPU's shareable buffer: its `cuMemAlloc` memory and its liveness file.
struct SharedGpu {
    memory: Shareable,
    alive: Arc<Arena>,
}

/// The shared memory file process `pid` holds open as `fd`, if it is still the one of
/// inode `inode`; a closed or reused descriptor, or a process gone, is stale.
#[cfg(linux)]
fn alive(pid: u32, fd: i32, inode: u64) -> Result<Arc<Arena>, GpuError> {
    Arena::open_of(pid, fd, inode)
}

/// Off Linux no process shares an arena (`Arena::create` refuses), so no handle opens.
#[cfg(not(linux))]
fn alive(_pid: u32, _fd: i32, _inode: u64) -> Result<Arc<Arena>, GpuError> {
    Err(GpuError::Unsupported("IPC handles need Linux".into()))
}

/// What names a shared memory file across processes: the descriptor this process holds
/// it open as, and its inode.
#[cfg(linux)]
fn named(arena: &Arena) -> Result<(i32, u64), GpuError> {
    Ok((arena.fd(), arena.inode()?))
}

/// Off Linux there are no shared memory files to name (`Arena::create` refuses).
#[cfg(not(linux))]
fn named(_arena: &Arena) -> Result<(i32, u64), GpuError> {
    Err(GpuError::Unsupported("IPC handles need Linux".into()))
}

impl<T: DTypeBase> GpuRef<T> {
    /// A handle another process of this machine opens this buffer with
    /// ([`Interop::open_ipc`]), after the buffer's pending work has finished (this waits
    /// for it). Only memory from [`Interop::alloc_shareable`] (or a view of it) can be
    /// exported: any other buffer is an `InvalidArgument` saying so.
    pub fn export_ipc(&self, interop: &Interop) -> Result<IpcHandle, GpuError> {
        interop.check(self)?;
        let not_shareable = || {
            GpuError::InvalidArgument(
                Invalid::new(format!(
                    "buffer #{} is not shareable memory: allocate it with Interop::alloc_shareable",
                    self.id()
                ))
                .arg("buffer"),
            )
        };
        let owner = self.foreign_owner().ok_or_else(not_shareable)?;
        let offset = (self.offset() * std::mem::size_of::<T>()) as u64;
        let memory = match (
            owner.downcast_ref::<SharedGpu>(),
            owner.downcast_ref::<Arc<Arena>>(),
            &interop.stream,
        ) {
            (Some(shared), _, Some(stream)) => {
                // Everything queued on the buffer finishes before the other side looks.
                let mut guard = self.lock();
                let (_, recorded) = guard.address(stream, true)?;
                drop(recorded);
                drop(guard);
                stream.synchronize()?;
                let (fd, inode) = named(&shared.alive)?;
                Memory::Cuda {
                    uuid: crate::sys::ipc::uuid(stream.context())?,
                    handle: shared.memory.handle()?,
                    fd,
                    inode,
                }
            }
            (_, Some(arena), None) => {
                let (fd, inode) = named(arena)?;
                Memory::Host { fd, inode }
            }
            _ => return Err(not_shareable()),
        };
        Ok(IpcHandle {
            pid: std::process::id(),
            dtype: T::NAME.to_string(),
            offset,
            len: self.len() as u64,
            memory,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IpcHandle {
        IpcHandle {
            pid: 4242,
            dtype: "bf16".into(),
            offset: 512,
            len: 1000,
            memory: Memory::Cuda {
                uuid: [7; 16],
                handle: [9; HANDLE_BYTES],
                fd: 12,
                inode: 345,
            },
        }
    }

    #[test]
    fn handles_round_trip_as_bytes() {
        for h in [
            sample(),
            IpcHandle {
                memory: Memory::Host { fd: 17, inode: 99 },
                ..sample()
            },
        ] {
            assert_eq!(IpcHandle::from_bytes(&h.to_bytes()).unwrap(), h);
        }
    }

    #[test]
    fn malformed_bytes_are_refused_not_panicked_on() {
        let good = sample().to_bytes();
        // Every truncation, and every single-byte corruption of the header.
        for n in 0..good.len() {
            assert!(IpcHandle::from_bytes(&good[..n]).is_err(), "cut at {n}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(IpcHandle::from_bytes(&long).is_err());
        for (at, v) in [(0, b'X'), (8, 2), (9, 3), (14, 0), (14, 200)] {
            let mut bad = good.clone();
            bad[at] = v;
            let e = IpcHandle::from_bytes(&bad).unwrap_err();
            assert!(matches!(e, GpuError::InvalidArgument(_)), "byte {at} = {v}: {e:?}");
        }
        let mut zero_len = sample();
        zero_len.len = 0;
        assert!(IpcHandle::from_bytes(&zero_len.to_bytes()).is_err());
    }
}
