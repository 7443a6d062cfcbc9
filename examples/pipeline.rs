//! The multi-stream pipeline pattern: host batches go through pinned upload → a
//! compute-heavy `#[kernel]` → pinned download with several batches in flight, so one
//! batch's copies overlap another's compute. Runs the same batches serially (depth 1)
//! and with 4 in flight, checks every result against a host reference, and prints both
//! times (on the GPU when present, else on the CPU device, where the overlap is between
//! host threads).
//!
//! `cargo run --release --example pipeline [batches] [elements per batch]`

use std::time::Instant;

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

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

/// The float64 reference of `heavy` for one element. Each f32 step rounds by at most an
/// ulp (NVRTC may also fuse it into an FMA); the recurrence shrinks old errors by 0.999
/// per step, so the f32 result stays within ~1000 ulps (about 1e-4) of this.
fn reference(x: f32, iters: u32) -> f64 {
    let mut v = x as f64;
    for _ in 0..iters {
        v = v * 0.999f32 as f64 + 0.001f32 as f64;
    }
    v
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let arg = |i: usize, d: usize| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let system = ActorSystem::new("pipeline");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    let gpu = info.backend == BackendKind::Cuda;
    // The CPU device emulates the kernel thread by thread: smaller defaults there.
    let (batches, len, iters) = if gpu {
        (arg(1, 16), arg(2, 4 << 20), 2000)
    } else {
        (arg(1, 6), arg(2, 1 << 14), 50)
    };
    println!(
        "device: {} ({:?}); {batches} batches of {len} f32",
        info.name, info.backend
    );
    let input: Vec<Vec<f32>> = (0..batches)
        .map(|b| (0..len).map(|i| ((i * 7 + b * 13) % 1000) as f32 * 1e-3).collect())
        .collect();
    let mut times = vec![];
    for depth in [1usize, 4] {
        let p = Pipeline::new(&device, depth, move |d: Device, x: GpuRef<f32>| async move {
            let mut y = d.alloc::<f32>(x.len()).await?;
            heavy::launch(&d, LaunchConfig::for_elements(x.len(), 256), iters as u32, &x, &mut y).await?;
            Ok(y)
        })?;
        p.run(input[..1].to_vec()).await?; // compile / warm up
        let t = Instant::now();
        let out = p.run(input.clone()).await?;
        let elapsed = t.elapsed().as_secs_f64();
        for (b, (x, y)) in input.iter().zip(&out).enumerate() {
            for (i, (xv, yv)) in x.iter().zip(y).enumerate().step_by(997) {
                let want = reference(*xv, iters as u32);
                assert!(
                    (*yv as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "batch {b} element {i}: {yv} vs {want}"
                );
            }
        }
        println!("depth {depth}: {:.1} ms, results checked", elapsed * 1e3);
        times.push(elapsed);
    }
    println!("{:.2}x the serial time with 4 batches in flight", times[0] / times[1]);
    system.shutdown().await;
    Ok(())
}
