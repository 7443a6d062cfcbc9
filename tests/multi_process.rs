//! Worlds spread over processes (`World::join` with a `Rendezvous`): this test binary is
//! rank 0 and starts itself again as the other ranks (`ATOMR_WORLD_CASE` in their
//! environment says which case they play, with `MASTER_ADDR`, `MASTER_PORT`, `RANK` and
//! `WORLD_SIZE` as `torchrun` sets them). Its own harness (`harness = false`): a rank
//! process starts at `main`. Prints libtest's summary line, so `.gpu/run.sh` counts it.
//!
//! CPU-device worlds in CI: every collective of three processes against float64
//! references on fresh random data (the same seed in every process), ranks that disagree,
//! a handshake refused, a rank process that dies mid-world. On the GPU (`--ignored`): a
//! world of one process per GPU on NCCL (one process on a machine with one GPU).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::multi_device::{CollectiveScalar, Rank, ReduceOp, Rendezvous, World};
use atomr_accel_cuda::prelude::*;
use common::{reduce_ref, seeded_vec};
use half::{bf16, f16};

/// The deadline every rank's device gives a collective.
const DEADLINE: Duration = Duration::from_secs(30);

/// Values in [-4, 4) from `seed` (the same in every process).
fn seeded<T: CollectiveScalar>(n: usize, seed: u64) -> Vec<T> {
    seeded_vec(n, seed).into_iter().map(|v| T::from_f64(v * 4.0)).collect()
}

fn close<T: CollectiveScalar>(got: &[T], want: &[f64], tol: f64, what: &str) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, want {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        if (g - w).abs() > tol * (1.0 + w.abs()) {
            return Err(format!("{what}: element {i} is {g}, want {w}"));
        }
    }
    Ok(())
}

/// Every collective of `T` from this rank, checked against float64 references of every
/// rank's inputs (all made from `seed`).
async fn collectives_of<T: CollectiveScalar>(r: &Rank, seed: u64, tol: f64) -> Result<(), String> {
    let (me, size, d) = (r.index(), r.size(), r.device());
    let n = 1001;
    let input = |rank: usize, len: usize, salt: u64| seeded::<T>(len, seed ^ ((rank as u64 + 1) << 32) ^ salt);
    let inputs: Vec<Vec<T>> = (0..size).map(|k| input(k, n, 1)).collect();
    let wide = |i: usize| inputs.iter().map(move |v| v[i].to_f64());
    let e = |e: GpuError| format!("rank {me}: {e}");
    let send = d.upload(inputs[me].clone()).await.map_err(e)?;
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg] {
        let want: Vec<f64> = (0..n).map(|i| reduce_ref(op, wide(i))).collect();
        let recv = d.alloc::<T>(n).await.map_err(e)?;
        r.all_reduce(&send, &recv, op).await.map_err(e)?;
        close(
            &d.download(&recv).await.map_err(e)?,
            &want,
            tol,
            &format!("all_reduce {op:?} of {} on rank {me}", T::NAME),
        )?;
    }
    let last = size - 1;
    let b = d.alloc::<T>(n).await.map_err(e)?;
    r.broadcast(&send, &b, last).await.map_err(e)?;
    let root: Vec<f64> = inputs[last].iter().map(|v| v.to_f64()).collect();
    close(
        &d.download(&b).await.map_err(e)?,
        &root,
        0.0,
        &format!("broadcast on rank {me}"),
    )?;
    let g = d.alloc::<T>(n * size).await.map_err(e)?;
    r.all_gather(&send, &g).await.map_err(e)?;
    let all: Vec<f64> = inputs.iter().flatten().map(|v| v.to_f64()).collect();
    close(
        &d.download(&g).await.map_err(e)?,
        &all,
        0.0,
        &format!("all_gather on rank {me}"),
    )?;
    let block = 333;
    let scatter: Vec<Vec<T>> = (0..size).map(|k| input(k, block * size, 2)).collect();
    let s = d.upload(scatter[me].clone()).await.map_err(e)?;
    let rs = d.alloc::<T>(block).await.map_err(e)?;
    r.reduce_scatter(&s, &rs, ReduceOp::Sum).await.map_err(e)?;
    let want: Vec<f64> = (0..block)
        .map(|i| scatter.iter().map(|v| v[me * block + i].to_f64()).sum())
        .collect();
    close(
        &d.download(&rs).await.map_err(e)?,
        &want,
        tol,
        &format!("reduce_scatter on rank {me}"),
    )?;
    if size > 1 {
        let recv = d.alloc::<T>(n).await.map_err(e)?;
        let (sent, got) = tokio::join!(r.send(&send, (me + 1) % size), r.recv(&recv, (me + size - 1) % size));
        sent.map_err(e)?;
        got.map_err(e)?;
        let from: Vec<f64> = inputs[(me + size - 1) % size].iter().map(|v| v.to_f64()).collect();
        close(
            &d.download(&recv).await.map_err(e)?,
            &from,
            0.0,
            &format!("ring receive on rank {me}"),
        )?;
    }
    Ok(())
}

async fn every_collective(r: Rank, seed: u64) -> Result<(), String> {
    collectives_of::<f32>(&r, seed, 1e-6).await?;
    collectives_of::<f64>(&r, seed, 1e-12).await?;
    collectives_of::<f16>(&r, seed, 2e-3).await?;
    collectives_of::<bf16>(&r, seed, 1e-2).await
}

/// Rank 1 all-reduces 7 elements where the others pass 8: every rank gets the
/// disagreement as `InvalidArgument`, and the world goes on.
async fn disagreement(r: Rank, _seed: u64) -> Result<(), String> {
    let d = r.device();
    let n = if r.index() == 1 { 7 } else { 8 };
    let x = d.upload(vec![1.0f32; n]).await.map_err(|e| e.to_string())?;
    match r.all_reduce(&x, &x, ReduceOp::Sum).await {
        Err(GpuError::InvalidArgument(i)) if i.to_string().contains("disagree") => {}
        other => return Err(format!("rank {}: {other:?}, want a disagreement", r.index())),
    }
    let y = d.upload(vec![1.0f32; 8]).await.map_err(|e| e.to_string())?;
    r.all_reduce(&y, &y, ReduceOp::Sum).await.map_err(|e| e.to_string())?;
    let got = d.download(&y).await.map_err(|e| e.to_string())?;
    if got != vec![r.size() as f32; 8] {
        return Err(format!("rank {}: {got:?} after the disagreement", r.index()));
    }
    Ok(())
}

/// One all-reduce together, then the last rank's process dies: the next collective fails
/// on every other rank with `DeviceLost`, long before the deadline.
async fn a_rank_dies(r: Rank, _seed: u64) -> Result<(), String> {
    let d = r.device();
    let x = d.upload(vec![1.0f64; 16]).await.map_err(|e| e.to_string())?;
    r.all_reduce(&x, &x, ReduceOp::Sum).await.map_err(|e| e.to_string())?;
    if r.index() == r.size() - 1 {
        std::process::exit(0);
    }
    let t = Instant::now();
    match r.all_reduce(&x, &x, ReduceOp::Sum).await {
        Err(GpuError::DeviceLost(m)) if t.elapsed() < DEADLINE / 3 => {
            println!("rank {} after {:?}: {m}", r.index(), t.elapsed());
            Ok(())
        }
        other => Err(format!("rank {} after {:?}: {other:?}", r.index(), t.elapsed())),
    }
}

type Scenario = fn(Rank, u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

fn scenario(name: &str) -> Scenario {
    match name {
        "every_collective" => |r, s| Box::pin(every_collective(r, s)),
        "disagreement" => |r, s| Box::pin(disagreement(r, s)),
        "a_rank_dies" => |r, s| Box::pin(a_rank_dies(r, s)),
        other => panic!("no case {other}"),
    }
}

/// The device a rank opens: the CPU device, or GPU `LOCAL_RANK`.
async fn open(sys: &ActorSystem, gpu: bool) -> Device {
    let mut config = if gpu {
        DeviceConfig::cuda(Rendezvous::local_rank())
    } else {
        DeviceConfig::cpu()
    };
    config.request_timeout = DEADLINE;
    Device::open(sys, config).await.unwrap()
}

/// A rank process: joins from its environment and plays its case.
fn rank_process(case: &str) -> ! {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(async {
        let gpu = std::env::var("ATOMR_WORLD_GPU").is_ok();
        let seed: u64 = std::env::var("ATOMR_WORLD_SEED").unwrap().parse().unwrap();
        let sys = ActorSystem::new("rank");
        let d = open(&sys, gpu).await;
        let rv = Rendezvous::from_env().map_err(|e| e.to_string())?;
        let rank = World::join(&d, &rv).await.map_err(|e| format!("join: {e}"))?;
        scenario(case)(rank, seed).await
    });
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts ranks 1.. of `size` as processes playing `case`.
fn start_ranks(case: &str, port: u16, size: usize, seed: u64, gpu: bool, size_told: usize) -> Vec<Child> {
    (1..size)
        .map(|rank| {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.env("ATOMR_WORLD_CASE", case)
                .env("ATOMR_WORLD_SEED", seed.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", size_told.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if gpu {
                c.env("ATOMR_WORLD_GPU", "1");
            }
            c.spawn().unwrap()
        })
        .collect()
}

/// Rank 0 in this process, ranks 1.. in children; every rank must pass.
async fn world_of(case: &str, size: usize, gpu: bool) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let port = free_port();
    let children = start_ranks(case, port, size, seed, gpu, size);
    let sys = ActorSystem::new("rank-0");
    let d = open(&sys, gpu).await;
    let rank = World::join(&d, &Rendezvous::new(format!("127.0.0.1:{port}"), 0, size))
        .await
        .unwrap();
    if gpu {
        assert!(rank.on_nccl());
    }
    let mine = scenario(case)(rank, seed).await;
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "rank {} of {case}: {:?}\n{}{}",
            i + 1,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    mine.unwrap();
    sys.shutdown().await;
}

async fn three_processes_run_every_collective() {
    world_of("every_collective", 3, false).await;
}

async fn ranks_that_disagree_fail_on_every_process() {
    world_of("disagreement", 3, false).await;
}

async fn a_process_that_dies_fails_the_others_at_once() {
    world_of("a_rank_dies", 3, false).await;
}

/// A rank that thinks the world is bigger is refused and told why; rank 0 goes on
/// listening for a rank that fits, and when none comes by its deadline says whom it
/// turned away.
async fn a_handshake_that_disagrees_is_refused() {
    let port = free_port();
    let children = start_ranks("every_collective", port, 2, 1, false, 3);
    let sys = ActorSystem::new("rank-0");
    let mut config = DeviceConfig::cpu();
    config.request_timeout = Duration::from_secs(3);
    let d = Device::open(&sys, config).await.unwrap();
    let e = World::join(&d, &Rendezvous::new(format!("127.0.0.1:{port}"), 0, 2))
        .await
        .expect_err("refused");
    assert!(
        matches!(e, GpuError::InvalidArgument(_)) && e.to_string().contains("3 ranks"),
        "{e}"
    );
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("3 ranks"), "the child: {err}");
    }
    // Bad variables are named.
    let e = Rendezvous::from_env().err().unwrap();
    assert!(e.to_string().contains("MASTER_ADDR"), "{e}");
    sys.shutdown().await;
}

/// One process per GPU (one on a machine of one GPU), collectives on NCCL.
async fn a_world_of_gpu_processes_on_nccl() {
    let gpus = atomr_accel_cuda::p2p::Topology::probe().unwrap().gpus();
    world_of("every_collective", gpus, true).await;
}

type Case = fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

fn main() {
    if let Ok(case) = std::env::var("ATOMR_WORLD_CASE") {
        rank_process(&case);
    }
    let cases: Vec<(&str, Case, bool)> = vec![
        (
            "cpu::three_processes_run_every_collective",
            || Box::pin(three_processes_run_every_collective()),
            false,
        ),
        (
            "cpu::ranks_that_disagree_fail_on_every_process",
            || Box::pin(ranks_that_disagree_fail_on_every_process()),
            false,
        ),
        (
            "cpu::a_process_that_dies_fails_the_others_at_once",
            || Box::pin(a_process_that_dies_fails_the_others_at_once()),
            false,
        ),
        (
            "cpu::a_handshake_that_disagrees_is_refused",
            || Box::pin(a_handshake_that_disagrees_is_refused()),
            false,
        ),
        (
            "gpu::a_world_of_gpu_processes_on_nccl",
            || Box::pin(a_world_of_gpu_processes_on_nccl()),
            true,
        ),
    ];
    common::harness::run_cases(
        cases
            .into_iter()
            .map(|(name, case, needs_gpu)| {
                let body: common::harness::Body = Box::new(case);
                (name, needs_gpu, body)
            })
            .collect(),
    )
}
