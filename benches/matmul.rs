//! cuBLASLt matmuls through the device (`Device::matmul`: ask → cuBLASLt → completion →
//! reply) vs raw cuBLASLt through cudarc (descriptors and the heuristic's algorithm made
//! once, then `cublasLtMatmul` + stream synchronize), in one process, calls alternated
//! (`support/alternate.rs`), on the same random data — for f32 (exact), TF32, bf16, f16,
//! FP8 E4M3 (TN, into bf16) and bf16 with a fused bias + GELU. Prints `RESULT |` lines
//! with TFLOP/s of each path and their ratio. `benches/matmul_torch.py` measures
//! `torch.matmul` on the same shapes. Sizes: BENCH_SIZES (default "4096"); MATMUL_ONLY
//! picks cases (comma-separated names), MATMUL_RAW_WAIT how the raw side waits (`sync`,
//! `tight`, `paced`: a probe of the completion's cost).
//! Skips with a message without a GPU.

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::dtype::f8e4m3;
use atomr_accel_cuda::prelude::*;
use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr};

#[path = "support/alternate.rs"]
mod alternate;
#[path = "support/gpu_bench.rs"]
mod gpu_bench;
#[path = "support/random.rs"]
mod random;

use alternate::{Order, Samples, Side};

/// An element type of the bench and its cuBLASLt name.
trait LtElem: DType + DeviceRepr + cudarc::driver::ValidAsZeroBits {
    const CUDA: sys::cudaDataType;
}
impl LtElem for f32 {
    const CUDA: sys::cudaDataType = sys::cudaDataType_t::CUDA_R_32F;
}
impl LtElem for f16 {
    const CUDA: sys::cudaDataType = sys::cudaDataType_t::CUDA_R_16F;
}
impl LtElem for bf16 {
    const CUDA: sys::cudaDataType = sys::cudaDataType_t::CUDA_R_16BF;
}
impl LtElem for f8e4m3 {
    const CUDA: sys::cudaDataType = sys::cudaDataType_t::CUDA_R_8F_E4M3;
}

/// One configuration: n³, the transposes, TF32, a bias + GELU epilogue.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    n: usize,
    transa: bool,
    tf32: bool,
    bias_gelu: bool,
}

/// Raw cuBLASLt: one handle, workspace, descriptors and algorithm, made once.
struct Raw {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    /// The workspace's address, taken once (used only on the bench's stream).
    workspace_address: u64,
    /// How a call waits (`MATMUL_RAW_WAIT`, read once: not inside the timed call).
    wait: RawWait,
}

fn check(r: Result<(), lt::CublasError>) {
    r.expect("cuBLASLt call");
}

impl Raw {
    fn new<I: LtElem, O: LtElem>(stream: &Arc<CudaStream>, c: Case, bias: u64) -> Raw {
        let n = c.n as u64;
        let handle = lt::create_handle().unwrap();
        let compute = if c.tf32 {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let desc = lt::create_matmul_desc(compute, sys::cudaDataType_t::CUDA_R_32F).unwrap();
        let set = |attr, v: *const c_void, size| {
            // SAFETY: `desc` is alive; each value is passed with its exact size.
            check(unsafe { lt::set_matmul_desc_attribute(desc, attr, v, size) })
        };
        use sys::cublasLtMatmulDescAttributes_t as A;
        let transa = c.transa as i32;
        set(A::CUBLASLT_MATMUL_DESC_TRANSA, &transa as *const i32 as _, 4);
        if c.bias_gelu {
            let e = sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS;
            set(
                A::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &e as *const _ as _,
                size_of::<sys::cublasLtEpilogue_t>(),
            );
            set(A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias as *const u64 as _, 8);
            let t = O::CUDA;
            set(
                A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                &t as *const _ as _,
                size_of::<sys::cudaDataType>(),
            );
        }
        let layouts = [I::CUDA, I::CUDA, O::CUDA].map(|t| lt::create_matrix_layout(t, n, n, n as i64).unwrap());
        let workspace = stream.alloc_zeros::<u8>(32 << 20).unwrap();
        let pref = lt::create_matmul_pref().unwrap();
        let bytes = workspace.len() as u64;
        // SAFETY: `pref` is alive; a uint64 by address and size.
        check(unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &bytes as *const u64 as _,
                8,
            )
        });
        // SAFETY: every descriptor is alive; C's layout is D's.
        let h = unsafe {
            lt::get_matmul_algo_heuristic(handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref)
        }
        .unwrap();
        // SAFETY: made above, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        let (workspace_address, guard) = workspace.device_ptr(stream);
        drop(guard);
        Raw {
            handle,
            desc,
            layouts,
            algo: h.algo,
            workspace,
            workspace_address,
            wait: raw_wait(),
        }
    }

    /// One matmul + synchronize: seconds.
    fn call(&self, stream: &Arc<CudaStream>, a: u64, b: u64, c: u64) -> f64 {
        let w = self.workspace_address;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let t = Instant::now();
        // SAFETY: a, b, c are n×n buffers of the layouts' types on this context; the
        // descriptors and algorithm were made for them; the workspace is ours.
        check(unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as _,
                &beta as *const f32 as _,
                a as _,
                self.layouts[0],
                b as _,
                self.layouts[1],
                c as _,
                self.layouts[2],
                c as _,
                self.layouts[2],
                &self.algo,
                w as _,
                self.workspace.len(),
                stream.cu_stream() as _,
            )
        });
        match self.wait {
            RawWait::Sync => stream.synchronize().unwrap(),
            how => {
                // A probe of the completion's cost: the raw call awaited the way our
                // spin waits query (an event, back to back or paced as
                // `completion::query_pause` paces them: none for 50 µs, then a 64th of
                // the time waited, 1–20 µs).
                let done = stream.record_event(None).unwrap();
                let since = Instant::now();
                while !done.is_complete() {
                    let waited = since.elapsed();
                    if how == RawWait::Paced && waited >= std::time::Duration::from_micros(50) {
                        let pause = (waited / 64).clamp(
                            std::time::Duration::from_micros(1),
                            std::time::Duration::from_micros(20),
                        );
                        let until = Instant::now() + pause;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                }
            }
        }
        t.elapsed().as_secs_f64()
    }
}

/// How the raw side waits for its matmul (`MATMUL_RAW_WAIT`): `sync` (the default,
/// `cuStreamSynchronize`), `tight` (an event queried back to back) or `paced` (an event
/// queried as our spin waits query theirs) — a probe of what the wait itself costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawWait {
    Sync,
    Tight,
    Paced,
}

fn raw_wait() -> RawWait {
    match std::env::var("MATMUL_RAW_WAIT").as_deref() {
        Ok("tight") => RawWait::Tight,
        Ok("paced") => RawWait::Paced,
        _ => RawWait::Sync,
    }
}

/// Whether the case `name` runs (`MATMUL_ONLY`: a comma-separated list; all by default).
fn selected(name: &str) -> bool {
    std::env::var("MATMUL_ONLY").map_or(true, |only| only.split(',').any(|n| n == name))
}

fn address<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _guard) = s.device_ptr(stream);
    p
}

fn tflops(n: usize, secs: f64) -> f64 {
    2.0 * (n as f64).powi(3) / secs / 1e12
}

async fn run<I: LtElem, O: LtElem>(dev: &Device, ctx: &Arc<CudaContext>, c: Case)
where
    MatmulBuffer: From<GpuRef<I>> + From<GpuRef<O>>,
{
    if !selected(c.name) {
        return;
    }
    let n = c.n;
    let typed = |seed| -> Vec<I> {
        random::random_f32(n * n, seed)
            .iter()
            .map(|&v| I::from_f64(v as f64))
            .collect()
    };
    let (ha, hb) = (typed(1), typed(2));
    let hbias: Vec<O> = random::random_f32(n, 3)
        .iter()
        .map(|&v| O::from_f64(v as f64))
        .collect();
    let stream = ctx.new_stream().unwrap();
    let ra = stream.clone_htod(&ha).unwrap();
    let rb = stream.clone_htod(&hb).unwrap();
    let rbias = stream.clone_htod(&hbias).unwrap();
    let rc = stream.alloc_zeros::<O>(n * n).unwrap();
    // Addresses taken once: every use is on this one stream.
    let (pa, pb) = (address(&ra, &stream), address(&rb, &stream));
    let (pc, pbias) = (address(&rc, &stream), address(&rbias, &stream));
    stream.synchronize().unwrap();
    let raw = Raw::new::<I, O>(&stream, c, pbias);
    let (a, b) = (dev.upload(ha).await.unwrap(), dev.upload(hb).await.unwrap());
    let bias = dev.upload(hbias).await.unwrap();
    let out = dev.alloc::<O>(n * n).await.unwrap();
    let op =
        Matmul::new(n, n, n)
            .transposed(c.transa, false)
            .compute(if c.tf32 { Compute::Tf32 } else { Compute::F32 });
    let epilogue = || {
        if c.bias_gelu {
            Epilogue::bias(bias.clone()).then(Activation::Gelu)
        } else {
            Epilogue::none()
        }
    };
    for order in Order::ALL {
        let iters = if n <= 4096 { 60 } else { 20 };
        let mut samples = Samples::new(3);
        for side in [Side::Raw, Side::Ours]
            .repeat(3)
            .into_iter()
            .chain(order.schedule(iters))
        {
            let secs = match side {
                Side::Raw => raw.call(&stream, pa, pb, pc),
                Side::Ours => {
                    let t = Instant::now();
                    dev.matmul(op, epilogue(), a.clone(), b.clone(), out.clone())
                        .await
                        .unwrap();
                    t.elapsed().as_secs_f64()
                }
            };
            samples.record(side, secs);
        }
        let (r, o) = samples.medians();
        println!(
            "RESULT | matmul.{} {n} ({order:?}, median of {iters}, raw waits {:?}) | ours {:.1} TFLOP/s, raw cuBLASLt {:.1} TFLOP/s, ratio {:.3}",
            c.name,
            raw_wait(),
            tflops(n, o),
            tflops(n, r),
            r / o
        );
    }
    // Both paths computed the same thing.
    let ours = dev.download(&out).await.unwrap();
    let theirs = stream.clone_dtoh(&rc).unwrap();
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (x, y) in ours.iter().zip(&theirs) {
        num += (x.to_f64() - y.to_f64()).powi(2);
        den += y.to_f64().powi(2);
    }
    println!(
        "RESULT | matmul.{} {n} agreement | rel diff ours vs raw {:.2e}",
        c.name,
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    );
    // SAFETY: made in `Raw::new`, destroyed once, no work pending (synchronized).
    unsafe {
        for l in raw.layouts {
            let _ = lt::destroy_matrix_layout(l);
        }
        let _ = lt::destroy_matmul_desc(raw.desc);
        let _ = lt::destroy_handle(raw.handle);
    }
}

fn main() {
    gpu_bench::run_gpu("matmul", DeviceConfig::cuda(0), |dev, ctx, _stream| async move {
        let info = dev.ready().await.unwrap();
        println!("RESULT | info.device | {} {:?}", info.name, info.compute_capability);
        for n in gpu_bench::sizes("4096") {
            let case = |name, transa, tf32, bias_gelu| Case {
                name,
                n,
                transa,
                tf32,
                bias_gelu,
            };
            run::<f32, f32>(&dev, &ctx, case("f32", false, false, false)).await;
            run::<f32, f32>(&dev, &ctx, case("tf32", false, true, false)).await;
            run::<bf16, bf16>(&dev, &ctx, case("bf16", false, false, false)).await;
            run::<f16, f16>(&dev, &ctx, case("f16", false, false, false)).await;
            run::<f8e4m3, bf16>(&dev, &ctx, case("fp8_e4m3_to_bf16", true, false, false)).await;
            run::<bf16, bf16>(&dev, &ctx, case("bf16_bias_gelu", false, false, true)).await;
        }
    });
}
