//! Data-parallel GEMMs over a world of devices: a batch of products `A_b·B_b` is sharded
//! over the ranks (each rank sums its shard's products on its own device with GEMMs,
//! `beta = 1`), then an all-reduce adds the partial sums, so every rank holds
//! `C = Σ_b A_b·B_b` — checked in float64 on the host, on every rank.
//!
//! The world is every GPU of the machine (at most `ranks`; its all-reduce runs on NCCL),
//! or `ranks` CPU devices where there is no GPU or no NCCL library.
//!
//! `cargo run --release --example data_parallel [ranks] [batch]`

use std::time::Instant;

use atomr_accel_cuda::multi_device::{ReduceOp, World};
use atomr_accel_cuda::prelude::*;

#[path = "support/random.rs"]
mod support_random;
use support_random::random;

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let ranks = args.next().unwrap_or(4).max(1);
    let batch = args.next().unwrap_or(16).max(1);
    let (m, n, k) = (96, 80, 64);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    // The batch, rounded to f32 (what the devices compute with).
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
    let a: Vec<Vec<f32>> = (0..batch)
        .map(|b| f32s(random(m * k, seed ^ (2 * b as u64 + 1))))
        .collect();
    let bs: Vec<Vec<f32>> = (0..batch)
        .map(|b| f32s(random(k * n, seed ^ (2 * b as u64 + 2))))
        .collect();

    let system = ActorSystem::new("data-parallel");
    let gpus = atomr_accel_cuda::p2p::Topology::probe()
        .map_or(0, |t| t.gpus())
        .min(ranks);
    let mut world = None;
    if gpus > 0 {
        let mut devices = vec![];
        for i in 0..gpus {
            devices.push(Device::open(&system, DeviceConfig::cuda(i)).await?);
        }
        match World::new(&devices).await {
            Ok(w) => world = Some(w),
            Err(GpuError::Unsupported(why)) => println!("{why}: on CPU devices instead"),
            Err(e) => return Err(e),
        }
    }
    let world = match world {
        Some(w) => w,
        None => {
            let mut devices = vec![];
            for i in 0..ranks {
                let config = DeviceConfig {
                    device_id: i,
                    ..DeviceConfig::cpu()
                };
                devices.push(Device::open(&system, config).await?);
            }
            World::new(&devices).await?
        }
    };
    let (ranks, on) = (
        world.size(),
        if world.rank(0).on_nccl() {
            "GPUs (NCCL)"
        } else {
            "CPU devices"
        },
    );
    let started = Instant::now();
    let tasks: Vec<_> = world
        .ranks()
        .into_iter()
        .map(|rank| {
            let (a, bs) = (a.clone(), bs.clone());
            tokio::spawn(async move {
                let d = rank.device().clone();
                let partial = d.upload(vec![0.0f32; m * n]).await?;
                // This rank's shard: items r, r + ranks, r + 2·ranks, …
                for b in (rank.index()..batch).step_by(rank.size()) {
                    let ga = d.upload(a[b].clone()).await?;
                    let gb = d.upload(bs[b].clone()).await?;
                    d.gemm(Gemm::new(m, n, k).scaled(1.0, 1.0), &ga, &gb, &partial).await?;
                }
                let total = d.alloc::<f32>(m * n).await?;
                rank.all_reduce(&partial, &total, ReduceOp::Sum).await?;
                d.download(&total).await
            })
        })
        .collect();
    let mut results = vec![];
    for t in tasks {
        results.push(t.await.expect("a rank's task")?);
    }
    let elapsed = started.elapsed();

    // The float64 reference: C = Σ_b A_b·B_b (column-major).
    let mut want = vec![0.0f64; m * n];
    for b in 0..batch {
        for j in 0..n {
            for p in 0..k {
                let bv = bs[b][p + j * k] as f64;
                for i in 0..m {
                    want[i + j * m] += a[b][i + p * m] as f64 * bv;
                }
            }
        }
    }
    let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
    for (r, got) in results.iter().enumerate() {
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).powi(2))
            .sum::<f64>()
            .sqrt()
            / norm;
        assert!(err < 1e-5, "rank {r}: relative error {err:e}");
    }
    println!(
        "{batch} GEMMs {m}x{n}x{k} over {ranks} ranks on {on}, all-reduced: every rank holds the sum (checked in float64) in {:.1} ms",
        elapsed.as_secs_f64() * 1e3
    );
    system.shutdown().await;
    println!("ok");
    Ok(())
}
