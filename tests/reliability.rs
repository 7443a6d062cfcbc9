//! The reliability suite (issue: isolated devices and the reliability suite), in-process
//! mode, on the CPU device (CI) and GPU 0: a table of bad requests over the public
//! messages and launchers, each a typed error with the device still serving; load from
//! 64 concurrent clients through a small mailbox; allocating until `OutOfMemory`, then
//! freeing and carrying on; stopping a device with work queued. (Sticky faults:
//! `tests/poisoning.rs` in-process, `tests/isolated.rs` with a worker.)

#[macro_use]
mod common;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::Status;
use atomr_accel_cuda::dtype::Complex;
use atomr_accel_cuda::kernel::dsl::prelude::*;
use atomr_accel_cuda::module::LaunchConfig;
use atomr_accel_cuda::prelude::{Compute, Epilogue, KernelSequence, Matmul, SparseOp};
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{kernel, Device, DeviceConfig, FftShape, Gemm, Gemv, GpuError};
use common::{check_sgemm, rand_vec};

/// `y += a·x`.
#[kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] += a * x[i];
    }
}

on_both! {
    a_table_of_bad_requests_each_gets_its_typed_error => bad_requests;
    sixty_four_clients_get_every_reply_right => load;
    allocating_until_out_of_memory_then_freeing_carries_on => out_of_memory;
    stopping_with_work_queued_answers_every_asker => stop_with_queued_work;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("reliability");
    let dev = Device::open(&sys, config).await.expect("device opens");
    (sys, dev)
}

/// The device still serves, correctly.
async fn healthy(dev: &Device) {
    check_sgemm(dev, 24, 24, 24).await;
    assert!(matches!(dev.state().status, Status::Ready));
}

type Request<'a> = Pin<Box<dyn Future<Output = Result<(), GpuError>> + Send + 'a>>;

/// A row of the table: what is wrong, the request, which error it must get.
type Row<'a> = (&'static str, Request<'a>, fn(&GpuError) -> bool);

async fn bad_requests(config: DeviceConfig) {
    let (sys, dev) = open(config.clone()).await;
    let f = |n: usize| rand_vec(n).iter().map(|&v| v as f32).collect::<Vec<_>>();
    let a = dev.upload(f(64)).await.unwrap();
    let b = dev.upload(f(64)).await.unwrap();
    let c = dev.alloc::<f32>(64).await.unwrap();
    let small = dev.alloc::<f32>(10).await.unwrap();
    let tiny = dev.alloc::<f32>(4).await.unwrap();
    let a64 = dev.upload(vec![1.0f64; 64]).await.unwrap();
    let piv = dev.alloc::<i32>(2).await.unwrap();
    let z = dev.alloc::<Complex<f32>>(8).await.unwrap();
    let mut y = dev.alloc::<f32>(64).await.unwrap();
    // Buffers of another device, and of an older generation of this one.
    let sys2 = ActorSystem::new("reliability-other");
    // (Another device: a CPU device with its own ordinal. Two `Device`s on one GPU share
    // its primary context, so a buffer of one is valid on the other.)
    let mut other_cfg = DeviceConfig::cpu();
    other_cfg.device_id = 9;
    let other = Device::open(&sys2, other_cfg).await.unwrap();
    let foreign = other.upload(f(64)).await.unwrap();
    let stale = dev.upload(f(64)).await.unwrap();
    let (s16, s0, s4) = (
        FftShape::new(&[16], 1),
        FftShape::new(&[], 1),
        FftShape::new(&[2, 2, 1, 2], 1),
    );
    let (mut c2, mut c3) = (c.clone(), c.clone());

    use GpuError as E;
    let inv = |e: &E| matches!(e, E::InvalidArgument(_));
    let oom = |e: &E| matches!(e, E::OutOfMemory { .. });
    let stale_err = |e: &E| matches!(e, E::Stale { .. });
    let unrecorded = dev.create_event().await.unwrap();
    let pinned_short = dev.pinned::<f32>(10).await.unwrap();
    let foreign_list = [&foreign];
    // Views: a window of A too short for a GEMM, two overlapping windows of A, and two
    // windows of one complex buffer.
    let (a_half, a_lo, a_mid) = (a.view(..32).unwrap(), a.view(..16).unwrap(), a.view(8..24).unwrap());
    let (z_lo, z_mid, s4v) = (z.view(..4).unwrap(), z.view(2..6).unwrap(), FftShape::new(&[4], 1));
    let unsupported = |e: &E| matches!(e, E::Unsupported(_));
    let table: Vec<Row<'_>> = vec![
        (
            "gemm k beyond a view of A",
            Box::pin(dev.gemm(Gemm::<f32>::new(8, 8, 8), &a_half, &b, &c)),
            inv,
        ),
        (
            "gemm C overlapping A (views)",
            Box::pin(dev.gemm(Gemm::<f32>::new(4, 4, 4), &a_lo, &b, &a_mid)),
            inv,
        ),
        ("copy between overlapping views", Box::pin(dev.copy(&a_lo, &a_mid)), inv),
        (
            "fft between overlapping views of one buffer",
            Box::pin(dev.fft_c2c(&z_lo, &z_mid, &s4v, false)),
            inv,
        ),
        (
            "gemm m·k beyond A",
            Box::pin(dev.gemm(Gemm::<f32>::new(16, 4, 8), &a, &b, &c)),
            inv,
        ),
        (
            "gemm zero m",
            Box::pin(dev.gemm(Gemm::<f32>::new(0, 4, 4), &a, &b, &c)),
            inv,
        ),
        (
            "gemm lda too small",
            Box::pin(dev.gemm(Gemm::<f32>::new(8, 8, 8).leading(4, 8, 8), &a, &b, &c)),
            inv,
        ),
        (
            "gemm C aliases A",
            Box::pin(dev.gemm(Gemm::<f32>::new(8, 8, 8), &a, &b, &a)),
            inv,
        ),
        (
            "gemm foreign A",
            Box::pin(dev.gemm(Gemm::<f32>::new(8, 8, 8), &foreign, &b, &c)),
            inv,
        ),
        (
            "matmul f32 × bf16 (no such pair)",
            Box::pin(async {
                let bh = dev.alloc::<half::bf16>(64).await?;
                dev.matmul(Matmul::new(8, 8, 8), Epilogue::none(), &a, &bh, &c).await
            }),
            inv,
        ),
        (
            "matmul TF32 on f16 inputs",
            Box::pin(async {
                let h = dev.alloc::<half::f16>(64).await?;
                dev.matmul(
                    Matmul::new(8, 8, 8).compute(Compute::Tf32),
                    Epilogue::none(),
                    &h,
                    &h,
                    &c,
                )
                .await
            }),
            inv,
        ),
        (
            "matmul bias of the wrong length",
            Box::pin(dev.matmul(Matmul::new(8, 8, 8), Epilogue::bias(&tiny), &a, &b, &c)),
            inv,
        ),
        (
            "matmul C overlapping A (views)",
            Box::pin(dev.matmul(Matmul::new(4, 4, 4), Epilogue::none(), &a_lo, &b, &a_mid)),
            inv,
        ),
        (
            "matmul foreign A",
            Box::pin(dev.matmul(Matmul::new(8, 8, 8), Epilogue::none(), &foreign, &b, &c)),
            inv,
        ),
        (
            "matmul FP8 output",
            Box::pin(async {
                let q = dev.alloc::<atomr_accel_cuda::dtype::f8e4m3>(64).await?;
                dev.matmul(
                    Matmul::new(8, 8, 8).transposed(true, false),
                    Epilogue::none(),
                    &q,
                    &q,
                    &q,
                )
                .await
            }),
            unsupported,
        ),
        (
            "gemv x too short",
            Box::pin(dev.gemv(Gemv::<f32>::new(8, 8), &a, &tiny, &c)),
            inv,
        ),
        ("axpy lengths differ", Box::pin(dev.axpy(1.0f32, &a, &small)), inv),
        (
            "axpy x and y interleaved with entries in common",
            Box::pin(dev.axpy_strided(
                1.0f32,
                atomr_accel_cuda::Strided::every(&a, 2).take(8),
                atomr_accel_cuda::Strided::every(&a, 3).take(8),
            )),
            inv,
        ),
        (
            "dot lengths differ",
            Box::pin(async { dev.dot(&a, &small).await.map(|_| ()) }),
            inv,
        ),
        ("scal foreign", Box::pin(dev.scal(2.0f32, &foreign)), inv),
        ("copy lengths differ", Box::pin(dev.copy(&a, &small)), inv),
        (
            "write length differs",
            Box::pin(dev.write(&small, vec![1.0f32; 11])),
            inv,
        ),
        (
            "download foreign",
            Box::pin(async { dev.download(&foreign).await.map(|_| ()) }),
            inv,
        ),
        (
            "alloc zero",
            Box::pin(async { dev.alloc::<f32>(0).await.map(|_| ()) }),
            inv,
        ),
        (
            "alloc 1 TB",
            Box::pin(async { dev.alloc::<u8>(1 << 40).await.map(|_| ()) }),
            oom,
        ),
        (
            "alloc byte size overflows",
            Box::pin(async { dev.alloc::<f64>(usize::MAX / 4).await.map(|_| ()) }),
            inv,
        ),
        ("fft length mismatch", Box::pin(dev.fft_c2c(&z, &z, &s16, false)), inv),
        ("fft zero dims", Box::pin(dev.fft_c2c(&z, &z, &s0, false)), inv),
        ("fft four dims", Box::pin(dev.fft_c2c(&z, &z, &s4, false)), inv),
        (
            "lu n beyond A",
            Box::pin(async { dev.lu_factor(&a64, 9).await.map(|_| ()) }),
            inv,
        ),
        (
            "lu_solve short pivots",
            Box::pin(dev.lu_solve(&a64, &piv, &a64, 8, 1)),
            inv,
        ),
        ("cholesky zero n", Box::pin(dev.cholesky(&a64, 0)), inv),
        (
            "eigh n beyond A",
            Box::pin(async { dev.eigh(&a64, 9).await.map(|_| ()) }),
            inv,
        ),
        (
            "poisson negative lambda",
            Box::pin(async {
                let u = dev.alloc::<u32>(16).await?;
                dev.fill_poisson(&u, -1.0).await
            }),
            inv,
        ),
        (
            "rng dimensions of a pseudo-random kind",
            Box::pin(dev.rng_dimensions(4)),
            inv,
        ),
        (
            "kernel block over 1024 threads",
            Box::pin(saxpy::launch(
                &dev,
                LaunchConfig {
                    grid: (1, 1, 1),
                    block: (2048, 1, 1),
                    shared_mem_bytes: 0,
                },
                1.0,
                &a,
                &mut y,
            )),
            inv,
        ),
        (
            "kernel zero grid",
            Box::pin(saxpy::launch(
                &dev,
                LaunchConfig {
                    grid: (0, 1, 1),
                    block: (64, 1, 1),
                    shared_mem_bytes: 0,
                },
                1.0,
                &b,
                &mut c2,
            )),
            inv,
        ),
        (
            "kernel foreign buffer",
            Box::pin(saxpy::launch(
                &dev,
                LaunchConfig::for_elements(64, 64),
                1.0,
                &foreign,
                &mut c3,
            )),
            inv,
        ),
        (
            "kernel writing a view that overlaps its input",
            Box::pin(async {
                let mut upper = a.view(16..48)?;
                saxpy::launch(
                    &dev,
                    LaunchConfig::for_elements(32, 32),
                    1.0,
                    &a.view(..32)?,
                    &mut upper,
                )
                .await
            }),
            inv,
        ),
        (
            "launch_all with a foreign buffer in its last launch",
            Box::pin(async {
                let (mut lo, mut hi) = (b.view(..32)?, c.view(..32)?);
                dev.launch_all([
                    saxpy::call(LaunchConfig::for_elements(32, 32), 1.0, &a.view(..32)?, &mut lo),
                    saxpy::call(LaunchConfig::for_elements(32, 32), 1.0, &foreign.view(..32)?, &mut hi),
                ])
                .await
            }),
            inv,
        ),
        (
            "launch_then_read of another device's buffer",
            Box::pin(async { dev.launch_then_read(KernelSequence::new(), &foreign).await.map(|_| ()) }),
            inv,
        ),
        (
            "dense_to_csr with zero rows",
            Box::pin(async { dev.dense_to_csr(&a, 0, 8).await.map(|_| ()) }),
            inv,
        ),
        (
            "pinned zero length",
            Box::pin(async { dev.pinned::<f32>(0).await.map(|_| ()) }),
            inv,
        ),
        (
            "pinned byte size overflows",
            Box::pin(async { dev.pinned::<f64>(usize::MAX / 4).await.map(|_| ()) }),
            inv,
        ),
        (
            "pinned over the per-buffer cap (16 GiB by default)",
            Box::pin(async { dev.pinned::<f32>((17usize << 30) / 4).await.map(|_| ()) }),
            inv,
        ),
        (
            "write_slice length differs",
            Box::pin(async { dev.write_slice(&a, &[1.0f32; 3]).await }),
            inv,
        ),
        (
            "download_into length differs",
            Box::pin(async { dev.download_into(&a, &mut [0.0f32; 3]).await }),
            inv,
        ),
        (
            "write_pinned length differs",
            Box::pin(async { dev.write_pinned(&a, pinned_short).await.map(|_| ()) }),
            inv,
        ),
        (
            "prefetch foreign",
            Box::pin(dev.prefetch(&foreign, atomr_accel_cuda::memory::Location::Device)),
            inv,
        ),
        (
            "record_event after a foreign buffer",
            Box::pin(dev.record_event(&unrecorded, &foreign_list)),
            inv,
        ),
        (
            "wait on an unrecorded event",
            Box::pin(dev.wait_event(&unrecorded)),
            inv,
        ),
        (
            "elapsed_ms of unrecorded events",
            Box::pin(async { dev.elapsed_ms(&unrecorded, &unrecorded).await.map(|_| ()) }),
            inv,
        ),
        // Issue 25's library calls: reductions, scans, sorts, batched solvers, sparse.
        (
            "sum of a foreign buffer",
            Box::pin(async { dev.sum(&foreign).await.map(|_| ()) }),
            inv,
        ),
        (
            "inclusive_scan into a shorter output",
            Box::pin(dev.inclusive_scan(&a, &small)),
            inv,
        ),
        (
            "exclusive_scan of integers into a shorter output",
            Box::pin(async {
                let x = dev.upload(vec![1i32; 64]).await?;
                let out = dev.alloc::<i64>(63).await?;
                dev.exclusive_scan(&x, &out).await
            }),
            inv,
        ),
        ("sort_by_key lengths differ", Box::pin(dev.sort_by_key(&a, &small)), inv),
        (
            "sort_by_key keys as values",
            Box::pin(dev.sort_by_key(&a_lo, &a_mid)),
            inv,
        ),
        (
            "cholesky_batched zero count",
            Box::pin(dev.cholesky_batched(&a64, 4, 0)),
            inv,
        ),
        (
            "lu_factor_batched too few pivots",
            Box::pin(dev.lu_factor_batched(&a64, &piv, 4, 4)),
            inv,
        ),
        (
            "lu_solve_batched with pivots out of range",
            Box::pin(async {
                let zero = dev.alloc::<i32>(16).await?;
                let rhs = dev.alloc::<f64>(16).await?;
                dev.lu_solve_batched(&a64, &zero, &rhs, 4, 1, 4).await
            }),
            inv,
        ),
        (
            "svd_values_batched of order 33",
            Box::pin(async {
                let big = dev.alloc::<f64>(33 * 33).await?;
                let s = dev.alloc::<f64>(33).await?;
                dev.svd_values_batched(&big, &s, 33, 33, 1).await
            }),
            inv,
        ),
        (
            "svd_batched U shorter than m·m per matrix",
            Box::pin(async {
                let s = dev.alloc::<f64>(8).await?;
                let (u, v) = (dev.alloc::<f64>(8 * 8 - 1).await?, dev.alloc::<f64>(16).await?);
                dev.svd_batched(&a64, &s, &u, &v, 8, 4, 2).await
            }),
            inv,
        ),
        (
            "qr_into with Q overlapping A (views of one buffer)",
            Box::pin(async {
                let r = dev.alloc::<f64>(16).await?;
                let (lo, hi) = (a64.view(0..32)?, a64.view(16..48)?);
                dev.qr_into(&lo, &hi, &r, 8, 4).await
            }),
            inv,
        ),
        (
            "upload_csr with a column index out of range",
            Box::pin(async {
                dev.upload_csr::<f32>(2, 2, &[0, 1, 2], &[0, 2], &[1.0, 2.0])
                    .await
                    .map(|_| ())
            }),
            inv,
        ),
        (
            "spmv x shorter than the matrix's columns",
            Box::pin(async {
                let m = dev.upload_csr::<f32>(2, 3, &[0, 1, 2], &[0, 2], &[1.0, 2.0]).await?;
                let (x2, y2) = (dev.alloc::<f32>(2).await?, dev.alloc::<f32>(2).await?);
                dev.spmv(&m, &x2, &y2, SparseOp::new()).await
            }),
            inv,
        ),
    ];
    for (name, request, expected) in table {
        let r = tokio::time::timeout(Duration::from_secs(60), request)
            .await
            .expect("no hang");
        match r {
            Err(e) => assert!(expected(&e), "{name}: {e:?}"),
            Ok(()) => panic!("{name}: accepted"),
        }
        healthy(&dev).await;
    }
    // Stale: a buffer from before a rebuild.
    dev.rebuild().await.unwrap();
    let e = dev.download(&stale).await.unwrap_err();
    assert!(stale_err(&e), "{e:?}");
    let e = saxpy::launch(&dev, LaunchConfig::for_elements(64, 64), 1.0, &stale, &mut y)
        .await
        .unwrap_err();
    assert!(stale_err(&e), "{e:?}");
    healthy(&dev).await;
    drop(sys);
}

async fn load(mut config: DeviceConfig) {
    // A small mailbox: senders wait for room (back-pressure) instead of piling up.
    config.mailbox_capacity = 8;
    let gpu = !matches!(config.backend, atomr_accel_cuda::device::BackendChoice::Cpu);
    let asks = if gpu { 10_000 } else { 300 };
    let (_sys, dev) = open(config).await;
    // Every library pool member the load will use makes its handle (and workspace) on
    // its first request: let 64 clients make them before memory is measured.
    let warm = (0..64).map(|_| {
        let dev = dev.clone();
        tokio::spawn(async move {
            let x = dev.upload(vec![1.0f32; 4]).await.unwrap();
            for _ in 0..20 {
                dev.dot(&x, &x).await.unwrap();
            }
        })
    });
    for w in futures::future::join_all(warm).await {
        w.unwrap();
    }
    let (free0, _) = dev.memory().await.unwrap();
    let t0 = Instant::now();
    let mut clients = vec![];
    for id in 0..64u32 {
        let dev = dev.clone();
        clients.push(tokio::spawn(async move {
            // Each client's own vector: dot(x, x) = 4·(id+1)².
            let v = (id + 1) as f32;
            let x = dev.upload(vec![v; 4]).await.unwrap();
            for _ in 0..asks {
                let d = dev.dot(&x, &x).await.unwrap();
                assert_eq!(d, 4.0 * v * v, "client {id}");
            }
            asks
        }));
    }
    let mut answered = 0;
    for c in clients {
        answered += tokio::time::timeout(Duration::from_secs(600), c)
            .await
            .expect("no hang")
            .unwrap();
    }
    assert_eq!(answered, 64 * asks, "every ask answered");
    let secs = t0.elapsed().as_secs_f64();
    println!("64 clients × {asks} asks: {:.0} asks/s", answered as f64 / secs);
    let (free1, _) = dev.memory().await.unwrap();
    // Flat: pools and library workspaces may keep tens of MiB (the H200 kept 64 MiB); a
    // leak of one buffer per ask would be 640k buffers.
    assert!(
        free0.saturating_sub(free1) < (256 << 20),
        "memory grew by {} bytes",
        free0 - free1
    );
    assert_eq!(dev.in_flight(), 0);
}

async fn out_of_memory(mut config: DeviceConfig) {
    let gpu = !matches!(config.backend, atomr_accel_cuda::device::BackendChoice::Cpu);
    config.cpu_memory_limit = 512 << 20;
    let chunk: usize = if gpu { 4 << 30 } else { 64 << 20 };
    let (_sys, dev) = open(config).await;
    let mut held = vec![];
    let e = loop {
        match dev.alloc::<u8>(chunk).await {
            Ok(b) => held.push(b),
            Err(e) => break e,
        }
        assert!(held.len() < 1000, "never ran out");
    };
    assert!(matches!(e, GpuError::OutOfMemory { .. }), "{e:?}");
    println!("OutOfMemory after {} × {} MiB", held.len(), chunk >> 20);
    assert!(!held.is_empty());
    held.clear();
    // The memory comes back.
    let b = dev.alloc::<u8>(chunk).await.unwrap();
    drop(b);
    healthy(&dev).await;
}

async fn stop_with_queued_work(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let a = dev
        .upload(rand_vec(256 * 256).iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let c = dev.alloc::<f32>(256 * 256).await.unwrap();
    let mut asks = vec![];
    for _ in 0..200 {
        let (d, a, c) = (dev.clone(), a.clone(), c.clone());
        asks.push(tokio::spawn(async move {
            d.gemm(Gemm::<f32>::new(256, 256, 256), &a, &a, &c).await
        }));
    }
    tokio::task::yield_now().await;
    dev.stop().await;
    let (mut ok, mut failed) = (0, 0);
    for a in asks {
        match tokio::time::timeout(Duration::from_secs(60), a)
            .await
            .expect("answered")
            .unwrap()
        {
            Ok(()) => ok += 1,
            Err(e) => {
                assert!(
                    matches!(e, GpuError::DeviceLost(_) | GpuError::Stopped(_) | GpuError::NoReply(_)),
                    "{e:?}"
                );
                failed += 1;
            }
        }
    }
    println!("stopped with 200 asks: {ok} done, {failed} typed errors");
    let e = dev.alloc::<f32>(4).await.unwrap_err();
    assert!(matches!(e, GpuError::DeviceLost(_)), "{e:?}");
}
