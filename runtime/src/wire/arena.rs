//! Shared-memory arenas: where bulk data (uploads, downloads) crosses between a user
//! process and its GPU worker without going through the socket.
//!
//! Each isolated device has two arenas, each a `memfd` mapped by both processes: the
//! *request* arena is carved up by the user process (the worker only reads it), the
//! *reply* arena by the worker (the user process reads it, then releases the range).
//! A range stays leased until its reader is done with it, so one writer never
//! overwrites what the other side is still reading. When an arena has no room the data
//! goes inline through the socket instead: slower, never an error.
//!
//! Linux only (memfd, descriptors inherited or opened through `/proc`): elsewhere an
//! arena cannot be made (`Unsupported`), which only isolated devices and IPC handles —
//! themselves Linux-only — ask for.

use std::collections::BTreeMap;
use std::fs::File;
#[cfg(linux)]
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::{Arc, Mutex};

use memmap2::MmapRaw;

use crate::error::GpuError;

/// Ranges of the request and reply arenas are handed out in multiples of this (a cache
/// line pair; also keeps every dtype's elements aligned). Pinned buffers take whole pages
/// (`Arena::create_aligned`): the worker page-locks each on its own.
const ALIGN: usize = 256;

/// One shared mapping and, on the side that writes it, its free ranges.
pub(crate) struct Arena {
    file: File,
    map: MmapRaw,
    free: Mutex<FreeList>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arena({} bytes)", self.map.len())
    }
}

impl Arena {
    /// A new anonymous shared arena of `bytes` (sparse: pages exist once touched).
    pub(crate) fn create(name: &str, bytes: usize) -> Result<Arc<Arena>, GpuError> {
        Arena::create_aligned(name, bytes, ALIGN)
    }

    /// A new arena whose ranges start (and end) at multiples of `align`, a power of two.
    #[cfg(linux)]
    pub(crate) fn create_aligned(name: &str, bytes: usize, align: usize) -> Result<Arc<Arena>, GpuError> {
        let cname = std::ffi::CString::new(name).map_err(|_| GpuError::invalid("arena name"))?;
        // SAFETY: FFI edge: `cname` is a valid NUL-terminated string; the flags are
        // documented ones. The returned descriptor is owned by the `File` below.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_error("memfd_create"));
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(bytes as u64)
            .map_err(|e| io_error("sizing the shared arena", e))?;
        Arena::map(file, align)
    }

    /// No shared arenas off Linux (see the module docs).
    #[cfg(not(linux))]
    pub(crate) fn create_aligned(_name: &str, _bytes: usize, _align: usize) -> Result<Arc<Arena>, GpuError> {
        Err(GpuError::Unsupported(
            "shared-memory arenas (isolated devices, IPC handles) need Linux".into(),
        ))
    }

    /// Maps an arena inherited as descriptor `fd` (in the worker).
    #[cfg(linux)]
    pub(crate) fn inherit(fd: RawFd) -> Result<Arc<Arena>, GpuError> {
        // SAFETY: the parent placed the arena's memfd at `fd` before exec; this process
        // takes ownership of it once, at start-up.
        let file = unsafe { File::from_raw_fd(fd) };
        Arena::map(file, ALIGN)
    }

    /// Maps the arena another process holds open as descriptor `fd` (through
    /// `/proc/<pid>/fd`, which the kernel lets a process of the same user open), if that
    /// descriptor is still the file of inode `inode`: a CPU-device IPC handle. Gone (the
    /// process exited, the arena was dropped) or reused for another file is an
    /// `InvalidArgument` saying the handle is stale — checked before mapping, since the
    /// reused descriptor may be a pipe or socket, which cannot be mapped at all.
    #[cfg(linux)]
    pub(crate) fn open_of(pid: u32, fd: RawFd, inode: u64) -> Result<Arc<Arena>, GpuError> {
        use std::os::unix::fs::MetadataExt;
        let path = format!("/proc/{pid}/fd/{fd}");
        let stale = |why: String| {
            GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "the IPC handle is stale: {why} (its buffer was dropped or its process exited), or of another user"
                ))
                .arg("handle"),
            )
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| stale(format!("{path} cannot be opened: {e}")))?;
        let found = file
            .metadata()
            .map_err(|e| io_error("reading the shared arena's inode", e))?
            .ino();
        if found != inode {
            return Err(stale(format!("descriptor {fd} of process {pid} is another file now")));
        }
        Arena::map(file, ALIGN)
    }

    fn map(file: File, align: usize) -> Result<Arc<Arena>, GpuError> {
        let map = MmapRaw::map_raw(&file).map_err(|e| io_error("mapping the shared arena", e))?;
        let len = map.len();
        Ok(Arc::new(Arena {
            file,
            map,
            free: Mutex::new(FreeList::new(len, align)),
        }))
    }

    /// The descriptor (passed to the worker at spawn).
    #[cfg(linux)]
    pub(crate) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Leases `bytes` for writing, or `None` if there is no room now.
    pub(crate) fn lease(self: &Arc<Self>, bytes: usize) -> Option<Lease> {
        let offset = self.free.lock().unwrap_or_else(|p| p.into_inner()).take(bytes)?;
        Some(Lease {
            arena: self.clone(),
            offset,
            len: bytes,
        })
    }

    /// Returns a range leased earlier (by offset), when its reader is done. Only a range
    /// leased and not yet returned is taken back: a release the other process made up,
    /// or sent twice, is ignored (and logged) rather than freeing a range someone else
    /// holds, which two later leases would then share.
    pub(crate) fn release(&self, offset: usize, len: usize) {
        if !self.free.lock().unwrap_or_else(|p| p.into_inner()).give(offset, len) {
            tracing::warn!(
                offset,
                len,
                "a shared-memory range released that is not leased: ignored"
            );
        }
    }

    /// Checks that a range the other process names lies inside the arena.
    pub(crate) fn check(&self, offset: usize, len: usize) -> Result<(), GpuError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.map.len() => Ok(()),
            _ => Err(GpuError::invalid(format!(
                "shared-memory range {offset}+{len} is outside the {}-byte arena",
                self.map.len()
            ))),
        }
    }

    /// The start of the mapping.
    pub(crate) fn ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// The inode of the arena's file: what names it across processes, where descriptor
    /// numbers are reused.
    #[cfg(linux)]
    pub(crate) fn inode(&self) -> Result<u64, GpuError> {
        use std::os::unix::fs::MetadataExt;
        Ok(self
            .file
            .metadata()
            .map_err(|e| io_error("reading the shared arena's inode", e))?
            .ino())
    }

    /// The mapping's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The start of the mapping, for writing.
    pub(crate) fn ptr_mut(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Copies `len` bytes at `offset` out of the arena. The range comes from the other
    /// process, so it is checked.
    pub(crate) fn read(&self, offset: usize, len: usize, out: &mut [u8]) -> Result<(), GpuError> {
        self.check(offset, len)?;
        if out.len() != len {
            return Err(GpuError::invalid(format!("{} bytes read into {}", len, out.len())));
        }
        // SAFETY: the range lies inside the mapping (checked above) and is leased to this
        // transfer by its writer, who does not touch it until it is released; `out` is a
        // distinct host buffer of `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset), out.as_mut_ptr(), len) };
        Ok(())
    }
}

/// A range of an arena leased for one transfer; released when dropped, unless
/// [`Lease::keep`] handed its release to the reader.
pub(crate) struct Lease {
    arena: Arc<Arena>,
    offset: usize,
    len: usize,
}

impl Lease {
    /// Where the range starts.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// Copies `data` (exactly the lease's length) into the range.
    pub(crate) fn fill(&mut self, data: &[u8]) {
        assert_eq!(data.len(), self.len, "a lease is filled with exactly its length");
        // SAFETY: the range lies inside the mapping (the free list only hands out ranges
        // of it) and is exclusively leased to this writer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.arena.map.as_mut_ptr().add(self.offset), self.len) };
    }

    /// Forgets the lease without releasing it: the other process releases it (by
    /// offset) once it has read the data.
    pub(crate) fn keep(self) -> (usize, usize) {
        let r = (self.offset, self.len);
        std::mem::forget(self);
        r
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.arena.release(self.offset, self.len);
    }
}

/// First-fit free ranges, coalesced on release, and the ranges leased out.
#[derive(Debug)]
struct FreeList {
    /// offset → length of each free range.
    free: BTreeMap<usize, usize>,
    /// offset → length (rounded) of each range leased and not yet given back.
    leased: BTreeMap<usize, usize>,
    /// Every range starts and ends at a multiple of this.
    align: usize,
}

impl FreeList {
    fn new(len: usize, align: usize) -> Self {
        let mut free = BTreeMap::new();
        let usable = len / align * align;
        if usable > 0 {
            free.insert(0, usable);
        }
        FreeList {
            free,
            leased: BTreeMap::new(),
            align,
        }
    }

    fn rounded(&self, bytes: usize) -> Option<usize> {
        bytes.max(1).checked_next_multiple_of(self.align)
    }

    fn take(&mut self, bytes: usize) -> Option<usize> {
        let need = self.rounded(bytes)?;
        let (&off, &len) = self.free.iter().find(|(_, &len)| len >= need)?;
        self.free.remove(&off);
        if len > need {
            self.free.insert(off + need, len - need);
        }
        self.leased.insert(off, need);
        Some(off)
    }

    /// Gives back the range leased at `offset` of `bytes`; false (nothing changes) if no
    /// such lease is out.
    fn give(&mut self, offset: usize, bytes: usize) -> bool {
        let Some(mut len) = self.rounded(bytes) else {
            return false;
        };
        if self.leased.get(&offset) != Some(&len) {
            return false;
        }
        self.leased.remove(&offset);
        let mut off = offset;
        if let Some((&prev, &plen)) = self.free.range(..off).next_back() {
            if prev + plen == off {
                self.free.remove(&prev);
                off = prev;
                len += plen;
            }
        }
        if let Some(&nlen) = self.free.get(&(off + len)) {
            self.free.remove(&(off + len));
            len += nlen;
        }
        self.free.insert(off, len);
        true
    }
}

fn os_error(what: &str) -> GpuError {
    io_error(what, std::io::Error::last_os_error())
}

pub(crate) fn io_error(what: &str, e: std::io::Error) -> GpuError {
    GpuError::DeviceLost(format!("isolated device: {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle whose descriptor now names another file is stale — also where that file
    /// is a pipe, which cannot be mapped (found before mapping, not as a lost device).
    #[cfg(linux)]
    #[test]
    fn a_descriptor_of_another_file_is_stale() {
        use std::process::{Command, Stdio};
        let arena = Arena::create_aligned("stale-test", 4096, ALIGN).unwrap();
        let (pid, inode) = (std::process::id(), arena.inode().unwrap());
        assert_eq!(Arena::open_of(pid, arena.fd(), inode).unwrap().inode().unwrap(), inode);
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pipe = child.stdin.take().unwrap();
        for (fd, what) in [(pipe.as_raw_fd(), "a pipe"), (arena.fd(), "another arena's inode")] {
            let e = Arena::open_of(pid, fd, if fd == arena.fd() { inode + 1 } else { inode })
                .err()
                .unwrap();
            assert!(
                matches!(&e, GpuError::InvalidArgument(i) if i.to_string().contains("stale")),
                "{what}: {e}"
            );
        }
        drop(pipe);
        child.wait().unwrap();
    }

    #[test]
    fn ranges_are_disjoint_and_coalesce_back() {
        let mut f = FreeList::new(4096, ALIGN);
        let a = f.take(100).unwrap();
        let b = f.take(300).unwrap();
        let c = f.take(256).unwrap();
        assert_eq!((a, b, c), (0, 256, 768));
        assert!(f.take(4096).is_none(), "only 3072 bytes are left");
        assert!(f.give(b, 300));
        assert!(f.give(a, 100));
        assert!(f.give(c, 256));
        assert_eq!(f.free.len(), 1, "{:?}", f.free);
        assert_eq!(f.take(4096), Some(0));
        let mut pages = FreeList::new(1 << 20, 4096);
        assert_eq!(
            (pages.take(1), pages.take(5000), pages.take(4096)),
            (Some(0), Some(4096), Some(12288))
        );
    }

    #[test]
    fn data_written_through_a_lease_reads_back() {
        let arena = Arena::create("test-arena", 1 << 20).unwrap();
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut lease = arena.lease(data.len()).unwrap();
        lease.fill(&data);
        let mut out = vec![0u8; data.len()];
        arena.read(lease.offset(), data.len(), &mut out).unwrap();
        assert_eq!(out, data);
        assert!(arena.read((1 << 20) - 10, 20, &mut [0u8; 20]).is_err());
        assert!(arena.read(usize::MAX - 1, 20, &mut [0u8; 20]).is_err());
    }

    /// A release the other process makes up, sends twice or sizes wrongly is ignored: no
    /// two leases ever share a byte.
    #[test]
    fn only_ranges_leased_are_taken_back() {
        let mut f = FreeList::new(4096, ALIGN);
        let a = f.take(512).unwrap();
        let b = f.take(512).unwrap();
        assert!(!f.give(a + 256, 256), "inside a lease");
        assert!(!f.give(2048, 256), "never leased");
        assert!(!f.give(a, 1024), "another length");
        assert!(!f.give(usize::MAX - 3, 8), "beyond every range");
        assert!(f.give(a, 512));
        assert!(!f.give(a, 512), "twice");
        let c = f.take(512).unwrap();
        let d = f.take(512).unwrap();
        let held = [(b, 512), (c, 512), (d, 512)];
        for (i, &(x, lx)) in held.iter().enumerate() {
            for &(y, ly) in &held[i + 1..] {
                assert!(x + lx <= y || y + ly <= x, "{held:?} overlap");
            }
        }
    }
}
