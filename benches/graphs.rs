//! Graph replay: 1000 empty `#[kernel]` launches captured into a graph through the
//! device's `GraphActor` and replayed in batches, vs a raw cudarc CUDA graph of 1000
//! empty kernels replayed the same way (DESIGN.md's reference: 1.47M kernels/s), vs the
//! same launches one `launch` ask at a time through the `KernelActor`. Same process,
//! interleaved rounds, medians.

use std::time::Instant;

use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{LaunchConfig as RawConfig, PushKernelArg};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::{median, run_gpu};

/// Does nothing: the launch is what is measured.
#[kernel]
pub fn nothing(x: &mut [f32]) {
    let _i = global_index();
}

const PER_GRAPH: usize = 1000;
const REPLAYS: u32 = 200;

fn main() {
    run_gpu("graphs", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        let ptx = cudarc::nvrtc::compile_ptx("extern \"C\" __global__ void empty(float* x) {}").unwrap();
        let f = ctx.load_module(ptx).unwrap().load_function("empty").unwrap();
        let rx = stream.alloc_zeros::<f32>(1).unwrap();
        // The raw address, taken before the capture: cudarc's event tracking would wait on
        // work outside the capture, which CUDA refuses (capture isolation).
        let raw_x = {
            use cudarc::driver::DevicePtr;
            let (p, _recorded) = rx.device_ptr(&stream);
            p
        };
        stream.synchronize().unwrap();
        let rc = RawConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .unwrap();
        for _ in 0..PER_GRAPH {
            // SAFETY: `empty(float*)` takes one device pointer (`rx`, alive throughout).
            unsafe { stream.launch_builder(&f).arg(&raw_x).launch(rc) }.unwrap();
        }
        let raw_graph = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap().unwrap();
        raw_graph.upload().unwrap();

        let mut x = dev.alloc::<f32>(1).await.unwrap();
        let cfg = LaunchConfig {
            grid: (1, 1, 1),
            block: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut builder = GraphBuilder::new();
        for _ in 0..PER_GRAPH {
            builder = builder.kernel(nothing::call(cfg, &mut x));
        }
        let g = dev.capture_graph(builder).await.unwrap();
        dev.replay(&g, 5).await.unwrap();
        nothing::launch(&dev, cfg, &mut x).await.unwrap();

        let (mut raw, mut actor, mut single) = (vec![], vec![], vec![]);
        for round in 0..8 {
            let t = Instant::now();
            for _ in 0..REPLAYS {
                raw_graph.launch().unwrap();
            }
            stream.synchronize().unwrap();
            let r = (REPLAYS as usize * PER_GRAPH) as f64 / t.elapsed().as_secs_f64();
            let t = Instant::now();
            dev.replay(&g, REPLAYS).await.unwrap();
            let a = (REPLAYS as usize * PER_GRAPH) as f64 / t.elapsed().as_secs_f64();
            let t = Instant::now();
            for _ in 0..2000 {
                nothing::launch(&dev, cfg, &mut x).await.unwrap();
            }
            let s = 2000.0 / t.elapsed().as_secs_f64();
            if round >= 2 {
                raw.push(r);
                actor.push(a);
                single.push(s);
            }
        }
        let (r, a, s) = (median(&mut raw), median(&mut actor), median(&mut single));
        println!(
            "RESULT | graph replay, {PER_GRAPH} empty kernels x {REPLAYS} | actor {:.3} M kernels/s, raw cudarc graph {:.3} M/s, ratio {:.3}",
            a / 1e6,
            r / 1e6,
            a / r
        );
        println!(
            "RESULT | one launch ask per kernel (KernelActor) | {:.1} k kernels/s, {:.4} of the actor graph rate",
            s / 1e3,
            s / a
        );
    });
}
