//! Actors with a GPU of their own (`ActorGpu`, `<Actor>Ref::spawn_on`): their GEMMs,
//! `#[kernel]` launches, solver calls and RNG fills run in place on their own streams,
//! checked against float64 references on fresh random data; buffers shared between them
//! stay ordered; a restart gives a fresh GPU, a context rebuild new handles; the device's
//! library pool serves concurrent tasks. On the CPU device and the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{gpu_actor, kernel, Gemm};
use common::slow::slow_copy;
use common::{gemm_ref, rand_vec, rel_err, spd};

/// y = a·x + y.
#[kernel]
pub fn axpy_k<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// A worker with a GPU of its own.
struct Worker {
    gpu: ActorGpu,
}

#[gpu_actor(supervision(restart_on = [Other], max_restarts = 5, within = "10s"), ask_timeout = "60s")]
impl Worker {
    /// `alpha·A·B + x` for n×n column-major matrices: a GEMM, then a `#[kernel]` axpy of
    /// `x` into the product, both on this actor's stream.
    #[handler]
    async fn gemm_axpy(
        &mut self,
        n: usize,
        alpha: f32,
        a: Vec<f32>,
        b: Vec<f32>,
        x: Vec<f32>,
    ) -> Result<Vec<f32>, GpuError> {
        let (ga, gb, gx) = (
            self.gpu.upload(a).await?,
            self.gpu.upload(b).await?,
            self.gpu.upload(x).await?,
        );
        let gc = self.gpu.alloc::<f32>(n * n).await?;
        let g = Gemm::<f32>::new(n, n, n).scaled(alpha, 0.0);
        self.gpu.gemm(g, &ga, &gb, &gc).await?;
        axpy_k::launch::<f32>(
            &self.gpu,
            LaunchConfig::for_elements(n * n, 128),
            1.0,
            &gx,
            &mut gc.clone(),
        )
        .await?;
        self.gpu.download(&gc).await
    }

    /// Cholesky of an n×n SPD matrix and the norm of its first column, in place.
    #[handler]
    async fn cholesky(&mut self, n: usize, a: Vec<f64>) -> Result<(Vec<f64>, f64), GpuError> {
        let ga = self.gpu.upload(a).await?;
        self.gpu.cholesky(&ga, n).await?;
        let l = self.gpu.download(&ga).await?;
        let col = self.gpu.upload(l[..n].to_vec()).await?;
        Ok((l, self.gpu.nrm2(&col).await?))
    }

    /// `len` uniform numbers from this actor's own generator.
    #[handler]
    async fn uniform(&mut self, len: usize) -> Result<Vec<f32>, GpuError> {
        let g = self.gpu.alloc::<f32>(len).await?;
        self.gpu.fill_uniform(&g).await?;
        self.gpu.download(&g).await
    }

    /// y = slow_copy(x) on this actor's stream; resolves when done.
    #[handler]
    async fn write(&mut self, x: GpuRef<f32>, y: GpuRef<f32>, rounds: u32) -> Result<(), GpuError> {
        slow_copy::launch(
            &self.gpu,
            LaunchConfig::for_elements(y.len(), 256),
            rounds,
            &x,
            &mut y.clone(),
        )
        .await
    }

    /// The sum of `y` (a dot with ones), read on this actor's stream.
    #[handler]
    async fn sum(&mut self, y: GpuRef<f32>) -> Result<f32, GpuError> {
        let ones = self.gpu.upload(vec![1.0f32; y.len()]).await?;
        self.gpu.dot(&y, &ones).await
    }

    /// This incarnation's GPU: (id, generation, runs in place).
    #[handler]
    fn which(&self) -> (u64, Option<u64>, bool) {
        (self.gpu.id(), self.gpu.generation(), self.gpu.in_place())
    }

    /// Fails with a kind the supervision restarts on.
    #[handler]
    fn fail(&mut self) -> Result<(), GpuError> {
        Err(GpuError::Other("asked to fail".into()))
    }
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn spawn(dev: &Device, sys: &ActorSystem, name: &str) -> WorkerRef {
    WorkerRef::spawn_on(dev, sys, name, |gpu| Worker { gpu }).unwrap()
}

on_both! {
    independent_actors_compute_in_place_on_their_own_gpus => independent_actors;
    buffers_shared_between_actors_stay_ordered => shared_buffers_ordered;
    a_restarted_actor_gets_a_fresh_gpu_and_a_rebuild_new_handles => restart_and_rebuild;
    each_actor_draws_its_own_random_sequence => own_random_sequences;
    concurrent_tasks_are_served_by_the_library_pool => library_pool;
    a_disabled_library_is_unsupported_on_an_actor_gpu => disabled_library;
    launches_enqueued_without_waiting_are_all_done_after_synchronize => enqueue_then_synchronize;
    a_buffer_launched_on_one_stream_is_ordered_for_every_other => one_stream_then_others;
}

/// Many launches of one actor on the same buffer (after the first, launched without
/// cudarc's per-use events: `gpu_ref::locked`) and then readers and writers on other
/// streams: each sees exactly the work enqueued before it.
async fn one_stream_then_others(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let on_gpu = dev.state().info.map(|i| i.backend) == Some(BackendKind::Cuda);
    let (len, n) = (1 << 21, 40);
    let rounds = if on_gpu { 20_000 } else { 1 };
    let cfg = LaunchConfig::for_elements(len, 256);
    let (x, y0) = (rand_vec(len), rand_vec(len));
    let gx = dev.upload(f32s(&x)).await.unwrap();
    let gy = dev.upload(f32s(&y0)).await.unwrap();
    let (a, b) = (dev.actor_gpu(), dev.actor_gpu());
    let close = |got: f32, want: f64| (got as f64 - want).abs() < 1e-4 * (1.0 + want.abs());
    // n launches on a's stream, not awaited; b's launch reads y on its stream.
    for _ in 0..n {
        axpy_k::enqueue::<f32>(&a, cfg, 1.0, &gx, &mut gy.clone())
            .await
            .unwrap();
    }
    let mut gz = dev.alloc::<f32>(len).await.unwrap();
    slow_copy::launch(&b, cfg, 1, &gy, &mut gz).await.unwrap();
    let z = dev.download(&gz).await.unwrap();
    for i in (0..len).step_by(997) {
        let want = y0[i] + n as f64 * x[i] + 1.0;
        assert!(close(z[i], want), "b read y[{i}] = {} (+1), want {want}", z[i]);
    }
    // A slow read on b's stream, still running when a writes y again: the write waits.
    let gz2 = dev.alloc::<f32>(len).await.unwrap();
    let mut gz2_w = gz2.clone();
    let read = slow_copy::launch(&b, cfg, rounds, &gy, &mut gz2_w);
    futures::pin_mut!(read);
    let first = futures::poll!(read.as_mut());
    for _ in 0..n {
        axpy_k::enqueue::<f32>(&a, cfg, 1.0, &gx, &mut gy.clone())
            .await
            .unwrap();
    }
    match first {
        std::task::Poll::Ready(r) => r.unwrap(),
        std::task::Poll::Pending => read.await.unwrap(),
    }
    a.synchronize().await.unwrap();
    let (z2, y) = (dev.download(&gz2).await.unwrap(), dev.download(&gy).await.unwrap());
    for i in (0..len).step_by(997) {
        let before = y0[i] + n as f64 * x[i];
        assert!(
            close(z2[i], before + 1.0),
            "the slow read saw y[{i}] = {} (+1), want {before}",
            z2[i]
        );
        let after = before + n as f64 * x[i];
        assert!(close(y[i], after), "y[{i}] = {}, want {after}", y[i]);
    }
    sys.shutdown().await;
}

async fn enqueue_then_synchronize(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let gpu = dev.actor_gpu();
    let n = 10_000;
    let x = rand_vec(n);
    let gx = dev.upload(f32s(&x)).await.unwrap();
    let mut gy = dev.alloc::<f32>(n).await.unwrap();
    let cfg = LaunchConfig::for_elements(n, 128);
    for _ in 0..50 {
        axpy_k::enqueue::<f32>(&gpu, cfg, 0.5, &gx, &mut gy).await.unwrap();
    }
    gpu.synchronize().await.unwrap();
    // Read on another stream (the device's): ordered after the 50 launches.
    let y = dev.download(&gy).await.unwrap();
    for (y, x) in y.iter().zip(&x) {
        assert!((*y as f64 - 25.0 * x).abs() < 1e-4, "{y} vs {}", 25.0 * x);
    }
    sys.shutdown().await;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("actor-gpu");
    let dev = Device::open(&sys, config).await.unwrap();
    (sys, dev)
}

async fn independent_actors(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let workers: Vec<WorkerRef> = (0..4).map(|i| spawn(&dev, &sys, &format!("w{i}"))).collect();
    let n = 96;
    let jobs = workers.iter().enumerate().map(|(i, w)| {
        let (a, b, x) = (rand_vec(n * n), rand_vec(n * n), rand_vec(n * n));
        let alpha = 0.5 + i as f64;
        let w = w.clone();
        async move {
            let got = w
                .gemm_axpy(n, alpha as f32, f32s(&a), f32s(&b), f32s(&x))
                .await
                .unwrap();
            let mut want = x.clone();
            gemm_ref(false, false, n, n, n, alpha, &a, n, &b, n, 1.0, &mut want, n);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            let e = rel_err(&got, &want);
            assert!(e < 1e-5, "worker {i}: rel err {e}");
        }
    });
    futures::future::join_all(jobs).await;
    // A factorization and a level-1 call on two actors at once.
    let m = 48;
    let jobs = workers[..2].iter().map(|w| {
        let a = spd(m);
        let w = w.clone();
        async move {
            let (l, norm) = w.cholesky(m, a.clone()).await.unwrap();
            // L·Lᵀ (lower triangle of the result) against A.
            let low: Vec<f64> = (0..m * m).map(|k| if k % m >= k / m { l[k] } else { 0.0 }).collect();
            let mut llt = vec![0.0; m * m];
            gemm_ref(false, true, m, m, m, 1.0, &low, m, &low, m, 0.0, &mut llt, m);
            assert!(rel_err(&llt, &a) < 1e-10, "cholesky on an actor's GPU");
            let want = l[..m].iter().map(|v| v * v).sum::<f64>().sqrt();
            assert!((norm - want).abs() < 1e-10 * want);
        }
    });
    futures::future::join_all(jobs).await;
    for w in &workers {
        let (_, generation, in_place) = w.which().await.unwrap();
        assert!(in_place, "an in-process device runs actor GPUs in place");
        assert_eq!(generation, Some(dev.state().generation));
    }
    sys.shutdown().await;
}

async fn shared_buffers_ordered(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let on_gpu = dev.state().info.map(|i| i.backend) == Some(BackendKind::Cuda);
    let len = 1 << 20;
    let rounds = if on_gpu { 20_000 } else { 1 };
    let cfg = LaunchConfig::for_elements(len, 256);
    let ones = dev.upload(vec![1.0f32; len]).await.unwrap();
    // Two actors' GPUs, each its own stream. The writer's slow kernel is enqueued (its
    // launch polled once), then the reader's dot is enqueued on the other stream while
    // that kernel still runs: the reader's stream must wait for it.
    let (writer, reader) = (dev.actor_gpu(), dev.actor_gpu());
    let warm = dev.alloc::<f32>(len).await.unwrap();
    slow_copy::launch(&writer, cfg, 1, &ones, &mut warm.clone())
        .await
        .unwrap();
    for _ in 0..3 {
        let x: Vec<f32> = f32s(&rand_vec(len));
        let gx = dev.upload(x.clone()).await.unwrap();
        let gy = dev.alloc::<f32>(len).await.unwrap();
        let mut gy_w = gy.clone();
        let write = slow_copy::launch(&writer, cfg, rounds, &gx, &mut gy_w);
        futures::pin_mut!(write);
        let first = futures::poll!(write.as_mut());
        let got = reader.dot(&gy, &ones).await.unwrap() as f64;
        match first {
            std::task::Poll::Ready(r) => r.unwrap(),
            std::task::Poll::Pending => write.await.unwrap(),
        }
        let want: f64 = x.iter().map(|&v| v as f64 + 1.0).sum();
        assert!((got - want).abs() < 1e-3 * len as f64, "reader saw {got}, want {want}");
    }
    // Through actors: the writer answers, then the reader reads on its own stream.
    let (wa, ra) = (spawn(&dev, &sys, "writer"), spawn(&dev, &sys, "reader"));
    let x: Vec<f32> = f32s(&rand_vec(len));
    let gx = dev.upload(x.clone()).await.unwrap();
    let gy = dev.alloc::<f32>(len).await.unwrap();
    wa.write(gx, gy.clone(), rounds).await.unwrap();
    let got = ra.sum(gy).await.unwrap() as f64;
    let want: f64 = x.iter().map(|&v| v as f64 + 1.0).sum();
    assert!(
        (got - want).abs() < 1e-3 * len as f64,
        "reader actor saw {got}, want {want}"
    );
    sys.shutdown().await;
}

async fn restart_and_rebuild(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let w = spawn(&dev, &sys, "w");
    let n = 32;
    let run = |w: WorkerRef| async move {
        let (a, b, x) = (rand_vec(n * n), rand_vec(n * n), rand_vec(n * n));
        let got = w.gemm_axpy(n, 1.0, f32s(&a), f32s(&b), f32s(&x)).await.unwrap();
        let mut want = x;
        gemm_ref(false, false, n, n, n, 1.0, &a, n, &b, n, 1.0, &mut want, n);
        let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        assert!(rel_err(&got, &want) < 1e-5);
    };
    run(w.clone()).await;
    let (id1, gen1, _) = w.which().await.unwrap();
    assert!(w.fail().await.is_err());
    run(w.clone()).await;
    let (id2, gen2, _) = w.which().await.unwrap();
    assert_ne!(id1, id2, "a restarted actor gets a fresh GPU (and stream)");
    assert_eq!(gen1, gen2);
    let old = dev.upload(vec![1.0f32; 8]).await.unwrap();
    let new_gen = dev.rebuild().await.unwrap();
    run(w.clone()).await;
    let (id3, gen3, _) = w.which().await.unwrap();
    assert_eq!(id3, id2, "a rebuild keeps the actor");
    assert_eq!(gen3, Some(new_gen), "its GPU moved to the new generation");
    assert!(matches!(w.sum(old).await, Err(GpuError::Stale { .. })));
    sys.shutdown().await;
}

async fn own_random_sequences(config: DeviceConfig) {
    let (sys, dev) = open(config).await;
    let (a, b) = (spawn(&dev, &sys, "a"), spawn(&dev, &sys, "b"));
    let len = 1 << 16;
    let (ra, rb) = (a.uniform(len).await.unwrap(), b.uniform(len).await.unwrap());
    assert_ne!(ra[..64], rb[..64], "two actors drew the same numbers");
    for r in [&ra, &rb] {
        let mean = r.iter().map(|&v| v as f64).sum::<f64>() / len as f64;
        assert!(r.iter().all(|&v| v > 0.0 && v <= 1.0));
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }
    sys.shutdown().await;
}

async fn library_pool(config: DeviceConfig) {
    let (sys, dev) = open(config.with_library_pool(3)).await;
    let n = 64;
    let jobs = (0..6).map(|_| {
        let dev = dev.clone();
        tokio::spawn(async move {
            for _ in 0..3 {
                common::check_sgemm(&dev, n, n + 3, n - 5).await;
            }
            let x = f32s(&rand_vec(5000));
            let gx = dev.upload(x.clone()).await.unwrap();
            let mut gy = dev.alloc::<f32>(5000).await.unwrap();
            axpy_k::launch::<f32>(&dev, LaunchConfig::for_elements(5000, 128), 2.0, &gx, &mut gy)
                .await
                .unwrap();
            let y = dev.download(&gy).await.unwrap();
            assert!(y.iter().zip(&x).all(|(y, x)| (y - 2.0 * x).abs() < 1e-6));
        })
    });
    for j in futures::future::join_all(jobs).await {
        j.unwrap();
    }
    sys.shutdown().await;
}

async fn disabled_library(mut config: DeviceConfig) {
    config.libraries.solver = false;
    let (sys, dev) = open(config).await;
    let w = spawn(&dev, &sys, "w");
    let e = w.cholesky(4, spd(4)).await.unwrap_err();
    assert!(matches!(e, GpuError::Unsupported(_)), "{e}");
    sys.shutdown().await;
}

/// A cold NVRTC compile on one actor's GPU does not hold up another actor's launches of
/// a kernel already loaded: the other finishes many launches before the compile ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gpu_a_cold_compile_does_not_block_other_actors_launches() {
    let dir = std::env::temp_dir().join(format!("atomr-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = DeviceConfig::cuda(0);
    config.kernel_cache_dir = Some(dir.clone());
    let (sys, dev) = open(config).await;
    let (warm, cold) = (dev.actor_gpu(), dev.actor_gpu());
    let x = dev.upload(f32s(&rand_vec(4096))).await.unwrap();
    let mut y = dev.alloc::<f32>(4096).await.unwrap();
    let cfg = LaunchConfig::for_elements(4096, 128);
    axpy_k::launch::<f32>(&warm, cfg, 1.0, &x, &mut y).await.unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut y2 = dev.alloc::<f64>(4096).await.unwrap();
    let x2 = dev.upload(rand_vec(4096)).await.unwrap();
    let compile = async {
        // f64 is a new instantiation: compiled now, into an empty cache directory.
        axpy_k::launch::<f64>(&cold, cfg, 1.0, &x2, &mut y2).await.unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let launches = async {
        tokio::task::yield_now().await;
        let mut n = 0;
        while n < 20 {
            axpy_k::launch::<f32>(&warm, cfg, 1.0, &x, &mut y).await.unwrap();
            n += 1;
        }
        done.load(std::sync::atomic::Ordering::SeqCst)
    };
    let ((), compile_finished_first) = futures::join!(compile, launches);
    assert!(
        !compile_finished_first,
        "20 launches of a loaded kernel waited for a compile"
    );
    let _ = std::fs::remove_dir_all(&dir);
    sys.shutdown().await;
}
