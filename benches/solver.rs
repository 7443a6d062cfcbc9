//! Cholesky (potrf) and LU (getrf) of f32/f64 n×n matrices through the device's
//! `SolverActor` vs raw cudarc cuSOLVER calls (one handle, workspace allocated once,
//! factor + reading `info` back) in the same process, in both orders of
//! `support/alternate.rs`. Each factorization starts from the same pristine random SPD
//! matrix, restored (untimed) before every run. Each row also prints where our calls'
//! time went (`support/handler_clock.rs`) next to the raw call's enqueue, and on which
//! CPUs. Arguments: the orders to measure (default 16 1024 4096).

use std::time::Instant;

use atomr_accel_cuda::observability::gpu_interrupts;
use atomr_accel_cuda::prelude::*;
use cudarc::cusolver::DnHandle;
use cudarc::driver::CudaStream;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/gpu_time.rs"]
mod gpu_time;

#[path = "support/raw_solver.rs"]
mod raw_solver;

#[path = "support/handler_clock.rs"]
mod handler_clock;

use alternate::{Order, Samples, Side};
use gpu_bench::{median, run_gpu};
use gpu_time::GpuTimes;
use handler_clock::{Call, OursPhases};
use raw_solver::{spd, Raw};

async fn measure<T: Raw>(dev: &Device, stream: &std::sync::Arc<CudaStream>, n: usize) {
    let a: Vec<T> = spd(n).iter().map(|v| T::from_f64(*v)).collect();
    let h = DnHandle::new(stream.clone()).unwrap();
    let pristine_raw = stream.clone_htod(&a).unwrap();
    let mut ra = stream.clone_htod(&a).unwrap();
    let mut info = stream.alloc_zeros::<i32>(1).unwrap();
    let mut piv = stream.alloc_zeros::<i32>(n).unwrap();
    let mut w_chol = stream.alloc_zeros::<T>(T::potrf_lwork(&h, stream, n, &mut ra)).unwrap();
    let mut w_lu = stream.alloc_zeros::<T>(T::getrf_lwork(&h, stream, n, &mut ra)).unwrap();
    let pristine = dev.upload(a.clone()).await.unwrap();
    let da = dev.upload(a).await.unwrap();
    let dpiv = dev.alloc::<i32>(n).await.unwrap();
    for op in ["cholesky", "lu"] {
        for order in Order::ALL {
            // Warm-up: one call of each path, unmeasured.
            let mut samples = Samples::new(1);
            let mut phases = RowPhases::default();
            let switches = handler_clock::switches();
            let interrupts = gpu_interrupts();
            for side in [Side::Raw, Side::Ours].into_iter().chain(order.schedule(20)) {
                let secs = match side {
                    Side::Raw => {
                        stream.memcpy_dtod(&pristine_raw, &mut ra).unwrap();
                        stream.synchronize().unwrap();
                        let t = Instant::now();
                        if op == "cholesky" {
                            T::potrf(&h, stream, n, &mut ra, &mut w_chol, &mut info);
                        } else {
                            T::getrf(&h, stream, n, &mut ra, &mut w_lu, &mut piv, &mut info);
                        }
                        phases.raw_enqueue.push(t.elapsed().as_secs_f64() * 1e6);
                        // The equivalent of our reply: the factor done and `info` checked.
                        let code = stream.clone_dtoh(&info).unwrap()[0];
                        let secs = t.elapsed().as_secs_f64();
                        assert_eq!(code, 0);
                        secs
                    }
                    Side::Ours => {
                        dev.copy(&pristine, &da).await.unwrap();
                        let call = Call::start();
                        if op == "cholesky" {
                            dev.cholesky(&da, n).await.unwrap();
                        } else {
                            dev.lu_factor_into(&da, &dpiv, n).await.unwrap();
                        }
                        let p = call.end();
                        phases.ours.push(p);
                        p.total / 1e6
                    }
                };
                samples.record(side, secs);
            }
            let (r, x) = samples.medians();
            println!(
                "RESULT | solver.{op} {} n={n} ({order:?}) | actor {:.3} ms, raw cudarc {:.3} ms, ratio {:.3}",
                T::NAME,
                x * 1e3,
                r * 1e3,
                r / x
            );
            let now = handler_clock::switches();
            phases.switches = (now.0 - switches.0, now.1 - switches.1);
            phases.interrupts = gpu_interrupts().zip(interrupts).map(|(now, then)| now - then);
            if handler_clock::installed() {
                phases.print(&format!("solver.{op} {} n={n} ({order:?})", T::NAME));
            }
        }
        // Where the difference goes: GPU time of the routine on each path, median of 5.
        let mut times = GpuTimes::new(stream.context());
        for _ in 0..5 {
            stream.memcpy_dtod(&pristine_raw, &mut ra).unwrap();
            times.raw(stream, || {
                if op == "cholesky" {
                    T::potrf(&h, stream, n, &mut ra, &mut w_chol, &mut info);
                } else {
                    T::getrf(&h, stream, n, &mut ra, &mut w_lu, &mut piv, &mut info);
                }
            });
            dev.copy(&pristine, &da).await.unwrap();
            let call = async {
                if op == "cholesky" {
                    dev.cholesky(&da, n).await.unwrap();
                } else {
                    dev.lu_factor_into(&da, &dpiv, n).await.unwrap();
                }
            };
            times.ours("solver", call).await;
        }
        times.print(&format!("solver.{op} {} n={n}", T::NAME));
    }
}

/// Where one row's calls went, warm-up calls included until `print` drops them.
#[derive(Default)]
struct RowPhases {
    ours: Vec<OursPhases>,
    /// µs to enqueue each raw call.
    raw_enqueue: Vec<f64>,
    /// The caller thread's context switches over the row (voluntary, involuntary).
    switches: (i64, i64),
    /// GPU interrupts over the row's calls, both sides (None: unknown here).
    interrupts: Option<u64>,
}

impl RowPhases {
    /// Medians of our phases and of the raw enqueue, and the CPUs our calls ran on.
    fn print(self, what: &str) {
        let ours = &self.ours[1..];
        let m = |f: fn(&OursPhases) -> f64| median(&mut ours.iter().map(f).collect::<Vec<_>>());
        let (a, b, c, d) = (
            m(|p| p.to_handler),
            m(|p| p.handler),
            m(|p| p.to_reply),
            m(|p| p.to_caller),
        );
        let e = median(&mut self.raw_enqueue[1..].to_vec());
        let mut cpus: Vec<[i64; 4]> = ours.iter().map(|p| p.cpus).collect();
        let moved = cpus.iter().filter(|c| c[0] != c[3]).count();
        let shared = cpus.iter().filter(|c| c[0] == c[1]).count();
        cpus.sort();
        cpus.dedup();
        println!(
            "PHASES | {what} | ours p50 us: to handler {a:.2}, handler {b:.2}, to reply {c:.2}, to caller {d:.2} | raw enqueue {e:.2} | GPU interrupts {:?} | caller switches {:?} | caller moved {moved}, handler on caller's cpu {shared} of {} | cpus [caller, handler, reply, caller after]: {cpus:?}",
            self.interrupts,
            self.switches,
            ours.len()
        );
    }
}

fn main() {
    // `BENCH_PHASES=0`: no subscriber (and no phases), to see that it changes nothing.
    if std::env::var("BENCH_PHASES").map_or(true, |v| v != "0") {
        handler_clock::install();
    }
    // `BENCH_CALLER_CPU=k`: the calling (main) thread runs on CPU k only (pinned once the
    // device's threads exist, so that they do not inherit it).
    let caller_cpu: Option<usize> = std::env::var("BENCH_CALLER_CPU").ok().and_then(|v| v.parse().ok());
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![16, 1024, 4096] } else { sizes };
    run_gpu("solver", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        if let Some(cpu) = caller_cpu {
            handler_clock::pin(cpu);
        }
        for n in sizes {
            measure::<f32>(&dev, &stream, n).await;
            measure::<f64>(&dev, &stream, n).await;
        }
    });
}
