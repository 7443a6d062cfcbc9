//! GPU time of each path of a bench, to tell the GPU's share of a difference from the
//! host's: raw calls bracketed by CUDA events of our own, ours read from the timeline.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;

use atomr_accel_cuda::observability::{enable_timeline, take_timeline};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

/// Collected GPU times, in ms.
pub struct GpuTimes {
    start: CudaEvent,
    end: CudaEvent,
    raw: Vec<f64>,
    ours: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

impl GpuTimes {
    /// Events of `ctx` for the raw path.
    pub fn new(ctx: &Arc<CudaContext>) -> Self {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        GpuTimes {
            start: ctx.new_event(flags).unwrap(),
            end: ctx.new_event(flags).unwrap(),
            raw: vec![],
            ours: vec![],
        }
    }

    /// Runs `enqueue` (raw work on `stream`) between two events and waits for it.
    pub fn raw<T>(&mut self, stream: &Arc<CudaStream>, enqueue: impl FnOnce() -> T) -> T {
        self.start.record(stream).unwrap();
        let r = enqueue();
        self.end.record(stream).unwrap();
        stream.synchronize().unwrap();
        self.raw.push(self.start.elapsed_ms(&self.end).unwrap() as f64);
        r
    }

    /// Awaits `call` (our path) with the timeline on and keeps the GPU time of its
    /// operation on `lane`.
    pub async fn ours<T>(&mut self, lane: &str, call: impl Future<Output = T>) -> T {
        enable_timeline(true);
        let r = call.await;
        enable_timeline(false);
        if let Some(e) = take_timeline().iter().find(|e| e.lane == lane) {
            self.ours.push(e.dur_us / 1e3);
        }
        r
    }

    /// Prints the medians as a `RESULT` line about `what`.
    pub fn print(mut self, what: &str) {
        println!(
            "RESULT | {what} GPU time | actor {:.3} ms, raw {:.3} ms",
            median(&mut self.ours),
            median(&mut self.raw)
        );
    }
}
