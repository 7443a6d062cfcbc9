//! Independent actors on one GPU (issue 22), each figure next to raw cudarc in the same
//! run:
//! 1. W workers (W = 1, 4, 8), each a sequence of awaited small GEMMs (256³ f32) or small
//!    `#[kernel]` launches (axpy over 4096 f32): raw cudarc with a thread, stream and
//!    cuBLAS handle per worker; W `#[gpu_actor]`s spawned with `spawn_on` (each its own
//!    `ActorGpu`); W tasks calling `Device` methods (the library pool); W tasks asking one
//!    actor (everything through one actor's stream).
//! 2. A cold NVRTC compile on one actor: another actor's launch latency during it vs idle.
//! 3. Launch rate with 64 launches in flight from one caller (an `ActorGpu`; the `Device`)
//!    vs raw launches on one stream; the awaited tiny launch vs raw launch + synchronize.
//! 4. The first GEMM / RNG fill / Cholesky / FFT after `Device::open`, in a fresh process
//!    (this bench re-run as a child), with the warm-up on and off, and on a fresh
//!    `ActorGpu`.

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::{gpu_actor, kernel, FftShape, Gemm};
use cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig as RawCfg, PushKernelArg};
use cudarc::nvrtc::Ptx;
use futures::stream::{FuturesUnordered, StreamExt};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;
#[path = "support/stats.rs"]
mod stats;

use gpu_bench::{median, run_gpu};
use stats::percentile;

/// y = a·x + y.
#[kernel]
pub fn axpy_b<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

const GEMM_N: usize = 256;
const AXPY_N: usize = 4096;
/// Awaited operations per worker per round.
const OPS: usize = 1000;
const ROUNDS: usize = 5;

/// Which small operation a worker repeats.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Gemm,
    Kernel,
}

/// A worker's buffers (GEMM operands, axpy vectors).
struct Bufs {
    a: GpuRef<f32>,
    c: GpuRef<f32>,
    x: GpuRef<f32>,
    y: GpuRef<f32>,
}

impl Bufs {
    async fn new(dev: &Device) -> Bufs {
        let n2 = GEMM_N * GEMM_N;
        Bufs {
            a: dev.upload(vec![0.01f32; n2]).await.unwrap(),
            c: dev.alloc::<f32>(n2).await.unwrap(),
            x: dev.upload(vec![1.0f32; AXPY_N]).await.unwrap(),
            y: dev.alloc::<f32>(AXPY_N).await.unwrap(),
        }
    }
}

/// A worker with a GPU of its own.
struct Worker {
    gpu: ActorGpu,
    bufs: Option<Bufs>,
}

impl Worker {
    async fn bufs(&mut self) -> &Bufs {
        if self.bufs.is_none() {
            self.bufs = Some(Bufs::new(&self.gpu).await);
        }
        self.bufs.as_ref().unwrap()
    }
}

async fn one_op(gpu: &ActorGpu, b: &Bufs, op: Op) -> Result<(), GpuError> {
    match op {
        Op::Gemm => {
            gpu.gemm(Gemm::<f32>::new(GEMM_N, GEMM_N, GEMM_N), &b.a, &b.a, &b.c)
                .await
        }
        Op::Kernel => {
            let cfg = LaunchConfig::for_elements(AXPY_N, 256);
            axpy_b::launch::<f32>(gpu, cfg, 1.0, &b.x, &mut b.y.clone()).await
        }
    }
}

#[gpu_actor(ask_timeout = "120s")]
impl Worker {
    /// `ops` awaited operations, one after another.
    #[handler]
    async fn run(&mut self, op_gemm: bool, ops: usize) -> Result<(), GpuError> {
        let op = if op_gemm { Op::Gemm } else { Op::Kernel };
        self.bufs().await;
        let b = self.bufs.as_ref().unwrap();
        for _ in 0..ops {
            one_op(&self.gpu, b, op).await?;
        }
        Ok(())
    }

    /// `n` awaited launches of the f32 axpy, each timed (µs).
    #[handler]
    async fn timed_launches(&mut self, n: usize) -> Result<Vec<f64>, GpuError> {
        self.bufs().await;
        let b = self.bufs.as_ref().unwrap();
        let mut t = Vec::with_capacity(n);
        for _ in 0..n {
            let s = Instant::now();
            one_op(&self.gpu, b, Op::Kernel).await?;
            t.push(s.elapsed().as_secs_f64() * 1e6);
        }
        Ok(t)
    }

    /// One launch of the f64 axpy (a new instantiation: compiled on first use).
    #[handler]
    async fn launch_f64(&mut self) -> Result<f64, GpuError> {
        let x = self.gpu.upload(vec![1.0f64; AXPY_N]).await?;
        let mut y = self.gpu.alloc::<f64>(AXPY_N).await?;
        let s = Instant::now();
        axpy_b::launch::<f64>(&self.gpu, LaunchConfig::for_elements(AXPY_N, 256), 1.0, &x, &mut y).await?;
        Ok(s.elapsed().as_secs_f64() * 1e3)
    }
}

/// One raw launch of the generated f32 axpy (`f`) over `x`, `y` on `stream`.
fn raw_axpy_launch(stream: &Arc<CudaStream>, f: &CudaFunction, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) {
    let len = AXPY_N as u64;
    // SAFETY: the arguments match the axpy's parameters (a, x, len, y, len); x and y hold
    // AXPY_N elements.
    unsafe {
        stream
            .launch_builder(f)
            .arg(&1.0f32)
            .arg(x)
            .arg(&len)
            .arg(y)
            .arg(&len)
            .launch(RawCfg::for_num_elems(AXPY_N as u32))
            .unwrap();
    }
}

/// One raw launch as `raw_axpy_launch`, without cudarc's per-use events: `x` and `y`
/// are passed as integer addresses (what a careful hand-written loop on one stream does).
fn untracked_axpy_launch(stream: &Arc<CudaStream>, f: &CudaFunction, x: u64, y: u64) {
    let len = AXPY_N as u64;
    // SAFETY: as `raw_axpy_launch`, with x's and y's addresses; the callers keep the
    // slices alive until the stream is synchronized.
    unsafe {
        stream
            .launch_builder(f)
            .arg(&1.0f32)
            .arg(&x)
            .arg(&len)
            .arg(&y)
            .arg(&len)
            .launch(RawCfg::for_num_elems(AXPY_N as u32))
            .unwrap();
    }
}

/// The addresses of `x` and `y`, for `untracked_axpy_launch`.
fn addresses(stream: &Arc<CudaStream>, x: &CudaSlice<f32>, y: &CudaSlice<f32>) -> (u64, u64) {
    use cudarc::driver::DevicePtr;
    (x.device_ptr(stream).0, y.device_ptr(stream).0)
}

/// The raw baseline of one worker: its own thread, stream, cuBLAS handle and buffers.
fn raw_worker(ctx: Arc<CudaContext>, f: CudaFunction, op: Op, ops: usize) {
    let stream = ctx.new_stream().unwrap();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let n2 = GEMM_N * GEMM_N;
    let a = stream.clone_htod(&vec![0.01f32; n2]).unwrap();
    let mut c = stream.alloc_zeros::<f32>(n2).unwrap();
    let x = stream.clone_htod(&vec![1.0f32; AXPY_N]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(AXPY_N).unwrap();
    let n = GEMM_N as i32;
    let cfg = GemmConfig {
        transa: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
        transb: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
        m: n,
        n,
        k: n,
        alpha: 1.0f32,
        lda: n,
        ldb: n,
        beta: 0.0,
        ldc: n,
    };
    for _ in 0..ops {
        match op {
            // SAFETY: a and c are n×n.
            Op::Gemm => unsafe { blas.gemm(cfg, &a, &a, &mut c).unwrap() },
            Op::Kernel => raw_axpy_launch(&stream, &f, &x, &mut y),
        }
        stream.synchronize().unwrap();
    }
}

/// The generated axpy for f32, loaded in `ctx` for the raw baselines.
fn raw_axpy(ctx: &Arc<CudaContext>) -> CudaFunction {
    let arch = atomr_accel_cuda::nvrtc_cache::sm_arch(ctx.compute_capability().unwrap());
    let (image, _) =
        atomr_accel_cuda::nvrtc_cache::compile_cached(&axpy_b::cuda_source::<f32>(), &arch, &[], None).unwrap();
    ctx.load_module(Ptx::from_binary(image))
        .unwrap()
        .load_function("axpy_b")
        .unwrap()
}

/// Operations per second over all workers, for one round of `body`.
async fn rate(w: usize, body: impl std::future::Future<Output = ()>) -> f64 {
    let s = Instant::now();
    body.await;
    (w * OPS) as f64 / s.elapsed().as_secs_f64()
}

async fn throughput(dev: &Device, ctx: &Arc<CudaContext>, f: &CudaFunction) {
    let sys = ActorSystem::new("actors-bench");
    println!("\n## W workers, each {OPS} awaited ops per round, median of {ROUNDS} rounds (ops/s, all workers)");
    println!("| op | W | raw cudarc (thread + stream + handle each) | W actors (`spawn_on`) | ratio | W tasks on `Device` | ratio | one actor | W actors / one actor |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let one = WorkerRef::spawn_on(dev, &sys, "one", |gpu| Worker { gpu, bufs: None }).unwrap();
    for op in [Op::Gemm, Op::Kernel] {
        for w in [1usize, 4, 8] {
            let actors: Vec<WorkerRef> = (0..w)
                .map(|i| {
                    WorkerRef::spawn_on(dev, &sys, &format!("w{op:?}{w}-{i}"), |gpu| Worker { gpu, bufs: None })
                        .unwrap()
                })
                .collect();
            let g = op == Op::Gemm;
            // Warm every path (buffers, handles, streams).
            for a in &actors {
                a.run(g, 10).await.unwrap();
            }
            one.run(g, 10).await.unwrap();
            let task_bufs: Vec<Arc<Bufs>> = futures::future::join_all((0..w).map(|_| Bufs::new(dev)))
                .await
                .into_iter()
                .map(Arc::new)
                .collect();
            let (mut raw, mut ours, mut tasks, mut single) = (vec![], vec![], vec![], vec![]);
            for _ in 0..ROUNDS {
                raw.push(
                    rate(w, async {
                        let threads: Vec<_> = (0..w)
                            .map(|_| {
                                let (ctx, f) = (ctx.clone(), f.clone());
                                std::thread::spawn(move || raw_worker(ctx, f, op, OPS))
                            })
                            .collect();
                        for t in threads {
                            t.join().unwrap();
                        }
                    })
                    .await,
                );
                ours.push(
                    rate(w, async {
                        futures::future::join_all(actors.iter().map(|a| a.run(g, OPS)))
                            .await
                            .into_iter()
                            .for_each(|r| r.unwrap())
                    })
                    .await,
                );
                tasks.push(
                    rate(w, async {
                        let js = task_bufs.iter().map(|b| {
                            let (dev, b) = (dev.clone(), b.clone());
                            tokio::spawn(async move {
                                for _ in 0..OPS {
                                    match op {
                                        Op::Gemm => dev
                                            .gemm(Gemm::<f32>::new(GEMM_N, GEMM_N, GEMM_N), &b.a, &b.a, &b.c)
                                            .await
                                            .unwrap(),
                                        Op::Kernel => axpy_b::launch::<f32>(
                                            &dev,
                                            LaunchConfig::for_elements(AXPY_N, 256),
                                            1.0,
                                            &b.x,
                                            &mut b.y.clone(),
                                        )
                                        .await
                                        .unwrap(),
                                    }
                                }
                            })
                        });
                        for j in futures::future::join_all(js).await {
                            j.unwrap();
                        }
                    })
                    .await,
                );
                single.push(
                    rate(w, async {
                        futures::future::join_all((0..w).map(|_| one.run(g, OPS)))
                            .await
                            .into_iter()
                            .for_each(|r| r.unwrap())
                    })
                    .await,
                );
            }
            let (r, o, t, s) = (
                median(&mut raw),
                median(&mut ours),
                median(&mut tasks),
                median(&mut single),
            );
            println!(
                "| {} | {w} | {:.0} | {:.0} | **{:.3}** | {:.0} | **{:.3}** | {:.0} | **{:.2}×** |",
                if g { "SGEMM 256³" } else { "axpy 4096 (`#[kernel]`)" },
                r,
                o,
                o / r,
                t,
                t / r,
                s,
                o / s
            );
            for a in actors {
                a.actor_ref().stop();
            }
        }
    }
    sys.shutdown().await;
}

async fn cold_compile() {
    let dir = std::env::temp_dir().join(format!("atomr-actors-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = DeviceConfig::cuda(0);
    config.kernel_cache_dir = Some(dir.clone());
    let sys = ActorSystem::new("cold");
    let dev = Device::open(&sys, config).await.unwrap();
    let (a, b) = (
        WorkerRef::spawn_on(&dev, &sys, "a", |gpu| Worker { gpu, bufs: None }).unwrap(),
        WorkerRef::spawn_on(&dev, &sys, "b", |gpu| Worker { gpu, bufs: None }).unwrap(),
    );
    a.timed_launches(100).await.unwrap();
    let mut idle = a.timed_launches(2000).await.unwrap();
    // b compiles the f64 instantiation (cold: an empty cache directory) while a launches.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let compile = tokio::spawn(async move {
        let ms = b.launch_f64().await.unwrap();
        d2.store(true, std::sync::atomic::Ordering::SeqCst);
        ms
    });
    let mut during = vec![];
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        during.extend(a.timed_launches(20).await.unwrap());
    }
    let ms = compile.await.unwrap();
    let (p_idle, p_during) = (percentile(&mut idle, 0.5), percentile(&mut during, 0.5));
    println!("\n## A cold NVRTC compile on actor b; actor a's awaited launches (axpy 4096 f32)");
    println!(
        "b's first f64 launch (compile + load + run): {ms:.1} ms; a's launch p50 idle {p_idle:.1} µs, during the compile {p_during:.1} µs over {} launches = **{:.2}×** idle (p99 {:.1} µs)",
        during.len(),
        p_during / p_idle,
        percentile(&mut during, 0.99)
    );
    sys.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Launch rate with 64 in flight from one caller, and the awaited tiny round trip.
async fn launch_rate(dev: &Device, stream: &Arc<CudaStream>, f: &CudaFunction) {
    const M: usize = 20_000;
    const IN_FLIGHT: usize = 64;
    let gpu = dev.actor_gpu();
    let b = Bufs::new(dev).await;
    let x = stream.clone_htod(&vec![1.0f32; AXPY_N]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(AXPY_N).unwrap();
    let cfg = LaunchConfig::for_elements(AXPY_N, 256);
    let (xp, yp) = addresses(stream, &x, &y);
    let untracked_launch = || untracked_axpy_launch(stream, f, xp, yp);
    let mut raw_launch = || raw_axpy_launch(stream, f, &x, &mut y);
    async fn many(
        target: &impl atomr_accel_cuda::kernel::dsl::LaunchTarget,
        b: &Bufs,
        cfg: LaunchConfig,
        m: usize,
        in_flight: usize,
    ) {
        let mut pending = FuturesUnordered::new();
        let mut sent = 0;
        while sent < m || !pending.is_empty() {
            while sent < m && pending.len() < in_flight {
                let mut yy = b.y.clone();
                let x = b.x.clone();
                pending.push(async move { axpy_b::launch::<f32>(target, cfg, 1.0, &x, &mut yy).await });
                sent += 1;
            }
            pending.next().await.unwrap().unwrap();
        }
    }
    many(&gpu, &b, cfg, 1000, IN_FLIGHT).await;
    many(dev, &b, cfg, 1000, IN_FLIGHT).await;
    let enqueue_all = |m: usize| {
        let (gpu, b) = (&gpu, &b);
        async move {
            for _ in 0..m {
                axpy_b::enqueue::<f32>(gpu, cfg, 1.0, &b.x, &mut b.y.clone())
                    .await
                    .unwrap();
            }
            gpu.synchronize().await.unwrap();
        }
    };
    enqueue_all(1000).await;
    let (mut raw, mut ours, mut device, mut enq) = (vec![], vec![], vec![], vec![]);
    let mut untracked = vec![];
    for _ in 0..ROUNDS {
        let s = Instant::now();
        for _ in 0..M {
            untracked_launch();
        }
        stream.synchronize().unwrap();
        untracked.push(M as f64 / s.elapsed().as_secs_f64());
        let s = Instant::now();
        enqueue_all(M).await;
        enq.push(M as f64 / s.elapsed().as_secs_f64());
        let s = Instant::now();
        for _ in 0..M {
            raw_launch();
        }
        stream.synchronize().unwrap();
        raw.push(M as f64 / s.elapsed().as_secs_f64());
        let s = Instant::now();
        many(&gpu, &b, cfg, M, IN_FLIGHT).await;
        ours.push(M as f64 / s.elapsed().as_secs_f64());
        let s = Instant::now();
        many(dev, &b, cfg, M, IN_FLIGHT).await;
        device.push(M as f64 / s.elapsed().as_secs_f64());
    }
    let (r, o, d, e) = (
        median(&mut raw),
        median(&mut ours),
        median(&mut device),
        median(&mut enq),
    );
    println!("\n## Launches of axpy 4096 from one caller, {M} per round (launches/s, median of {ROUNDS})");
    println!("| raw cudarc: {M} launches on one stream, then one sync | `ActorGpu`: `enqueue` ×{M}, then `synchronize` | ratio | `ActorGpu`: `launch`, {IN_FLIGHT} awaited in flight | ratio | `Device`: `launch`, {IN_FLIGHT} in flight | ratio |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {r:.0} | {e:.0} | **{:.3}** | {o:.0} | **{:.3}** | {d:.0} | **{:.3}** |",
        e / r,
        o / r,
        d / r
    );
    let u = median(&mut untracked);
    println!(
        "\nRaw cudarc untracked (addresses as integers, no per-use events): {u:.0} launches/s; `enqueue` **{:.3}**×, 64 awaited in flight **{:.3}**× of it",
        e / u,
        o / u
    );

    // The awaited tiny launch, alternating raw / ours.
    let (mut raw, mut ours) = (vec![], vec![]);
    for i in 0..4000 {
        if i % 2 == 0 {
            let s = Instant::now();
            raw_launch();
            stream.synchronize().unwrap();
            raw.push(s.elapsed().as_secs_f64() * 1e6);
        } else {
            let s = Instant::now();
            axpy_b::launch::<f32>(&gpu, cfg, 1.0, &b.x, &mut b.y.clone())
                .await
                .unwrap();
            ours.push(s.elapsed().as_secs_f64() * 1e6);
        }
    }
    let (r, o) = (percentile(&mut raw, 0.5), percentile(&mut ours, 0.5));
    println!(
        "\nAwaited tiny launch (axpy 4096), 2000 each alternating: raw launch + synchronize p50 {r:.1} µs, `ActorGpu` p50 {o:.1} µs = **{:.2}×** (p99 {:.1} / {:.1} µs)",
        o / r,
        percentile(&mut raw, 0.99),
        percentile(&mut ours, 0.99)
    );
}

/// Where an awaited launch's extra host time goes: the same 20 000 launches through an
/// `ActorGpu` with the waiting done five ways (µs per launch, median of the rounds).
async fn await_probe(dev: &Device) {
    const M: usize = 20_000;
    let gpu = dev.actor_gpu();
    let b = Bufs::new(dev).await;
    let cfg = LaunchConfig::for_elements(AXPY_N, 256);
    let per = |s: Instant| s.elapsed().as_secs_f64() * 1e6 / M as f64;
    let enqueue = || {
        let (x, mut y) = (b.x.clone(), b.y.clone());
        let gpu = &gpu;
        async move { axpy_b::enqueue::<f32>(gpu, cfg, 1.0, &x, &mut y).await }
    };
    let launch = || {
        let (x, mut y) = (b.x.clone(), b.y.clone());
        let gpu = &gpu;
        async move { axpy_b::launch::<f32>(gpu, cfg, 1.0, &x, &mut y).await }
    };
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("`enqueue` ×M, one `synchronize`", vec![]),
        (
            "`enqueue`s 64 in flight in `FuturesUnordered`, one `synchronize`",
            vec![],
        ),
        ("`enqueue`, a `synchronize` awaited every 64", vec![]),
        (
            "`launch` each, the oldest awaited when 64 are held (no `FuturesUnordered`)",
            vec![],
        ),
        ("`launch`, 64 awaited in flight in `FuturesUnordered`", vec![]),
    ];
    for round in 0..=ROUNDS {
        let mut t = vec![];
        let s = Instant::now();
        for _ in 0..M {
            enqueue().await.unwrap();
        }
        gpu.synchronize().await.unwrap();
        t.push(per(s));
        let s = Instant::now();
        let mut pending = FuturesUnordered::new();
        for _ in 0..M {
            if pending.len() == 64 {
                let r: Result<(), GpuError> = pending.next().await.unwrap();
                r.unwrap();
            }
            pending.push(enqueue());
        }
        while let Some(r) = pending.next().await {
            r.unwrap();
        }
        gpu.synchronize().await.unwrap();
        t.push(per(s));
        let s = Instant::now();
        for i in 0..M {
            enqueue().await.unwrap();
            if i % 64 == 63 {
                gpu.synchronize().await.unwrap();
            }
        }
        gpu.synchronize().await.unwrap();
        t.push(per(s));
        let s = Instant::now();
        let mut held = std::collections::VecDeque::new();
        for _ in 0..M {
            if held.len() == 64 {
                let oldest: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), GpuError>> + Send + '_>> =
                    held.pop_front().unwrap();
                oldest.await.unwrap();
            }
            let mut f = Box::pin(launch());
            // Polled once now (the launch enqueued), like an entry of FuturesUnordered;
            // one already done is not held (polling it again would be a misuse).
            if let std::task::Poll::Ready(r) = futures::poll!(f.as_mut()) {
                r.unwrap();
                continue;
            }
            held.push_back(f);
        }
        for f in held.drain(..) {
            f.await.unwrap();
        }
        t.push(per(s));
        let s = Instant::now();
        let mut pending = FuturesUnordered::new();
        for _ in 0..M {
            if pending.len() == 64 {
                let r: Result<(), GpuError> = pending.next().await.unwrap();
                r.unwrap();
            }
            pending.push(launch());
        }
        while let Some(r) = pending.next().await {
            r.unwrap();
        }
        t.push(per(s));
        if round > 0 {
            for (row, v) in rows.iter_mut().zip(t) {
                row.1.push(v);
            }
        }
    }
    println!("\n## Awaiting launches, five ways ({M} launches of axpy 4096 through an `ActorGpu`; µs per launch, median of {ROUNDS})");
    println!("| how | µs per launch |");
    println!("|---|---|");
    for (what, mut v) in rows {
        println!("| {what} | {:.2} |", median(&mut v));
    }
}

/// Where a launch's host time goes: each step alone, `M` back to back then one sync (µs
/// per launch).
async fn breakdown(dev: &Device, stream: &Arc<CudaStream>, f: &CudaFunction) {
    const M: usize = 20_000;
    let b = Bufs::new(dev).await;
    let x = stream.clone_htod(&vec![1.0f32; AXPY_N]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(AXPY_N).unwrap();
    let cfg = LaunchConfig::for_elements(AXPY_N, 256);
    let ev = stream.record_event(None).unwrap();
    let per = |s: Instant| s.elapsed().as_secs_f64() * 1e6 / M as f64;
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("raw launch (cudarc, 2 tracked slices)", vec![]),
        ("raw launch + an event recorded", vec![]),
        ("`KernelCall` built and dropped (no GPU)", vec![]),
        ("`launch_on` our enqueue (validate, order, launch)", vec![]),
        ("raw launch, untracked (addresses passed as integers)", vec![]),
        (
            "raw launch + its own event, 64 in flight (oldest queried before reuse)",
            vec![],
        ),
        ("`Instant::now()`", vec![]),
    ];
    let (xp, yp) = addresses(stream, &x, &y);
    let ring: Vec<_> = (0..64).map(|_| stream.record_event(None).unwrap()).collect();
    for _ in 0..ROUNDS {
        let s = Instant::now();
        for _ in 0..M {
            raw_axpy_launch(stream, f, &x, &mut y);
        }
        stream.synchronize().unwrap();
        rows[0].1.push(per(s));
        let s = Instant::now();
        for _ in 0..M {
            raw_axpy_launch(stream, f, &x, &mut y);
            ev.record(stream).unwrap();
        }
        stream.synchronize().unwrap();
        rows[1].1.push(per(s));
        let s = Instant::now();
        for _ in 0..M {
            drop(axpy_b::call::<f32>(cfg, 1.0, &b.x, &mut b.y.clone()));
        }
        rows[2].1.push(per(s));
        let s = Instant::now();
        for _ in 0..M {
            axpy_b::launch_on::<f32>(stream, cfg, 1.0, &b.x, &mut b.y.clone()).unwrap();
        }
        stream.synchronize().unwrap();
        rows[3].1.push(per(s));
        let s = Instant::now();
        for _ in 0..M {
            untracked_axpy_launch(stream, f, xp, yp);
        }
        stream.synchronize().unwrap();
        rows[4].1.push(per(s));
        let s = Instant::now();
        for i in 0..M {
            let ev = &ring[i % ring.len()];
            while !ev.is_complete() {}
            raw_axpy_launch(stream, f, &x, &mut y);
            ev.record(stream).unwrap();
        }
        stream.synchronize().unwrap();
        rows[5].1.push(per(s));
        let s = Instant::now();
        let mut t = s;
        for _ in 0..M {
            t = std::hint::black_box(Instant::now());
        }
        let _ = t;
        rows[6].1.push(per(s));
    }
    println!("\n## Host time per launch, by step ({M} back to back, then one sync; median of {ROUNDS})");
    println!("| step | µs per launch |");
    println!("|---|---|");
    for (what, mut v) in rows {
        println!("| {what} | {:.2} |", median(&mut v));
    }
}

/// In a fresh process: open, then time the first call of each library on the device and
/// on a fresh `ActorGpu`.
fn first_calls_child(warm: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sys = ActorSystem::new("first");
        let mut config = DeviceConfig::cuda(0);
        config.warm_up = warm;
        let s = Instant::now();
        let dev = Device::open(&sys, config).await.unwrap();
        println!("open {:.1}", s.elapsed().as_secs_f64() * 1e3);
        let n = 256;
        let a = dev.upload(vec![0.5f32; n * n]).await.unwrap();
        let c = dev.alloc::<f32>(n * n).await.unwrap();
        let r = dev.alloc::<f32>(1 << 20).await.unwrap();
        let spd: Vec<f32> = (0..64 * 64).map(|k| if k % 65 == 0 { 2.0 } else { 0.0 }).collect();
        let (l1, l2) = (dev.upload(spd.clone()).await.unwrap(), dev.upload(spd).await.unwrap());
        let (fx, fy) = (
            dev.alloc::<c32>(1 << 16).await.unwrap(),
            dev.alloc::<c32>(1 << 16).await.unwrap(),
        );
        // The same four first calls on the device and on a fresh `ActorGpu` (whose
        // methods of these names run in place).
        macro_rules! firsts {
            ($on:expr, $what:literal, $l:expr) => {{
                let ms = |s: Instant| s.elapsed().as_secs_f64() * 1e3;
                let s = Instant::now();
                $on.gemm(Gemm::<f32>::new(n, n, n), &a, &a, &c).await.unwrap();
                println!("{} gemm {:.2}", $what, ms(s));
                let s = Instant::now();
                $on.fill_uniform(&r).await.unwrap();
                println!("{} uniform {:.2}", $what, ms(s));
                let s = Instant::now();
                $on.cholesky($l, 64).await.unwrap();
                println!("{} cholesky {:.2}", $what, ms(s));
                let s = Instant::now();
                $on.fft_c2c(&fx, &fy, &FftShape::new(&[1 << 16], 1), false)
                    .await
                    .unwrap();
                println!("{} fft {:.2}", $what, ms(s));
            }};
        }
        firsts!(dev, "device", &l1);
        let gpu = dev.actor_gpu();
        firsts!(gpu, "actor_gpu", &l2);
        sys.shutdown().await;
    });
}

fn first_calls() {
    println!("\n## First calls after `Device::open` returned, each in a fresh process (ms)");
    println!("| warm-up | open | device GEMM 256³ | RNG fill 1M | Cholesky 64 | FFT 2^16 | fresh `ActorGpu`: GEMM | RNG | Cholesky | FFT |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for warm in [true, false] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("ACTORS_BENCH_CHILD", if warm { "warm" } else { "cold" })
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<String> = text
            .lines()
            .filter_map(|l| l.rsplit_once(' ').map(|(_, v)| v.to_string()))
            .collect();
        if !out.status.success() || v.len() != 9 {
            println!("child failed: {text} {}", String::from_utf8_lossy(&out.stderr));
            continue;
        }
        println!("| {} | {} |", if warm { "on" } else { "off" }, v.join(" | "));
    }
}

fn main() {
    if let Ok(mode) = std::env::var("ACTORS_BENCH_CHILD") {
        first_calls_child(mode == "warm");
        return;
    }
    let gpu = std::sync::atomic::AtomicBool::new(false);
    let gpu_ref = &gpu;
    run_gpu("actors", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        gpu_ref.store(true, std::sync::atomic::Ordering::SeqCst);
        let f = raw_axpy(&ctx);
        if std::env::var("ACTORS_ONLY").is_ok_and(|v| v == "rate") {
            launch_rate(&dev, &stream, &f).await;
            await_probe(&dev).await;
            return;
        }
        throughput(&dev, &ctx, &f).await;
        cold_compile().await;
        launch_rate(&dev, &stream, &f).await;
        await_probe(&dev).await;
        breakdown(&dev, &stream, &f).await;
    });
    if std::env::var("ACTORS_ONLY").is_ok() {
        return;
    }
    if gpu.load(std::sync::atomic::Ordering::SeqCst) {
        first_calls();
    }
}
