//! [`precompile_all`]: every registered `#[kernel]` compiled (NVRTC, in parallel, into
//! the disk cache) and loaded into a device before the first launch needs it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{BackendKind, Device};
use crate::error::GpuError;
use crate::kernel::dsl::registry::{registered, KernelInstance};

/// What [`precompile_all`] did.
#[derive(Debug, Clone, Default)]
pub struct PrecompileSummary {
    /// Instantiations compiled by NVRTC now.
    pub compiled: usize,
    /// Instantiations found in the disk cache.
    pub cached: usize,
    /// Instantiations that need no compiling: the device is the CPU device.
    pub emulated: usize,
    /// Failures: `name<dtypes>` and the error (an NVRTC log points at the Rust line).
    pub failed: Vec<(String, GpuError)>,
    /// Wall time.
    pub elapsed: Duration,
}

impl std::fmt::Display for PrecompileSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernels: {} compiled, {} from the disk cache, {} emulated (CPU device), {} failed in {:.2?}",
            self.compiled,
            self.cached,
            self.emulated,
            self.failed.len(),
            self.elapsed
        )?;
        for (name, e) in &self.failed {
            write!(f, "\n  {name}: {e}")?;
        }
        Ok(())
    }
}

/// One compile of [`precompile_all_with`], handed to its callback as it finishes (from the
/// compiling thread), so that a program can show progress its own way: a library draws
/// nothing on the terminal itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrecompileStep {
    /// The instantiation: `module::kernel<dtypes>`.
    pub kernel: String,
    /// How many instantiations are done, this one included.
    pub done: usize,
    /// How many there are in all.
    pub total: usize,
    /// Found in the disk cache (no NVRTC run).
    pub cached: bool,
    /// The compile failed (the summary has the error).
    pub failed: bool,
}

/// Counts finished compiles; reports each as a `tracing` event and to the caller.
struct Progress<'a> {
    total: usize,
    done: AtomicUsize,
    report: &'a (dyn Fn(&PrecompileStep) + Send + Sync),
}

impl Progress<'_> {
    fn step(&self, kernel: &str, outcome: &Result<bool, GpuError>) {
        let step = PrecompileStep {
            kernel: kernel.to_string(),
            done: self.done.fetch_add(1, Ordering::Relaxed) + 1,
            total: self.total,
            cached: matches!(outcome, Ok(true)),
            failed: outcome.is_err(),
        };
        tracing::debug!(
            target: "atomr_accel_cuda::precompile",
            kernel = %step.kernel,
            done = step.done,
            total = step.total,
            cached = step.cached,
            failed = step.failed,
            "kernel compiled"
        );
        (self.report)(&step);
    }
}

/// Compiles every instantiation of every registered kernel for `device` (NVRTC runs in
/// parallel on the host's cores, results go to the disk cache) and loads them into the
/// device's kernel actor, so no launch waits for a compile. On the CPU device there is
/// nothing to compile. Failures are collected in the summary, not returned early.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let summary = precompile_all(&dev).await?;
/// // The CPU device compiles nothing: it runs every registered kernel as Rust.
/// assert_eq!((summary.compiled, summary.failed.len()), (0, 0));
/// println!("{summary}");
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// Each compile is reported as a `tracing` event (target `atomr_accel_cuda::precompile`,
/// level DEBUG); [`precompile_all_with`] also hands each to a callback.
pub async fn precompile_all(device: &Device) -> Result<PrecompileSummary, GpuError> {
    precompile_all_with(device, |_| {}).await
}

/// [`precompile_all`], calling `on_step` after each instantiation is compiled (or found in
/// the cache, or failed) — from the compiling threads, so it must be quick: set a progress
/// bar, count, log.
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # use atomr_accel_cuda_runtime::device::precompile_all_with;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let summary = precompile_all_with(&dev, |step| {
///     eprintln!("[{}/{}] {}", step.done, step.total, step.kernel);
/// })
/// .await?;
/// assert!(summary.failed.is_empty());
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub async fn precompile_all_with(
    device: &Device,
    on_step: impl Fn(&PrecompileStep) + Send + Sync + 'static,
) -> Result<PrecompileSummary, GpuError> {
    let start = Instant::now();
    let info = device.ready().await?;
    let all: Vec<(String, &'static KernelInstance)> = registered()
        .flat_map(|r| {
            r.instances.iter().map(move |i| {
                let name = if i.dtypes.is_empty() {
                    format!("{}::{}", r.module, r.name)
                } else {
                    format!("{}::{}<{}>", r.module, r.name, i.dtypes)
                };
                (name, i)
            })
        })
        .collect();
    let mut summary = PrecompileSummary::default();
    let Some(arch) = info.arch().filter(|_| info.backend == BackendKind::Cuda) else {
        summary.emulated = all.len();
        summary.elapsed = start.elapsed();
        return Ok(summary);
    };
    let cache_dir = device.config().kernel_cache_dir.clone();
    // Compile on blocking threads: NVRTC is CPU work that must not stall the runtime.
    let jobs = all.clone();
    let compiled = tokio::task::spawn_blocking(move || {
        let progress = Progress {
            total: jobs.len(),
            done: AtomicUsize::new(0),
            report: &on_step,
        };
        let next = AtomicUsize::new(0);
        let results = Mutex::new(vec![]);
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(jobs.len().max(1));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some((name, inst)) = jobs.get(k) else { break };
                    let r = crate::nvrtc_cache::compile_cached(&(inst.source)(), &arch, &[], cache_dir.as_deref())
                        .map(|(_, hit)| hit);
                    progress.step(name, &r);
                    results.lock().unwrap_or_else(|p| p.into_inner()).push((k, r));
                });
            }
        });
        results.into_inner().unwrap_or_else(|p| p.into_inner())
    })
    .await
    .map_err(|e| GpuError::Internal(format!("precompile worker failed: {e}")))?;
    for (k, r) in compiled {
        let (name, inst) = &all[k];
        match r {
            Ok(true) => summary.cached += 1,
            Ok(false) => summary.compiled += 1,
            Err(e) => {
                summary.failed.push((name.clone(), e));
                continue;
            }
        }
        if let Err(e) = device.preload(inst).await {
            summary.failed.push((name.clone(), e));
        }
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}
