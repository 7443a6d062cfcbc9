//! cuRAND and cuFFT through the device's `RngActor` and `FftActor` (a seeded ChaCha12
//! generator and rustfft on the CPU device): fill a signal with seeded normal noise plus
//! a sine, find the sine's frequency with a batched real-to-complex FFT, and invert it
//! back — each step checked on the host.
//!
//! `cargo run --release --example fft_rng [points]`

use atomr_accel_cuda::prelude::*;

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(4096);
    let system = ActorSystem::new("fft-rng");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);

    // Seeded noise: the same seed gives the same numbers (on one backend).
    let batch = 4;
    let noise = device.alloc::<f64>(n * batch).await?;
    device.seed_rng(7).await?;
    device.fill_normal(&noise, 0.0, 0.5).await?;
    let first = device.download(&noise).await?;
    device.seed_rng(7).await?;
    device.fill_normal(&noise, 0.0, 0.5).await?;
    assert_eq!(first, device.download(&noise).await?, "reseeding repeats the sequence");
    let mean = first.iter().sum::<f64>() / first.len() as f64;
    let std = (first.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / first.len() as f64).sqrt();
    println!("noise: mean {mean:+.4}, std {std:.4} (asked 0, 0.5)");

    // Each of the batch's signals: noise + a sine at bin 37 + 5·b.
    let bins: Vec<usize> = (0..batch).map(|b| 37 + 5 * b).collect();
    let signal: Vec<f64> = first
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let (b, t) = (i / n, (i % n) as f64);
            e + 3.0 * (2.0 * std::f64::consts::PI * bins[b] as f64 * t / n as f64).sin()
        })
        .collect();
    let x = device.upload(signal.clone()).await?;
    let shape = FftShape::new(&[n], batch);
    let spectrum = device.alloc::<c64>(shape.half_points() * batch).await?;
    device.fft_r2c(&x, &spectrum, &shape).await?;
    let s = device.download(&spectrum).await?;
    let half = shape.half_points();
    for (b, want) in bins.iter().enumerate() {
        let peak = (1..half)
            .max_by(|&i, &j| {
                let m = |k: usize| s[b * half + k].re.hypot(s[b * half + k].im);
                m(i).total_cmp(&m(j))
            })
            .unwrap_or(0);
        assert_eq!(peak, *want, "signal {b}: the peak is at the sine's bin");
    }
    println!("R2C {n} x {batch}: peaks at bins {bins:?}, as planted");

    // C2R is unnormalised: the round trip multiplies by n.
    let back = device.alloc::<f64>(n * batch).await?;
    device.fft_c2r(&spectrum, &back, &shape).await?;
    let back = device.download(&back).await?;
    let err = back
        .iter()
        .zip(&signal)
        .map(|(y, x)| (y / n as f64 - x).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-9, "round trip error {err:e}");
    println!("C2R round trip: max error {err:.1e}");
    system.shutdown().await;
    Ok(())
}
