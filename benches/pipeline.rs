//! The pipeline pattern on the GPU: 16 batches of 32 MiB (f32) through pinned upload →
//! a compute-heavy `#[kernel]` → pinned download, serial (depth 1) against 2–4 batches in
//! flight, end to end from host `Vec`s to host `Vec`s, in one run.

use std::time::Instant;

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;
use gpu_bench::{median, run_gpu};

/// `iters` dependent multiply-adds per element.
#[kernel]
pub fn heavy(iters: u32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        let mut v = x[i];
        let mut k: u32 = 0;
        while k < iters {
            v = v * 0.999 + 0.001;
            k += 1;
        }
        y[i] = v;
    }
}

const BATCHES: usize = 16;
const LEN: usize = 8 << 20;
const ITERS: u32 = 3000;

fn main() {
    run_gpu("pipeline", DeviceConfig::cuda(0), |dev, _ctx, _stream| async move {
        let batches: Vec<Vec<f32>> = (0..BATCHES)
            .map(|b| (0..LEN).map(|i| ((i + b) % 1000) as f32 * 1e-3).collect())
            .collect();
        let mut serial = 0.0;
        for depth in [1usize, 2, 3, 4] {
            let p = Pipeline::new(&dev, depth, |d: Device, x: GpuRef<f32>| async move {
                let mut y = d.alloc::<f32>(x.len()).await?;
                heavy::launch(&d, LaunchConfig::for_elements(x.len(), 256), ITERS, &x, &mut y).await?;
                Ok(y)
            })
            .unwrap();
            p.run(batches[..2].to_vec()).await.unwrap();
            let mut times = vec![];
            for _ in 0..3 {
                let input = batches.clone();
                let t = Instant::now();
                let out = p.run(input).await.unwrap();
                times.push(t.elapsed().as_secs_f64());
                assert_eq!(out.len(), BATCHES);
            }
            let t = median(&mut times);
            if depth == 1 {
                serial = t;
            }
            println!(
                "RESULT | pipeline {BATCHES} x 32 MiB, depth {depth} | {:.1} ms ({:.2} GB/s in+out) | {:.2}x serial",
                t * 1e3,
                2.0 * (BATCHES * LEN * 4) as f64 / t / 1e9,
                serial / t
            );
        }
    });
}
