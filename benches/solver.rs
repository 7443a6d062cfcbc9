//! Cholesky (potrf) and LU (getrf) of f32/f64 n×n matrices through the device's
//! `SolverActor` vs raw cudarc cuSOLVER calls (one handle, workspace allocated once,
//! factor + reading `info` back) in the same process, in both orders of
//! `support/alternate.rs`. Each factorization starts from the same pristine random SPD
//! matrix, restored (untimed) before every run.

use std::time::Instant;

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

use alternate::{Order, Samples, Side};

use gpu_bench::run_gpu;
use gpu_time::GpuTimes;
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
                        // The equivalent of our reply: the factor done and `info` checked.
                        let code = stream.clone_dtoh(&info).unwrap()[0];
                        let secs = t.elapsed().as_secs_f64();
                        assert_eq!(code, 0);
                        secs
                    }
                    Side::Ours => {
                        dev.copy(&pristine, &da).await.unwrap();
                        let t = Instant::now();
                        if op == "cholesky" {
                            dev.cholesky(&da, n).await.unwrap();
                        } else {
                            dev.lu_factor_into(&da, &dpiv, n).await.unwrap();
                        }
                        t.elapsed().as_secs_f64()
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
        }
        // Where the difference goes: GPU time of the routine on each path (ours also
        // spans the 4-byte `info` copy), median of 5.
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

fn main() {
    run_gpu("solver", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        for n in [16, 1024, 4096] {
            measure::<f32>(&dev, &stream, n).await;
            measure::<f64>(&dev, &stream, n).await;
        }
    });
}
