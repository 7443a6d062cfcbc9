//! C2C FFTs (f32, forward, out of place) through the device's `FftActor` vs raw cudarc
//! cuFFT (plan made once, exec + sync) on the same random data in the same process, in
//! both orders of `support/alternate.rs`, and with 16 transforms in flight. Shapes: a
//! large 1-D batch, a small 1-D batch and a 2-D transform. The device replays repeated
//! transforms as CUDA graphs (`DeviceConfig::fft_graphs`; `BENCH_FFT_GRAPHS=0` turns it
//! off), so each shape also prints raw cudarc with the transform captured into a graph
//! by hand — what a raw user would have to write to get the same.

use std::time::Instant;

use atomr_accel_cuda::dtype::{c32, Complex};
use atomr_accel_cuda::{DeviceConfig, FftShape};
use cudarc::cufft::{sys, CudaFft, FftDirection};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{DevicePtr, DevicePtrMut};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/random.rs"]
mod random;

#[path = "support/gpu_time.rs"]
mod gpu_time;

use alternate::{measure, Order};
use gpu_bench::{median, run_gpu};
use gpu_time::GpuTimes;
use random::random_f32;

/// Transforms sent at once in the pipelined measurement.
const IN_FLIGHT: usize = 16;

/// (dims, batch) of each measured transform.
const SHAPES: [(&[usize], usize); 3] = [(&[1 << 20], 16), (&[1 << 16], 16), (&[2048, 2048], 1)];

fn main() {
    run_gpu("fft", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        for (dims, batch) in SHAPES {
            let points: usize = dims.iter().product::<usize>() * batch;
            let host = random_f32(2 * points, points as u64);
            let plan = match dims {
                [n] => CudaFft::plan_1d(*n as i32, sys::cufftType::CUFFT_C2C, batch as i32, stream.clone()),
                [x, y] => CudaFft::plan_2d(*x as i32, *y as i32, sys::cufftType::CUFFT_C2C, stream.clone()),
                _ => unreachable!("1-D and 2-D shapes only"),
            }
            .unwrap();
            let raw_in: Vec<sys::float2> = host.chunks(2).map(|p| sys::float2 { x: p[0], y: p[1] }).collect();
            let mut rin = stream.clone_htod(&raw_in).unwrap();
            let mut rout = stream.alloc_zeros::<sys::float2>(points).unwrap();
            let ours_in: Vec<c32> = host.chunks(2).map(|p| Complex { re: p[0], im: p[1] }).collect();
            let a = dev.upload(ours_in).await.unwrap();
            let b = dev.alloc::<c32>(points).await.unwrap();
            let shape = FftShape::new(dims, batch);
            for order in Order::ALL {
                let (r, x) = measure(
                    order,
                    1,
                    30,
                    || {
                        plan.exec_c2c(&mut rin, &mut rout, FftDirection::Forward).unwrap();
                        stream.synchronize().unwrap();
                    },
                    || async { dev.fft_c2c(&a, &b, &shape, false).await.unwrap() },
                )
                .await;
                println!(
                    "RESULT | fft.c2c f32 {dims:?} x {batch} ({order:?}) | actor {:.3} ms, raw cudarc {:.3} ms, ratio {:.3}",
                    x * 1e3,
                    r * 1e3,
                    r / x
                );
            }
            // Raw cudarc replaying its own capture (the addresses are taken outside the
            // capture: cudarc's stream-order waits may not be captured).
            let graph = {
                let (pi, _ri) = rin.device_ptr(&stream);
                let (po, _ro) = rout.device_ptr_mut(&stream);
                stream
                    .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .unwrap();
                // SAFETY: both buffers hold the plan's `points` complex values.
                unsafe { cudarc::cufft::result::exec_c2c(plan.handle(), pi as *mut _, po as *mut _, -1) }.unwrap();
                let g = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap().unwrap();
                g.upload().unwrap();
                g
            };
            let (r, x) = measure(
                Order::PerCall,
                1,
                30,
                || {
                    graph.launch().unwrap();
                    stream.synchronize().unwrap();
                },
                || async { dev.fft_c2c(&a, &b, &shape, false).await.unwrap() },
            )
            .await;
            println!(
                "RESULT | fft.c2c f32 {dims:?} x {batch} vs a raw graph | actor {:.3} ms, raw cudarc graph replay {:.3} ms, ratio {:.3}",
                x * 1e3,
                r * 1e3,
                r / x
            );
            drop(graph);
            // GPU time of one transform on each path, median of 5.
            let mut times = GpuTimes::new(&ctx);
            for _ in 0..5 {
                times.raw(&stream, || {
                    plan.exec_c2c(&mut rin, &mut rout, FftDirection::Forward).unwrap()
                });
                times.ours("fft", dev.fft_c2c(&a, &b, &shape, false)).await.unwrap();
            }
            times.print(&format!("fft.c2c f32 {dims:?} x {batch}"));
            // Sixteen transforms in flight: raw enqueues 16 and synchronizes once; ours
            // sends 16 asks at once and awaits every reply.
            let (mut raw, mut actor) = (vec![], vec![]);
            for round in 0..11 {
                let t = Instant::now();
                for _ in 0..IN_FLIGHT {
                    plan.exec_c2c(&mut rin, &mut rout, FftDirection::Forward).unwrap();
                }
                stream.synchronize().unwrap();
                let r = t.elapsed().as_secs_f64() / IN_FLIGHT as f64;
                let t = Instant::now();
                let asks = (0..IN_FLIGHT).map(|_| dev.fft_c2c(&a, &b, &shape, false));
                for done in futures::future::join_all(asks).await {
                    done.unwrap();
                }
                let x = t.elapsed().as_secs_f64() / IN_FLIGHT as f64;
                if round > 0 {
                    raw.push(r);
                    actor.push(x);
                }
            }
            let (r, x) = (median(&mut raw), median(&mut actor));
            println!(
                "RESULT | fft.c2c f32 {dims:?} x {batch} ({IN_FLIGHT} in flight) | actor {:.3} ms, raw cudarc {:.3} ms per transform, ratio {:.3}",
                x * 1e3,
                r * 1e3,
                r / x
            );
        }
    });
}
