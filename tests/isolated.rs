//! Isolated devices: the inner tier in a worker process (this test binary, re-entered
//! through `#[gpu_main]`). Its own harness (`harness = false` in Cargo.toml): a worker
//! must start at `main`, which libtest owns otherwise. Prints libtest's summary line, so
//! `.gpu/run.sh` counts it like the others; `--ignored` runs the GPU cases.
//!
//! CPU cases run in CI; the GPU cases (sticky faults: a trap, 719, and an illegal
//! address, 700) on the H200.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::Status;
use atomr_accel_cuda::hopper::{TensorMap, TensorMapBuilder};
use atomr_accel_cuda::isolation::IsolationConfig;
use atomr_accel_cuda::kernel::dsl::prelude::*;
use atomr_accel_cuda::module::{KernelArgs, KernelSource, LaunchConfig, ModuleImage};
use atomr_accel_cuda::prelude::BackendChoice;
use atomr_accel_cuda::prelude::{Activation, Epilogue, GraphBuilder, Matmul, SparseOp};
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{gpu_main, kernel, Device, DeviceConfig, FftShape, Gemm, GpuError, GpuRef, KernelArg};
use common::slow::slow_copy;
use common::{check_sgemm, gemm_ref, rand_vec, rel_err};

/// Parameters by value, with trailing padding (20 bytes of fields in 24).
#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
pub struct Affine {
    pub scale: f64,
    pub shift: f64,
    pub bias: i32,
}

/// `y = scale·x + shift + bias`.
#[kernel]
pub fn affine<T: Float>(p: Affine, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = T::from_f64(p.scale) * x[i] + T::from_f64(p.shift + p.bias as f64);
    }
}

/// A device-side `trap` (CUDA error 719: sticky).
#[kernel(cuda = r#"
extern "C" __global__ void fault_trap(float* y, unsigned long long y_len) {
    if (threadIdx.x == 0) { y[0] = 1.0f; __trap(); }
}
"#)]
pub fn fault_trap(y: &mut [f32]) {
    cpu_unsupported();
}

/// A write far outside `y` (CUDA error 700, illegal address: sticky).
#[kernel(cuda = r#"
extern "C" __global__ void fault_oob(float* y, unsigned long long y_len, unsigned long long at) {
    if (threadIdx.x == 0) { y[at] = 1.0f; }
}
"#)]
pub fn fault_oob(y: &mut [f32], at: u64) {
    cpu_unsupported();
}

type Case = fn(DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// A case: name, body, device, whether it needs a GPU.
type Entry = (&'static str, Case, fn() -> DeviceConfig, bool);

fn cpu() -> DeviceConfig {
    DeviceConfig::cpu().isolated()
}

fn gpu() -> DeviceConfig {
    DeviceConfig::cuda(0).isolated()
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("isolated");
    let dev = Device::open(&sys, config).await.expect("the isolated device opens");
    assert!(dev.worker_pid().is_some_and(|p| p != std::process::id()));
    (sys, dev)
}

/// The `affine` #[kernel] through the worker, against a float64 reference.
async fn check_kernel(dev: &Device, n: usize) {
    let x = rand_vec(n);
    let p = Affine {
        scale: 1.5,
        shift: -0.25,
        bias: 3,
    };
    let gx = dev
        .upload(x.iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut gy = dev.alloc::<f32>(n).await.unwrap();
    affine::launch::<f32>(dev, LaunchConfig::for_elements(n, 256), p, &gx, &mut gy)
        .await
        .unwrap();
    let got = dev.download(&gy).await.unwrap();
    for (i, (&g, &x)) in got.iter().zip(&x).enumerate() {
        let want = 1.5 * (x as f32 as f64) - 0.25 + 3.0;
        assert!((g as f64 - want).abs() < 1e-5, "affine[{i}] = {g}, want {want}");
    }
}

fn round_trip(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let (_sys, dev) = open(config).await;
        check_sgemm(&dev, 96, 80, 64).await;
        check_kernel(&dev, 10_000).await;
        check_sparse(&dev).await;
        check_library_kernels(&dev).await;
        // Its memory and streams live in the worker: nothing to lend in this process.
        let e = dev.interop().await.unwrap_err();
        assert!(matches!(&e, GpuError::Unsupported(m) if m.contains("isolated")), "{e}");
        // Every element type crosses exactly: small (inline) and large (shared memory).
        for n in [3usize, 1 << 20] {
            let v: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let g = dev.upload(v.clone()).await.unwrap();
            assert_eq!(dev.download(&g).await.unwrap(), v);
            let w: Vec<u8> = v.iter().map(|x| x.wrapping_mul(3)).collect();
            dev.write(&g, w.clone()).await.unwrap();
            assert_eq!(dev.download(&g).await.unwrap(), w);
            let h: Vec<half::f16> = rand_vec(n).iter().map(|&x| half::f16::from_f64(x)).collect();
            let g = dev.upload(h.clone()).await.unwrap();
            assert_eq!(dev.download(&g).await.unwrap(), h);
            let c: Vec<atomr_accel_cuda::dtype::Complex<f64>> = rand_vec(2 * n)
                .chunks(2)
                .map(|p| atomr_accel_cuda::dtype::Complex { re: p[0], im: p[1] })
                .collect();
            let g = dev.upload(c.clone()).await.unwrap();
            let back = dev.alloc(c.len()).await.unwrap();
            dev.copy(&g, &back).await.unwrap();
            assert_eq!(dev.download(&back).await.unwrap(), c);
        }
        // Library actors answer through the worker too.
        let x = dev.alloc::<f32>(1 << 20).await.unwrap();
        dev.seed_rng(7).await.unwrap();
        dev.fill_normal(&x, 2.0, 0.5).await.unwrap();
        let v = dev.download(&x).await.unwrap();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!((mean - 2.0).abs() < 0.01, "mean {mean}");
        // A generator kind crosses as its variant (the Sobol points are the same
        // everywhere: 0, ½, ¾, ¼ + 2^-32).
        dev.rng_generator(atomr_accel_cuda::RngKind::Sobol32, 0).await.unwrap();
        let q = dev.alloc::<f64>(4).await.unwrap();
        dev.fill_uniform(&q).await.unwrap();
        let eps = 1.0 / 4_294_967_296.0;
        assert_eq!(
            dev.download(&q).await.unwrap(),
            vec![eps, 0.5 + eps, 0.75 + eps, 0.25 + eps]
        );
        dev.rng_generator(atomr_accel_cuda::RngKind::Philox, 3).await.unwrap();
        let s = dev.upload(vec![1.0f32; 64]).await.unwrap();
        let f = dev.alloc(33).await.unwrap();
        dev.fft_r2c(&s, &f, &FftShape::new(&[64], 1)).await.unwrap();
        let spec = dev.download(&f).await.unwrap();
        assert!(
            (spec[0].re - 64.0).abs() < 1e-4 && spec[1].re.abs() < 1e-4,
            "{:?}",
            &spec[..2]
        );
        let (nrm, dot) = (dev.nrm2(&s).await.unwrap(), dev.dot(&s, &s).await.unwrap());
        assert!((nrm - 8.0).abs() < 1e-5 && (dot - 64.0).abs() < 1e-4);
        check_matmul(&dev).await;
        check_events(&dev).await;
        check_graphs(&dev).await;
        check_graphs(&dev).await;
        // An operation added as one handler crosses too (its message is generated).
        let mut w: Vec<f64> = rand_vec(301);
        w[117] = -9.0;
        assert_eq!(dev.iamax(&dev.upload(w).await.unwrap()).await.unwrap(), 117);
        // Views cross as their buffer and window: writes, copies between views of one
        // buffer, BLAS and a kernel on views touch their windows only.
        let all = rand_vec(1000);
        let big = dev.upload(all.clone()).await.unwrap();
        let fresh = rand_vec(200);
        dev.write(&big.view(100..300).unwrap(), fresh.clone()).await.unwrap();
        dev.copy(&big.view(100..200).unwrap(), &big.view(600..700).unwrap())
            .await
            .unwrap();
        dev.axpy(2.0, &big.view(0..50).unwrap(), &big.view(900..950).unwrap())
            .await
            .unwrap();
        let mut want = all.clone();
        want[100..300].copy_from_slice(&fresh);
        want.copy_within(100..200, 600);
        for i in 0..50 {
            want[900 + i] += 2.0 * want[i];
        }
        assert_eq!(dev.download(&big).await.unwrap(), want);
        assert_eq!(
            dev.download(&big.view(600..610).unwrap()).await.unwrap(),
            want[600..610]
        );
        let xs = dev.upload(vec![2.0f32; 64]).await.unwrap();
        let ys = dev.upload(vec![0.0f32; 64]).await.unwrap();
        let p = Affine {
            scale: 1.0,
            shift: 0.5,
            bias: 0,
        };
        let mut yv = ys.view(32..).unwrap();
        affine::launch::<f32>(
            &dev,
            LaunchConfig::for_elements(32, 32),
            p,
            &xs.view(..32).unwrap(),
            &mut yv,
        )
        .await
        .unwrap();
        let got = dev.download(&ys).await.unwrap();
        assert!(
            got[..32].iter().all(|&v| v == 0.0) && got[32..].iter().all(|&v| v == 2.5),
            "{got:?}"
        );
        // Two views of one buffer in one launch: each crosses as its window.
        let zs: Vec<f32> = rand_vec(64).iter().map(|&v| v as f32).collect();
        let gz = dev.upload(zs.clone()).await.unwrap();
        let mut upper = gz.view(32..).unwrap();
        affine::launch::<f32>(
            &dev,
            LaunchConfig::for_elements(32, 32),
            p,
            &gz.view(..32).unwrap(),
            &mut upper,
        )
        .await
        .unwrap();
        let got = dev.download(&gz).await.unwrap();
        assert_eq!(got[..32], zs[..32]);
        for i in 0..32 {
            assert_eq!(got[32 + i], zs[i] * 1.0 + 0.5, "two views of one buffer at {i}");
        }
        // A sequence of launches crosses as one request, run in order in the worker.
        let double = Affine {
            scale: 2.0,
            shift: 0.0,
            bias: 1,
        };
        let (mut lower, mut upper) = (gz.view(..32).unwrap(), gz.view(32..).unwrap());
        let cfg = LaunchConfig::for_elements(32, 32);
        dev.launch_all([
            affine::call::<f32>(cfg, double, &gz.view(32..).unwrap(), &mut lower),
            affine::call::<f32>(cfg, double, &gz.view(..32).unwrap(), &mut upper),
        ])
        .await
        .unwrap();
        let again = dev.download(&gz).await.unwrap();
        for i in 0..32 {
            let low = 2.0 * got[32 + i] + 1.0;
            assert_eq!((again[i], again[32 + i]), (low, 2.0 * low + 1.0), "a sequence at {i}");
        }
        dev.stop().await;
    })
}

fn larger_than_the_arena_goes_inline(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let config = config.with_isolation(IsolationConfig {
            arena_bytes: 1 << 20,
            ..Default::default()
        });
        let (_sys, dev) = open(config).await;
        let v: Vec<f32> = rand_vec(3 << 20).iter().map(|&x| x as f32).collect();
        let g = dev.upload(v.clone()).await.unwrap();
        assert_eq!(dev.download(&g).await.unwrap(), v);
        dev.stop().await;
    })
}

fn bad_input_is_a_typed_error_and_the_worker_keeps_serving(
    config: DeviceConfig,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let on_gpu = config.backend == atomr_accel_cuda::device::BackendChoice::Cuda;
        let (_sys, dev) = open(config.clone()).await;
        let a = dev.upload(vec![1.0f32; 16]).await.unwrap();
        let c = dev.alloc::<f32>(16).await.unwrap();
        // m·k larger than the buffer.
        let e = dev.gemm(Gemm::<f32>::new(8, 8, 8), &a, &a, &c).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        // Mismatched lengths.
        let short = dev.alloc::<f32>(4).await.unwrap();
        let e = dev.copy(&a, &short).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        // A zero size, and a huge allocation.
        let e = dev.alloc::<f32>(0).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        let e = dev.alloc::<f32>(1 << 40).await.unwrap_err();
        assert!(matches!(e, GpuError::OutOfMemory { .. }), "{e:?}");
        // A buffer of an in-process device, and one of another isolated device.
        let sys2 = ActorSystem::new("isolated-2");
        let local = Device::open(&sys2, DeviceConfig::cpu()).await.unwrap();
        let lb = local.upload(vec![1.0f32; 16]).await.unwrap();
        let e = dev.download(&lb).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        let e = local.download(&a).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        let sys3 = ActorSystem::new("isolated-3");
        let other = Device::open(&sys3, config).await.unwrap();
        let ob = other.upload(vec![1.0f32; 16]).await.unwrap();
        let e = dev.download(&ob).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        // Host access to a worker's buffer, and what does not cross yet.
        assert!(matches!(a.with_host(|_| ()), Err(GpuError::Unsupported(_))));
        let m = dev.alloc_managed::<f32>(16).await.unwrap();
        assert!(matches!(m.with_host_mut(|_| ()), Err(GpuError::Unsupported(_))));
        dev.write(&m, vec![2.0f32; 16]).await.unwrap();
        assert_eq!(dev.download(&m).await.unwrap(), vec![2.0f32; 16]);
        // Pinned buffers stay with their own device.
        let lp = local.pinned::<f32>(16).await.unwrap();
        let e = dev.write_pinned(&c, lp).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "an in-process pinned buffer: {e:?}"
        );
        let (ip, op) = (
            dev.pinned::<f32>(16).await.unwrap(),
            other.pinned::<f32>(16).await.unwrap(),
        );
        let e = local.write_pinned(&lb, ip).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "an isolated pinned buffer in-process: {e:?}"
        );
        let e = dev.write_pinned(&c, op).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "another isolated device's pinned buffer: {e:?}"
        );
        let e = dev.pinned::<f32>(0).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        // Raw modules cross to the worker: a GPU's loads them (check_modules launches
        // them), a CPU device's has none.
        let empty = dev.load_module(KernelSource::new("", &[])).await;
        let image = dev
            .load_module_image(ModuleImage::Ptx(".version 8.0\n.target sm_90\n".into()), &["k"])
            .await;
        if on_gpu {
            empty.unwrap();
            let e = image.unwrap_err();
            assert!(matches!(e, GpuError::InvalidArgument(_)), "an image without `k`: {e:?}");
        } else {
            for e in [empty.unwrap_err(), image.unwrap_err()] {
                assert!(
                    matches!(&e, GpuError::Unsupported(m) if m.contains("GPU only")),
                    "{e:?}"
                );
            }
        }
        // A TMA map over an isolated device's buffer is checked here and encoded by the
        // worker when launched (check_modules launches one on a GPU).
        let tiles = dev.alloc::<f32>(64 * 64).await.unwrap();
        let map = TensorMapBuilder::new(&tiles, &[64, 64], &[32, 16]).build().unwrap();
        assert_eq!(map.box_bytes(), 32 * 16 * 4);
        let e = TensorMapBuilder::new(&tiles, &[64, 64], &[32, 300])
            .build()
            .unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "a box beyond 256: {e:?}");
        // Events cross too, but each stays with its own device.
        let (ev, lev, oev) = (
            dev.create_event().await.unwrap(),
            local.create_event().await.unwrap(),
            other.create_event().await.unwrap(),
        );
        let e = dev.record_event(&lev, &[&a]).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "an in-process event: {e:?}");
        let e = dev.record_event(&oev, &[&a]).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "another isolated device's event: {e:?}"
        );
        let e = local.record_event(&ev, &[&lb]).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "an isolated event in-process: {e:?}"
        );
        let e = dev.wait_event(&ev).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "never recorded: {e:?}");
        // Graphs too.
        let lg = local.capture_graph(GraphBuilder::new().copy(&lb, &lb.clone())).await;
        if let Ok(lg) = lg {
            let e = dev.replay(&lg, 1).await.unwrap_err();
            assert!(matches!(e, GpuError::InvalidArgument(_)), "an in-process graph: {e:?}");
        }
        let og = other
            .capture_graph(GraphBuilder::new().copy(&ob, &other.alloc::<f32>(16).await.unwrap()))
            .await
            .unwrap();
        let e = dev.replay(&og, 1).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "another isolated device's graph: {e:?}"
        );
        // Copies between devices go through this process's memory (an isolated
        // device's buffers live in its worker); the other side's buffers are checked.
        let lc = local.alloc::<f32>(16).await.unwrap();
        dev.copy_to(&a, &local, &lc).await.unwrap();
        assert_eq!(local.download(&lc).await.unwrap(), vec![1.0f32; 16]);
        local.copy_to(&lb, &dev, &c).await.unwrap();
        assert_eq!(dev.download(&c).await.unwrap(), vec![1.0f32; 16]);
        let e = dev.copy_to(&a, &local, &c).await.unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "dst of the source device: {e:?}"
        );
        // Still serving.
        check_sgemm(&dev, 32, 32, 32).await;
        other.stop().await;
        dev.stop().await;
    })
}

/// The worker's operations join this process's timeline on one clock: `enable_timeline`
/// reaches the worker, `take_timeline` brings its operations back (copies and level-1
/// BLAS among them), in order with this process's own — an in-process CPU device's scal
/// issued between two of the worker's operations lands between them — and the device's
/// metrics count them.
fn the_timeline_crosses_processes(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        use atomr_accel_cuda::observability::{enable_timeline, take_timeline};
        let (sys, dev) = open(config).await;
        let mut local_config = DeviceConfig::cpu();
        local_config.device_id = 7;
        let local = Device::open(&sys, local_config).await.unwrap();
        let _ = take_timeline();
        enable_timeline(true);
        let x = dev.upload(rand_vec(4096)).await.unwrap();
        let y = dev.alloc::<f64>(4096).await.unwrap();
        dev.axpy(2.0, &x, &y).await.unwrap();
        let lx = local.upload(rand_vec(64)).await.unwrap();
        local.scal(3.0, &lx).await.unwrap();
        check_sgemm(&dev, 64, 64, 64).await;
        dev.download(&y).await.unwrap();
        enable_timeline(false);
        let events = take_timeline();
        let start = |name: &str, device: usize| {
            events
                .iter()
                .find(|e| e.name == name && e.device == device)
                .unwrap_or_else(|| panic!("no {name} of device {device} on the timeline: {events:?}"))
                .start_us
        };
        let worker_device = 0; // the ordinal of `cpu()` and `gpu()`
        let (axpy, scal, gemm) = (
            start("axpy<f64>", worker_device),
            start("scal<f64>", 7),
            start("gemm<f32>", worker_device),
        );
        assert!(
            axpy < scal && scal < gemm,
            "one clock: axpy {axpy} < scal {scal} < gemm {gemm}"
        );
        for copy in ["htod<f64>", "dtoh<f64>", "htod<f32>", "dtoh<f32>"] {
            assert!(
                events
                    .iter()
                    .any(|e| e.name == copy && e.lane == "copy" && e.device == worker_device),
                "{copy} is on the timeline"
            );
        }
        let latency = dev.metrics().await.unwrap().latency;
        assert!(
            latency.count() >= 6,
            "the worker's operations in the metrics: {}",
            latency.count()
        );
        // The device's own timeline: its worker is told, its take brings the worker's
        // operations back.
        dev.enable_timeline(true).unwrap();
        dev.nrm2(&x).await.unwrap();
        dev.enable_timeline(false).unwrap();
        let own = dev.take_timeline().await.unwrap();
        assert!(own.iter().any(|e| e.name == "nrm2<f64>"), "{own:?}");
        dev.stop().await;
    })
}

fn dropped_buffers_are_freed_in_the_worker(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let (_sys, dev) = open(config).await;
        let (free0, _) = dev.memory().await.unwrap();
        // 100 × 32 MiB: a leak would be 3.2 GB.
        for _ in 0..100 {
            let b = dev.alloc::<f32>(8 << 20).await.unwrap();
            let c = b.clone();
            drop(b);
            dev.write(&c, vec![1.0f32; 16]).await.unwrap_err(); // wrong length, still typed
            drop(c);
        }
        // Frees travel after the last request; give the worker a moment.
        let mut free = 0;
        for _ in 0..100 {
            free = dev.memory().await.unwrap().0;
            if free0.saturating_sub(free) < (256 << 20) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            free0.saturating_sub(free) < (256 << 20),
            "memory grew by {} MiB",
            (free0 - free) >> 20
        );
        dev.stop().await;
    })
}

/// Kills the worker as a crash would; returns the time until the device serves again.
async fn crash_and_recover(dev: &Device, fault: impl Future<Output = Result<(), GpuError>>) -> Duration {
    let before = dev.state().generation;
    let old_pid = dev.worker_pid().unwrap();
    let stale = dev.upload(vec![1.0f32; 8]).await.unwrap();
    // In flight alongside the fault: each must be answered (done or a typed error).
    let mut pending = vec![];
    for _ in 0..8 {
        let d = dev.clone();
        pending.push(tokio::spawn(async move { check_sgemm_result(&d).await }));
    }
    let t0 = Instant::now();
    let r = fault.await;
    if let Err(e) = &r {
        assert!(
            e.is_sticky() || matches!(e, GpuError::DeviceLost(_)),
            "the faulting request: {e:?}"
        );
    }
    // Requests made while the worker restarts are queued and served by the new one.
    check_sgemm(dev, 64, 64, 64).await;
    let recovered = t0.elapsed();
    for p in pending {
        tokio::time::timeout(Duration::from_secs(60), p)
            .await
            .expect("every asker is answered")
            .unwrap();
    }
    let s = dev.state();
    assert!(s.generation > before, "generation {} after {before}", s.generation);
    assert!(matches!(s.status, Status::Ready));
    assert_ne!(dev.worker_pid(), Some(old_pid));
    let e = dev.download(&stale).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    check_kernel(dev, 4096).await;
    recovered
}

/// An SGEMM whose result is either right or a typed error.
async fn check_sgemm_result(dev: &Device) {
    let n = 128;
    let a = rand_vec(n * n);
    let run = async {
        let ga = dev.upload(a.iter().map(|&v| v as f32).collect::<Vec<_>>()).await?;
        let gc = dev.alloc::<f32>(n * n).await?;
        dev.gemm(Gemm::<f32>::new(n, n, n), &ga, &ga, &gc).await?;
        dev.download(&gc).await
    };
    match run.await {
        Ok(got) => {
            let mut want = vec![0.0; n * n];
            gemm_ref(false, false, n, n, n, 1.0, &a, n, &a, n, 0.0, &mut want, n);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            assert!(rel_err(&got, &want) < 1e-5);
        }
        // In flight when the worker faulted (or the device stopped): its own typed error
        // (NoReply: the worker's inner actor dropped it in the fault; Stopped: it reached
        // a stopped device), never a hang.
        Err(e) => assert!(
            e.is_sticky()
                || matches!(
                    e,
                    GpuError::DeviceLost(_) | GpuError::Stale { .. } | GpuError::NoReply(_) | GpuError::Stopped(_)
                ),
            "{e:?}"
        ),
    }
}

/// The pid of the device's warm standby once it is ready.
async fn standby_ready(dev: &Device) -> u32 {
    let t0 = Instant::now();
    loop {
        if let Some(pid) = dev.standby_pid() {
            return pid;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no standby worker within 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A killed worker is replaced by the warm standby (the worker serving next is the one
/// that was waiting), then a new standby starts; without a standby, by a new worker.
fn a_killed_worker_is_respawned(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        for standby in [true, false] {
            let iso = config.isolation.clone().unwrap_or_default();
            let config = config.clone().with_isolation(IsolationConfig { standby, ..iso });
            let (_sys, dev) = open(config).await;
            let mut times = vec![];
            for cycle in 0..5 {
                let next = if standby { Some(standby_ready(&dev).await) } else { None };
                let d = dev.clone();
                let t = crash_and_recover(&dev, async move {
                    let (mut rx, g0) = (d.watch_state(), d.state().generation);
                    let t0 = Instant::now();
                    d.kill_worker()?;
                    // A crash is noticed when the channel closes: requests sent before that
                    // fail (in flight), later ones queue for the next worker. (With a
                    // standby the next one may already serve: a newer generation.)
                    let _ = tokio::time::timeout(
                        Duration::from_secs(10),
                        rx.wait_for(|s| s.generation > g0 || !matches!(s.status, Status::Ready)),
                    )
                    .await;
                    let noticed = t0.elapsed();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(10),
                        rx.wait_for(|s| s.generation > g0 && matches!(s.status, Status::Ready)),
                    )
                    .await;
                    println!("      noticed after {noticed:?}, serving after {:?}", t0.elapsed());
                    Ok(())
                })
                .await;
                if let Some(pid) = next {
                    assert_eq!(dev.worker_pid(), Some(pid), "the standby took over");
                }
                println!("    kill {cycle} (standby {standby}): serving again after {t:?}");
                times.push(t);
            }
            if standby {
                let pid = standby_ready(&dev).await;
                assert_ne!(dev.worker_pid(), Some(pid), "a new standby, not the serving worker");
            } else {
                assert_eq!(dev.standby_pid(), None);
            }
            times.sort();
            println!("    standby {standby}: median {:?} over 5 kills", times[2]);
            dev.stop().await;
            assert_eq!(dev.standby_pid(), None, "the standby ends with the device");
        }
    })
}

/// A worker that stops answering (`SIGSTOP`: a hang of the whole process) is taken for
/// hung within the heartbeat's limit, killed and replaced by the standby; every request
/// it held is answered `DeviceLost`, and a flood meanwhile is held back by the in-flight
/// bound (`Backpressure` at once) instead of piling up.
fn a_hung_worker_is_replaced_and_a_flood_held_back(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let iso = config.isolation.clone().unwrap_or_default();
        let config = config.with_isolation(IsolationConfig {
            heartbeat: Duration::from_millis(100),
            hang_timeout: Duration::from_secs(1),
            max_in_flight: 8,
            ..iso
        });
        let (_sys, dev) = open(config).await;
        let host: Vec<f32> = rand_vec(64).iter().map(|&v| v as f32).collect();
        let x = dev.upload(host.clone()).await.unwrap();
        assert_eq!(dev.download(&x).await.unwrap(), host);
        let standby = standby_ready(&dev).await;
        let hung = dev.worker_pid().unwrap();
        // SAFETY: signals a child process of this test, which it owns.
        assert_eq!(unsafe { libc::kill(hung as i32, libc::SIGSTOP) }, 0);
        let t0 = Instant::now();
        // A signal takes effect when the process is next scheduled: wait until it shows
        // as stopped, so that no request of the flood is served before.
        let stopped = || {
            std::fs::read_to_string(format!("/proc/{hung}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
                .unwrap_or(false)
        };
        while !stopped() {
            assert!(t0.elapsed() < Duration::from_millis(500), "the worker did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
        let flood: Vec<_> = (0..20)
            .map(|_| {
                let (d, x) = (dev.clone(), x.clone());
                tokio::spawn(async move { (d.download(&x).await, t0.elapsed()) })
            })
            .collect();
        let (mut held_back, mut lost, mut slowest) = (0, 0, Duration::ZERO);
        for t in flood {
            let (r, at) = t.await.unwrap();
            match r {
                Err(GpuError::Backpressure { capacity: 8 }) => held_back += 1,
                Err(GpuError::DeviceLost(m)) if m.contains("hung") => {
                    lost += 1;
                    slowest = slowest.max(at);
                }
                other => panic!("a request of the flood, after {at:?}: {:?}", other.map(|v| v.len())),
            }
        }
        assert_eq!((held_back, lost), (12, 8), "8 in flight at most, the rest held back");
        println!("    hang detected and its 8 requests answered after {slowest:?}");
        assert!(
            slowest < Duration::from_secs(5),
            "detected after {slowest:?} (limit 1 s)"
        );
        // The standby serves now; the stopped worker is gone.
        let fresh = dev.upload(host.clone()).await.unwrap();
        assert_eq!(dev.download(&fresh).await.unwrap(), host);
        assert_eq!(dev.worker_pid(), Some(standby));
        assert!(matches!(dev.download(&x).await, Err(GpuError::Stale { .. })));
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(hung as i32, 0) } == 0;
        assert!(!alive, "the hung worker was killed and reaped");
        dev.stop().await;
    })
}

/// A worker program that sends garbage, an oversized frame or a frame it never finishes
/// makes the device's start fail with a typed error — no hang, no allocation of what
/// the frame claims.
fn a_worker_sending_garbage_is_an_error(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        // Frames as `[u64 length][u8 kind][u64 id]`, little-endian, on descriptor 3.
        let scripts = [
            (
                "an unknown kind",
                r"\011\000\000\000\000\000\000\000\310\000\000\000\000\000\000\000\000",
            ),
            (
                "a 1 TiB frame",
                r"\000\000\000\000\000\001\000\000\012\000\000\000\000\000\000\000\000",
            ),
            (
                "a 32 GiB frame cut short",
                r"\000\000\000\000\010\000\000\000\012\000\000\000\000\000\000\000\000abc",
            ),
        ];
        for (what, bytes) in scripts {
            let t0 = Instant::now();
            let config = config.clone().with_isolation(IsolationConfig {
                program: Some("/bin/sh".into()),
                args: vec!["-c".into(), format!("printf '{bytes}' >&3; exec 3>&-; sleep 30")],
                standby: false,
                max_restarts: 0,
                start_timeout: Duration::from_secs(20),
                ..Default::default()
            });
            let sys = ActorSystem::new("garbage");
            let e = Device::open(&sys, config).await.expect_err(what);
            println!("    {what}: {e} (after {:?})", t0.elapsed());
            assert!(
                matches!(e, GpuError::DeviceLost(_) | GpuError::Io { .. }),
                "{what}: {e:?}"
            );
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "{what}: took {:?}",
                t0.elapsed()
            );
            sys.shutdown().await;
        }
    })
}

fn a_crash_loop_ends_in_device_lost(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let config = config.with_isolation(IsolationConfig {
            max_restarts: 2,
            ..Default::default()
        });
        let (_sys, dev) = open(config).await;
        for _ in 0..3 {
            let ready = dev.ready().await;
            if ready.is_err() {
                break;
            }
            dev.kill_worker().unwrap();
            // Wait for this worker to be gone before killing the next one.
            let mut rx = dev.watch_state();
            let _ = tokio::time::timeout(
                Duration::from_secs(30),
                rx.wait_for(|s| !matches!(s.status, Status::Ready)),
            )
            .await;
        }
        let mut rx = dev.watch_state();
        tokio::time::timeout(
            Duration::from_secs(60),
            rx.wait_for(|s| matches!(s.status, Status::Lost(_))),
        )
        .await
        .expect("the device is given up")
        .unwrap();
        let e = dev.alloc::<f32>(4).await.unwrap_err();
        assert!(
            matches!(&e, GpuError::DeviceLost(m) if m.contains("giving up")),
            "{e:?}"
        );
    })
}

fn stopping_with_queued_work_answers_every_asker(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let (_sys, dev) = open(config).await;
        let mut asks = vec![];
        for _ in 0..32 {
            let d = dev.clone();
            asks.push(tokio::spawn(async move { check_sgemm_result(&d).await }));
        }
        dev.kill_worker().unwrap();
        dev.stop().await;
        for a in asks {
            tokio::time::timeout(Duration::from_secs(60), a)
                .await
                .expect("answered")
                .unwrap();
        }
        let e = dev.alloc::<f32>(4).await.unwrap_err();
        assert!(matches!(e, GpuError::DeviceLost(_)), "{e:?}");
    })
}

fn a_worker_that_cannot_start_is_an_error(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let config = config.with_isolation(IsolationConfig {
            program: Some("/nonexistent/worker".into()),
            max_restarts: 1,
            ..Default::default()
        });
        let e = open_refused(config).await;
        assert!(
            matches!(&e, GpuError::DeviceLost(m) if m.contains("giving up")),
            "{e:?}"
        );
    })
}

/// Opens a device that must refuse to start, and its error — answered, not hung: well
/// within 30 s.
async fn open_refused(config: DeviceConfig) -> GpuError {
    let sys = ActorSystem::new("isolated");
    let t0 = Instant::now();
    let e = Device::open(&sys, config).await.unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "answered after {:?}",
        t0.elapsed()
    );
    e
}

fn a_program_without_gpu_main_is_refused(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        // The quickstart example (built by `cargo test`) has no #[gpu_main]: started as a
        // worker, it stops at its first ActorSystem, and the device says why — once.
        let exe = std::env::current_exe().unwrap();
        let quickstart = exe.parent().unwrap().parent().unwrap().join("examples/quickstart");
        assert!(quickstart.exists(), "{} is built by `cargo test`", quickstart.display());
        let config = config.with_isolation(IsolationConfig {
            program: Some(quickstart),
            ..Default::default()
        });
        let e = open_refused(config).await;
        assert!(
            matches!(&e, GpuError::Unsupported(m) if m.contains("gpu_main")),
            "{e:?}"
        );
    })
}

/// Twenty sticky faults in one user process, ten of each kind alternating (719 trap, 700
/// illegal address), each taken over by the warm standby: on the GPU real faulting
/// kernels, on the CPU device injected faults (`TestHooks::inject_fault`). After each,
/// SGEMM and a `#[kernel]` are right and every asker was answered. Prints, per kind, the
/// median time from the fault to a checked SGEMM and from the fault's detection (the
/// faulting launch answered) to the next worker serving — issue 26's failover figures
/// in README's reliability table.
fn ten_faults_of_each_kind_recover(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let on_gpu = matches!(config.backend, BackendChoice::Cuda);
        let config = config.with_isolation(IsolationConfig {
            max_restarts: 40,
            ..Default::default()
        });
        let (_sys, dev) = open(config).await;
        check_sgemm(&dev, 512, 512, 512).await;
        // Per kind (700, 719): fault → serving, and detection (the faulting launch
        // answered) → the next worker serving.
        let mut times: [Vec<Duration>; 2] = Default::default();
        let mut after_detection: [Vec<Duration>; 2] = Default::default();
        for cycle in 0..20 {
            let next = standby_ready(&dev).await;
            let d = dev.clone();
            let trap = cycle % 2 == 0;
            let code = if trap { 719 } else { 700 };
            let detected = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
            let note = detected.clone();
            let t = crash_and_recover(&dev, async move {
                let (mut rx, g0) = (d.watch_state(), d.state().generation);
                // The buffer first, so that the time below is the faulting launch's alone
                // (the kernel's module load in the worker, the launch, the fault surfacing).
                let mut y = d.alloc::<f32>(256).await?;
                let t0 = Instant::now();
                let r = if !on_gpu {
                    Err(d.inject_fault(code).await)
                } else if trap {
                    fault_trap::launch(&d, LaunchConfig::for_elements(32, 32), &mut y).await
                } else {
                    fault_oob::launch(&d, LaunchConfig::for_elements(32, 32), &mut y, 1 << 40).await
                };
                match &r {
                    Err(GpuError::ContextPoisoned { code: got, .. }) => assert_eq!(*got, code),
                    other => panic!("a sticky fault reported as {other:?}"),
                }
                let reported = t0.elapsed();
                let _ = tokio::time::timeout(
                    Duration::from_secs(10),
                    rx.wait_for(|s| s.generation > g0 && matches!(s.status, Status::Ready)),
                )
                .await;
                let serving = t0.elapsed();
                *note.lock().unwrap() = serving - reported;
                println!("      fault reported after {reported:?}, the next worker serving after {serving:?}");
                r
            })
            .await;
            assert_eq!(dev.worker_pid(), Some(next), "the standby took over");
            println!("    fault {cycle} ({code}): serving again after {t:?}");
            times[trap as usize].push(t);
            after_detection[trap as usize].push(*detected.lock().unwrap());
        }
        let kinds = ["illegal address 700", "trap 719"];
        for ((kind, mut t), mut a) in kinds.into_iter().zip(times).zip(after_detection) {
            t.sort();
            a.sort();
            let median = |v: &[Duration]| (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2;
            println!(
                "    {kind}: fault → a checked SGEMM median {:?}, max {:?}; detection → next worker serving median {:?}, max {:?} (over {} faults)",
                median(&t),
                t[t.len() - 1],
                median(&a),
                a[a.len() - 1],
                t.len()
            );
        }
        dev.stop().await;
    })
}

/// Events through the worker: recorded after buffers' writes, waited on, queried and
/// timed; a fresh one per round, the worker's copies freed with the handles.
async fn check_events(dev: &Device) {
    for _ in 0..3 {
        let (e0, e1) = (dev.create_event().await.unwrap(), dev.create_event().await.unwrap());
        let x = dev.upload(rand_vec(1 << 16)).await.unwrap();
        dev.record_event(&e0, &[&x]).await.unwrap();
        dev.scal(2.0, &x).await.unwrap();
        dev.record_event(&e1, &[&x]).await.unwrap();
        dev.wait_event(&e1).await.unwrap();
        assert!(dev.event_done(&e1).await.unwrap());
        let ms = dev.elapsed_ms(&e0, &e1).await.unwrap();
        assert!((0.0..60_000.0).contains(&ms), "elapsed {ms} ms");
        let mixed = dev.alloc::<u8>(8).await.unwrap();
        // After a view of a buffer of another element type.
        dev.record_event(&e0, &[&mixed.view(..4).unwrap()]).await.unwrap();
        dev.record_event(&e1, &[&x]).await.unwrap();
        assert!(dev.elapsed_ms(&e0, &e1).await.is_ok());
    }
}

/// Pinned buffers of an isolated device: shared memory the user fills and reads in
/// place, copied by the worker straight from and into it (page-locked there on a GPU):
/// uploads, writes into buffers and views, downloads, from concurrent tasks, exact; the
/// caller's slices staged through them; a buffer back in the pool comes out zeroed; a buffer outlives the worker it was used
/// with (a killed worker's successor copies it too).
fn pinned_buffers_are_shared_memory(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let (_sys, dev) = open(config.clone()).await;
        check_pinned(&dev, 1 << 20).await;
        // Concurrent tasks, each with buffers of its own.
        let mut tasks = vec![];
        for t in 0..8 {
            let d = dev.clone();
            tasks.push(tokio::spawn(async move { check_pinned(&d, 1000 + 4096 * t).await }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // The caller's own slices, staged through them in chunks.
        let big: Vec<f32> = rand_vec(5 << 20).iter().map(|&v| v as f32).collect();
        let g = dev.upload_slice(&big).await.unwrap();
        assert_eq!(dev.download(&g).await.unwrap(), big, "upload_slice");
        dev.scal(-1.0, &g).await.unwrap();
        let mut out = vec![0.0f32; big.len()];
        dev.download_into(&g, &mut out).await.unwrap();
        assert!(out.iter().zip(&big).all(|(o, b)| *o == -b), "download_into");
        dev.write_slice(&g, &big).await.unwrap();
        dev.download_into(&g, &mut out).await.unwrap();
        assert_eq!(out, big, "write_slice");
        // Back from the pool: zeroed by `pinned`, left as they were by `pinned_scratch`.
        let n = 1 << 16;
        let mut p = dev.pinned::<f32>(n).await.unwrap();
        p.as_mut_slice().unwrap().fill(7.0);
        drop(p);
        let p = dev.pinned::<f32>(n).await.unwrap();
        assert!(
            p.as_slice().unwrap().iter().all(|&v| v == 0.0),
            "a reused buffer is zeroed"
        );
        // Kept across a new worker.
        let data: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
        let mut p = p;
        p.as_mut_slice().unwrap().copy_from_slice(&data);
        let before = dev.state().generation;
        dev.kill_worker().unwrap();
        let mut rx = dev.watch_state();
        tokio::time::timeout(
            Duration::from_secs(60),
            rx.wait_for(|s| s.generation > before && matches!(s.status, Status::Ready)),
        )
        .await
        .expect("a new worker serves")
        .unwrap();
        let (g, p) = dev.upload_pinned(p).await.unwrap();
        assert_eq!(dev.download(&g).await.unwrap(), data);
        assert_eq!(p.as_slice().unwrap(), &data[..]);
        dev.stop().await;
        // A full pinned arena is a typed error, not a crash; its buffers still work.
        let small = config.with_isolation(IsolationConfig {
            pinned_arena_bytes: 1 << 20,
            ..Default::default()
        });
        let (_sys2, dev) = open(small).await;
        let held = dev.pinned::<f32>(200_000).await.unwrap();
        let e = dev.pinned::<f32>(100_000).await.unwrap_err();
        assert!(matches!(e, GpuError::OutOfMemory { .. }), "{e:?}");
        let (g, held) = dev.upload_pinned(held).await.unwrap();
        assert_eq!(dev.download(&g).await.unwrap(), held.as_slice().unwrap());
        drop(held);
        dev.pinned::<f32>(100_000).await.unwrap();
        dev.stop().await;
    })
}

/// One task's round of pinned copies on `dev`, `n` elements, against its own data.
async fn check_pinned(dev: &Device, n: usize) {
    let data: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
    let mut p = dev.pinned::<f32>(n).await.unwrap();
    assert!(p.as_slice().unwrap().iter().all(|&v| v == 0.0));
    p.as_mut_slice().unwrap().copy_from_slice(&data);
    let (g, p) = dev.upload_pinned(p).await.unwrap();
    assert_eq!(dev.download(&g).await.unwrap(), data, "upload_pinned");
    assert_eq!(p.as_slice().unwrap(), &data[..], "the buffer comes back as it went");
    // Into a buffer, then a device-side change, then back into a scratch buffer.
    let g2 = dev.alloc::<f32>(n).await.unwrap();
    let p = dev.write_pinned(&g2, p).await.unwrap();
    dev.scal(2.0, &g2).await.unwrap();
    let back = dev.pinned_scratch::<f32>(n).await.unwrap();
    let back = dev.download_pinned(&g2, back).await.unwrap();
    let doubled: Vec<f32> = data.iter().map(|v| v * 2.0).collect();
    assert_eq!(back.as_slice().unwrap(), &doubled[..], "download_pinned");
    // A view's window, of another element type.
    let wide: Vec<f64> = rand_vec(n);
    let gw = dev.upload(wide.clone()).await.unwrap();
    let half = n / 2;
    let pw = dev.pinned_scratch::<f64>(n - half).await.unwrap();
    let pw = dev.download_pinned(&gw.view(half..).unwrap(), pw).await.unwrap();
    assert_eq!(pw.as_slice().unwrap(), &wide[half..], "download_pinned of a view");
    // Wrong lengths are typed errors, the buffer lost with the request.
    let short = dev.pinned_scratch::<f32>(n - 1).await.unwrap();
    let e = dev.write_pinned(&g2, short).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    drop((p, pw));
    // Owned vectors of several staging chunks (8 MiB) and a partial one: `upload`,
    // `write` and `download` go through the shared pinned buffers, exact.
    let big = 3 * (2 << 20) + 77;
    let data: Vec<f32> = rand_vec(big).iter().map(|&v| v as f32).collect();
    let g = dev.upload(data.clone()).await.unwrap();
    assert!(dev.download(&g).await.unwrap() == data, "a staged upload + download");
    let again: Vec<f32> = data.iter().map(|v| v * 0.5 - 1.0).collect();
    dev.write(&g, &again[..]).await.unwrap();
    assert!(
        dev.download(&g.view(5..).unwrap()).await.unwrap() == again[5..],
        "a staged write + view download"
    );
}

/// A sparse matrix crosses as its buffers: made, multiplied and converted in the
/// worker, against float64.
async fn check_sparse(dev: &Device) {
    // [[1.5, 0, -2], [0, 0, 0.25], [4, 0, 0]] by rows; x = (1, 2, 3).
    let a = dev
        .upload_csr(3, 3, &[0, 2, 3, 4], &[0, 2, 2, 0], &[1.5f64, -2.0, 0.25, 4.0])
        .await
        .unwrap();
    let x = dev.upload(vec![1.0f64, 2.0, 3.0]).await.unwrap();
    let y = dev.upload(vec![1.0f64; 3]).await.unwrap();
    dev.spmv(&a, &x, &y, SparseOp::new().alpha(2.0).beta(-1.0))
        .await
        .unwrap();
    assert_eq!(
        dev.download(&y).await.unwrap(),
        vec![2.0 * -4.5 - 1.0, 2.0 * 0.75 - 1.0, 7.0]
    );
    let d = dev.alloc::<f64>(9).await.unwrap();
    dev.csr_to_dense(&a, &d).await.unwrap();
    let again = dev.dense_to_csr(&d, 3, 3).await.unwrap();
    assert_eq!(
        dev.download_csr(&again).await.unwrap(),
        dev.download_csr(&a).await.unwrap()
    );
    // The COO form crosses too: made in the worker, multiplied there, read back.
    let coo = dev.csr_to_coo(&a).await.unwrap();
    assert_eq!(
        dev.download_coo(&coo).await.unwrap(),
        (vec![0, 0, 1, 2], vec![0, 2, 2, 0], vec![1.5, -2.0, 0.25, 4.0])
    );
    let y = dev.upload(vec![1.0f64; 3]).await.unwrap();
    dev.spmv(&coo, &x, &y, SparseOp::new().alpha(2.0).beta(-1.0))
        .await
        .unwrap();
    assert_eq!(
        dev.download(&y).await.unwrap(),
        vec![2.0 * -4.5 - 1.0, 2.0 * 0.75 - 1.0, 7.0]
    );
}

/// A raw CUDA C++ module through the worker: loaded from source and as a prebuilt CUBIN,
/// launched with a `#[derive(KernelArg)]` struct, buffers of two element types and plain
/// numbers, against float64; in thread-block clusters; each device's modules refused by
/// the others; a struct with padding refused rather than copied.
async fn check_modules(dev: &Device) {
    let src = format!(
        "{}\n{}",
        <Affine as KernelArg>::cuda_decl(),
        r#"
extern "C" __global__ void affine_raw(Affine p, const float* x, double* y, unsigned int n, float extra) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.scale * (double)x[i] + p.shift + p.bias + extra;
}
extern "C" __global__ void cluster_rank(unsigned int* out) {
    unsigned int r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    if (threadIdx.x == 0) out[blockIdx.x] = r;
}
"#
    );
    let n = 10_007usize;
    let x = rand_vec(n);
    let gx = dev
        .upload(x.iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let p = Affine {
        scale: 1.5,
        shift: -0.25,
        bias: 3,
    };
    let arch = dev.ready().await.unwrap().arch().expect("a GPU's architecture");
    let (cubin, _) = atomr_accel_cuda::nvrtc_cache::compile_cached(&src, &arch, &[], None).unwrap();
    let from_source = dev
        .load_module(KernelSource::new(src.clone(), &["affine_raw", "cluster_rank"]))
        .await
        .unwrap();
    let from_image = dev
        .load_module_image(ModuleImage::Cubin(cubin), &["affine_raw"])
        .await
        .unwrap();
    for (m, extra) in [(&from_source, 0.5f32), (&from_image, -2.0)] {
        let gy = dev.alloc::<f64>(n).await.unwrap();
        let args = KernelArgs::new()
            .kernel_arg(p)
            .buf(&gx)
            .buf_mut(&gy)
            .scalar(n as u32)
            .scalar(extra);
        // SAFETY: `affine_raw(Affine, const float*, double*, unsigned int, float)`.
        unsafe { dev.launch(m, "affine_raw", LaunchConfig::for_elements(n, 256), args) }
            .await
            .unwrap();
        let got = dev.download(&gy).await.unwrap();
        let want: Vec<f64> = x
            .iter()
            .map(|&v| 1.5 * (v as f32 as f64) - 0.25 + 3.0 + extra as f64)
            .collect();
        let e = rel_err(&got, &want);
        assert!(e < 1e-12, "raw module through the worker: rel err {e}");
    }
    // Clusters of 2: each block's rank in its cluster.
    let out = dev.alloc::<u32>(8).await.unwrap();
    let cfg = LaunchConfig {
        grid: (8, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let spec = atomr_accel_cuda::hopper::LaunchSpec::new(cfg, (2, 1, 1));
    // SAFETY: `cluster_rank(unsigned int*)`.
    unsafe { dev.launch_cluster(&from_source, "cluster_rank", spec, KernelArgs::new().buf_mut(&out)) }
        .await
        .unwrap();
    assert_eq!(dev.download(&out).await.unwrap(), vec![0, 1, 0, 1, 0, 1, 0, 1]);
    // A scalar whose bytes may hold padding does not cross; the device keeps serving.
    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Padded {
        _a: f64,
        _b: i32,
    }
    // SAFETY: a plain `repr(C)` struct of numbers, as a kernel parameter of that layout.
    unsafe impl cudarc::driver::DeviceRepr for Padded {}
    let args = KernelArgs::new().scalar(Padded { _a: 1.0, _b: 2 });
    // SAFETY: refused before any launch.
    let e = unsafe { dev.launch(&from_source, "cluster_rank", cfg, args) }
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::Unsupported(m) if m.contains("kernel_arg")),
        "{e:?}"
    );
    // An in-process device's module on the isolated device, and the other way round.
    let sys = ActorSystem::new("modules-local");
    let local = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let lm = local
        .load_module(KernelSource::new(src, &["cluster_rank"]))
        .await
        .unwrap();
    let lout = local.alloc::<u32>(8).await.unwrap();
    // SAFETY: refused before any launch.
    let e = unsafe { dev.launch(&lm, "cluster_rank", cfg, KernelArgs::new().buf_mut(&out)) }
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "an in-process module: {e:?}");
    // SAFETY: refused before any launch.
    let e = unsafe { local.launch(&from_source, "cluster_rank", cfg, KernelArgs::new().buf_mut(&lout)) }
        .await
        .unwrap_err();
    assert!(
        matches!(e, GpuError::InvalidArgument(_)),
        "an isolated module in-process: {e:?}"
    );
    // TMA: a map over the isolated device's buffer is encoded in the worker, for its
    // copy of the buffer; the same map launched in-process is refused, and so is an
    // in-process map sent to the worker.
    common::tma::check_tile(dev).await;
    let tiles = dev.alloc::<f32>(64 * 64).await.unwrap();
    let remote_map = TensorMapBuilder::new(&tiles, &[64, 64], &[32, 16]).build().unwrap();
    let tm = local
        .load_module(KernelSource::new(common::tma::TMA_SRC, &["tma_tile"]))
        .await
        .unwrap();
    let one = LaunchConfig {
        grid: (1, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let args = |map: &TensorMap<f32>, out: &GpuRef<f32>| {
        KernelArgs::new()
            .tensor_map(map)
            .buf_mut(out)
            .scalar(0i32)
            .scalar(0i32)
            .scalar(map.box_bytes() as u32)
    };
    let (lfl, ifl) = (
        local.alloc::<f32>(32 * 16).await.unwrap(),
        dev.alloc::<f32>(32 * 16).await.unwrap(),
    );
    // SAFETY: refused before any launch.
    let e = unsafe { local.launch(&tm, "tma_tile", one, args(&remote_map, &lfl)) }
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(m) if m.contains("isolated device's buffer")),
        "an isolated device's map in-process: {e:?}"
    );
    let ltiles = local.alloc::<f32>(64 * 64).await.unwrap();
    let local_map = TensorMapBuilder::new(&ltiles, &[64, 64], &[32, 16]).build().unwrap();
    let im = dev
        .load_module(KernelSource::new(common::tma::TMA_SRC, &["tma_tile"]))
        .await
        .unwrap();
    // SAFETY: refused before any launch.
    let e = unsafe { dev.launch(&im, "tma_tile", one, args(&local_map, &ifl)) }
        .await
        .unwrap_err();
    assert!(
        matches!(e, GpuError::Unsupported(_) | GpuError::InvalidArgument(_)),
        "an in-process map on the isolated device: {e:?}"
    );
    local.stop().await;
}

/// A graph captured in the worker — a GEMM, a `#[kernel]` over its result, a copy — and
/// replayed three times, against float64; the worker frees it with the last handle.
async fn check_graphs(dev: &Device) {
    let n = 24;
    let (a, b) = (rand_vec(n * n), rand_vec(n * n));
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let (ga, gb) = (dev.upload(f32s(&a)).await.unwrap(), dev.upload(f32s(&b)).await.unwrap());
    let gc = dev.alloc::<f32>(n * n).await.unwrap();
    let mut gy = dev.alloc::<f32>(n * n).await.unwrap();
    let gz = dev.alloc::<f32>(n * n).await.unwrap();
    let p = Affine {
        scale: 1.5,
        shift: -0.25,
        bias: 3,
    };
    let graph = dev
        .capture_graph(
            GraphBuilder::new()
                .gemm(Gemm::<f32>::new(n, n, n), &ga, &gb, &gc)
                .kernel(affine::call::<f32>(
                    LaunchConfig::for_elements(n * n, 256),
                    p,
                    &gc,
                    &mut gy,
                ))
                .copy(&gy, &gz),
        )
        .await
        .unwrap();
    assert_eq!(graph.operations(), 3);
    dev.replay(&graph, 3).await.unwrap();
    let (a32, b32): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|&x| x as f32 as f64).collect(),
        b.iter().map(|&x| x as f32 as f64).collect(),
    );
    let mut want = vec![0.0; n * n];
    gemm_ref(false, false, n, n, n, 1.0, &a32, n, &b32, n, 0.0, &mut want, n);
    want.iter_mut().for_each(|w| *w = 1.5 * *w - 0.25 + 3.0);
    let got: Vec<f64> = dev.download(&gz).await.unwrap().iter().map(|&v| v as f64).collect();
    let e = rel_err(&got, &want);
    assert!(e < 1e-5, "isolated graph: rel err {e}");
    drop(graph);
    // A cuBLASLt matmul node crosses too: C = relu(A·B), A·B as the GEMM above.
    let gm = dev.alloc::<f32>(n * n).await.unwrap();
    let graph = dev
        .capture_graph(GraphBuilder::new().matmul(Matmul::new(n, n, n), Epilogue::relu(), &ga, &gb, &gm))
        .await
        .unwrap();
    dev.replay(&graph, 1).await.unwrap();
    let mut want = vec![0.0; n * n];
    gemm_ref(false, false, n, n, n, 1.0, &a32, n, &b32, n, 0.0, &mut want, n);
    want.iter_mut().for_each(|w| *w = w.max(0.0));
    let got: Vec<f64> = dev.download(&gm).await.unwrap().iter().map(|&v| v as f64).collect();
    let e = rel_err(&got, &want);
    assert!(e < 1e-5, "isolated graph matmul: rel err {e}");
}

/// An isolated device with the others of the process: `copy_to` both ways between it
/// and an in-process device (and a second isolated one), through this process's memory a
/// window at a time — views, several windows, a third device's buffer refused — and a
/// world of the three whose collectives run through the host (an isolated device's
/// context is out of NCCL's reach): all-reduce, broadcast and all-gather against host
/// references.
fn copies_and_worlds_cross_isolation(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        use atomr_accel_cuda::multi_device::{ReduceOp, World};
        let (_sys, a) = open(config.clone()).await;
        let sys = ActorSystem::new("isolated-neighbours");
        let in_process = DeviceConfig {
            isolation: None,
            device_id: config.device_id + if config.backend == BackendChoice::Cuda { 0 } else { 1 },
            ..config.clone()
        };
        let b = Device::open(&sys, in_process).await.unwrap();
        let mut second = config.clone();
        if config.backend != BackendChoice::Cuda {
            second.device_id = config.device_id + 2;
        }
        // An isolated device of its own actor system: on a GPU it has `b`'s device id,
        // and one system names one device of an id once.
        let sys_c = ActorSystem::new("isolated-second");
        let c = Device::open(&sys_c, second).await.unwrap();
        // Three 8 MiB windows and a partial one.
        let n = 3 * (2 << 20) + 12_345;
        let x: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
        let ga = a.upload(x.clone()).await.unwrap();
        let gb = b.alloc::<f32>(n).await.unwrap();
        a.copy_to(&ga, &b, &gb).await.unwrap();
        assert!(b.download(&gb).await.unwrap() == x, "isolated → in-process");
        let gc = c.alloc::<f32>(n).await.unwrap();
        b.copy_to(&gb, &c, &gc).await.unwrap();
        assert!(c.download(&gc).await.unwrap() == x, "in-process → isolated");
        let back = a.alloc::<f32>(1000).await.unwrap();
        c.copy_to(&gc.view(500..1500).unwrap(), &a, &back).await.unwrap();
        assert!(
            a.download(&back).await.unwrap() == x[500..1500],
            "isolated → isolated, a view"
        );
        let e = a
            .copy_to(&ga.view(..10).unwrap(), &b, &gc.view(..10).unwrap())
            .await
            .unwrap_err();
        assert!(
            matches!(e, GpuError::InvalidArgument(_)),
            "a third device's buffer: {e:?}"
        );

        let devices = [a.clone(), b.clone(), c.clone()];
        let world = World::new(&devices).await.unwrap();
        assert!(
            !world.rank(0).on_nccl(),
            "an isolated member: collectives through the host"
        );
        let m = 10_001;
        let inputs: Vec<Vec<f64>> = (0..3).map(|_| rand_vec(m)).collect();
        let mut tasks = vec![];
        for (r, d) in devices.iter().enumerate() {
            let (rank, d, input) = (world.rank(r), d.clone(), inputs[r].clone());
            tasks.push(tokio::spawn(async move {
                let send = d.upload(input.clone()).await.unwrap();
                let sum = d.alloc::<f64>(m).await.unwrap();
                rank.all_reduce(&send, &sum, ReduceOp::Sum).await.unwrap();
                let root = d.alloc::<f64>(m).await.unwrap();
                rank.broadcast(&send, &root, 2).await.unwrap();
                let all = d.alloc::<f64>(3 * m).await.unwrap();
                rank.all_gather(&send, &all).await.unwrap();
                (
                    d.download(&sum).await.unwrap(),
                    d.download(&root).await.unwrap(),
                    d.download(&all).await.unwrap(),
                )
            }));
        }
        let want_sum: Vec<f64> = (0..m).map(|i| inputs.iter().map(|v| v[i]).sum()).collect();
        for (r, t) in tasks.into_iter().enumerate() {
            let (sum, root, all) = t.await.unwrap();
            assert!(rel_err(&sum, &want_sum) < 1e-15, "rank {r}: all-reduce");
            assert_eq!(root, inputs[2], "rank {r}: broadcast from rank 2");
            assert_eq!(all, inputs.concat(), "rank {r}: all-gather");
        }
        for d in devices {
            d.stop().await;
        }
    })
}

/// The runtime's own `#[kernel]` library calls (sent by name to the worker) and the
/// batched solver through the worker, each against a host reference: a stable sort by
/// key (radix passes over several tiles), integer and float prefix sums, an argmax, a
/// batched LU solve and a non-square batched SVD.
async fn check_library_kernels(dev: &Device) {
    let n = 5_000;
    let keys: Vec<i32> = rand_vec(n).iter().map(|&x| (x * 40.0) as i32).collect();
    let gk = dev.upload(keys.clone()).await.unwrap();
    let gv = dev.upload((0..n as u32).collect::<Vec<_>>()).await.unwrap();
    dev.sort_by_key(&gk, &gv).await.unwrap();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| keys[i as usize]);
    assert_eq!(dev.download(&gv).await.unwrap(), order, "isolated sort_by_key");
    let scanned = dev.alloc::<i64>(n).await.unwrap();
    let gx = dev.upload(keys.clone()).await.unwrap();
    dev.inclusive_scan(&gx, &scanned).await.unwrap();
    let want: Vec<i64> = keys
        .iter()
        .scan(0i64, |run, &k| {
            *run += k as i64;
            Some(*run)
        })
        .collect();
    assert_eq!(dev.download(&scanned).await.unwrap(), want, "isolated integer scan");
    let f: Vec<f64> = rand_vec(n);
    let gf = dev.upload(f.clone()).await.unwrap();
    let fs = dev.alloc::<f64>(n).await.unwrap();
    dev.exclusive_scan(&gf, &fs).await.unwrap();
    let got = dev.download(&fs).await.unwrap();
    let total: f64 = f[..n - 1].iter().sum();
    assert!(
        (got[n - 1] - total).abs() < 1e-9 * total.abs().max(1.0),
        "isolated float scan"
    );
    let best = (0..n).max_by(|&a, &b| f[a].total_cmp(&f[b]).then(b.cmp(&a))).unwrap();
    assert_eq!(dev.argmax(&gf).await.unwrap(), Some(best), "isolated argmax");
    // 40 systems of order 6 (diagonally dominant), factored and solved in batches.
    let (m, count) = (6usize, 40usize);
    let mats: Vec<f64> = rand_vec(m * m * count)
        .iter()
        .enumerate()
        .map(|(i, v)| if (i % (m * m)) % (m + 1) == 0 { v + m as f64 } else { *v })
        .collect();
    let rhs = rand_vec(m * count);
    let (lu, piv) = (
        dev.upload(mats.clone()).await.unwrap(),
        dev.alloc::<i32>(m * count).await.unwrap(),
    );
    dev.lu_factor_batched(&lu, &piv, m, count).await.unwrap();
    let b = dev.upload(rhs.clone()).await.unwrap();
    dev.lu_solve_batched(&lu, &piv, &b, m, 1, count).await.unwrap();
    let x = dev.download(&b).await.unwrap();
    for k in 0..count {
        let mut ax = vec![0.0; m];
        gemm_ref(
            false,
            false,
            m,
            1,
            m,
            1.0,
            &mats[k * m * m..(k + 1) * m * m],
            m,
            &x[k * m..(k + 1) * m],
            m,
            0.0,
            &mut ax,
            m,
        );
        assert!(
            rel_err(&ax, &rhs[k * m..(k + 1) * m]) < 1e-10,
            "isolated batched solve {k}"
        );
    }
    // A wide batch's SVD with vectors: U·S·Vᵀ rebuilds each matrix.
    let (r, c, cnt) = (3usize, 5usize, 4usize);
    let a: Vec<f64> = rand_vec(r * c * cnt);
    let ga = dev.upload(a.clone()).await.unwrap();
    let (sv, u, v) = (
        dev.alloc::<f64>(r * cnt).await.unwrap(),
        dev.alloc::<f64>(r * r * cnt).await.unwrap(),
        dev.alloc::<f64>(c * c * cnt).await.unwrap(),
    );
    dev.svd_batched(&ga, &sv, &u, &v, r, c, cnt).await.unwrap();
    let (sv, u, v) = (
        dev.download(&sv).await.unwrap(),
        dev.download(&u).await.unwrap(),
        dev.download(&v).await.unwrap(),
    );
    for k in 0..cnt {
        let (uk, vk, sk) = (
            &u[k * r * r..(k + 1) * r * r],
            &v[k * c * c..(k + 1) * c * c],
            &sv[k * r..(k + 1) * r],
        );
        // (U·S) is r×c with S's values on the first r columns; times Vᵀ.
        let us: Vec<f64> = (0..r * c)
            .map(|i| if i / r < r { uk[i] * sk[i / r] } else { 0.0 })
            .collect();
        let vt: Vec<f64> = (0..c * c).map(|i| vk[(i % c) * c + i / c]).collect();
        let mut back = vec![0.0; r * c];
        gemm_ref(false, false, r, c, c, 1.0, &us, r, &vt, c, 0.0, &mut back, r);
        assert!(
            rel_err(&back, &a[k * r * c..(k + 1) * r * c]) < 1e-10,
            "isolated batched SVD {k}"
        );
    }
    // Views of one buffer cross as windows of the worker's one buffer: the batched
    // factors and right-hand sides as two panels of it, sorted keys and values as its
    // halves, an SpMV from one of its vectors into the next.
    let one = dev.upload([mats.clone(), rhs.clone()].concat()).await.unwrap();
    let (lu, b) = (one.view(0..m * m * count).unwrap(), one.view(m * m * count..).unwrap());
    dev.lu_factor_batched(&lu, &piv, m, count).await.unwrap();
    dev.lu_solve_batched(&lu, &piv, &b, m, 1, count).await.unwrap();
    assert_eq!(
        dev.download(&b).await.unwrap(),
        x,
        "isolated batched solve on panels of one buffer"
    );
    let halves = dev
        .upload([f[..100].to_vec(), f[100..200].to_vec()].concat())
        .await
        .unwrap();
    dev.sort_by_key(&halves.view(0..100).unwrap(), &halves.view(100..).unwrap())
        .await
        .unwrap();
    let got = dev.download(&halves).await.unwrap();
    let mut order: Vec<usize> = (0..100).collect();
    order.sort_by(|&i, &j| f[i].total_cmp(&f[j]));
    for (i, &j) in order.iter().enumerate() {
        assert_eq!(
            (got[i], got[100 + i]),
            (f[j], f[100 + j]),
            "isolated sort on halves at {i}"
        );
    }
    let a = dev
        .upload_csr(3, 3, &[0, 2, 3, 4], &[0, 2, 2, 0], &[1.5f64, -2.0, 0.25, 4.0])
        .await
        .unwrap();
    let basis = dev.upload(vec![1.0f64, 2.0, 3.0, 9.0, 9.0, 9.0]).await.unwrap();
    dev.spmv(
        &a,
        &basis.view(0..3).unwrap(),
        &basis.view(3..).unwrap(),
        SparseOp::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        dev.download(&basis).await.unwrap(),
        vec![1.0, 2.0, 3.0, -4.5, 0.75, 4.0]
    );
}

/// A cuBLASLt matmul through the worker — buffers of three element types in one message:
/// bf16 inputs, an f32 C, an f32 bias and ReLU, against float64.
async fn check_matmul(dev: &Device) {
    let (m, n, k) = (48, 32, 64);
    let bf = |v: Vec<f64>| v.into_iter().map(half::bf16::from_f64).collect::<Vec<_>>();
    let (a, b, bias) = (bf(rand_vec(m * k)), bf(rand_vec(k * n)), rand_vec(m));
    let wide = |v: &[half::bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    let (ae, be) = (wide(&a), wide(&b));
    let ga = dev.upload(a).await.unwrap();
    let gb = dev.upload(b).await.unwrap();
    let gbias = dev
        .upload(bias.iter().map(|&x| x as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let gc = dev.alloc::<f32>(m * n).await.unwrap();
    dev.matmul(
        Matmul::new(m, n, k),
        Epilogue::bias(&gbias).then(Activation::Relu),
        &ga,
        &gb,
        &gc,
    )
    .await
    .unwrap();
    let mut want = vec![0.0; m * n];
    gemm_ref(false, false, m, n, k, 1.0, &ae, m, &be, k, 0.0, &mut want, m);
    for (i, w) in want.iter_mut().enumerate() {
        *w = (*w + (bias[i % m] as f32) as f64).max(0.0);
    }
    let got: Vec<f64> = dev.download(&gc).await.unwrap().iter().map(|&v| v as f64).collect();
    let e = rel_err(&got, &want);
    assert!(e < 1e-5, "isolated matmul: rel err {e}");
}

/// GPU: the same round trip and buffers as on the CPU.
/// A session on an isolated device, recorded in the user process, replays bit for bit
/// into an in-process device and into a second isolated one: the journal holds the same
/// frames the link sends.
fn a_recorded_session_replays(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let path = std::env::temp_dir().join(format!("atomr-isolated-journal-{}.jsonl", std::process::id()));
        let (sys, dev) = open(config.clone()).await;
        let rec = atomr_accel_cuda::replay::Recorder::create(&dev, &path).await.unwrap();
        check_sgemm(&dev, 96, 80, 64).await;
        check_kernel(&dev, 5_000).await;
        check_matmul(&dev).await;
        let x = dev.alloc::<f64>(1 << 16).await.unwrap();
        dev.seed_rng(11).await.unwrap();
        dev.fill_uniform(&x).await.unwrap();
        assert!(dev.iamax(&x).await.unwrap() < 1 << 16);
        // Views are journalled with their windows.
        dev.scal(3.0, &x.view(100..200).unwrap()).await.unwrap();
        dev.copy(&x.view(..64).unwrap(), &x.view(1000..1064).unwrap())
            .await
            .unwrap();
        dev.download(&x.view(50..1100).unwrap()).await.unwrap();
        dev.download(&x).await.unwrap();
        rec.finish().unwrap();
        dev.stop().await;
        drop(sys);
        let in_process = DeviceConfig {
            isolation: None,
            ..config.clone()
        };
        for target in [in_process, config] {
            let sys = ActorSystem::new("isolated-replay");
            let d = Device::open(&sys, target).await.unwrap();
            let report = atomr_accel_cuda::replay::replay(&path, &d).await.unwrap();
            assert!(report.is_bit_identical(), "{report:?}");
            assert!(report.answers_checked >= 12, "{report:?}");
            d.stop().await;
        }
        let _ = std::fs::remove_file(&path);
    })
}

fn gpu_round_trip(config: DeviceConfig) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let (_sys, dev) = open(config).await;
        check_sgemm(&dev, 1024, 768, 512).await;
        check_kernel(&dev, 1 << 20).await;
        check_matmul(&dev).await;
        check_events(&dev).await;
        check_graphs(&dev).await;
        check_modules(&dev).await;
        check_pinned(&dev, 64 << 20).await;
        check_library_kernels(&dev).await;
        let v: Vec<f32> = rand_vec(64 << 20).iter().map(|&x| x as f32).collect();
        let g: GpuRef<f32> = dev.upload(v.clone()).await.unwrap();
        assert_eq!(dev.download(&g).await.unwrap(), v);
        dev.stop().await;
    })
}

/// Each `ActorGpu` gets a stream of its own in the worker (and its own handles
/// there): with one library actor of each kind in the worker, actor b's launch is
/// served while actor a's slow kernel still runs — through the worker's library pool it
/// would queue behind it.
fn actor_gpus_have_streams_of_their_own_in_the_worker(
    config: DeviceConfig,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let on_gpu = config.backend == atomr_accel_cuda::device::BackendChoice::Cuda;
        let (_sys, dev) = open(config.with_library_pool(1)).await;
        let (len, rounds) = if on_gpu {
            (1 << 20, 4_000_000)
        } else {
            (1 << 12, 40_000)
        };
        let cfg = LaunchConfig::for_elements(len, 256);
        let small = LaunchConfig::for_elements(256, 256);
        let x: Vec<f32> = rand_vec(len).iter().map(|&v| v as f32).collect();
        let gx = dev.upload(x.clone()).await.unwrap();
        let ya = dev.alloc::<f32>(len).await.unwrap();
        let xb = dev.upload(x[..256].to_vec()).await.unwrap();
        let yb = dev.alloc::<f32>(256).await.unwrap();
        let (a, b) = (dev.actor_gpu(), dev.actor_gpu());
        assert!(!a.in_place(), "an isolated device's GPU is in the worker");
        // Both actors' streams made in the worker (and the kernel loaded) before the race.
        for gpu in [&a, &b] {
            slow_copy::launch(gpu, small, 1, &gx, &mut yb.clone()).await.unwrap();
        }
        {
            let mut ya_w = ya.clone();
            let slow = slow_copy::launch(&a, cfg, rounds, &gx, &mut ya_w);
            futures::pin_mut!(slow);
            // The first poll sends a's request (frames reach the worker in order).
            assert!(futures::poll!(slow.as_mut()).is_pending());
            // b's buffers are not a's (the CPU device locks a launch's buffers while
            // it runs).
            let t = Instant::now();
            slow_copy::launch(&b, small, 1, &xb, &mut yb.clone()).await.unwrap();
            let quick = t.elapsed();
            assert!(
                futures::poll!(slow.as_mut()).is_pending(),
                "b's launch ({quick:?}) was served only after a's slow kernel: no stream of its own"
            );
            slow.await.unwrap();
            println!("    b's launch {quick:?} during a's slow kernel ({:?})", t.elapsed());
        }
        let y = dev.download(&ya).await.unwrap();
        for (i, (y, x)) in y.iter().zip(&x).enumerate().step_by(97) {
            assert!((y - (x + 1.0)).abs() < 1e-3, "y[{i}] = {y}, want {}", x + 1.0);
        }
        // The worker drops their streams with the ActorGpus; the device keeps serving.
        drop((a, b));
        let again = dev.actor_gpu();
        slow_copy::launch(&again, small, 1, &gx, &mut yb.clone()).await.unwrap();
        let yb = dev.download(&yb).await.unwrap();
        assert!((yb[3] - (x[3] + 1.0)).abs() < 1e-3);
        dev.stop().await;
    })
}

#[gpu_main]
fn main() {
    let cases: Vec<Entry> = vec![
        ("cpu::round_trip", round_trip, cpu, false),
        (
            "cpu::copies_and_worlds_cross_isolation",
            copies_and_worlds_cross_isolation,
            cpu,
            false,
        ),
        (
            "gpu::copies_and_worlds_cross_isolation",
            copies_and_worlds_cross_isolation,
            gpu,
            true,
        ),
        (
            "cpu::larger_than_the_arena_goes_inline",
            larger_than_the_arena_goes_inline,
            cpu,
            false,
        ),
        (
            "cpu::bad_input",
            bad_input_is_a_typed_error_and_the_worker_keeps_serving,
            cpu,
            false,
        ),
        (
            "cpu::dropped_buffers_are_freed",
            dropped_buffers_are_freed_in_the_worker,
            cpu,
            false,
        ),
        (
            "cpu::a_killed_worker_is_respawned",
            a_killed_worker_is_respawned,
            cpu,
            false,
        ),
        (
            "cpu::a_hung_worker_is_replaced_and_a_flood_held_back",
            a_hung_worker_is_replaced_and_a_flood_held_back,
            cpu,
            false,
        ),
        (
            "gpu::a_hung_worker_is_replaced_and_a_flood_held_back",
            a_hung_worker_is_replaced_and_a_flood_held_back,
            gpu,
            true,
        ),
        (
            "cpu::a_worker_sending_garbage_is_an_error",
            a_worker_sending_garbage_is_an_error,
            cpu,
            false,
        ),
        (
            "cpu::a_crash_loop_ends_in_device_lost",
            a_crash_loop_ends_in_device_lost,
            cpu,
            false,
        ),
        (
            "cpu::stopping_with_queued_work",
            stopping_with_queued_work_answers_every_asker,
            cpu,
            false,
        ),
        (
            "cpu::a_worker_that_cannot_start",
            a_worker_that_cannot_start_is_an_error,
            cpu,
            false,
        ),
        (
            "cpu::a_program_without_gpu_main",
            a_program_without_gpu_main_is_refused,
            cpu,
            false,
        ),
        (
            "cpu::pinned_buffers_are_shared_memory",
            pinned_buffers_are_shared_memory,
            cpu,
            false,
        ),
        (
            "gpu::pinned_buffers_are_shared_memory",
            pinned_buffers_are_shared_memory,
            gpu,
            true,
        ),
        (
            "cpu::a_recorded_session_replays",
            a_recorded_session_replays,
            cpu,
            false,
        ),
        (
            "cpu::actor_gpus_have_streams_of_their_own",
            actor_gpus_have_streams_of_their_own_in_the_worker,
            cpu,
            false,
        ),
        ("gpu::round_trip", gpu_round_trip, gpu, true),
        (
            "cpu::the_timeline_crosses_processes",
            the_timeline_crosses_processes,
            cpu,
            false,
        ),
        (
            "gpu::the_timeline_crosses_processes",
            the_timeline_crosses_processes,
            gpu,
            true,
        ),
        (
            "gpu::actor_gpus_have_streams_of_their_own",
            actor_gpus_have_streams_of_their_own_in_the_worker,
            gpu,
            true,
        ),
        ("gpu::a_recorded_session_replays", a_recorded_session_replays, gpu, true),
        (
            "gpu::bad_input",
            bad_input_is_a_typed_error_and_the_worker_keeps_serving,
            gpu,
            true,
        ),
        (
            "gpu::dropped_buffers_are_freed",
            dropped_buffers_are_freed_in_the_worker,
            gpu,
            true,
        ),
        (
            "gpu::a_killed_worker_is_respawned",
            a_killed_worker_is_respawned,
            gpu,
            true,
        ),
        (
            "gpu::ten_faults_of_each_kind_recover",
            ten_faults_of_each_kind_recover,
            gpu,
            true,
        ),
        (
            "cpu::ten_faults_of_each_kind_recover",
            ten_faults_of_each_kind_recover,
            cpu,
            false,
        ),
    ];
    common::harness::run_cases(
        cases
            .into_iter()
            .map(|(name, case, config, needs_gpu)| {
                let body: common::harness::Body = Box::new(move || case(config()));
                (name, needs_gpu, body)
            })
            .collect(),
    )
}
