//! SGEMM through the device's `BlasActor` vs raw cudarc cuBLAS, interleaved call by call
//! in one process so clock and thermal drift hit both alike. Shared by
//! `benches/sgemm.rs` and `examples/sgemm.rs`.

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::{Device, Gemm, GpuError};
use cudarc::cublas::{sys as cbsys, CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::CudaContext;

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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Calls per size: enough for a stable median in well under a second of GPU time.
pub fn iters_for(n: usize) -> usize {
    match n {
        0..=1024 => 300,
        1025..=4096 => 80,
        _ => 20,
    }
}

/// Measures `iters` SGEMMs of n³ on each path (after 3 warm-up calls each).
pub async fn compare_sgemm(
    dev: &Device,
    ctx: &Arc<CudaContext>,
    n: usize,
    iters: usize,
) -> Result<SgemmTimes, GpuError> {
    let stream = ctx.new_stream()?;
    let blas = CudaBlas::new(stream.clone())?;
    let ra = stream.alloc_zeros::<f32>(n * n)?;
    let rb = stream.alloc_zeros::<f32>(n * n)?;
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
        dev.alloc::<f32>(n * n).await?,
        dev.alloc::<f32>(n * n).await?,
        dev.alloc::<f32>(n * n).await?,
    );
    let g = Gemm::<f32>::new(n, n, n);
    let (mut raw, mut actor) = (vec![], vec![]);
    for i in 0..iters + 3 {
        let t = Instant::now();
        // SAFETY: all three buffers hold n*n elements, matching the config.
        unsafe { blas.gemm(cfg, &ra, &rb, &mut rc) }?;
        stream.synchronize()?;
        let t_raw = t.elapsed().as_secs_f64();
        let t = Instant::now();
        dev.gemm(g, &a, &b, &c).await?;
        let t_actor = t.elapsed().as_secs_f64();
        if i >= 3 {
            raw.push(t_raw);
            actor.push(t_actor);
        }
    }
    Ok(SgemmTimes {
        actor: median(&mut actor),
        raw: median(&mut raw),
    })
}
