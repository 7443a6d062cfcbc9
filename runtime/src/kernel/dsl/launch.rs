//! What a `#[kernel]` launcher sends to a device's `KernelActor`, and what the CPU
//! device hands the emulated body.

use std::any::TypeId;

use cudarc::driver::DeviceRepr;

use super::slices::{GlobalSlice, GlobalSliceMut};
use crate::error::GpuError;
use crate::module::{KernelArgs, LaunchConfig};

/// A plain struct a kernel takes by value: `#[derive(KernelArg)]` implements it for a
/// `#[repr(C)]` struct of kernel scalars, so the struct has one layout in Rust and in
/// the generated CUDA C++.
pub trait KernelArg: DeviceRepr + Copy + Send + Sync + 'static {
    /// The CUDA C++ declaration (`struct Params { float scale; unsigned int n; };`).
    fn cuda_decl() -> String;
    /// Writes the value's fields at their offsets into `out` (`size_of::<Self>()`
    /// bytes), padding zeroed: its bytes for an isolated device's worker, without
    /// reading uninitialised padding.
    fn write_bytes(&self, out: &mut [u8]);
}

/// The emulated form of a launch: runs the body over host buffers on the CPU device — as
/// often as asked (a graph replays it).
pub type Emulation = Box<dyn Fn(&HostBufs) -> Result<(), GpuError> + Send + Sync>;

/// One launch of one instantiation of a `#[kernel]`: built by the generated launcher,
/// which has checked argument count and types at compile time.
pub struct KernelCall {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    pub(crate) source: fn() -> String,
    pub(crate) cfg: LaunchConfig,
    pub(crate) args: KernelArgs,
    pub(crate) emulate: Emulation,
}

impl std::fmt::Debug for KernelCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelCall({}, {:?}, {:?})", self.name, self.cfg, self.args)
    }
}

impl KernelCall {
    /// Used by generated code. `K` names the instantiation (one type per kernel and
    /// dtype), so a device compiles and loads each once; `source` is called only then.
    #[doc(hidden)]
    pub fn new<K: 'static>(
        name: &'static str,
        source: fn() -> String,
        cfg: LaunchConfig,
        args: KernelArgs,
        emulate: Emulation,
    ) -> Self {
        KernelCall {
            id: TypeId::of::<K>(),
            name,
            source,
            cfg,
            args,
            emulate,
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A locked host buffer of a launch on the CPU device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBuf {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
    pub(crate) writes: bool,
}

/// The buffers of an emulated launch, in the kernel's buffer-parameter order. They stay
/// locked (no other request can touch them) while the emulation runs.
#[derive(Debug)]
pub struct HostBufs {
    pub(crate) bufs: Vec<RawBuf>,
}

impl HostBufs {
    fn get<T: 'static>(&self, i: usize, writes: bool) -> Result<RawBuf, GpuError> {
        let b = self
            .bufs
            .get(i)
            .ok_or_else(|| GpuError::InvalidArgument(format!("kernel buffer #{i} is missing")))?;
        if b.type_id != TypeId::of::<T>() || (writes && !b.writes) {
            return Err(GpuError::InvalidArgument(format!(
                "kernel buffer #{i} is a {}{} buffer, not the {}{} one the kernel takes",
                if b.writes { "written " } else { "" },
                b.type_name,
                if writes { "written " } else { "" },
                std::any::type_name::<T>()
            )));
        }
        Ok(*b)
    }

    /// Buffer `i` as a read-only kernel slice. Used by generated code.
    #[doc(hidden)]
    pub fn read<T: 'static>(&self, i: usize) -> Result<GlobalSlice<T>, GpuError> {
        let b = self.get::<T>(i, false)?;
        // SAFETY: the buffer holds `len` elements of `T` (type checked above) and stays
        // locked, unmoved, until the emulation returns.
        Ok(unsafe { GlobalSlice::from_raw(b.ptr as *const T, b.len) })
    }

    /// Buffer `i` as a writable kernel slice. Used by generated code.
    #[doc(hidden)]
    pub fn write<T: 'static>(&self, i: usize) -> Result<GlobalSliceMut<T>, GpuError> {
        let b = self.get::<T>(i, true)?;
        // SAFETY: as in `read`; the launch passed each buffer once (KernelArgs rejects
        // duplicates), so no other handle aliases it.
        Ok(unsafe { GlobalSliceMut::from_raw(b.ptr as *mut T, b.len) })
    }
}
