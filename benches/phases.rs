//! Where an awaited call's time goes: the phases of one ask through the device, next to
//! the phases of the raw cudarc call, on the same GPU in the same run.
//!
//! Ours: the caller's clock before the call, the actor's `message` span entered (the
//! handler starts) and left (work enqueued, completion set up), its `completion` span
//! left for the last time (the reply sent) — read by `support/handler_clock.rs` — and
//! the caller's clock when the reply is in. Raw: the enqueue call, then `synchronize`.
//! Calls alternate raw / ours; medians of each phase (so they need not add up).
//! Measured: a 1×1×1 SGEMM (the tiny round trip), a C2C FFT of 2^16 × 16 points and an
//! f32 Cholesky of n = 16 (raw: `potrf`, then `info` copied to pinned memory; each side
//! restores its matrix, untimed, before every call). Each row also counts the GPU's
//! interrupts over its calls (`observability::gpu_interrupts`): neither side should raise
//! any.

use std::cell::RefCell;
use std::future::Future;

use atomr_accel_cuda::dtype::{c32, Complex};
use atomr_accel_cuda::observability::gpu_interrupts;
use atomr_accel_cuda::{DeviceConfig, FftShape, Gemm};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::cufft::{sys, CudaFft, FftDirection};
use cudarc::cusolver::DnHandle;
use cudarc::driver::{result, CudaStream, DevicePtr};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/tiny_gemm.rs"]
mod tiny_gemm;

#[path = "support/random.rs"]
mod random;

#[path = "support/raw_solver.rs"]
mod raw_solver;

#[path = "support/handler_clock.rs"]
mod handler_clock;

use gpu_bench::{median, run_gpu};
use handler_clock::{now_ns, Call, OursPhases};
use random::random_f32;
use raw_solver::{spd, Raw};

/// Calls of each kind measured (after 200 warm-up calls).
const ITERS: usize = 3000;

/// Per-call phases in µs.
#[derive(Default)]
struct Phases {
    to_handler: Vec<f64>,
    handler: Vec<f64>,
    to_reply: Vec<f64>,
    to_caller: Vec<f64>,
    total: Vec<f64>,
    raw_enqueue: Vec<f64>,
    raw_sync: Vec<f64>,
    raw_total: Vec<f64>,
}

impl Phases {
    fn ours(&mut self, p: OursPhases) {
        self.to_handler.push(p.to_handler);
        self.handler.push(p.handler);
        self.to_reply.push(p.to_reply);
        self.to_caller.push(p.to_caller);
        self.total.push(p.total);
    }

    fn raw(&mut self, t0: u64, t1: u64, t2: u64) {
        let us = |a: u64, b: u64| (b - a) as f64 / 1e3;
        self.raw_enqueue.push(us(t0, t1));
        self.raw_sync.push(us(t1, t2));
        self.raw_total.push(us(t0, t2));
    }

    /// Alternates `ITERS` (+ 200 warm-up) raw calls — `raw_enqueue`, then `synchronize`
    /// on `stream` — with awaited calls of ours, `ours()`, and prints the medians. Before
    /// each call, untimed: `prepare_raw()` (then `synchronize`), `prepare_ours()`.
    async fn measure<Fut: Future<Output = ()>, Prep: Future<Output = ()>>(
        what: &str,
        stream: &CudaStream,
        (mut prepare_raw, mut raw_enqueue): (impl FnMut(), impl FnMut()),
        (mut prepare_ours, mut ours): (impl FnMut() -> Prep, impl FnMut() -> Fut),
    ) {
        let mut p = Phases::default();
        let interrupts = gpu_interrupts();
        for i in 0..ITERS + 200 {
            prepare_raw();
            stream.synchronize().unwrap();
            let t0 = now_ns();
            raw_enqueue();
            let t1 = now_ns();
            stream.synchronize().unwrap();
            let t2 = now_ns();
            prepare_ours().await;
            let call = Call::start();
            ours().await;
            let phases = call.end();
            if i >= 200 {
                p.raw(t0, t1, t2);
                p.ours(phases);
            }
        }
        let interrupts = gpu_interrupts().zip(interrupts).map(|(now, then)| now - then);
        p.print(what, interrupts);
    }

    /// Prints the medians, and the GPU interrupts over the row's calls (both sides).
    fn print(mut self, what: &str, interrupts: Option<u64>) {
        let (a, b, c, d, t) = (
            median(&mut self.to_handler),
            median(&mut self.handler),
            median(&mut self.to_reply),
            median(&mut self.to_caller),
            median(&mut self.total),
        );
        let (e, s, r) = (
            median(&mut self.raw_enqueue),
            median(&mut self.raw_sync),
            median(&mut self.raw_total),
        );
        println!(
            "RESULT | phases {what} | ours p50 {t:.2} us: to handler {a:.2}, handler {b:.2}, to reply sent {c:.2}, to caller {d:.2} | raw p50 {r:.2} us = enqueue {e:.2} + sync {s:.2} | ours - raw {:.2} us | GPU interrupts {}",
            t - r,
            interrupts.map_or("unknown".to_string(), |n| n.to_string())
        );
    }
}

fn main() {
    handler_clock::install();
    run_gpu("phases", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        // 1×1×1 SGEMM.
        {
            let a = dev.upload(vec![1.5f32]).await.unwrap();
            let c = dev.alloc::<f32>(1).await.unwrap();
            let g = Gemm::<f32>::new(1, 1, 1);
            let blas = CudaBlas::new(stream.clone()).unwrap();
            let ra = stream.clone_htod(&[1.5f32]).unwrap();
            let mut rc = stream.alloc_zeros::<f32>(1).unwrap();
            let cfg = tiny_gemm::config();
            Phases::measure(
                "sgemm 1x1x1",
                &stream,
                // SAFETY: 1-element buffers for a 1×1×1 GEMM.
                (|| (), || unsafe { blas.gemm(cfg, &ra, &ra, &mut rc) }.unwrap()),
                (|| async {}, || async { dev.gemm(g, &a, &a, &c).await.unwrap() }),
            )
            .await;
        }
        // C2C FFT, 2^16 points x 16.
        {
            let (n, batch) = (1usize << 16, 16usize);
            let host = random_f32(2 * n * batch, 7);
            let plan = CudaFft::plan_1d(n as i32, sys::cufftType::CUFFT_C2C, batch as i32, stream.clone()).unwrap();
            let raw_in: Vec<sys::float2> = host.chunks(2).map(|p| sys::float2 { x: p[0], y: p[1] }).collect();
            let mut rin = stream.clone_htod(&raw_in).unwrap();
            let mut rout = stream.alloc_zeros::<sys::float2>(n * batch).unwrap();
            let ours_in: Vec<c32> = host.chunks(2).map(|p| Complex { re: p[0], im: p[1] }).collect();
            let a = dev.upload(ours_in).await.unwrap();
            let b = dev.alloc::<c32>(n * batch).await.unwrap();
            let shape = FftShape::new(&[n], batch);
            Phases::measure(
                "fft c2c f32 2^16 x 16",
                &stream,
                (
                    || (),
                    || plan.exec_c2c(&mut rin, &mut rout, FftDirection::Forward).unwrap(),
                ),
                (
                    || async {},
                    || async { dev.fft_c2c(&a, &b, &shape, false).await.unwrap() },
                ),
            )
            .await;
        }
        // Cholesky, f32, n = 16.
        {
            let n = 16;
            let host: Vec<f32> = spd(n).iter().map(|v| *v as f32).collect();
            let h = DnHandle::new(stream.clone()).unwrap();
            let pristine_raw = stream.clone_htod(&host).unwrap();
            let ra = RefCell::new(stream.clone_htod(&host).unwrap());
            let mut info = stream.alloc_zeros::<i32>(1).unwrap();
            // Page-locked memory straight from the driver: cudarc's `alloc_pinned` would
            // record a BLOCKING_SYNC event with each copy, and the GPU interrupt that
            // raises is not part of the baseline (nor of ours, see `sys::pinned`).
            ctx.bind_to_thread().unwrap();
            // SAFETY: 4 bytes of page-locked memory, freed below after the last copy.
            let info_host = unsafe { result::malloc_host(4, 0) }.unwrap() as *mut i32;
            let mut work = stream
                .alloc_zeros::<f32>(f32::potrf_lwork(&h, &stream, n, &mut ra.borrow_mut()))
                .unwrap();
            let pristine = dev.upload(host.clone()).await.unwrap();
            let a = dev.upload(host).await.unwrap();
            Phases::measure(
                "cholesky f32 n=16",
                &stream,
                (
                    || stream.memcpy_dtod(&pristine_raw, &mut *ra.borrow_mut()).unwrap(),
                    || {
                        f32::potrf(&h, &stream, n, &mut ra.borrow_mut(), &mut work, &mut info);
                        let (from, _read) = info.device_ptr(&stream);
                        // SAFETY: one i32 of page-locked memory, alive until after the
                        // last synchronize; nothing reads it.
                        let to = unsafe { std::slice::from_raw_parts_mut(info_host, 1) };
                        // SAFETY: `from` is `info`'s device address on this stream.
                        unsafe { result::memcpy_dtoh_async(to, from, stream.cu_stream()) }.unwrap();
                    },
                ),
                (
                    || async { dev.copy(&pristine, &a).await.unwrap() },
                    || async { dev.cholesky(&a, n).await.unwrap() },
                ),
            )
            .await;
            stream.synchronize().unwrap();
            // SAFETY: allocated above, no copy in flight (synchronized), freed once.
            unsafe { result::free_host(info_host as *mut std::ffi::c_void) }.unwrap();
        }
    });
}
