//! A batched 1-D C2C FFT (f32, 2^20 points x 16) through the device's `FftActor` vs raw
//! cudarc cuFFT (plan once, exec + sync) in the same process, interleaved.

use std::time::Instant;

use atomr_accel_cuda::dtype::c32;
use atomr_accel_cuda::{DeviceConfig, FftShape};
use cudarc::cufft::{sys, CudaFft, FftDirection};

const N: usize = 1 << 20;
const BATCH: usize = 16;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::{median, run_gpu};

fn main() {
    run_gpu("fft", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        let plan = CudaFft::plan_1d(N as i32, sys::cufftType::CUFFT_C2C, BATCH as i32, stream.clone()).unwrap();
        let mut rin = stream.alloc_zeros::<sys::float2>(N * BATCH).unwrap();
        let mut rout = stream.alloc_zeros::<sys::float2>(N * BATCH).unwrap();
        let a = dev.alloc::<c32>(N * BATCH).await.unwrap();
        let b = dev.alloc::<c32>(N * BATCH).await.unwrap();
        let shape = FftShape::new(&[N], BATCH);
        let (mut raw, mut actor) = (vec![], vec![]);
        for i in 0..33 {
            let t = Instant::now();
            plan.exec_c2c(&mut rin, &mut rout, FftDirection::Forward).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            dev.fft_c2c(&a, &b, &shape, false).await.unwrap();
            let x = t.elapsed().as_secs_f64();
            if i >= 3 {
                raw.push(r);
                actor.push(x);
            }
        }
        let (r, x) = (median(&mut raw), median(&mut actor));
        println!(
            "RESULT | fft.c2c f32 2^20 x {BATCH} | actor {:.3} ms, raw cudarc {:.3} ms, ratio {:.3}",
            x * 1e3,
            r * 1e3,
            r / x
        );
    });
}
