//! What a kernel launch is made of, whoever launches it (a raw module, a `#[kernel]`,
//! a graph, a cluster launch): its grid, the device's launch limits, and typed
//! arguments — buffers checked (generation, device, aliasing) and ordered against
//! their last writers, scalars copied — and the one `unsafe` enqueue.

use std::any::TypeId;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DeviceRepr, LaunchArgs, PushKernelArg, SyncOnDrop};
use smallvec::SmallVec;

use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{GpuRef, Locked};
use crate::kernel::dsl::slices::{GlobalSlice, GlobalSliceMut};

mod tensor_map_arg;
mod wire;

pub(crate) use self::tensor_map_arg::{data_type as tensor_map_data_type, TiledSpec};
pub(crate) use self::wire::{put_buffer_list, take_buffer_list};

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
            .ok_or_else(|| GpuError::invalid(format!("kernel buffer #{i} is missing")))?;
        if b.type_id != TypeId::of::<T>() || (writes && !b.writes) {
            return Err(GpuError::invalid(format!(
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
        // SAFETY: as in `read`; no other window of the launch overlaps a written one
        // (`KernelArgs::check_aliasing`), so nothing else aliases it.
        Ok(unsafe { GlobalSliceMut::from_raw(b.ptr as *mut T, b.len) })
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

/// Grid, block and dynamic shared memory of a launch.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// let cfg = LaunchConfig::for_elements(1000, 256); // enough blocks of 256 for 1000 threads
/// assert_eq!((cfg.grid, cfg.block, cfg.shared_mem_bytes), ((4, 1, 1), (256, 1, 1), 0));
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid (x, y, z).
    pub grid: (u32, u32, u32),
    /// Threads per block (x, y, z).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

crate::wire::wire_struct!(LaunchConfig {
    grid,
    block,
    shared_mem_bytes
});

impl LaunchConfig {
    /// A 1-D launch covering `n` elements with `threads` per block.
    pub fn for_elements(n: usize, threads: u32) -> Self {
        let blocks = n.div_ceil(threads.max(1) as usize).max(1);
        LaunchConfig {
            grid: (blocks.min(u32::MAX as usize) as u32, 1, 1),
            block: (threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The device's launch limits, checked before every launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchLimits {
    pub(crate) max_threads_per_block: u32,
    pub(crate) max_block: (u32, u32, u32),
    pub(crate) max_grid: (u32, u32, u32),
    pub(crate) max_shared_mem: u32,
    /// Thread-block clusters (compute capability 9.0+).
    pub(crate) cluster_launch: bool,
}

/// Lets `f` be launched with as much dynamic shared memory as the device allows a block
/// (the opt-in maximum less its static shared memory), not only the default 48 KiB: a
/// kernel sized at launch should not fail above 48 KiB where the GPU has 227.
pub(crate) fn allow_dynamic_shared(
    f: &cudarc::driver::CudaFunction,
    ctx: &cudarc::driver::CudaContext,
) -> Result<(), GpuError> {
    use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as F};
    let optin = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let fixed = f.shared_size_bytes()?;
    f.set_attribute(
        F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        (optin - fixed).max(0),
    )?;
    Ok(())
}

impl LaunchLimits {
    /// The limits of the device behind `ctx`.
    pub(crate) fn of(ctx: &cudarc::driver::CudaContext) -> Result<LaunchLimits, GpuError> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let attr = |a| ctx.attribute(a).map(|v| v as u32);
        Ok(LaunchLimits {
            max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: (
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ),
            max_grid: (
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ),
            // The opt-in maximum: every loaded kernel is allowed it (`allow_dynamic_shared`).
            max_shared_mem: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            cluster_launch: attr(A::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
        })
    }
}

impl LaunchConfig {
    /// The dimensions the driver's launch calls take.
    pub(crate) fn dims(&self) -> crate::sys::launch::Dims {
        crate::sys::launch::Dims {
            grid: self.grid,
            block: self.block,
            shared_mem_bytes: self.shared_mem_bytes,
        }
    }

    pub(crate) fn validate(&self, l: &LaunchLimits) -> Result<(), GpuError> {
        let bad = |m: String| Err(GpuError::invalid(m));
        let (g, b) = (self.grid, self.block);
        if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
            return bad(format!("launch dimensions must be positive: grid {g:?}, block {b:?}"));
        }
        let threads = b.0 as u64 * b.1 as u64 * b.2 as u64;
        if threads > l.max_threads_per_block as u64 {
            return bad(format!(
                "{threads} threads per block exceed the device's {}",
                l.max_threads_per_block
            ));
        }
        if b.0 > l.max_block.0 || b.1 > l.max_block.1 || b.2 > l.max_block.2 {
            return bad(format!("block {b:?} exceeds the device's maximum {:?}", l.max_block));
        }
        if g.0 > l.max_grid.0 || g.1 > l.max_grid.1 || g.2 > l.max_grid.2 {
            return bad(format!("grid {g:?} exceeds the device's maximum {:?}", l.max_grid));
        }
        if self.shared_mem_bytes > l.max_shared_mem {
            return bad(format!(
                "{} bytes of shared memory exceed the device's {}",
                self.shared_mem_bytes, l.max_shared_mem
            ));
        }
        Ok(())
    }
}

/// Enqueues `f` with `args` on `stream`: each buffer is locked, ordered after its last
/// writer on another stream and recorded as read or written by this launch.
///
/// # Safety
/// `args` must match `f`'s parameter list in number, order and type, and have been
/// validated (`KernelArgs::validate`) and `cfg` checked against the device's limits.
pub(crate) unsafe fn enqueue(
    stream: &Arc<CudaStream>,
    f: &cudarc::driver::CudaFunction,
    cfg: LaunchConfig,
    args: &KernelArgs,
) -> Result<(), GpuError> {
    let HeldArgs { mut buffers, slots } = lock_args(args);
    // Each buffer ordered once (after its last writer on another stream, unless its last
    // launch was on this one: `gpu_ref::locked`), however many views of it the launch
    // takes; the guards record this launch as its user when dropped after the enqueue.
    // Buffers reached other than through a parameter (a TMA descriptor's tensor) are
    // ordered the same way and not passed.
    let mut ordered = Vec::new();
    let mut bases = Few::with_capacity(buffers.len());
    for h in buffers.iter_mut() {
        let (base, recorded) = h.launch_base(stream)?;
        bases.push(base);
        ordered.extend(recorded);
    }
    let addresses = param_addresses(&slots, &bases);
    let mut params = param_pointers(&slots, &addresses);
    let dims = cfg.dims();
    // SAFETY: the caller guarantees the arguments match the kernel's parameters, were
    // validated (device, generation, no output overlapping another view) and that `cfg`
    // fits the device; `params` holds one pointer per parameter, in order, to values
    // alive until the call returns.
    unsafe { crate::sys::launch::launch(stream, f, &dims, &mut params) }?;
    drop(ordered);
    Ok(())
}

/// A launch's few arguments, buffers, addresses or parameter pointers: on the stack up to
/// eight (a kernel launch built ~10 small vectors on the heap, ~10% of its host time).
pub(crate) type Few<T> = SmallVec<[T; 8]>;

/// Each buffer parameter's device address, in parameter order: its buffer's address
/// (`bases`, by held buffer) plus where its window starts.
pub(crate) fn param_addresses(slots: &[Slot<'_>], bases: &[u64]) -> Few<u64> {
    slots
        .iter()
        .filter_map(|s| match s {
            Slot::Buffer { held, item } if item.is_param() => Some(bases[*held] + item.byte_offset()),
            _ => None,
        })
        .collect()
}

/// The driver's `kernelParams`: one pointer per kernel parameter, in order — to each
/// buffer parameter's entry of `addresses` (`param_addresses` of the same slots), to
/// each scalar's value. Valid while `addresses` and the arguments stay where they are.
pub(crate) fn param_pointers(slots: &[Slot<'_>], addresses: &[u64]) -> Few<*mut std::ffi::c_void> {
    let mut next = addresses.iter();
    slots
        .iter()
        .filter_map(|s| match s {
            Slot::Buffer { item, .. } if item.is_param() => {
                let address = next.next().expect("one address per buffer parameter");
                Some(address as *const u64 as *mut std::ffi::c_void)
            }
            Slot::Buffer { .. } => None,
            Slot::Scalar(s) => Some(s.as_param()),
        })
        .collect()
}

/// A launch's arguments with their buffers locked: each distinct buffer once, however
/// many views of it the launch takes.
pub(crate) struct HeldArgs<'a> {
    /// The distinct buffers, locked (in buffer-id order), each as read or written by
    /// any of its views.
    pub(crate) buffers: Few<Box<dyn HeldArg + 'a>>,
    /// Every argument in order.
    pub(crate) slots: Few<Slot<'a>>,
}

/// One argument of a locked launch.
pub(crate) enum Slot<'a> {
    /// A buffer (or view): `held` indexes [`HeldArgs::buffers`].
    Buffer { held: usize, item: &'a dyn BufferArg },
    /// A scalar, as it is.
    Scalar(&'a dyn ScalarArg),
}

/// Locks the buffers of `args`: each distinct buffer once — an argument list may hold
/// several views of one buffer — in buffer-id order, as every operation locks its
/// operands, so two launches over the same buffers in different parameter orders cannot
/// deadlock.
pub(crate) fn lock_args(args: &KernelArgs) -> HeldArgs<'_> {
    // (buffer id, its first argument, whether any view of it is written)
    let mut distinct: Few<(u64, usize, bool)> = Few::with_capacity(args.items.len());
    let mut slots = Few::with_capacity(args.items.len());
    for (i, a) in args.items.iter().enumerate() {
        match a {
            Arg::Buffer(b) => {
                let held = match distinct.iter().position(|d| d.0 == b.id()) {
                    Some(k) => {
                        distinct[k].2 |= b.writes();
                        k
                    }
                    None => {
                        distinct.push((b.id(), i, b.writes()));
                        distinct.len() - 1
                    }
                };
                slots.push(Slot::Buffer { held, item: &**b });
            }
            Arg::Scalar(s) => slots.push(Slot::Scalar(&**s)),
        }
    }
    let mut order: Few<usize> = (0..distinct.len()).collect();
    // Usually already in order (one buffer, or ids rising with the parameters).
    order.sort_unstable_by_key(|&k| distinct[k].0);
    let mut locked: Few<Option<Box<dyn HeldArg + '_>>> = (0..distinct.len()).map(|_| None).collect();
    for k in order {
        let (_, first, writes) = distinct[k];
        if let Arg::Buffer(b) = &args.items[first] {
            locked[k] = Some(b.lock(writes));
        }
    }
    HeldArgs {
        buffers: locked
            .into_iter()
            .map(|h| h.expect("every buffer was locked"))
            .collect(),
        slots,
    }
}

/// Orders every buffer of `args` at the current end of `stream`, one buffer at a time:
/// `stream` waits for the buffer's last writer (and, written buffers, its readers), and
/// the buffer is recorded as used there, so later users on other streams wait for what
/// `stream` has enqueued so far. Returns each buffer's device address by buffer id (a
/// view's is that plus its offset).
///
/// Graphs use it around a capture and around replays, where cudarc's own tracking
/// cannot run (an event recorded inside a capture is unusable outside it).
pub(crate) fn order_on(
    args: &[&KernelArgs],
    stream: &cudarc::driver::CudaStream,
) -> Result<std::collections::HashMap<u64, u64>, GpuError> {
    // A buffer may appear more than once (views of it): ordered once, as a write if any
    // use writes it.
    let buffers = || {
        args.iter().flat_map(|a| a.items.iter()).filter_map(|a| match a {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        })
    };
    let mut writes = std::collections::HashMap::new();
    for b in buffers() {
        *writes.entry(b.id()).or_insert(false) |= b.writes();
    }
    let mut addresses = std::collections::HashMap::new();
    for b in buffers() {
        if addresses.contains_key(&b.id()) {
            continue;
        }
        let w = writes[&b.id()];
        let mut held = b.lock(w);
        let (address, _recorded_on_drop) = held.buffer_address(stream, w)?;
        addresses.insert(b.id(), address);
    }
    Ok(addresses)
}

/// Makes `stream` wait for the last write of every buffer in `args`.
pub(crate) fn wait_for_writes(stream: &cudarc::driver::CudaStream, args: &KernelArgs) -> Result<(), GpuError> {
    for a in &args.items {
        if let Arg::Buffer(b) = a {
            b.lock(false).wait_on(stream)?;
        }
    }
    Ok(())
}

/// Locks the buffers of an emulated launch (each once, in buffer-id order) and hands
/// their host memory to `run`, one window per buffer parameter in parameter order (views
/// of one buffer as windows of its one allocation); the locks are held until `run`
/// returns.
pub(crate) fn with_host_buffers<R>(
    args: &KernelArgs,
    run: impl FnOnce(HostBufs) -> Result<R, GpuError>,
) -> Result<R, GpuError> {
    let HeldArgs { mut buffers, slots } = lock_args(args);
    let bufs = slots
        .iter()
        .filter_map(|s| match s {
            Slot::Buffer { held, item } if item.is_param() => Some(buffers[*held].host(item.window(), item.writes())),
            _ => None,
        })
        .collect::<Result<Vec<_>, _>>()?;
    run(HostBufs { bufs })
}

/// A buffer argument, type-erased so one launch can mix dtypes.
pub(crate) trait BufferArg: Send {
    fn validate(&self, device_id: usize, generation: u64) -> Result<(), GpuError>;
    fn id(&self) -> u64;
    /// Whether the launch writes the buffer.
    fn writes(&self) -> bool;
    /// False for a buffer the kernel reaches through something else (a TMA descriptor):
    /// ordered and kept alive, but not a parameter.
    fn is_param(&self) -> bool;
    /// Where the argument's window starts in its buffer, in bytes (0 unless a view).
    fn byte_offset(&self) -> u64;
    /// The argument's elements in its buffer.
    fn window(&self) -> std::ops::Range<usize>;
    /// Bytes per element.
    fn elem_size(&self) -> u64;
    /// Locks the argument's buffer for a launch that writes it (through this view or
    /// another) or only reads it.
    fn lock(&self, writes: bool) -> Box<dyn HeldArg + '_>;
    /// Writes the buffer for a launch on an isolated device's worker.
    fn put_wire(&self, w: &mut crate::wire::Writer<'_>) -> Result<(), GpuError>;
    /// The element type's name (`"f32"`): what a list of buffers of mixed types names
    /// on the wire.
    fn dtype_name(&self) -> &'static str;
}

/// A buffer locked for a launch (once, whatever number of its views the launch takes).
pub(crate) trait HeldArg {
    /// The buffer's device address for a launch on `stream` (each view adds its offset):
    /// on the stream of the buffer's last launch the use is only noted; elsewhere it is
    /// ordered after the last writer (and, written, the readers) and the guard, dropped
    /// after the enqueue, records it (`gpu_ref::locked`).
    fn launch_base<'b>(&'b mut self, stream: &'b Arc<CudaStream>) -> Result<(u64, Option<SyncOnDrop<'b>>), GpuError>;
    /// Whether the launch writes the buffer (through any of its views).
    fn writes(&self) -> bool;
    /// The whole buffer's device address (a view adds its offset) for a use on
    /// `stream` that `writes` it or reads it, ordered after the buffer's last writer
    /// (and, for a write, its readers); the guard records the use when dropped after
    /// the enqueue.
    fn buffer_address<'b>(
        &'b mut self,
        stream: &'b cudarc::driver::CudaStream,
        writes: bool,
    ) -> Result<(u64, SyncOnDrop<'b>), GpuError>;
    /// Elements `window` of a CPU-device buffer in host memory, for an emulated launch
    /// that reads them or also `writes` them.
    fn host(&mut self, window: std::ops::Range<usize>, writes: bool) -> Result<RawBuf, GpuError>;
    /// Makes `stream` wait for the buffer's last write (a read access in cudarc's
    /// ordering).
    fn wait_on(&mut self, stream: &cudarc::driver::CudaStream) -> Result<(), GpuError>;
}

struct BufItem<T: DTypeBase> {
    r: GpuRef<T>,
    writes: bool,
    param: bool,
}

struct HeldBuf<'a, T> {
    /// Locked for a launch: the other accesses record its launch uses first.
    guard: Locked<'a, T>,
    writes: bool,
}

impl<T: DTypeBase> BufferArg for BufItem<T> {
    fn validate(&self, device_id: usize, generation: u64) -> Result<(), GpuError> {
        self.r.validate(device_id, generation)
    }
    fn id(&self) -> u64 {
        self.r.id()
    }
    fn writes(&self) -> bool {
        self.writes
    }
    fn is_param(&self) -> bool {
        self.param
    }
    fn byte_offset(&self) -> u64 {
        (self.r.offset() * std::mem::size_of::<T>()) as u64
    }
    fn window(&self) -> std::ops::Range<usize> {
        self.r.window()
    }
    fn elem_size(&self) -> u64 {
        std::mem::size_of::<T>() as u64
    }
    fn put_wire(&self, w: &mut crate::wire::Writer<'_>) -> Result<(), GpuError> {
        if !self.param {
            return Err(GpuError::Unsupported(
                "buffers reached through a TMA descriptor on an isolated device".into(),
            ));
        }
        crate::wire::put_buffer_arg(&self.r, w)
    }
    fn dtype_name(&self) -> &'static str {
        T::NAME
    }
    fn lock(&self, writes: bool) -> Box<dyn HeldArg + '_> {
        Box::new(HeldBuf {
            guard: self.r.lock_for_launch(),
            writes,
        })
    }
}

impl<T: DTypeBase> HeldArg for HeldBuf<'_, T> {
    fn launch_base<'b>(&'b mut self, stream: &'b Arc<CudaStream>) -> Result<(u64, Option<SyncOnDrop<'b>>), GpuError> {
        // Locked through one of its handles: its window's address less its offset.
        let offset = self.guard.byte_offset();
        let (address, recorded) = self.guard.launch_address(stream, self.writes)?;
        Ok((address - offset, recorded))
    }

    fn writes(&self) -> bool {
        self.writes
    }

    fn buffer_address<'b>(
        &'b mut self,
        stream: &'b cudarc::driver::CudaStream,
        writes: bool,
    ) -> Result<(u64, SyncOnDrop<'b>), GpuError> {
        self.guard.buffer_address(stream, writes)
    }

    fn wait_on(&mut self, stream: &cudarc::driver::CudaStream) -> Result<(), GpuError> {
        // Taking the address for `stream` as a read queues the wait for the last write;
        // the guard records the read when dropped here.
        self.guard.buffer_address(stream, false).map(drop)
    }

    fn host(&mut self, window: std::ops::Range<usize>, writes: bool) -> Result<RawBuf, GpuError> {
        self.guard.record();
        let Some((ptr, len)) = self.guard.host_raw_at(window) else {
            return Err(GpuError::invalid("a CUDA buffer in an emulated launch"));
        };
        Ok(RawBuf {
            ptr: ptr as *mut u8,
            len,
            type_id: std::any::TypeId::of::<T>(),
            type_name: T::NAME,
            writes,
        })
    }
}

/// A scalar argument.
pub(crate) trait ScalarArg: Send {
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>);
    /// The address of the value, as the driver's `kernelParams` entries take it.
    fn as_param(&self) -> *mut std::ffi::c_void;
    /// The value's bytes, for a launch on an isolated device's worker.
    fn bytes(&self) -> Result<Vec<u8>, GpuError>;
    /// Writes the argument for a raw module's launch on an isolated device's worker:
    /// its bytes, unless it is something the worker makes (a tensor map).
    fn put_wire(&self, w: &mut crate::wire::Writer<'_>) -> Result<(), GpuError> {
        crate::wire::put_scalar_arg(&self.bytes()?, w);
        Ok(())
    }
    /// Refuses an argument that only an isolated device's worker can launch (checked
    /// with the buffers, before every launch in this process).
    fn check_local(&self) -> Result<(), GpuError> {
        Ok(())
    }
}

struct ScalarItem<T>(T);

impl<T: DeviceRepr + Send + 'static> ScalarArg for ScalarItem<T> {
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        b.arg(&self.0);
    }

    fn as_param(&self) -> *mut std::ffi::c_void {
        &self.0 as *const T as *mut std::ffi::c_void
    }

    fn bytes(&self) -> Result<Vec<u8>, GpuError> {
        plain_number_bytes(&self.0).ok_or_else(|| {
            GpuError::Unsupported(format!(
                "a `{}` scalar on an isolated device: its bytes may hold padding, which cannot be copied \
                 to the worker; pass plain numbers, or a #[derive(KernelArg)] struct with KernelArgs::kernel_arg",
                std::any::type_name::<T>()
            ))
        })
    }
}

/// The bytes of `v` when `T` is a plain number (`bool`, an integer, a float of any width,
/// a complex number): no padding, every byte initialised — what a raw module's scalar
/// crosses to an isolated device's worker as. `None` for any other type (a user's
/// `DeviceRepr` struct may have padding, which must not be read).
fn plain_number_bytes<T: 'static>(v: &T) -> Option<Vec<u8>> {
    use crate::dtype::{c32, c64, f8e4m3, f8e5m2};
    let plain = [
        TypeId::of::<bool>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<i128>(),
        TypeId::of::<isize>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<u128>(),
        TypeId::of::<usize>(),
        TypeId::of::<half::f16>(),
        TypeId::of::<half::bf16>(),
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<f8e4m3>(),
        TypeId::of::<f8e5m2>(),
        TypeId::of::<c32>(),
        TypeId::of::<c64>(),
    ];
    if !plain.contains(&TypeId::of::<T>()) {
        return None;
    }
    let mut out = vec![0u8; std::mem::size_of::<T>()];
    // SAFETY: `T` is one of the plain number types listed above: no padding, so all
    // `size_of::<T>()` bytes of `v` are initialised; `out` is exactly that long.
    unsafe { std::ptr::copy_nonoverlapping(v as *const T as *const u8, out.as_mut_ptr(), out.len()) };
    Some(out)
}

/// A scalar that crossed from the user process to an isolated device's worker as bytes
/// (a raw module's launch: the kernel's parameter types are unknown here).
struct BytesItem(Vec<u8>);

impl ScalarArg for BytesItem {
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        // The driver copies the parameter's size from the address it is given: the
        // first byte's address is the value's (never empty: `KernelArgs::bytes`).
        b.arg(&self.0[0]);
    }

    fn as_param(&self) -> *mut std::ffi::c_void {
        self.0.as_ptr() as *mut std::ffi::c_void
    }

    fn bytes(&self) -> Result<Vec<u8>, GpuError> {
        Ok(self.0.clone())
    }
}

/// A scalar parameter of a `#[kernel]` launch: a primitive number or `bool`.
struct DTypeItem<T>(T);

impl<T: crate::kernel::dsl::KernelScalar + DeviceRepr + Copy + Send> ScalarArg for DTypeItem<T> {
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        b.arg(&self.0);
    }

    fn as_param(&self) -> *mut std::ffi::c_void {
        &self.0 as *const T as *mut std::ffi::c_void
    }

    fn bytes(&self) -> Result<Vec<u8>, GpuError> {
        let mut out = vec![0u8; std::mem::size_of::<T>()];
        // SAFETY: kernel scalars are primitive numbers and `bool` (the `KernelScalar`
        // list): no padding, every byte initialised; `out` is exactly their size.
        unsafe { std::ptr::copy_nonoverlapping(&self.0 as *const T as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(out)
    }
}

/// A `#[derive(KernelArg)]` struct of a `#[kernel]` launch.
struct StructItem<S>(S);

impl<S: KernelArg> ScalarArg for StructItem<S> {
    fn push<'b>(&'b self, b: &mut LaunchArgs<'b>) {
        b.arg(&self.0);
    }

    fn as_param(&self) -> *mut std::ffi::c_void {
        &self.0 as *const S as *mut std::ffi::c_void
    }

    fn bytes(&self) -> Result<Vec<u8>, GpuError> {
        let mut out = vec![0u8; std::mem::size_of::<S>()];
        self.0.write_bytes(&mut out);
        Ok(out)
    }
}

pub(crate) enum Arg {
    Buffer(Box<dyn BufferArg>),
    Scalar(Box<dyn ScalarArg>),
}

/// The arguments of a launch, in the kernel's parameter order.
#[derive(Default)]
pub struct KernelArgs {
    pub(crate) items: Vec<Arg>,
    /// The user's names of arguments (item index, name), for errors: a `#[kernel]`
    /// launcher names every parameter; hand-built arguments are named by position.
    names: Vec<(usize, &'static str)>,
    /// Buffers accessed as vectors (item index, lanes): their windows' alignment is
    /// checked at launch.
    vectors: Vec<(usize, u64)>,
}

impl std::fmt::Debug for KernelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelArgs({} args)", self.items.len())
    }
}

impl KernelArgs {
    /// No arguments yet.
    pub fn new() -> Self {
        KernelArgs::default()
    }

    /// No arguments yet, with room for `n` (a `#[kernel]` launcher knows its count: one
    /// allocation per list instead of one per growth, on every launch).
    pub fn with_capacity(n: usize) -> Self {
        KernelArgs {
            items: Vec::with_capacity(n),
            names: Vec::with_capacity(n),
            vectors: Vec::new(),
        }
    }

    /// A buffer the kernel reads (`const T*`).
    pub fn buf<T: DTypeBase>(mut self, r: &GpuRef<T>) -> Self {
        self.items.push(Arg::Buffer(Box::new(BufItem {
            r: r.clone(),
            writes: false,
            param: true,
        })));
        self
    }

    /// A buffer the kernel writes (`T*`).
    pub fn buf_mut<T: DTypeBase>(mut self, r: &GpuRef<T>) -> Self {
        self.items.push(Arg::Buffer(Box::new(BufItem {
            r: r.clone(),
            writes: true,
            param: true,
        })));
        self
    }

    /// A buffer the kernel reaches without a parameter of its own (through a TMA
    /// descriptor): validated, kept alive and stream-ordered as written, not passed.
    pub(crate) fn reached<T: DTypeBase>(mut self, r: &GpuRef<T>) -> Self {
        self.items.push(Arg::Buffer(Box::new(BufItem {
            r: r.clone(),
            writes: true,
            param: false,
        })));
        self
    }

    /// Names the argument added last (the kernel's parameter name), so errors about it
    /// say which one the caller meant.
    pub fn named(mut self, name: &'static str) -> Self {
        if let Some(i) = self.items.len().checked_sub(1) {
            self.names.push((i, name));
        }
        self
    }

    /// The last buffer is read or written as vectors of `lanes` elements (`load4` …):
    /// its window must start at a multiple of that many elements' bytes (a buffer's own
    /// start always does; a view's may not — a misaligned vector access would be a
    /// sticky fault, so the launch is refused instead). Used by generated code.
    #[doc(hidden)]
    pub fn vector_access(mut self, lanes: u64) -> Self {
        if let Some(i) = self.items.len().checked_sub(1) {
            self.vectors.push((i, lanes));
        }
        self
    }

    /// Refuses a view a vector access would read misaligned.
    fn check_vector_alignment(&self) -> Result<(), GpuError> {
        for &(i, lanes) in &self.vectors {
            if let Some(Arg::Buffer(b)) = self.items.get(i) {
                let align = lanes * b.elem_size();
                if b.byte_offset() % align != 0 {
                    let mut e = Invalid::new(format!(
                        "{} is a view starting {} bytes into its buffer; the kernel accesses it as vectors of {lanes} \
                         elements, which must start at a multiple of {align} bytes: take the view at a multiple of \
                         {lanes} elements",
                        self.describe(i),
                        b.byte_offset(),
                    ))
                    .mismatch(
                        format_args!("an offset that is a multiple of {align} bytes"),
                        format_args!("{} bytes", b.byte_offset()),
                    );
                    if let Some(name) = self.name_of(i) {
                        e = e.arg(name);
                    }
                    return Err(GpuError::InvalidArgument(e));
                }
            }
        }
        Ok(())
    }

    /// The caller's name of item `i`, if it was named.
    fn name_of(&self, i: usize) -> Option<&'static str> {
        self.names.iter().find(|(at, _)| *at == i).map(|(_, name)| *name)
    }

    /// How errors call item `i`: its name, or its position (1-based).
    fn describe(&self, i: usize) -> String {
        match self.name_of(i) {
            Some(name) => format!("`{name}`"),
            None => format!("argument {}", i + 1),
        }
    }

    /// A scalar passed by value. On an isolated device only plain numbers cross (any
    /// integer, float or complex type, `bool`): a struct goes through
    /// [`KernelArgs::kernel_arg`].
    pub fn scalar<T: DeviceRepr + Send + 'static>(mut self, v: T) -> Self {
        self.items.push(Arg::Scalar(Box::new(ScalarItem(v))));
        self
    }

    /// Writes the arguments for a launch on an isolated device's worker.
    pub(crate) fn put_wire(&self, w: &mut crate::wire::Writer<'_>) -> Result<(), GpuError> {
        w.put_u64(self.items.len() as u64);
        for a in &self.items {
            match a {
                Arg::Buffer(b) => b.put_wire(w)?,
                Arg::Scalar(s) => crate::wire::put_scalar_arg(&s.bytes()?, w),
            }
        }
        Ok(())
    }

    /// A scalar as the bytes a user process sent (an isolated device's worker rebuilding
    /// a raw module's launch); `InvalidArgument` when empty.
    pub(crate) fn bytes(mut self, bytes: Vec<u8>) -> Result<Self, GpuError> {
        if bytes.is_empty() {
            return Err(GpuError::invalid("an empty kernel scalar"));
        }
        self.items.push(Arg::Scalar(Box::new(BytesItem(bytes))));
        Ok(self)
    }

    /// A dtype scalar of a `#[kernel]` launch. Used by generated code.
    #[doc(hidden)]
    pub fn dtype<T: crate::kernel::dsl::KernelScalar + DeviceRepr + Copy + Send + 'static>(mut self, v: T) -> Self {
        self.items.push(Arg::Scalar(Box::new(DTypeItem(v))));
        self
    }

    /// A `#[derive(KernelArg)]` struct passed by value: a `#[kernel]`'s parameter (the
    /// generated launcher adds it), or a raw module kernel's whose C++ struct is the one
    /// `KernelArg::cuda_decl` prints. Unlike [`KernelArgs::scalar`] it crosses to an
    /// isolated device's worker, its padding zeroed.
    pub fn kernel_arg<S: KernelArg>(mut self, v: S) -> Self {
        self.items.push(Arg::Scalar(Box::new(StructItem(v))));
        self
    }

    /// Checks every buffer against the device, and that no written window overlaps
    /// another window of its buffer.
    pub(crate) fn validate(&self, device_id: usize, generation: u64) -> Result<(), GpuError> {
        for a in &self.items {
            match a {
                Arg::Buffer(b) => b.validate(device_id, generation)?,
                Arg::Scalar(s) => s.check_local()?,
            }
        }
        self.check_buffers()
    }

    /// The checks of a launch's buffers that need no device: views of one buffer apart
    /// where one is written, and views accessed as vectors aligned for it.
    pub(crate) fn check_buffers(&self) -> Result<(), GpuError> {
        self.check_aliasing()?;
        self.check_vector_alignment()
    }

    /// Refuses two arguments that are overlapping windows of one buffer where the
    /// kernel writes either: it would read and write the same elements through two
    /// pointers (which CUDA compilers may assume apart). Views that are only read may
    /// overlap; disjoint views of one buffer may be written.
    pub(crate) fn check_aliasing(&self) -> Result<(), GpuError> {
        // Compared pairwise in place: a launch has a handful of buffers, and this runs on
        // every launch, so it allocates nothing.
        for (i, a) in self.items.iter().enumerate() {
            let Arg::Buffer(b) = a else { continue };
            for (k, e) in self.items[..i].iter().enumerate() {
                let Arg::Buffer(e) = e else { continue };
                if e.id() != b.id() || !(e.writes() || b.writes()) {
                    continue;
                }
                let (x, y) = (e.window(), b.window());
                if x.start < y.end && y.start < x.end {
                    let written = if b.writes() { i } else { k };
                    let mut err = Invalid::new(format!(
                        "{} (elements {x:?}) and {} (elements {y:?}) are overlapping windows of the same buffer, \
                         and the kernel writes {}: pass disjoint views, or copy the input first",
                        self.describe(k),
                        self.describe(i),
                        self.describe(written),
                    ))
                    .mismatch("views apart from a written one", "overlapping views of one buffer");
                    if let Some(name) = self.name_of(written) {
                        err = err.arg(name);
                    }
                    return Err(GpuError::InvalidArgument(err));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes each scalar of `args` crosses to an isolated device's worker as.
    fn wire_bytes(args: &KernelArgs) -> Vec<Result<Vec<u8>, GpuError>> {
        args.items
            .iter()
            .map(|a| match a {
                Arg::Scalar(s) => s.bytes(),
                Arg::Buffer(_) => panic!("no buffers here"),
            })
            .collect()
    }

    #[test]
    fn plain_numbers_cross_as_their_bytes_and_padded_structs_do_not() {
        #[derive(Clone, Copy)]
        #[repr(C)]
        struct Padded {
            _a: f64,
            _b: i32,
        }
        // SAFETY: a plain `repr(C)` struct of numbers.
        unsafe impl DeviceRepr for Padded {}
        let z = crate::dtype::c32::new(1.5, -2.0);
        let args = KernelArgs::new()
            .scalar(-7i32)
            .scalar(2.5f64)
            .scalar(true)
            .scalar(half::bf16::from_f32(3.0))
            .scalar(z)
            .scalar(Padded { _a: 1.0, _b: 2 });
        let got = wire_bytes(&args);
        assert_eq!(got[0].as_ref().unwrap(), &(-7i32).to_le_bytes());
        assert_eq!(got[1].as_ref().unwrap(), &2.5f64.to_le_bytes());
        assert_eq!(got[2].as_ref().unwrap(), &[1u8]);
        assert_eq!(got[3].as_ref().unwrap(), &half::bf16::from_f32(3.0).to_le_bytes());
        let mut zb = 1.5f32.to_le_bytes().to_vec();
        zb.extend((-2.0f32).to_le_bytes());
        assert_eq!(got[4].as_ref().unwrap(), &zb);
        assert!(
            matches!(&got[5], Err(GpuError::Unsupported(m)) if m.contains("Padded") && m.contains("kernel_arg")),
            "{:?}",
            got[5]
        );
    }

    #[test]
    fn bytes_from_the_wire_are_kept_as_sent_and_never_empty() {
        let args = KernelArgs::new().bytes(vec![1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let got = wire_bytes(&args);
        assert_eq!(got[0].as_ref().unwrap(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        if let Arg::Scalar(s) = &args.items[0] {
            // SAFETY: the parameter holds eight bytes.
            let v = unsafe { std::ptr::read_unaligned(s.as_param() as *const u64) };
            assert_eq!(v, u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]));
        }
        let e = KernelArgs::new().bytes(vec![]).unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    }
}
