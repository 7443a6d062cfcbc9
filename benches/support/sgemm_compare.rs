//! SGEMM through the device's `BlasActor` vs raw cudarc cuBLAS on the same random
//! matrices, in one process, in either order of `alternate.rs`. Shared by
//! `benches/sgemm.rs` and `examples/sgemm.rs` (each includes `alternate.rs` too).

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::{Device, Gemm, GpuError};
use cudarc::cublas::{sys as cbsys, CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::CudaContext;

use super::alternate::{Order, Samples, Side};
use super::random::random_f32;

/// Median seconds per call of each path.
pub struct SgemmTimes {
    /// Through the actor: ask → cuBLAS → completion → reply.
    pub actor: f64,
    /// Raw cudarc: cuBLAS + stream synchronize.
    pub raw: f64,
}

impl SgemmTimes {
    /// TFLOP/s of a median call, for an n³ GEMM.
    pub fn tflops(n: usize, secs: f64) -> f64 {
        2.0 * (n as f64).powi(3) / secs / 1e12
    }
}

/// Calls per size and path: enough for a stable median in well under a second of GPU
/// time (a multiple of `alternate::BLOCK`).
pub fn iters_for(n: usize) -> usize {
    match n {
        0..=1024 => 300,
        1025..=4096 => 80,
        _ => 20,
    }
}

/// Measures `iters` SGEMMs of n³ on each path in `order` (after warm-up calls on each).
pub async fn compare_sgemm(
    dev: &Device,
    ctx: &Arc<CudaContext>,
    n: usize,
    iters: usize,
    order: Order,
) -> Result<SgemmTimes, GpuError> {
    let (ha, hb) = (random_f32(n * n, 1), random_f32(n * n, 2));
    let stream = ctx.new_stream()?;
    let blas = CudaBlas::new(stream.clone())?;
    let ra = stream.clone_htod(&ha)?;
    let rb = stream.clone_htod(&hb)?;
    let mut rc = stream.alloc_zeros::<f32>(n * n)?;
    let cfg = GemmConfig {
        transa: cbsys::cublasOperation_t::CUBLAS_OP_N,
        transb: cbsys::cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: n as i32,
        k: n as i32,
        alpha: 1.0f32,
        lda: n as i32,
        ldb: n as i32,
        beta: 0.0,
        ldc: n as i32,
    };
    let (a, b, c) = (
        dev.upload(ha).await?,
        dev.upload(hb).await?,
        dev.alloc::<f32>(n * n).await?,
    );
    let g = Gemm::<f32>::new(n, n, n);
    let mut raw_call = || -> Result<f64, GpuError> {
        let t = Instant::now();
        // SAFETY: all three buffers hold n*n elements, matching the config.
        unsafe { blas.gemm(cfg, &ra, &rb, &mut rc) }?;
        stream.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    };
    let actor_call = || async {
        let t = Instant::now();
        dev.gemm(g, &a, &b, &c).await?;
        Ok::<f64, GpuError>(t.elapsed().as_secs_f64())
    };
    let warmup = [Side::Raw, Side::Ours].repeat(3);
    let mut samples = Samples::new(3);
    for side in warmup.into_iter().chain(order.schedule(iters)) {
        let secs = match side {
            Side::Raw => raw_call()?,
            Side::Ours => actor_call().await?,
        };
        samples.record(side, secs);
    }
    let (raw, actor) = samples.medians();
    Ok(SgemmTimes { actor, raw })
}
