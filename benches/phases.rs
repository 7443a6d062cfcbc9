//! Where an awaited call's time goes: the phases of one ask through the device, next to
//! the phases of the raw cudarc call, on the same GPU in the same run.
//!
//! Ours: the caller's clock before the call, the actor's `message` span entered (the
//! handler starts) and left (work enqueued, completion set up), its `completion` span
//! left for the last time (the reply sent) — read by a tiny `tracing` subscriber — and
//! the caller's clock when the reply is in. Raw: the enqueue call, then `synchronize`.
//! Calls alternate raw / ours; medians of each phase (so they need not add up).
//! Measured: a 1×1×1 SGEMM (the tiny round trip), a C2C FFT of 2^16 × 16 points and an
//! f32 Cholesky of n = 16 (raw: `potrf`, then `info` copied to pinned memory; each side
//! restores its matrix, untimed, before every call).

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use atomr_accel_cuda::dtype::{c32, Complex};
use atomr_accel_cuda::{DeviceConfig, FftShape, Gemm};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::cufft::{sys, CudaFft, FftDirection};
use cudarc::cusolver::DnHandle;
use cudarc::driver::CudaStream;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/tiny_gemm.rs"]
mod tiny_gemm;

#[path = "support/random.rs"]
mod random;

#[path = "support/raw_solver.rs"]
mod raw_solver;

use gpu_bench::{median, run_gpu};
use random::random_f32;
use raw_solver::{spd, Raw};

/// Calls of each kind measured (after 200 warm-up calls).
const ITERS: usize = 3000;

/// Nanoseconds since the bench's start.
fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// When the call's handler started and ended (the first entry into and exit from its
/// `message` span: `tracing` enters a span again to drop its future), and when its reply
/// left (the last exit from its `completion` span). The caller zeroes them per call.
static HANDLER_IN: AtomicU64 = AtomicU64::new(0);
static HANDLER_OUT: AtomicU64 = AtomicU64::new(0);
static REPLIED: AtomicU64 = AtomicU64::new(0);

const MESSAGE: u64 = 1;
const COMPLETION: u64 = 2;

/// A subscriber that enables the `message` and `completion` spans only and records when
/// they are entered and left.
struct HandlerClock;

fn first(slot: &AtomicU64) {
    let _ = slot.compare_exchange(0, now_ns(), Ordering::AcqRel, Ordering::Acquire);
}

impl Subscriber for HandlerClock {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.is_span() && matches!(m.name(), "message" | "completion")
    }
    fn new_span(&self, a: &Attributes<'_>) -> Id {
        Id::from_u64(if a.metadata().name() == "message" {
            MESSAGE
        } else {
            COMPLETION
        })
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, id: &Id) {
        if id.into_u64() == MESSAGE {
            first(&HANDLER_IN);
        }
    }
    fn exit(&self, id: &Id) {
        if id.into_u64() == MESSAGE {
            first(&HANDLER_OUT);
        } else {
            REPLIED.store(now_ns(), Ordering::Release);
        }
    }
}

/// Zeroes the clocks before a call.
fn reset() {
    for slot in [&HANDLER_IN, &HANDLER_OUT, &REPLIED] {
        slot.store(0, Ordering::Release);
    }
}

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
    fn ours(&mut self, t0: u64, t3: u64) {
        let (e, l, r) = (
            HANDLER_IN.load(Ordering::Acquire),
            HANDLER_OUT.load(Ordering::Acquire),
            REPLIED.load(Ordering::Acquire),
        );
        let us = |a: u64, b: u64| (b as f64 - a as f64) / 1e3;
        self.to_handler.push(us(t0, e));
        self.handler.push(us(e, l));
        self.to_reply.push(us(l, r));
        self.to_caller.push(us(r, t3));
        self.total.push(us(t0, t3));
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
        for i in 0..ITERS + 200 {
            prepare_raw();
            stream.synchronize().unwrap();
            let t0 = now_ns();
            raw_enqueue();
            let t1 = now_ns();
            stream.synchronize().unwrap();
            let t2 = now_ns();
            prepare_ours().await;
            reset();
            let s0 = now_ns();
            ours().await;
            let s3 = now_ns();
            if i >= 200 {
                p.raw(t0, t1, t2);
                p.ours(s0, s3);
            }
        }
        p.print(what);
    }

    fn print(mut self, what: &str) {
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
            "RESULT | phases {what} | ours p50 {t:.2} us: to handler {a:.2}, handler {b:.2}, to reply sent {c:.2}, to caller {d:.2} | raw p50 {r:.2} us = enqueue {e:.2} + sync {s:.2} | ours - raw {:.2} us",
            t - r
        );
    }
}

fn main() {
    tracing::subscriber::set_global_default(HandlerClock).expect("no other subscriber");
    now_ns();
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
            // SAFETY: pinned memory only ever written by the copy below, never read.
            let mut info_host = unsafe { ctx.alloc_pinned::<i32>(1) }.unwrap();
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
                        stream.memcpy_dtoh(&info, &mut info_host).unwrap();
                    },
                ),
                (
                    || async { dev.copy(&pristine, &a).await.unwrap() },
                    || async { dev.cholesky(&a, n).await.unwrap() },
                ),
            )
            .await;
        }
    });
}
