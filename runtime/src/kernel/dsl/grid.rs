//! The CPU device's grid executor: runs a kernel body once per emulated thread with
//! CUDA's block semantics.
//!
//! Two modes, chosen by the `#[kernel]` macro from what the body uses:
//! - *independent* (no `sync_threads()`, shared arrays or shuffles): threads of a block
//!   need not run together, so each worker runs its blocks' threads one after another;
//! - *cooperative*: every thread of a block is a stackful coroutine (`corosensei`) on
//!   one worker thread. `sync_threads()` and the two halves of a shuffle suspend the
//!   thread; the block's scheduler resumes the waiters once every live thread of the
//!   block (or the warp) waits there — CUDA's rule, under which a thread that returned
//!   no longer counts. A switch costs nanoseconds, not an OS context switch, and a block
//!   whose live threads wait at different barriers is a deadlock reported at once.
//!
//! Blocks are spread over the host's cores in both modes. A panic in the body (an index
//! out of bounds, an overflow) fails the launch with [`GpuError::KernelFault`] naming the
//! block and thread; `cpu_unsupported()` fails it with `Unsupported`. An emulated launch
//! never hangs on a barrier.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::error::GpuError;
use crate::launch::LaunchConfig;

/// Static shared memory a block may use, as on the GPU (48 KiB).
pub(crate) const SHARED_LIMIT: usize = 48 * 1024;

/// Dynamic shared memory a launch may ask for: the opt-in maximum of an sm_90 GPU
/// (227 KiB), which the GPU path unlocks for every loaded kernel.
pub(crate) const DYNAMIC_SHARED_LIMIT: u32 = 227 * 1024;

/// Stack of one emulated thread in cooperative mode.
const THREAD_STACK: usize = 256 * 1024;

/// The limits the emulation enforces, CUDA's own, so a launch that fails on the GPU
/// fails on the CPU device too.
pub(crate) const LIMITS: crate::launch::LaunchLimits = crate::launch::LaunchLimits {
    max_threads_per_block: 1024,
    max_block: (1024, 1024, 64),
    max_grid: (i32::MAX as u32, 65535, 65535),
    max_shared_mem: DYNAMIC_SHARED_LIMIT,
    cluster_launch: false,
};

/// The body of a kernel launch, as the generated launcher hands it over.
pub type KernelBody = Arc<dyn Fn() + Send + Sync>;

/// What a suspended emulated thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// `sync_threads()`: every live thread of the block.
    Block,
    /// A shuffle step: every live lane of the warp.
    Warp,
}

/// What the threads of one block share in cooperative mode (one worker thread runs the
/// whole block, so plain cells suffice).
#[derive(Debug)]
pub(crate) struct BlockState {
    /// Shuffle exchange slots, 32 per warp.
    pub(crate) slots: RefCell<Vec<u64>>,
    /// Shared arrays, in declaration order (every thread declares them in the same order).
    pub(crate) shared: RefCell<Vec<Box<[u64]>>>,
    /// The dynamic shared memory the launch asked for (`dyn_shared`), zeroed per block;
    /// every thread's view points into it (cells: written through shared pointers).
    pub(crate) dynamic: Box<[std::cell::UnsafeCell<u64>]>,
    /// Its size in bytes.
    pub(crate) dynamic_bytes: usize,
}

/// Where the current emulated thread is: what the intrinsics read.
pub(crate) struct ThreadCtx {
    pub(crate) thread: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) block_dim: [u32; 3],
    pub(crate) grid_dim: [u32; 3],
    /// The block's shared state (cooperative mode only).
    pub(crate) coop: Option<Rc<BlockState>>,
    /// How many shared arrays this thread has declared so far.
    pub(crate) shared_next: Cell<usize>,
    /// The coroutine's yielder (cooperative mode), published when it starts.
    yielder: Cell<*const Yielder<(), Wait>>,
}

impl ThreadCtx {
    fn new(t: usize, b: usize, block: [u32; 3], grid: [u32; 3], coop: Option<Rc<BlockState>>) -> Self {
        ThreadCtx {
            thread: unflatten(t, block),
            block: unflatten(b, grid),
            block_dim: block,
            grid_dim: grid,
            coop,
            shared_next: Cell::new(0),
            yielder: Cell::new(std::ptr::null()),
        }
    }

    /// The thread's index within its block, x fastest.
    pub(crate) fn linear_thread(&self) -> usize {
        let [x, y, z] = self.thread.map(|v| v as usize);
        let [bx, by, _] = self.block_dim.map(|v| v as usize);
        (z * by + y) * bx + x
    }

    /// Suspends this emulated thread until the scheduler releases `wait`.
    pub(crate) fn suspend(&self, wait: Wait) {
        let y = self.yielder.get();
        assert!(!y.is_null(), "a barrier outside the cooperative emulation mode");
        // SAFETY: the pointer was published by this thread's coroutine when it started
        // and the yielder lives on that coroutine's stack until it returns; `suspend` is
        // only reached from the body running on that coroutine (the scheduler sets this
        // context around each resume of it), on the worker thread that owns it.
        unsafe { &*y }.suspend(wait);
    }
}

scoped_tls::scoped_thread_local!(pub(crate) static CTX: ThreadCtx);

fn dims(t: (u32, u32, u32)) -> [u32; 3] {
    [t.0, t.1, t.2]
}

/// Block (or thread) `i` of `d` in x-fastest order.
fn unflatten(i: usize, d: [u32; 3]) -> [u32; 3] {
    let (x, y) = (d[0] as usize, d[1] as usize);
    [(i % x) as u32, ((i / x) % y) as u32, (i / (x * y)) as u32]
}

/// The payload of `cpu_unsupported()`: the kernel has no CPU emulation.
#[derive(Debug)]
pub(crate) struct NoCpuEmulation;

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The first failure of a launch.
struct FirstError(Mutex<Option<GpuError>>, AtomicBool);

impl FirstError {
    fn set(&self, kernel: &str, block: [u32; 3], thread: [u32; 3], msg: String) {
        self.set_error(GpuError::KernelFault(format!(
            "kernel `{kernel}` failed on the CPU device in block {block:?}, thread {thread:?}: {msg}"
        )));
    }

    /// Records a panic of the body: `cpu_unsupported()` or a fault.
    fn set_panic(&self, kernel: &str, ctx: &ThreadCtx, p: &(dyn std::any::Any + Send)) {
        if p.is::<NoCpuEmulation>() {
            self.set_error(GpuError::Unsupported(format!(
                "kernel `{kernel}` is raw CUDA C++ without a CPU emulation; run it on a GPU"
            )));
        } else {
            self.set(kernel, ctx.block, ctx.thread, panic_text(p));
        }
    }

    fn set_error(&self, e: GpuError) {
        let mut first = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(e);
        }
        self.1.store(true, Ordering::Release);
    }

    fn failed(&self) -> bool {
        self.1.load(Ordering::Acquire)
    }

    fn into_result(self) -> Result<(), GpuError> {
        match self.0.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Runs `body` once per thread of the grid `cfg` describes. `cooperative` as the module
/// docs say; the `#[kernel]` macro passes it.
pub fn run_grid(kernel: &str, cfg: &LaunchConfig, cooperative: bool, body: KernelBody) -> Result<(), GpuError> {
    cfg.validate(&LIMITS)?;
    let (grid, block) = (dims(cfg.grid), dims(cfg.block));
    let blocks = grid.iter().map(|&v| v as usize).product::<usize>();
    let threads = block.iter().map(|&v| v as usize).product::<usize>();
    let first = FirstError(Mutex::new(None), AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Spawning workers only pays off for grids of some size.
    let workers = if blocks * threads < 16 * 1024 {
        1
    } else {
        cores.min(blocks)
    };
    let worker = |w: usize| {
        let mut stacks = vec![];
        // One handle per worker, cloned per emulated thread without touching the shared
        // (atomic) count: the workers would otherwise bounce its cache line per thread.
        let local: Rc<KernelBody> = Rc::new(body.clone());
        for b in (w..blocks).step_by(workers) {
            if first.failed() {
                return;
            }
            if cooperative {
                let dynamic = cfg.shared_mem_bytes as usize;
                run_block(kernel, b, grid, block, threads, dynamic, &local, &first, &mut stacks);
            } else {
                run_block_independent(kernel, b, grid, block, threads, &*body, &first);
            }
        }
    };
    if workers == 1 {
        worker(0);
    } else {
        std::thread::scope(|s| {
            for w in 0..workers {
                s.spawn(move || worker(w));
            }
        });
    }
    first.into_result()
}

fn run_block_independent(
    kernel: &str,
    b: usize,
    grid: [u32; 3],
    block: [u32; 3],
    threads: usize,
    body: &(dyn Fn() + Send + Sync),
    first: &FirstError,
) {
    for t in 0..threads {
        let ctx = ThreadCtx::new(t, b, block, grid, None);
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| CTX.set(&ctx, body))) {
            first.set_panic(kernel, &ctx, &*p);
            return;
        }
    }
}

type Thread = Coroutine<(), Wait, (), DefaultStack>;

/// Runs one block in cooperative mode: a coroutine per thread and a scheduler that
/// releases barriers. `stacks` are reused across the worker's blocks.
#[allow(clippy::too_many_arguments)]
fn run_block(
    kernel: &str,
    b: usize,
    grid: [u32; 3],
    block: [u32; 3],
    threads: usize,
    dynamic_bytes: usize,
    body: &Rc<KernelBody>,
    first: &FirstError,
    stacks: &mut Vec<DefaultStack>,
) {
    let state = Rc::new(BlockState {
        slots: RefCell::new(vec![0; threads.div_ceil(32) * 32]),
        shared: RefCell::new(vec![]),
        dynamic: (0..dynamic_bytes.div_ceil(8))
            .map(|_| std::cell::UnsafeCell::new(0))
            .collect(),
        dynamic_bytes,
    });
    let ctxs: Vec<ThreadCtx> = (0..threads)
        .map(|t| ThreadCtx::new(t, b, block, grid, Some(state.clone())))
        .collect();
    let mut coroutines: Vec<Option<Thread>> = Vec::with_capacity(threads);
    for _ in 0..threads {
        let stack = match stacks.pop() {
            Some(s) => s,
            None => match DefaultStack::new(THREAD_STACK) {
                Ok(s) => s,
                Err(e) => {
                    first.set(
                        kernel,
                        unflatten(b, grid),
                        [0; 3],
                        format!("no stack for an emulated thread: {e}"),
                    );
                    return;
                }
            },
        };
        let body = body.clone();
        coroutines.push(Some(Coroutine::with_stack(stack, move |y: &Yielder<(), Wait>, ()| {
            CTX.with(|c| c.yielder.set(y as *const _));
            (**body)()
        })));
    }
    // `None`: runnable; `Some(w)`: suspended at `w`.
    let mut waiting: Vec<Option<Wait>> = vec![None; threads];
    let mut live = threads;
    loop {
        for t in 0..threads {
            if waiting[t].is_some() {
                continue;
            }
            let Some(co) = coroutines[t].as_mut() else { continue };
            let step = catch_unwind(AssertUnwindSafe(|| CTX.set(&ctxs[t], || co.resume(()))));
            match step {
                Ok(CoroutineResult::Yield(w)) => waiting[t] = Some(w),
                Ok(CoroutineResult::Return(())) => {
                    live -= 1;
                    if let Some(co) = coroutines[t].take() {
                        stacks.push(co.into_stack());
                    }
                }
                Err(p) => {
                    first.set_panic(kernel, &ctxs[t], &*p);
                    // Dropping the suspended coroutines unwinds their stacks.
                    return;
                }
            }
        }
        if live == 0 {
            return;
        }
        if !release(&mut waiting, &coroutines) {
            let at = |w: Wait| waiting.iter().filter(|x| **x == Some(w)).count();
            let msg = format!(
                "deadlock: of {live} live threads, {} wait at sync_threads() and {} at a warp shuffle, and \
                 no barrier can complete; is a sync_threads() or shuffle in code that not every thread reaches?",
                at(Wait::Block),
                at(Wait::Warp)
            );
            first.set(kernel, unflatten(b, grid), [0; 3], msg);
            return;
        }
    }
}

/// Releases every barrier whose live threads have all arrived; false if none could be.
fn release(waiting: &mut [Option<Wait>], coroutines: &[Option<Thread>]) -> bool {
    let live = |t: usize| coroutines[t].is_some();
    let all = |range: std::ops::Range<usize>, w: Wait, waiting: &[Option<Wait>]| {
        let mut any = false;
        for t in range {
            if live(t) {
                if waiting[t] != Some(w) {
                    return false;
                }
                any = true;
            }
        }
        any
    };
    let n = waiting.len();
    if all(0..n, Wait::Block, waiting) {
        waiting.iter_mut().for_each(|w| *w = None);
        return true;
    }
    let mut released = false;
    for start in (0..n).step_by(32) {
        let lanes = start..(start + 32).min(n);
        if all(lanes.clone(), Wait::Warp, waiting) {
            waiting[lanes].iter_mut().for_each(|w| *w = None);
            released = true;
        }
    }
    released
}
