//! Filling 64M f32 through the device's `RngActor` vs raw cudarc cuRAND (`CudaRng` + sync)
//! in the same process, interleaved. Target ≥ 0.95× raw throughput.

use std::time::Instant;

use atomr_accel_cuda::DeviceConfig;
use cudarc::curand::CudaRng;

const N: usize = 64 << 20;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::{median, run_gpu};

fn main() {
    run_gpu("rng", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        let rng = CudaRng::new(7, stream.clone()).unwrap();
        let mut raw_buf = stream.alloc_zeros::<f32>(N).unwrap();
        let buf = dev.alloc::<f32>(N).await.unwrap();
        for (name, normal) in [("uniform", false), ("normal", true)] {
            let (mut raw, mut actor) = (vec![], vec![]);
            for i in 0..23 {
                let t = Instant::now();
                if normal {
                    rng.fill_with_normal(&mut raw_buf, 0.0, 1.0).unwrap();
                } else {
                    rng.fill_with_uniform(&mut raw_buf).unwrap();
                }
                stream.synchronize().unwrap();
                let r = t.elapsed().as_secs_f64();
                let t = Instant::now();
                if normal {
                    dev.fill_normal(&buf, 0.0f32, 1.0).await.unwrap();
                } else {
                    dev.fill_uniform(&buf).await.unwrap();
                }
                let a = t.elapsed().as_secs_f64();
                if i >= 3 {
                    raw.push(r);
                    actor.push(a);
                }
            }
            let (r, a) = (median(&mut raw), median(&mut actor));
            println!(
                "RESULT | rng.{name} 64M f32 | actor {:.1} Gsamples/s, raw cudarc {:.1} Gsamples/s, ratio {:.3}",
                N as f64 / a / 1e9,
                N as f64 / r / 1e9,
                r / a
            );
        }
    });
}
