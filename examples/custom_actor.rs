//! A user-defined GPU actor written with `#[gpu_actor]`: a scaled-GEMM service with one
//! generic handler expanded to f32 and f64, spawned with a GPU of its own (`spawn_on`: its
//! GEMMs run in place on its own stream and cuBLAS handle), run on the GPU when present
//! (else the CPU device) and checked against a float64 CPU reference.

use std::time::Instant;

use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::{gpu_actor, Gemm};

/// Multiplies square matrices and scales the product, keeping a count of its work.
struct ScaledGemm {
    gpu: ActorGpu,
    served: u64,
}

#[gpu_actor(supervision(resume_on = [InvalidArgument]))]
impl ScaledGemm {
    /// `scale · A·B` for n×n column-major matrices given on the host.
    #[handler(dtypes(f32, f64))]
    async fn multiply<T: BlasScalar>(&mut self, n: usize, scale: T, a: Vec<T>, b: Vec<T>) -> Result<Vec<T>, GpuError> {
        if a.len() != n * n || b.len() != n * n {
            return Err(GpuError::invalid(format!("expected two {n}x{n} matrices")));
        }
        let (ga, gb) = (self.gpu.upload(a).await?, self.gpu.upload(b).await?);
        let gc = self.gpu.alloc::<T>(n * n).await?;
        let g = Gemm::<T>::new(n, n, n).scaled(scale, T::from_f64(0.0));
        self.gpu.gemm(g, &ga, &gb, &gc).await?;
        self.served += 1;
        self.gpu.download(&gc).await
    }

    /// How many products this actor computed.
    #[handler]
    fn served(&self) -> u64 {
        self.served
    }
}

fn random(n: usize, mut s: u64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn reference(n: usize, scale: f64, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for j in 0..n {
        for p in 0..n {
            let bv = b[p + j * n];
            for i in 0..n {
                c[i + j * n] += a[i + p * n] * bv;
            }
        }
    }
    c.iter().map(|v| v * scale).collect()
}

fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum();
    (num / want.iter().map(|w| w * w).sum::<f64>()).sqrt()
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let system = ActorSystem::new("custom");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);
    let service = ScaledGemmRef::spawn_on(&device, &system, "scaled-gemm", |gpu| ScaledGemm { gpu, served: 0 })?;

    let n = 256;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 | 1)
        .unwrap_or(1);
    let (a, b) = (random(n * n, seed), random(n * n, seed.rotate_left(17) | 1));
    let want = reference(n, 0.5, &a, &b);

    let t = Instant::now();
    let c64 = service.multiply::<f64>(n, 0.5, a.clone(), b.clone()).await?;
    let a32: Vec<f32> = a.iter().map(|v| *v as f32).collect();
    let b32: Vec<f32> = b.iter().map(|v| *v as f32).collect();
    let c32 = service.multiply::<f32>(n, 0.5, a32, b32).await?;
    let elapsed = t.elapsed();

    let e64 = rel_err(&c64, &want);
    let e32 = rel_err(&c32.iter().map(|v| *v as f64).collect::<Vec<_>>(), &want);
    println!(
        "f64: relative error {e64:.2e}; f32: relative error {e32:.2e}; both in {:.1} ms",
        elapsed.as_secs_f64() * 1e3
    );
    // Bad input is a typed error and the actor keeps serving.
    let bad = service.multiply::<f32>(n, 1.0, vec![1.0; 3], vec![1.0; 3]).await;
    println!(
        "mismatched input: {}",
        bad.as_ref().err().map(|e| e.to_string()).unwrap_or_default()
    );
    println!("served: {}", service.served().await?);
    system.shutdown().await;
    if e64 > 1e-12 || e32 > 1e-5 || bad.is_ok() {
        return Err(GpuError::Other("result check failed".into()));
    }
    println!("ok");
    Ok(())
}
