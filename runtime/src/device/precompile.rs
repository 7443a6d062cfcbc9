//! [`precompile_all`]: every registered `#[kernel]` compiled (NVRTC, in parallel, into
//! the disk cache) and loaded into a device before the first launch needs it.

use std::io::{IsTerminal, Write};
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

/// Draws `[#####-----] done/total` on stderr when it is a terminal.
struct Progress {
    total: usize,
    done: AtomicUsize,
    draw: bool,
    out: Mutex<()>,
}

impl Progress {
    fn step(&self, what: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.draw {
            return;
        }
        let _g = self.out.lock();
        let width = 30;
        let filled = done * width / self.total.max(1);
        let mut e = std::io::stderr();
        let _ = write!(
            e,
            "\r[{}{}] {done}/{} {what:<40.40}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.total
        );
        if done == self.total {
            let _ = writeln!(e);
        }
    }
}

/// Compiles every instantiation of every registered kernel for `device` (NVRTC runs in
/// parallel on the host's cores, results go to the disk cache) and loads them into the
/// device's kernel actor, so no launch waits for a compile. On the CPU device there is
/// nothing to compile. Failures are collected in the summary, not returned early.
pub async fn precompile_all(device: &Device) -> Result<PrecompileSummary, GpuError> {
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
    let progress = Progress {
        total: all.len(),
        done: AtomicUsize::new(0),
        draw: std::io::stderr().is_terminal(),
        out: Mutex::new(()),
    };
    // Compile on blocking threads: NVRTC is CPU work that must not stall the runtime.
    let jobs = all.clone();
    let compiled = tokio::task::spawn_blocking(move || {
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
                    let r = crate::nvrtc_cache::compile_cached(&(inst.source)(), &arch, &[], cache_dir.as_deref());
                    progress.step(name);
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((k, r.map(|(_, hit)| hit)));
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
