//! All-reduce (sum, f32) over a world of every GPU of the machine through `Rank::all_reduce`
//! vs raw NCCL through cudarc in the same run (one communicator per GPU from one thread,
//! grouped — nccl-tests' `-g N` pattern), from 4 MiB to 256 MiB per rank. Reports the
//! algorithm bandwidth (bytes per rank / time) and, with two GPUs or more, nccl-tests'
//! bus bandwidth (× 2(n−1)/n). On one GPU the world has one rank (NCCL copies send to
//! recv). Target (2+ GPUs): ≥ 0.95× raw. Then GEMM throughput scaling: 64 SGEMMs of
//! 4096³ spread over the first 1, 2, … GPUs (each GPU's share from its own task), in
//! TFLOP/s and as a multiple of one GPU. Skips with a message without a GPU or NCCL.

use std::time::Instant;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::multi_device::{ReduceOp, World};
use atomr_accel_cuda::p2p::Topology;
use atomr_accel_cuda::{Device, DeviceConfig, Gemm};
use cudarc::driver::CudaContext;
use cudarc::nccl::{group_end, group_start, Comm};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::median;

const ITERS: usize = 20;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let n = Topology::probe().map(|t| t.gpus()).unwrap_or(0);
        // SAFETY: only opens the library.
        if n == 0 || !unsafe { cudarc::nccl::sys::is_culib_present() } {
            println!("collectives bench: needs a GPU and NCCL ({n} GPUs); nothing measured");
            return;
        }
        let mut systems = vec![];
        let mut devices = vec![];
        for i in 0..n {
            let sys = ActorSystem::new(&format!("collectives-{i}"));
            devices.push(Device::open(&sys, DeviceConfig::cuda(i)).await.unwrap());
            systems.push(sys);
        }
        let world = World::new(&devices).await.unwrap();
        let streams: Vec<_> = (0..n)
            .map(|i| CudaContext::new(i).unwrap().new_stream().unwrap())
            .collect();
        let comms = Comm::from_devices(streams.clone()).unwrap();
        println!("collectives bench: {n} GPU(s), all_reduce sum f32, median of {ITERS}");

        for mib in [4usize, 64, 256] {
            let len = (mib << 20) / 4;
            let raw_send: Vec<_> = streams.iter().map(|s| s.clone_htod(&vec![1.0f32; len]).unwrap()).collect();
            let mut raw_recv: Vec<_> = streams.iter().map(|s| s.alloc_zeros::<f32>(len).unwrap()).collect();
            let mut sends = vec![];
            let mut recvs = vec![];
            for d in &devices {
                sends.push(d.upload(vec![1.0f32; len]).await.unwrap());
                recvs.push(d.alloc::<f32>(len).await.unwrap());
            }
            let (mut raw, mut ours) = (vec![], vec![]);
            for i in 0..ITERS + 3 {
                let t = Instant::now();
                group_start().unwrap();
                for ((c, s), r) in comms.iter().zip(&raw_send).zip(raw_recv.iter_mut()) {
                    c.all_reduce(s, r, &cudarc::nccl::ReduceOp::Sum).unwrap();
                }
                group_end().unwrap();
                for s in &streams {
                    s.synchronize().unwrap();
                }
                let r = t.elapsed().as_secs_f64();

                let t = Instant::now();
                let calls = world.ranks().into_iter().map(|rank| {
                    let (s, v) = (sends[rank.index()].clone(), recvs[rank.index()].clone());
                    async move { rank.all_reduce(&s, &v, ReduceOp::Sum).await }
                });
                for r in futures::future::join_all(calls).await {
                    r.unwrap();
                }
                let a = t.elapsed().as_secs_f64();
                if i >= 3 {
                    raw.push(r);
                    ours.push(a);
                }
            }
            let got = devices[0].download(&recvs[0]).await.unwrap();
            assert!(got.iter().all(|&v| v == n as f32), "the sum of {n} ones");
            let (raw, ours) = (median(&mut raw), median(&mut ours));
            let bytes = (len * 4) as f64;
            let bus = if n > 1 { 2.0 * (n - 1) as f64 / n as f64 } else { 1.0 };
            println!(
                "RESULT | all_reduce {mib} MiB × {n} | world {:.1} GB/s ({:.1} µs), raw NCCL {:.1} GB/s ({:.1} µs), {} bandwidth, ratio {:.3}",
                bytes / ours / 1e9 * bus,
                ours * 1e6,
                bytes / raw / 1e9 * bus,
                raw * 1e6,
                if n > 1 { "bus" } else { "algorithm" },
                raw / ours
            );
        }
        gemm_scaling(&devices).await;
        drop(world);
        for s in systems {
            s.shutdown().await;
        }
    });
}

/// SGEMM 4096³ throughput over the first k GPUs, k = 1..=n, each GPU running its share of
/// a batch of 64 back to back from a task of its own.
async fn gemm_scaling(devices: &[Device]) {
    const N: usize = 4096;
    const BATCH: usize = 64;
    let mut one = 0.0;
    for k in 1..=devices.len() {
        let mut tflops = vec![];
        for round in 0..4 {
            let tasks: Vec<_> = devices[..k]
                .iter()
                .enumerate()
                .map(|(g, d)| {
                    let d = d.clone();
                    tokio::spawn(async move {
                        let a = d.upload(vec![1.0f32; N * N]).await.unwrap();
                        let c = d.alloc::<f32>(N * N).await.unwrap();
                        let t = Instant::now();
                        for _ in (g..BATCH).step_by(k) {
                            d.gemm(Gemm::new(N, N, N), &a, &a, &c).await.unwrap();
                        }
                        t.elapsed()
                    })
                })
                .collect();
            let mut slowest = std::time::Duration::ZERO;
            for task in tasks {
                slowest = slowest.max(task.await.unwrap());
            }
            if round > 0 {
                tflops.push(BATCH as f64 * 2.0 * (N as f64).powi(3) / slowest.as_secs_f64() / 1e12);
            }
        }
        let t = median(&mut tflops);
        if k == 1 {
            one = t;
        }
        println!(
            "RESULT | sgemm 4096 x {BATCH} over {k} GPU(s) | {t:.1} TFLOP/s, {:.2}x one GPU",
            t / one
        );
    }
}
