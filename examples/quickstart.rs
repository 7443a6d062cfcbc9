//! Quickstart (README's main command): SGEMM through the device's `BlasActor`.
//!
//! Opens the GPU when one is present, otherwise the CPU device (and says which),
//! uploads two random matrices, multiplies them, downloads the result, checks it against
//! a float64 CPU reference and prints the error and the time.

use std::time::Instant;

use atomr_accel_cuda::prelude::*;

/// Uniform values in [-1, 1) from a clock-seeded xorshift: fresh data on every run.
fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            ((s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(512);
    let system = ActorSystem::new("quickstart");
    let t_open = Instant::now();
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!(
        "device: {} ({:?}), ready in {:.0} ms",
        info.name,
        info.backend,
        t_open.elapsed().as_secs_f64() * 1e3
    );

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let (a, b) = (random(n * n, seed), random(n * n, seed ^ 0xABCD));
    let t = Instant::now();
    let ga = device.upload(a.clone()).await?;
    let gb = device.upload(b.clone()).await?;
    let gc = device.alloc::<f32>(n * n).await?;
    device.gemm(Gemm::<f32>::new(n, n, n), &ga, &gb, &gc).await?;
    let c = device.download(&gc).await?;
    let elapsed = t.elapsed();

    // Float64 reference (column-major, like cuBLAS).
    let mut num = 0f64;
    let mut den = 0f64;
    for j in 0..n {
        for i in 0..n {
            let mut acc = 0f64;
            for p in 0..n {
                acc += a[i + p * n] as f64 * b[p + j * n] as f64;
            }
            num += (c[i + j * n] as f64 - acc).powi(2);
            den += acc * acc;
        }
    }
    let rel = (num / den).sqrt();
    println!(
        "SGEMM {n}x{n}x{n}: upload + gemm + download in {:.2} ms; relative error vs f64 reference {rel:.2e}",
        elapsed.as_secs_f64() * 1e3
    );
    system.shutdown().await;
    if rel > 1e-4 {
        return Err(GpuError::Other(format!("result check failed: relative error {rel:e}")));
    }
    println!("ok");
    Ok(())
}
