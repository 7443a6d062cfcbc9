//! Tensor contractions (`Device::contract`) against raw cudarc cuBLAS in the same process
//! and PyTorch's `torch.einsum` on the same card (`benches/einsum_torch.py`, run in the
//! same device session): attention's two contractions over batch × heads (8 × 16,
//! sequence 1024, head size 64) in f32 and f16, a 4096² row-major matrix product, and
//! the scores of heads-interleaved `[batch, seq, heads, dim]` tensors, which need a
//! permutation (our gather kernels; PyTorch's copies). Each call awaited; raw: the one
//! strided-batched GEMM the contraction is, then a stream synchronize; blocks of 10 raw
//! and 10 of ours alternate (`support/alternate.rs`), median per call.

use std::sync::Arc;

use atomr_accel_cuda::library::tensor::Contraction;
use atomr_accel_cuda::prelude::TensorScalar;
use atomr_accel_cuda::{Device, DeviceConfig};
use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
use cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig, StridedBatchedConfig};
use cudarc::driver::{CudaStream, DeviceRepr, ValidAsZeroBits};
use half::f16;

#[path = "support/alternate.rs"]
mod alternate;
#[path = "support/gpu_bench.rs"]
mod gpu_bench;
#[path = "support/random.rs"]
mod random;

use gpu_bench::run_gpu;

/// The strided-batched GEMM a contraction is when nothing is permuted: (transa, transb,
/// m, n, k, lda, ldb, ldc, batch, stride a, b, c), A and B as cuBLAS sees them.
type Raw = (bool, bool, i32, i32, i32, i64, i64, i64, i32, i64, i64, i64);

struct Case {
    name: &'static str,
    op: Contraction,
    /// (first GEMM operand is B, the raw GEMM) where the contraction is one GEMM.
    raw: Option<(bool, Raw)>,
    flops: f64,
}

fn cases() -> Vec<Case> {
    let (b, h, s, d) = (8usize, 16usize, 1024usize, 64usize);
    let bh = (b * h) as i32;
    let attn_flops = 2.0 * (b * h * s * s * d) as f64;
    let (si, di) = (s as i32, d as i32);
    let n = 4096usize;
    vec![
        Case {
            name: "scores bhqd,bhkd->bhqk 8x16x1024x64",
            op: Contraction::new("bhqd,bhkd->bhqk", &[b, h, s, d], &[b, h, s, d]),
            raw: Some((
                true,
                (
                    true,
                    false,
                    si,
                    si,
                    di,
                    d as i64,
                    d as i64,
                    s as i64,
                    bh,
                    (s * d) as i64,
                    (s * d) as i64,
                    (s * s) as i64,
                ),
            )),
            flops: attn_flops,
        },
        Case {
            name: "values bhqk,bhkd->bhqd 8x16x1024x64",
            op: Contraction::new("bhqk,bhkd->bhqd", &[b, h, s, s], &[b, h, s, d]),
            raw: Some((
                true,
                (
                    false,
                    false,
                    di,
                    si,
                    si,
                    d as i64,
                    s as i64,
                    d as i64,
                    bh,
                    (s * d) as i64,
                    (s * s) as i64,
                    (s * d) as i64,
                ),
            )),
            flops: attn_flops,
        },
        Case {
            name: "matmul ij,jk->ik 4096",
            op: Contraction::new("ij,jk->ik", &[n, n], &[n, n]),
            raw: Some((
                true,
                (
                    false, false, n as i32, n as i32, n as i32, n as i64, n as i64, n as i64, 1, 0, 0, 0,
                ),
            )),
            flops: 2.0 * (n * n * n) as f64,
        },
        Case {
            name: "interleaved scores bqhd,bkhd->bhqk 8x1024x16x64",
            op: Contraction::new("bqhd,bkhd->bhqk", &[b, s, h, d], &[b, s, h, d]),
            raw: None,
            flops: attn_flops,
        },
    ]
}

/// Raw cudarc: the GEMM on `stream`, then a synchronize, per call.
fn raw_call<T: DeviceRepr>(
    blas: &CudaBlas,
    stream: &Arc<CudaStream>,
    r: &Raw,
    a: &cudarc::driver::CudaSlice<T>,
    b: &cudarc::driver::CudaSlice<T>,
    c: &mut cudarc::driver::CudaSlice<T>,
    (alpha, beta): (T, T),
) where
    CudaBlas: cudarc::cublas::Gemm<T>,
{
    let op = |t: bool| if t { CUBLAS_OP_T } else { CUBLAS_OP_N };
    let cfg = StridedBatchedConfig {
        gemm: GemmConfig {
            transa: op(r.0),
            transb: op(r.1),
            m: r.2,
            n: r.3,
            k: r.4,
            alpha,
            lda: r.5 as i32,
            ldb: r.6 as i32,
            beta,
            ldc: r.7 as i32,
        },
        batch_size: r.8,
        stride_a: r.9,
        stride_b: r.10,
        stride_c: r.11,
    };
    // SAFETY: the buffers hold what the configuration reaches (the same sizes the
    // contraction checks), and they live until the synchronize below.
    unsafe { blas.gemm_strided_batched(cfg, a, b, c) }.unwrap();
    stream.synchronize().unwrap();
}

async fn measure<T: TensorScalar + DeviceRepr + ValidAsZeroBits>(
    dev: &Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    dtype: &str,
    of: fn(f32) -> T,
) where
    CudaBlas: cudarc::cublas::Gemm<T>,
{
    for case in cases() {
        if dtype == "f16" && case.name.starts_with("matmul") {
            continue;
        }
        let shape = case.op.output_shape().unwrap();
        let (na, nb, nc) = (
            case.op.a.elements(),
            case.op.b.elements(),
            shape.iter().product::<usize>(),
        );
        let host = |n: usize, seed: u64| random::random_f32(n, seed).into_iter().map(of).collect::<Vec<T>>();
        let (ha, hb) = (host(na, 1), host(nb, 2));
        let a = dev.upload(ha.clone()).await.unwrap();
        let b = dev.upload(hb.clone()).await.unwrap();
        let c = dev.alloc::<T>(nc).await.unwrap();
        let reps = 20;
        let ours_call = || async { dev.contract(case.op.clone(), &a, &b, &c).await.unwrap() };
        let tflops = |s: f64| case.flops / s / 1e12;
        match &case.raw {
            Some((swapped, r)) => {
                let (ra, rb) = (stream.clone_htod(&ha).unwrap(), stream.clone_htod(&hb).unwrap());
                let mut rc = stream.alloc_zeros::<T>(nc).unwrap();
                let (first, second) = if *swapped { (&rb, &ra) } else { (&ra, &rb) };
                let alpha = of(case.op.alpha as f32);
                let (raw, ours) = alternate::measure(
                    alternate::Order::Blocks,
                    3,
                    7 * reps,
                    || raw_call(blas, stream, r, first, second, &mut rc, (alpha, of(0.0))),
                    ours_call,
                )
                .await;
                println!(
                    "RESULT | einsum.{} {dtype} | ours {:.1} µs ({:.1} TFLOP/s), raw cudarc {:.1} µs ({:.1} TFLOP/s), ratio {:.3}",
                    case.name,
                    ours * 1e6,
                    tflops(ours),
                    raw * 1e6,
                    tflops(raw),
                    raw / ours
                );
            }
            None => {
                let ours = gpu_bench::per_call(reps, ours_call).await;
                println!(
                    "RESULT | einsum.{} {dtype} | ours {:.1} µs ({:.1} TFLOP/s)",
                    case.name,
                    ours * 1e6,
                    tflops(ours)
                )
            }
        }
    }
}

fn main() {
    run_gpu("einsum", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        let blas = CudaBlas::new(stream.clone()).unwrap();
        measure::<f32>(&dev, &stream, &blas, "f32", |x| x).await;
        measure::<f16>(&dev, &stream, &blas, "f16", f16::from_f32).await;
    });
}
