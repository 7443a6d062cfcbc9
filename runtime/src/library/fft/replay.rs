//! cuFFT transforms replayed as CUDA graphs.
//!
//! `cufftExec*` spends ~7–10 µs of host time per call on the H200 even for a transform
//! the GPU finishes in ~12 µs (2^16 × 16 C2C), and the kernels it launches wait for that
//! host work: an awaited transform took 20–21 µs. The same transform captured once into
//! a graph and then launched (`cuGraphLaunch`, a few µs) took 17 µs, with the same output
//! (`benches/tracking_probe.cu`, BENCHMARKS.md "FFT replayed as graphs").
//!
//! A graph holds the addresses it was captured with, so replays are keyed by the
//! transform (its plan and direction) and the input and output addresses. A transform is
//! captured the second time it runs on the same buffers — a buffer pair used once costs
//! no capture — and the [`REPLAYS_PER_PLAN`] most recently used pairs of a plan keep
//! their graphs. Replaying on another buffer at the same address is correct: the plan's
//! shape and types fix what the transform touches, and the caller checked that both
//! buffers hold it. Should capture fail (a driver or cuFFT that refuses it), the transform
//! runs directly, and the plan never tries again.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::error::GpuError;
use crate::sys::graph::{capture, GraphExec};

/// Buffer pairs per plan whose graphs are kept (least recently used evicted first; an
/// evicted graph still in flight is freed by CUDA when it completes).
pub(super) const REPLAYS_PER_PLAN: usize = 8;

/// What identifies one captured transform of a plan: direction code, input and output
/// device addresses.
type ReplayKey = (u8, u64, u64);

struct Replay {
    key: ReplayKey,
    /// `None` after the first run: captured on the second.
    graph: Option<GraphExec>,
    /// The plan's call count at its last use (for eviction).
    last_use: u64,
}

/// The captured transforms of one plan.
pub(super) struct Replays {
    entries: Vec<Replay>,
    calls: u64,
    /// Run every transform directly: graphs are off for this plan's device, or a capture
    /// failed once.
    direct: bool,
}

impl Replays {
    /// The replays of a new plan; `enabled: false` runs every transform directly.
    pub(super) fn new(enabled: bool) -> Self {
        Replays {
            entries: Vec::new(),
            calls: 0,
            direct: !enabled,
        }
    }

    /// Runs the transform `key` on `stream` — its graph when captured, else `exec`
    /// (which enqueues the transform on `stream`), capturing it on its second use.
    /// The buffers' stream-order waits must already be enqueued, and their records
    /// follow: nothing here waits on events (a capture may not).
    pub(super) fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        key: ReplayKey,
        exec: impl Fn() -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        if self.direct {
            return exec();
        }
        self.calls += 1;
        let calls = self.calls;
        let Some(i) = self.entries.iter().position(|r| r.key == key) else {
            self.remember(key);
            return exec();
        };
        let entry = &mut self.entries[i];
        entry.last_use = calls;
        if let Some(g) = &entry.graph {
            return g.launch();
        }
        match capture(stream, &exec) {
            Ok(g) => {
                g.launch()?;
                entry.graph = Some(g);
                Ok(())
            }
            Err(e) => {
                tracing::debug!(error = %e, "cuFFT transform not captured; running it directly from now on");
                self.direct = true;
                self.entries.clear();
                exec()
            }
        }
    }

    /// Notes the first use of `key`, evicting the least recently used pair when full.
    fn remember(&mut self, key: ReplayKey) {
        if self.entries.len() >= REPLAYS_PER_PLAN {
            if let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_use) {
                self.entries.swap_remove(oldest);
            }
        }
        self.entries.push(Replay {
            key,
            graph: None,
            last_use: self.calls,
        });
    }

    /// Buffer pairs remembered, and how many of them hold a graph (for tests).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        (
            self.entries.len(),
            self.entries.iter().filter(|r| r.graph.is_some()).count(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_drops_the_least_recently_used_pair() {
        let mut r = Replays::new(true);
        for k in 0..REPLAYS_PER_PLAN as u64 {
            r.calls += 1;
            r.remember((0, k, k));
        }
        // Touch pair 0 so that pair 1 is now the oldest.
        r.calls += 1;
        r.entries.iter_mut().find(|e| e.key == (0, 0, 0)).unwrap().last_use = r.calls;
        r.calls += 1;
        r.remember((1, 99, 99));
        assert_eq!(r.counts(), (REPLAYS_PER_PLAN, 0));
        assert!(r.entries.iter().any(|e| e.key == (0, 0, 0)));
        assert!(!r.entries.iter().any(|e| e.key == (0, 1, 1)));
        assert!(r.entries.iter().any(|e| e.key == (1, 99, 99)));
    }
}
