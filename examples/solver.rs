//! Dense solvers through the device's `SolverActor` (cuSOLVER on a GPU, nalgebra on the
//! CPU device): a linear system by LU, a least-squares fit by QR, and the spectrum of a
//! covariance matrix by the symmetric eigensolver — each checked in float64 on the host.
//!
//! `cargo run --release --example solver [n]`

use std::time::Instant;

use atomr_accel_cuda::prelude::*;

#[path = "support/random.rs"]
mod support_random;
use support_random::random;

/// `a` (rows×k, column-major) times `x` (k).
fn matvec(a: &[f64], x: &[f64], rows: usize) -> Vec<f64> {
    let mut y = vec![0.0; rows];
    for (j, xj) in x.iter().enumerate() {
        for (i, yi) in y.iter_mut().enumerate() {
            *yi += a[i + j * rows] * xj;
        }
    }
    y
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let system = ActorSystem::new("solver");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);

    // 1. A·x = b by LU with partial pivoting.
    let a = random(n * n, seed);
    let b = random(n, seed ^ 1);
    let t = Instant::now();
    let lu = device.upload(a.clone()).await?;
    let pivots = device.lu_factor(&lu, n).await?;
    let x = device.upload(b.clone()).await?;
    device.lu_solve(&lu, &pivots, &x, n, 1).await?;
    let x = device.download(&x).await?;
    let r: Vec<f64> = matvec(&a, &x, n).iter().zip(&b).map(|(p, q)| p - q).collect();
    println!(
        "LU solve {n}×{n}: relative residual {:.2e} in {:.2} ms",
        norm(&r) / norm(&b),
        t.elapsed().as_secs_f64() * 1e3
    );

    // 2. Least squares: fit m noisy samples of a cubic by QR (R·c = Qᵀ·y).
    let m = 4 * n;
    let ts: Vec<f64> = (0..m).map(|i| i as f64 / m as f64).collect();
    let truth = [0.5, -2.0, 3.0, 1.5];
    let noise = random(m, seed ^ 2);
    let y: Vec<f64> = ts
        .iter()
        .zip(&noise)
        .map(|(t, e)| truth.iter().rev().fold(0.0, |acc, c| acc * t + c) + 1e-3 * e)
        .collect();
    let vander: Vec<f64> = (0..4).flat_map(|p| ts.iter().map(move |t| t.powi(p))).collect();
    let t = Instant::now();
    let (q, r) = device.qr(&device.upload(vander).await?, m, 4).await?;
    let (q, r) = (device.download(&q).await?, device.download(&r).await?);
    // Qᵀy, then back-substitution with the 4×4 R on the host.
    let qty: Vec<f64> = (0..4).map(|j| (0..m).map(|i| q[i + j * m] * y[i]).sum()).collect();
    let mut c = [0.0; 4];
    for i in (0..4).rev() {
        let s: f64 = (i + 1..4).map(|j| r[i + j * 4] * c[j]).sum();
        c[i] = (qty[i] - s) / r[i + i * 4];
    }
    println!(
        "QR least squares over {m} samples: coefficients {c:.3?} (truth {truth:?}) in {:.2} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    // 3. The spectrum of a sample covariance matrix (symmetric, positive semi-definite).
    let k = n.min(128);
    let samples = 4 * k;
    let data = random(samples * k, seed ^ 3);
    let mut cov = vec![0.0; k * k];
    for j in 0..k {
        for i in 0..k {
            cov[i + j * k] = (0..samples)
                .map(|s| data[s + i * samples] * data[s + j * samples])
                .sum::<f64>()
                / samples as f64;
        }
    }
    let t = Instant::now();
    let v = device.upload(cov.clone()).await?;
    let w = device.download(&device.eigh(&v, k).await?).await?;
    let v = device.download(&v).await?;
    let top = &v[(k - 1) * k..];
    let av = matvec(&cov, top, k);
    let err = norm(&av.iter().zip(top).map(|(p, q)| p - w[k - 1] * q).collect::<Vec<_>>());
    println!(
        "eigh {k}×{k}: eigenvalues {:.3} … {:.3}, ‖A·v − λ·v‖ = {err:.1e} in {:.2} ms",
        w[0],
        w[k - 1],
        t.elapsed().as_secs_f64() * 1e3
    );
    system.shutdown().await;
    Ok(())
}
