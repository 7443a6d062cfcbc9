//! The CPU device's grid executor: runs a kernel body once per emulated thread with
//! CUDA's block semantics.
//!
//! Two modes, chosen by the `#[kernel]` macro from what the body uses:
//! - *independent* (no `sync_threads()`, shared arrays or shuffles): threads of a block
//!   need not run together, so blocks are spread over the host's cores and each
//!   worker runs its blocks' threads one after another;
//! - *cooperative*: every thread of a block is an OS thread, so `sync_threads()` is a
//!   real barrier, shared arrays are shared and shuffles exchange values; blocks run one
//!   after another.
//!
//! A panic in the body (an index out of bounds, an overflow) fails the launch with
//! [`GpuError::KernelFault`] naming the block and thread; other threads of the block are
//! released, so an emulated launch never hangs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::barrier::BlockBarrier;
use crate::error::GpuError;
use crate::module::LaunchConfig;

/// Static shared memory a block may use, as on the GPU (48 KiB).
pub(crate) const SHARED_LIMIT: usize = 48 * 1024;

/// The limits the emulation enforces, CUDA's own, so a launch that fails on the GPU
/// fails on the CPU device too.
pub(crate) const LIMITS: crate::module::LaunchLimits = crate::module::LaunchLimits {
    max_threads_per_block: 1024,
    max_block: (1024, 1024, 64),
    max_grid: (i32::MAX as u32, 65535, 65535),
    max_shared_mem: SHARED_LIMIT as u32,
};

/// One warp's exchange slots, for shuffles.
#[derive(Debug)]
pub(crate) struct Warp {
    pub(crate) barrier: BlockBarrier,
    pub(crate) slots: Mutex<[u64; 32]>,
}

/// What the threads of one block share in cooperative mode.
#[derive(Debug)]
pub(crate) struct BlockState {
    pub(crate) barrier: BlockBarrier,
    pub(crate) warps: Vec<Warp>,
    /// Shared arrays, in declaration order (every thread declares them in the same order).
    pub(crate) shared: Mutex<Vec<Box<[u64]>>>,
}

impl BlockState {
    fn new(threads: usize) -> Self {
        BlockState {
            barrier: BlockBarrier::new(threads, "sync_threads()"),
            warps: (0..threads.div_ceil(32))
                .map(|w| Warp {
                    barrier: BlockBarrier::new((threads - w * 32).min(32), "warp shuffle"),
                    slots: Mutex::new([0; 32]),
                })
                .collect(),
            shared: Mutex::new(vec![]),
        }
    }

    fn reset(&self, threads: usize) {
        self.barrier.reset(threads);
        for (w, warp) in self.warps.iter().enumerate() {
            warp.barrier.reset((threads - w * 32).min(32));
        }
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn break_all(&self, why: &str) {
        self.barrier.break_with(why.to_string());
        for w in &self.warps {
            w.barrier.break_with(why.to_string());
        }
    }
}

/// Where the current emulated thread is: what the intrinsics read.
#[derive(Debug)]
pub(crate) struct ThreadCtx {
    pub(crate) thread: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) block_dim: [u32; 3],
    pub(crate) grid_dim: [u32; 3],
    /// The block's shared state (cooperative mode only).
    pub(crate) coop: Option<Arc<BlockState>>,
    /// How many shared arrays this thread has declared so far.
    pub(crate) shared_next: std::cell::Cell<usize>,
}

impl ThreadCtx {
    /// The thread's index within its block, x fastest.
    pub(crate) fn linear_thread(&self) -> usize {
        let [x, y, z] = self.thread.map(|v| v as usize);
        let [bx, by, _] = self.block_dim.map(|v| v as usize);
        (z * by + y) * bx + x
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
    fn set_panic(&self, kernel: &str, block: [u32; 3], thread: [u32; 3], p: &(dyn std::any::Any + Send)) {
        if p.is::<NoCpuEmulation>() {
            self.set_error(GpuError::Unsupported(format!(
                "kernel `{kernel}` is raw CUDA C++ without a CPU emulation; run it on a GPU"
            )));
        } else {
            self.set(kernel, block, thread, panic_text(p));
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
pub fn run_grid(kernel: &str, cfg: &LaunchConfig, cooperative: bool, body: &(dyn Fn() + Sync)) -> Result<(), GpuError> {
    cfg.validate(&LIMITS)?;
    let (grid, block) = (dims(cfg.grid), dims(cfg.block));
    let blocks = grid.iter().map(|&v| v as usize).product::<usize>();
    let threads = block.iter().map(|&v| v as usize).product::<usize>();
    let first = FirstError(Mutex::new(None), AtomicBool::new(false));
    if cooperative {
        run_cooperative(kernel, grid, block, blocks, threads, body, &first);
    } else {
        run_independent(kernel, grid, block, blocks, threads, body, &first);
    }
    first.into_result()
}

fn run_independent(
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    blocks: usize,
    threads: usize,
    body: &(dyn Fn() + Sync),
    first: &FirstError,
) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Spawning workers only pays off for grids of some size.
    let workers = if blocks * threads < 16 * 1024 {
        1
    } else {
        cores.min(blocks)
    };
    let worker = |w: usize| {
        for b in (w..blocks).step_by(workers) {
            if first.failed() {
                return;
            }
            for t in 0..threads {
                let ctx = ThreadCtx {
                    thread: unflatten(t, block),
                    block: unflatten(b, grid),
                    block_dim: block,
                    grid_dim: grid,
                    coop: None,
                    shared_next: std::cell::Cell::new(0),
                };
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| CTX.set(&ctx, body))) {
                    first.set_panic(kernel, ctx.block, ctx.thread, &*p);
                    return;
                }
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
}

fn run_cooperative(
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    blocks: usize,
    threads: usize,
    body: &(dyn Fn() + Sync),
    first: &FirstError,
) {
    let state = Arc::new(BlockState::new(threads));
    // Every thread meets here after each block; it waits as long as the slowest
    // thread's work takes, so it has no deadline (sync_threads() has one).
    let block_done = BlockBarrier::without_deadline(threads, "block end");
    std::thread::scope(|s| {
        for t in 0..threads {
            let block_done = &block_done;
            let mine = state.clone();
            let run = move || {
                let state = mine;
                for b in 0..blocks {
                    let ctx = ThreadCtx {
                        thread: unflatten(t, block),
                        block: unflatten(b, grid),
                        block_dim: block,
                        grid_dim: grid,
                        coop: Some(state.clone()),
                        shared_next: std::cell::Cell::new(0),
                    };
                    let r = catch_unwind(AssertUnwindSafe(|| CTX.set(&ctx, body)));
                    state.barrier.exit();
                    state.warps[t / 32].barrier.exit();
                    if let Err(p) = r {
                        first.set_panic(kernel, ctx.block, ctx.thread, &*p);
                        state.break_all("another thread of the block failed");
                    }
                    match block_done.wait() {
                        Ok(true) => state.reset(threads),
                        Ok(false) => {}
                        Err(_) => return,
                    }
                    if block_done.wait().is_err() || first.failed() {
                        return;
                    }
                }
            };
            // Small stacks: a block may have 1024 threads.
            let spawned = std::thread::Builder::new().stack_size(256 * 1024).spawn_scoped(s, run);
            if let Err(e) = spawned {
                // Threads already started would wait for this one forever: release them.
                let why = format!("the host refused an emulated thread: {e}");
                first.set(kernel, [0; 3], unflatten(t, block), why.clone());
                state.break_all(&why);
                block_done.break_with(why);
                return;
            }
        }
    });
}
