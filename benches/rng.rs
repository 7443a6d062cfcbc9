//! Filling 64M f32 through the device's `RngActor` vs raw cudarc cuRAND (`CudaRng` + sync)
//! in the same process, in both orders of `support/alternate.rs`, plus the GPU time of
//! one fill on each path (events; ours from the timeline). Target ≥ 0.95× raw throughput.

use atomr_accel_cuda::DeviceConfig;
use cudarc::curand::CudaRng;

const N: usize = 64 << 20;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/gpu_time.rs"]
mod gpu_time;

use alternate::{measure, Order};
use gpu_bench::run_gpu;
use gpu_time::GpuTimes;

fn main() {
    run_gpu("rng", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        let rng = CudaRng::new(7, stream.clone()).unwrap();
        let mut raw_buf = stream.alloc_zeros::<f32>(N).unwrap();
        let buf = dev.alloc::<f32>(N).await.unwrap();
        for (name, normal) in [("uniform", false), ("normal", true)] {
            let mut raw_fill = || {
                if normal {
                    rng.fill_with_normal(&mut raw_buf, 0.0, 1.0).unwrap();
                } else {
                    rng.fill_with_uniform(&mut raw_buf).unwrap();
                }
            };
            let ours = || async {
                if normal {
                    dev.fill_normal(&buf, 0.0f32, 1.0).await.unwrap();
                } else {
                    dev.fill_uniform(&buf).await.unwrap();
                }
            };
            for order in Order::ALL {
                let (r, a) = measure(
                    order,
                    3,
                    20,
                    || {
                        raw_fill();
                        stream.synchronize().unwrap();
                    },
                    ours,
                )
                .await;
                println!(
                    "RESULT | rng.{name} 64M f32 ({order:?}) | actor {:.1} Gsamples/s, raw cudarc {:.1} Gsamples/s, ratio {:.3}",
                    N as f64 / a / 1e9,
                    N as f64 / r / 1e9,
                    r / a
                );
            }
            let mut times = GpuTimes::new(&ctx);
            for _ in 0..5 {
                times.raw(&stream, &mut raw_fill);
                times.ours("rng", ours()).await;
            }
            times.print(&format!("rng.{name} 64M f32"));
        }
    });
}
