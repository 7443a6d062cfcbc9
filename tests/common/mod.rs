//! Helpers shared by the integration tests: fresh random data and float64 references.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

pub mod harness;
pub mod slow;
pub mod tma;

static SEED: AtomicU64 = AtomicU64::new(0);

#[path = "../../examples/support/random.rs"]
mod random;
pub use random::random as seeded_vec;

/// Fresh random values in [-1, 1): a new seed per call, mixed with the clock, so no two
/// runs check the same data.
pub fn rand_vec(n: usize) -> Vec<f64> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    seeded_vec(n, nanos ^ SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed))
}

/// The float64 reference of a collective's `op` over one element's values on every rank.
pub fn reduce_ref(op: atomr_accel_cuda::multi_device::ReduceOp, values: impl Iterator<Item = f64>) -> f64 {
    use atomr_accel_cuda::multi_device::ReduceOp;
    let v: Vec<f64> = values.collect();
    match op {
        ReduceOp::Sum => v.iter().sum(),
        ReduceOp::Avg => v.iter().sum::<f64>() / v.len() as f64,
        ReduceOp::Max => v.iter().copied().fold(f64::MIN, f64::max),
        ReduceOp::Min => v.iter().copied().fold(f64::MAX, f64::min),
    }
}

/// Column-major reference GEMM in float64.
#[allow(clippy::too_many_arguments)]
pub fn gemm_ref(
    transa: bool,
    transb: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: &[f64],
    lda: usize,
    b: &[f64],
    ldb: usize,
    beta: f64,
    c: &mut [f64],
    ldc: usize,
) {
    for j in 0..n {
        for i in 0..m {
            let mut acc = 0.0;
            for p in 0..k {
                let av = if transa { a[p + i * lda] } else { a[i + p * lda] };
                let bv = if transb { b[j + p * ldb] } else { b[p + j * ldb] };
                acc += av * bv;
            }
            let old = if beta != 0.0 { c[i + j * ldc] } else { 0.0 };
            c[i + j * ldc] = alpha * acc + beta * old;
        }
    }
}

/// A random symmetric positive definite n×n matrix: B·Bᵀ + n·I.
pub fn spd(n: usize) -> Vec<f64> {
    let b = rand_vec(n * n);
    let mut a = vec![0.0; n * n];
    gemm_ref(false, true, n, n, n, 1.0, &b, n, &b, n, 0.0, &mut a, n);
    for i in 0..n {
        a[i * n + i] += n as f64;
    }
    a
}

/// Relative error ‖got − want‖₂ / ‖want‖₂.
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w).powi(2)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Declares each behaviour twice: on the CPU device, and on GPU 0.
#[allow(unused_macros)]
macro_rules! on_both {
    ($($name:ident => $body:ident;)*) => {
        mod cpu {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$body(super::DeviceConfig::cpu()).await;
                }
            )*
        }
        mod gpu {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                #[ignore = "needs a CUDA GPU"]
                async fn $name() {
                    super::$body(super::DeviceConfig::cuda(0)).await;
                }
            )*
        }
    };
}

/// An m×n×k SGEMM on `dev` from fresh random data, checked against float64: the device
/// serves, correctly.
pub async fn check_sgemm(dev: &atomr_accel_cuda::Device, m: usize, n: usize, k: usize) {
    let (a, b) = (rand_vec(m * k), rand_vec(k * n));
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let ga = dev.upload(f32s(&a)).await.unwrap();
    let gb = dev.upload(f32s(&b)).await.unwrap();
    let gc = dev.alloc::<f32>(m * n).await.unwrap();
    dev.gemm(atomr_accel_cuda::Gemm::<f32>::new(m, n, k), &ga, &gb, &gc)
        .await
        .unwrap();
    let got: Vec<f64> = dev.download(&gc).await.unwrap().iter().map(|&v| v as f64).collect();
    let mut want = vec![0.0; m * n];
    gemm_ref(false, false, m, n, k, 1.0, &a, m, &b, k, 0.0, &mut want, m);
    let e = rel_err(&got, &want);
    assert!(e < 1e-5, "sgemm {m}x{n}x{k}: rel err {e}");
}
