//! The device tier and `BlasActor`: every behaviour runs on the CPU device (CI) and, as a
//! test marked `#[ignore = "needs a CUDA GPU"]`, on the GPU.

#[macro_use]
mod common;

use std::time::Duration;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::{BackendKind, DeviceConfig, Status};
use atomr_accel_cuda::device::{Blas1Scalar, BlasScalar, DType};
use atomr_accel_cuda::prelude::Strided;
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{Batch, CompletionStrategy, Device, Gemm, Gemv, GpuError};
use common::{gemm_ref, rand_vec, rel_err};
use half::{bf16, f16};

on_both! {
    gemm_all_dtypes_match_f64_reference => gemm_all_dtypes;
    strided_batched_gemm_matches_reference => batched_gemm;
    upload_download_copy_round_trip_every_dtype => round_trips;
    written_on_one_stream_read_on_another => cross_stream;
    thousand_64mib_alloc_drop_cycles_do_not_grow_memory => alloc_drop_cycles;
    rebuild_makes_old_refs_stale_and_new_ones_work => rebuild_stale;
    requests_before_ready_are_delivered_and_full_queue_backpressures => queue_while_starting;
    bad_input_gives_typed_errors_and_the_device_keeps_serving => bad_input;
    every_completion_strategy_reports_results => completion_strategies;
    gemv_axpy_dot_nrm2_scal_match_f64_reference => level1_and_gemv;
    pinned_buffers_round_trip_and_return_to_the_pool => pinned_round_trips;
    iamax_finds_the_first_element_of_largest_magnitude => iamax_matches_reference;
    strided_level1_calls_touch_only_their_entries => strided_level1;
    axpy_between_interleaved_rows_of_one_matrix => interleaved_rows;
    bad_requests_name_the_argument_and_what_was_expected => structured_errors;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("test");
    let dev = Device::open(&sys, config).await.expect("device opens");
    (sys, dev)
}

fn to<T: DType>(v: &[f64]) -> Vec<T> {
    v.iter().map(|x| T::from_f64(*x)).collect()
}

fn back<T: DType>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// One GEMM against the float64 reference (computed on the dtype-rounded inputs).
#[allow(clippy::too_many_arguments)]
async fn check_gemm<T: BlasScalar>(
    dev: &Device,
    transa: bool,
    transb: bool,
    m: usize,
    n: usize,
    k: usize,
    pad: usize,
    alpha: f64,
    beta: f64,
    tol: f64,
) {
    let (ar, ac) = if transa { (k, m) } else { (m, k) };
    let (br, bc) = if transb { (n, k) } else { (k, n) };
    let (lda, ldb, ldc) = (ar + pad, br + pad, m + pad);
    let a = back(&to::<T>(&rand_vec(lda * ac)));
    let b = back(&to::<T>(&rand_vec(ldb * bc)));
    let c0 = back(&to::<T>(&rand_vec(ldc * n)));
    let (ga, gb, gc) = (
        dev.upload(to::<T>(&a)).await.unwrap(),
        dev.upload(to::<T>(&b)).await.unwrap(),
        dev.upload(to::<T>(&c0)).await.unwrap(),
    );
    let g = Gemm::<T>::new(m, n, k)
        .transposed(transa, transb)
        .scaled(T::from_f64(alpha), T::from_f64(beta))
        .leading(lda, ldb, ldc);
    dev.gemm(g, &ga, &gb, &gc).await.unwrap();
    let got = back(&dev.download(&gc).await.unwrap());
    let mut want = c0.clone();
    gemm_ref(transa, transb, m, n, k, alpha, &a, lda, &b, ldb, beta, &mut want, ldc);
    // Only the m×n block is defined; padding rows must be untouched.
    let (mut g_in, mut w_in) = (vec![], vec![]);
    for j in 0..n {
        for i in 0..ldc {
            if i < m {
                g_in.push(got[i + j * ldc]);
                w_in.push(want[i + j * ldc]);
            } else {
                assert_eq!(got[i + j * ldc], c0[i + j * ldc], "padding of C was written");
            }
        }
    }
    let err = rel_err(&g_in, &w_in);
    assert!(
        err < tol,
        "{} gemm ta={transa} tb={transb} {m}x{n}x{k}: rel err {err:e} >= {tol:e}",
        T::NAME
    );
}

async fn gemm_all_dtypes(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let shapes = [(64, 48, 32, 0), (33, 17, 65, 3), (128, 128, 128, 0), (1, 7, 5, 1)];
    for (m, n, k, pad) in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            check_gemm::<f32>(&dev, ta, tb, m, n, k, pad, 1.25, 0.5, 1e-5).await;
            check_gemm::<f64>(&dev, ta, tb, m, n, k, pad, -0.75, 1.0, 1e-12).await;
            check_gemm::<f16>(&dev, ta, tb, m, n, k, pad, 1.0, 0.0, 5e-3).await;
            check_gemm::<bf16>(&dev, ta, tb, m, n, k, pad, 0.5, 0.25, 2e-2).await;
        }
    }
}

async fn batched_gemm(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let (m, n, k, count) = (24, 20, 16, 5);
    let (sa, sb, sc) = (m * k + 3, k * n + 1, m * n + 2);
    let a = back(&to::<f32>(&rand_vec(sa * count)));
    let b = back(&to::<f32>(&rand_vec(sb * count)));
    let (ga, gb) = (
        dev.upload(to::<f32>(&a)).await.unwrap(),
        dev.upload(to::<f32>(&b)).await.unwrap(),
    );
    let batch = Batch {
        count,
        stride_a: sa,
        stride_b: sb,
        stride_c: sc,
    };
    // `C = 2·A·B − C` of each matrix of the batch, C of `c_len` elements, leading
    // dimension `ldc`, against the reference.
    let check = |batch: Batch, ldc: usize, c_len: usize| {
        let (a, b, ga, gb, dev) = (&a, &b, &ga, &gb, &dev);
        async move {
            let c0 = back(&to::<f32>(&rand_vec(c_len)));
            let gc = dev.upload(to::<f32>(&c0)).await.unwrap();
            let g = Gemm::<f32>::new(m, n, k).scaled(2.0, -1.0).leading(m, k, ldc);
            dev.gemm_strided_batched(g, batch, ga, gb, &gc).await?;
            let got = back(&dev.download(&gc).await.unwrap());
            let mut want = c0.clone();
            for i in 0..count {
                let c = &mut want[i * batch.stride_c..];
                gemm_ref(
                    false,
                    false,
                    m,
                    n,
                    k,
                    2.0,
                    &a[i * sa..],
                    m,
                    &b[i * sb..],
                    k,
                    -1.0,
                    c,
                    ldc,
                );
            }
            assert!(
                rel_err(&got, &want) < 1e-5,
                "{batch:?}: rel err {}",
                rel_err(&got, &want)
            );
            Ok::<(), GpuError>(())
        }
    };
    check(batch, m, sc * count).await.unwrap();
    // C matrices side by side within each column (rows interleaved: the heads of a
    // `[batch, seq, heads, dim]` tensor): stride m, ldc count·m + 1.
    let ldc = count * m + 1;
    check(Batch { stride_c: m, ..batch }, ldc, ldc * n).await.unwrap();
    // One row less apart: they overlap.
    let r = check(
        Batch {
            stride_c: m - 1,
            ..batch
        },
        ldc,
        ldc * n,
    )
    .await;
    assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{r:?}");
}

async fn round_trip<T: DType>(dev: &Device) {
    let v = to::<T>(&rand_vec(1000).iter().map(|x| x * 100.0).collect::<Vec<_>>());
    let r = dev.upload(v.clone()).await.unwrap();
    assert_eq!(dev.download(&r).await.unwrap(), v, "{}", T::NAME);
    let z = dev.alloc::<T>(1000).await.unwrap();
    assert!(dev.download(&z).await.unwrap().iter().all(|x| *x == T::default()));
    dev.copy(&r, &z).await.unwrap();
    assert_eq!(dev.download(&z).await.unwrap(), v, "{} copy", T::NAME);
    let w = to::<T>(&rand_vec(1000).iter().map(|x| x * 50.0).collect::<Vec<_>>());
    dev.write(&z, w.clone()).await.unwrap();
    assert_eq!(dev.download(&z).await.unwrap(), w, "{} write", T::NAME);
}

async fn round_trips(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    round_trip::<f32>(&dev).await;
    round_trip::<f64>(&dev).await;
    round_trip::<f16>(&dev).await;
    round_trip::<bf16>(&dev).await;
    round_trip::<i8>(&dev).await;
    round_trip::<i16>(&dev).await;
    round_trip::<i32>(&dev).await;
    round_trip::<i64>(&dev).await;
    round_trip::<u8>(&dev).await;
    round_trip::<u16>(&dev).await;
    round_trip::<u32>(&dev).await;
    round_trip::<u64>(&dev).await;
    // Uploads and writes take vectors, slices, arrays and boxed slices alike.
    let v = to::<f32>(&rand_vec(6));
    let from_slice = dev.upload(&v[..]).await.unwrap();
    let from_vec_ref = dev.upload(&v).await.unwrap();
    let from_array = dev.upload([v[0], v[1], v[2], v[3], v[4], v[5]]).await.unwrap();
    for g in [&from_slice, &from_vec_ref, &from_array] {
        assert_eq!(dev.download(g).await.unwrap(), v);
    }
    let rev: Vec<f32> = v.iter().rev().copied().collect();
    dev.write(&from_array, rev.clone().into_boxed_slice()).await.unwrap();
    assert_eq!(dev.download(&from_array).await.unwrap(), rev);
}

async fn cross_stream(config: DeviceConfig) {
    // Written by the context actor's stream (upload, copy), read by the BLAS actor's
    // stream (GEMM) with no host synchronisation in between, then read back.
    let (_sys, dev) = open(config).await;
    let n = 256;
    let a = rand_vec(n * n);
    let ga = dev.upload(to::<f32>(&a)).await.unwrap();
    let gb = dev.alloc::<f32>(n * n).await.unwrap();
    let gc = dev.alloc::<f32>(n * n).await.unwrap();
    let ident: Vec<f64> = (0..n * n).map(|i| if i % (n + 1) == 0 { 1.0 } else { 0.0 }).collect();
    let gi = dev.upload(to::<f32>(&ident)).await.unwrap();
    for _ in 0..5 {
        dev.copy(&ga, &gb).await.unwrap();
        dev.gemm(Gemm::<f32>::new(n, n, n), &gb, &gi, &gc).await.unwrap();
        let got = back(&dev.download(&gc).await.unwrap());
        assert!(rel_err(&got, &back(&to::<f32>(&a))) < 1e-6);
    }
}

async fn alloc_drop_cycles(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let n = (64 << 20) / 4;
    let (free0, _) = dev.memory().await.unwrap();
    // 1000 cycles on the GPU; on the CPU device each cycle zero-fills 64 MiB of host
    // memory, so CI runs 50 (the accounting it checks is the same).
    let cycles = if dev.ready().await.unwrap().backend == BackendKind::Cuda {
        1000
    } else {
        50
    };
    for _ in 0..cycles {
        let r = dev.alloc::<f32>(n).await.unwrap();
        drop(r);
    }
    // Frees are stream-ordered: let them land.
    let probe = dev.alloc::<f32>(1).await.unwrap();
    dev.download(&probe).await.unwrap();
    drop(probe);
    let (free1, _) = dev.memory().await.unwrap();
    let grown = free0.saturating_sub(free1);
    // Frees go to CUDA's stream-ordered pool, which keeps a few freed blocks for reuse
    // (258 MiB seen once on the H200); a leak would show 64 GB.
    assert!(
        grown < (512 << 20),
        "device memory grew by {grown} bytes over 1000 cycles"
    );
}

async fn rebuild_stale(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let g0 = dev.state().generation;
    let old = dev.upload(vec![1.0f32, 2.0, 3.0]).await.unwrap();
    let g1 = dev.rebuild().await.unwrap();
    assert!(g1 > g0);
    assert_eq!(old.generation(), g0);
    let e = dev.download(&old).await.unwrap_err();
    assert_eq!(
        e,
        GpuError::Stale {
            buffer_generation: g0,
            device_generation: g1
        }
    );
    let e = dev.gemm(Gemm::<f32>::new(1, 1, 1), &old, &old, &old).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    let fresh = dev.upload(vec![4.0f32, 5.0]).await.unwrap();
    assert_eq!(dev.download(&fresh).await.unwrap(), vec![4.0, 5.0]);
    let a = dev.upload(vec![2.0f32]).await.unwrap();
    let c = dev.alloc::<f32>(1).await.unwrap();
    dev.gemm(Gemm::<f32>::new(1, 1, 1), &a, &a, &c).await.unwrap();
    assert_eq!(dev.download(&c).await.unwrap(), vec![4.0]);
}

async fn queue_while_starting(mut config: DeviceConfig) {
    config.start_delay = Some(Duration::from_millis(300));
    config.queue_capacity = 4;
    let sys = ActorSystem::new("queue");
    let dev = Device::start(&sys, config).unwrap();
    assert!(matches!(dev.state().status, Status::Starting));
    let data: Vec<Vec<f32>> = (0..4).map(|i| vec![i as f32; 8]).collect();
    let mut pending = vec![];
    for d in &data {
        let (dev, d) = (dev.clone(), d.clone());
        pending.push(tokio::spawn(async move { dev.upload(d).await }));
    }
    // Give the four a moment to be queued, then overflow the queue.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(matches!(dev.state().status, Status::Starting));
    let overflow = dev.upload(vec![9.0f32]).await.unwrap_err();
    assert_eq!(overflow, GpuError::Backpressure { capacity: 4 });
    for (h, d) in pending.into_iter().zip(&data) {
        let r = h.await.unwrap().expect("queued request delivered after start");
        assert_eq!(&dev.download(&r).await.unwrap(), d);
    }
}

async fn bad_input(config: DeviceConfig) {
    let (sys, dev) = open(config.clone()).await;
    let a = dev.upload(to::<f32>(&rand_vec(64))).await.unwrap();
    let b = dev.upload(to::<f32>(&rand_vec(64))).await.unwrap();
    let c = dev.alloc::<f32>(64).await.unwrap();
    let small = dev.alloc::<f32>(10).await.unwrap();
    let inv = |r: Result<(), GpuError>| matches!(r, Err(GpuError::InvalidArgument(_)));
    // m·k larger than A.
    assert!(inv(dev.gemm(Gemm::<f32>::new(16, 4, 8), &a, &b, &c).await));
    // Zero sizes.
    assert!(inv(dev.gemm(Gemm::<f32>::new(0, 4, 4), &a, &b, &c).await));
    assert!(matches!(dev.alloc::<f32>(0).await, Err(GpuError::InvalidArgument(_))));
    // Leading dimension too small.
    assert!(inv(dev
        .gemm(Gemm::<f32>::new(8, 8, 8).leading(4, 8, 8), &a, &b, &c)
        .await));
    // Output aliasing an input.
    assert!(inv(dev.gemm(Gemm::<f32>::new(8, 8, 8), &a, &b, &a).await));
    // Mismatched lengths.
    assert!(inv(dev.copy(&a, &small).await));
    assert!(inv(dev.write(&small, vec![1.0f32; 11]).await));
    // A ref from another device.
    let mut other_cfg = DeviceConfig::cpu();
    other_cfg.device_id = 7;
    let other = Device::open(&sys, other_cfg).await.unwrap();
    let foreign = other.upload(vec![1.0f32; 64]).await.unwrap();
    assert!(matches!(
        dev.download(&foreign).await,
        Err(GpuError::InvalidArgument(_))
    ));
    assert!(inv(dev.gemm(Gemm::<f32>::new(8, 8, 8), &foreign, &b, &c).await));
    // A 1 TB allocation.
    let e = dev.alloc::<u8>(1 << 40).await.unwrap_err();
    assert_eq!(
        e,
        GpuError::OutOfMemory {
            requested_bytes: 1 << 40
        }
    );
    // An element count whose byte size overflows.
    assert!(matches!(
        dev.alloc::<f64>(usize::MAX / 4).await,
        Err(GpuError::InvalidArgument(_))
    ));
    // Still serving, correctly.
    dev.gemm(Gemm::<f32>::new(8, 8, 8), &a, &b, &c).await.unwrap();
    let got = back(&dev.download(&c).await.unwrap());
    let (av, bv) = (
        back(&dev.download(&a).await.unwrap()),
        back(&dev.download(&b).await.unwrap()),
    );
    let mut want = vec![0.0; 64];
    gemm_ref(false, false, 8, 8, 8, 1.0, &av, 8, &bv, 8, 0.0, &mut want, 8);
    assert!(rel_err(&got, &want) < 1e-5);
    assert!(matches!(dev.state().status, Status::Ready));
}

async fn completion_strategies(config: DeviceConfig) {
    for strategy in [
        CompletionStrategy::Polled,
        CompletionStrategy::HostFn,
        CompletionStrategy::Blocking,
        CompletionStrategy::Spin,
    ] {
        let (_sys, dev) = open(config.clone().with_completion(strategy)).await;
        let n = 96;
        let a = rand_vec(n * n);
        let b = rand_vec(n * n);
        let (ga, gb) = (
            dev.upload(to::<f32>(&a)).await.unwrap(),
            dev.upload(to::<f32>(&b)).await.unwrap(),
        );
        let gc = dev.alloc::<f32>(n * n).await.unwrap();
        dev.gemm(Gemm::<f32>::new(n, n, n), &ga, &gb, &gc).await.unwrap();
        let got = back(&dev.download(&gc).await.unwrap());
        let mut want = vec![0.0; n * n];
        gemm_ref(
            false,
            false,
            n,
            n,
            n,
            1.0,
            &back(&to::<f32>(&a)),
            n,
            &back(&to::<f32>(&b)),
            n,
            0.0,
            &mut want,
            n,
        );
        assert!(rel_err(&got, &want) < 1e-5, "{strategy:?}");
        // Sixteen asks in flight at once, each into its own output: every reply comes,
        // each with its own product (scaled by its index).
        let outs: Vec<_> = futures::future::join_all((0..16).map(|_| dev.alloc::<f32>(n * n)))
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let asks = outs.iter().enumerate().map(|(i, out)| {
            let g = Gemm::<f32> {
                alpha: i as f32 + 1.0,
                ..Gemm::new(n, n, n)
            };
            dev.gemm(g, &ga, &gb, out)
        });
        for r in futures::future::join_all(asks).await {
            r.unwrap();
        }
        for (i, out) in outs.iter().enumerate() {
            let got = back(&dev.download(out).await.unwrap());
            let scaled: Vec<f64> = want.iter().map(|w| w * (i as f64 + 1.0)).collect();
            assert!(rel_err(&got, &scaled) < 1e-5, "{strategy:?}, ask {i}");
        }
    }
}

/// A wait that outlives `op_timeout` answers `Timeout` with every strategy — never
/// hangs — and the device serves again once the GPU is through.
#[tokio::test]
#[ignore = "needs a CUDA GPU"]
async fn gpu_every_completion_strategy_times_out_at_the_deadline() {
    for strategy in [
        CompletionStrategy::Polled,
        CompletionStrategy::HostFn,
        CompletionStrategy::Blocking,
        CompletionStrategy::Spin,
    ] {
        let mut config = DeviceConfig::cuda(0).with_completion(strategy);
        config.op_timeout = Duration::from_millis(2);
        let (_sys, dev) = open(config).await;
        // 16 DGEMMs of 4096³ in one call: ~0.04 s on an H200, far past 2 ms.
        let n = 4096;
        let a = dev.upload(to::<f64>(&rand_vec(n * n))).await.unwrap();
        let c = dev.alloc::<f64>(n * n * 16).await.unwrap();
        let batch = Batch {
            count: 16,
            stride_a: 0,
            stride_b: 0,
            stride_c: n * n,
        };
        let r = dev
            .gemm_strided_batched(Gemm::<f64>::new(n, n, n), batch, &a, &a, &c)
            .await;
        assert_eq!(r, Err(GpuError::Timeout(Duration::from_millis(2))), "{strategy:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let one = dev.upload(vec![2.0f64]).await.unwrap();
        let out = dev.alloc::<f64>(1).await.unwrap();
        dev.gemm(Gemm::<f64>::new(1, 1, 1), &one, &one, &out).await.unwrap();
        assert_eq!(dev.download(&out).await.unwrap(), vec![4.0], "{strategy:?}");
    }
}

#[tokio::test]
#[ignore = "needs a CUDA GPU"]
async fn gpu_device_reports_cuda_backend() {
    let (_sys, dev) = open(DeviceConfig::cuda(0)).await;
    let info = dev.ready().await.unwrap();
    assert_eq!(info.backend, BackendKind::Cuda);
    println!("device: {info:?}");
}

#[tokio::test]
async fn cpu_device_reports_cpu_backend_and_auto_falls_back_without_a_gpu() {
    let (_sys, dev) = open(DeviceConfig::cpu()).await;
    assert_eq!(dev.ready().await.unwrap().backend, BackendKind::Cpu);
    let (_sys2, auto) = open(DeviceConfig::auto()).await;
    // Auto picks CUDA only where a usable GPU exists; CI has none.
    let info = auto.ready().await.unwrap();
    assert!(matches!(info.backend, BackendKind::Cpu | BackendKind::Cuda));
}

#[tokio::test]
async fn a_stopped_device_answers_every_request_with_device_lost() {
    let (_sys, dev) = open(DeviceConfig::cpu()).await;
    let r = dev.upload(vec![1.0f32]).await.unwrap();
    dev.stop().await;
    let e = dev.download(&r).await.unwrap_err();
    // The cause once, in its own words: not "DeviceLost: device 0 is lost: DeviceLost: …".
    assert_eq!(e.to_string(), "DeviceLost: device 0 is lost: the device was stopped");
    assert!(matches!(dev.alloc::<f32>(4).await, Err(GpuError::DeviceLost(_))));
}

async fn check_level1<T: Blas1Scalar>(dev: &Device, tol: f64) {
    let n = 1000;
    let x = back(&to::<T>(&rand_vec(n)));
    let y = back(&to::<T>(&rand_vec(n)));
    let (gx, gy) = (
        dev.upload(to::<T>(&x)).await.unwrap(),
        dev.upload(to::<T>(&y)).await.unwrap(),
    );
    let dot = dev.dot(&gx, &gy).await.unwrap().to_f64();
    let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    assert!(
        (dot - want).abs() <= tol * want.abs().max(1.0),
        "{} dot {dot} vs {want}",
        T::NAME
    );
    let nrm = dev.nrm2(&gx).await.unwrap().to_f64();
    let want = x.iter().map(|a| a * a).sum::<f64>().sqrt();
    assert!((nrm - want).abs() <= tol * want, "{} nrm2 {nrm} vs {want}", T::NAME);
    dev.axpy(T::from_f64(-0.5), &gx, &gy).await.unwrap();
    let got = back(&dev.download(&gy).await.unwrap());
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| b - 0.5 * a).collect();
    assert!(rel_err(&got, &want) < tol, "{} axpy", T::NAME);
    dev.scal(T::from_f64(3.0), &gx).await.unwrap();
    let got = back(&dev.download(&gx).await.unwrap());
    let want: Vec<f64> = x.iter().map(|a| 3.0 * a).collect();
    assert!(rel_err(&got, &want) < tol, "{} scal", T::NAME);
    // GEMV, both orientations, padded lda, alpha/beta.
    let (m, k, pad) = (37, 23, 2);
    let lda = m + pad;
    let a = back(&to::<T>(&rand_vec(lda * k)));
    let ga = dev.upload(to::<T>(&a)).await.unwrap();
    for trans in [false, true] {
        let (nx, ny) = if trans { (m, k) } else { (k, m) };
        let xv = back(&to::<T>(&rand_vec(nx)));
        let y0 = back(&to::<T>(&rand_vec(ny)));
        let (gxv, gyv) = (
            dev.upload(to::<T>(&xv)).await.unwrap(),
            dev.upload(to::<T>(&y0)).await.unwrap(),
        );
        let g = Gemv::<T>::new(m, k)
            .transposed(trans)
            .scaled(T::from_f64(1.5), T::from_f64(-2.0))
            .leading(lda);
        dev.gemv(g, &ga, &gxv, &gyv).await.unwrap();
        let got = back(&dev.download(&gyv).await.unwrap());
        let want: Vec<f64> = (0..ny)
            .map(|i| {
                let acc: f64 = (0..nx)
                    .map(|j| if trans { a[j + i * lda] } else { a[i + j * lda] } * xv[j])
                    .sum();
                1.5 * acc - 2.0 * y0[i]
            })
            .collect();
        assert!(
            rel_err(&got, &want) < tol,
            "{} gemv trans={trans}: {}",
            T::NAME,
            rel_err(&got, &want)
        );
    }
    // Bad input stays a typed error.
    let short = dev.alloc::<T>(3).await.unwrap();
    assert!(matches!(
        dev.axpy(T::from_f64(1.0), &gx, &short).await,
        Err(GpuError::InvalidArgument(_))
    ));
    assert!(matches!(dev.dot(&gx, &short).await, Err(GpuError::InvalidArgument(_))));
    assert!(matches!(
        dev.gemv(Gemv::<T>::new(m, k), &ga, &short, &gy).await,
        Err(GpuError::InvalidArgument(_))
    ));
    assert!(matches!(
        dev.gemv(Gemv::<T>::new(m, k).leading(m - 1), &ga, &gx, &gy).await,
        Err(GpuError::InvalidArgument(_))
    ));
}

async fn level1_and_gemv(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    check_level1::<f32>(&dev, 1e-5).await;
    check_level1::<f64>(&dev, 1e-12).await;
}

/// `iamax` through a generic `Blas1Scalar` caller: random data with a planted
/// largest-magnitude negative element, a tie (the first wins, as in cuBLAS), and
/// odd lengths, each checked against a float64 scan.
async fn check_iamax<T: Blas1Scalar>(dev: &Device) {
    for n in [1usize, 7, 1000, 4097] {
        let mut x = rand_vec(n);
        let planted = (n * 3) / 5;
        x[planted] = -3.5;
        if n > 2 {
            x[n - 1] = 3.5; // same magnitude, later: not the answer
        }
        let x = back(&to::<T>(&x));
        let want = x
            .iter()
            .enumerate()
            .fold(0, |best, (i, v)| if v.abs() > x[best].abs() { i } else { best });
        let g = dev.upload(to::<T>(&x)).await.unwrap();
        assert_eq!(dev.iamax(&g).await.unwrap(), want, "{} iamax over {n}", T::NAME);
        assert_eq!(want, planted);
    }
}

/// Level-1 calls over strided vectors (BLAS incx/incy): a row of a column-major matrix
/// (stride lda) and every third element of a view, against float64; the elements between
/// the entries are left as they were; bad strides and counts are typed errors.
async fn strided_level1_typed<T: Blas1Scalar>(d: &Device) {
    let (rows, cols) = (7, 50);
    let a: Vec<f64> = rand_vec(rows * cols);
    let y0: Vec<f64> = rand_vec(3 * cols + 11);
    let ga = d
        .upload(a.iter().map(|&v| T::from_f64(v)).collect::<Vec<_>>())
        .await
        .unwrap();
    let gy = d
        .upload(y0.iter().map(|&v| T::from_f64(v)).collect::<Vec<_>>())
        .await
        .unwrap();
    let back = |v: Vec<T>| v.into_iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let exact = |v: f64| T::from_f64(v).to_f64();
    // Row 3 of A (cols entries, rows apart), and every third element of y from 5 on.
    let row = Strided::every(&ga.view(3..).unwrap(), rows).take(cols);
    let ys = Strided::every(&gy.view(5..).unwrap(), 3).take(cols);
    let xr: Vec<f64> = (0..cols).map(|j| exact(a[3 + j * rows])).collect();
    let yr: Vec<f64> = (0..cols).map(|j| exact(y0[5 + 3 * j])).collect();
    let dot = d.dot_strided(row.clone(), ys.clone()).await.unwrap().to_f64();
    let want: f64 = xr.iter().zip(&yr).map(|(x, y)| x * y).sum();
    assert!(
        (dot - want).abs() < 1e-4 * want.abs().max(1.0),
        "{} dot {dot} vs {want}",
        T::NAME
    );
    let nrm = d.nrm2_strided(row.clone()).await.unwrap().to_f64();
    let want = xr.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((nrm - want).abs() < 1e-5 * want, "{} nrm2 {nrm} vs {want}", T::NAME);
    let at = d.iamax_strided(row.clone()).await.unwrap();
    let best = xr.iter().map(|x| x.abs()).fold(0.0, f64::max);
    assert_eq!(xr[at].abs(), best, "{} iamax: position {at}", T::NAME);
    d.axpy_strided(T::from_f64(2.0), row.clone(), ys.clone()).await.unwrap();
    d.scal_strided(T::from_f64(-0.5), ys.clone()).await.unwrap();
    let got = back(d.download(&gy).await.unwrap());
    for (i, g) in got.iter().enumerate() {
        let entry = (i >= 5 && (i - 5) % 3 == 0 && (i - 5) / 3 < cols).then(|| (i - 5) / 3);
        match entry {
            Some(j) => {
                let want = -0.5 * (yr[j] + 2.0 * xr[j]);
                assert!((g - want).abs() < 1e-5, "{} y[{i}] = {g}, want {want}", T::NAME);
            }
            None => assert_eq!(*g, exact(y0[i]), "{} y[{i}] between entries changed", T::NAME),
        }
    }
    // A is untouched (it was only read).
    assert_eq!(
        back(d.download(&ga).await.unwrap()),
        a.iter().map(|&v| exact(v)).collect::<Vec<_>>()
    );
    let invalid =
        |r: Result<(), GpuError>, what: &str| assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    invalid(
        d.scal_strided(T::from_f64(1.0), Strided::every(&gy, 0)).await,
        "stride 0",
    );
    invalid(
        d.scal_strided(T::from_f64(1.0), Strided::every(&gy, 2).take(1000))
            .await,
        "entries beyond the buffer",
    );
    invalid(
        d.axpy_strided(T::from_f64(1.0), row.clone(), ys.clone().take(cols - 1))
            .await,
        "entry counts differ",
    );
    invalid(d.nrm2_strided(row.take(0)).await.map(|_| ()), "no entries");
}

async fn strided_level1(config: DeviceConfig) {
    let sys = ActorSystem::new("strided-level1");
    let d = Device::open(&sys, config).await.unwrap();
    strided_level1_typed::<f32>(&d).await;
    strided_level1_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn iamax_matches_reference(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    check_iamax::<f32>(&dev).await;
    check_iamax::<f64>(&dev).await;
}

/// The common bad requests carry which argument is at fault and expected vs got, beside
/// the message (`GpuError::InvalidArgument(Invalid { .. })`).
async fn structured_errors(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    let x = dev.upload(vec![1.0f32; 8]).await.unwrap();
    let field = |e: GpuError| match e {
        GpuError::InvalidArgument(i) => (i.arg.clone(), i.expected.clone(), i.got.clone(), i.message),
        other => panic!("expected InvalidArgument, got {other}"),
    };
    let (arg, expected, got, message) = field(dev.write(&x, vec![0.0f32; 7]).await.unwrap_err());
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("data"), Some("8 elements"), Some("7 elements"))
    );
    assert_eq!(message, "write of 7 elements into a buffer of 8");
    let short = dev.alloc::<f32>(3).await.unwrap();
    let (arg, expected, got, _) = field(dev.copy(&x, &short).await.unwrap_err());
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("dst"), Some("8 elements"), Some("3 elements"))
    );
    let (arg, _, got, _) = field(
        dev.gemm(atomr_accel_cuda::Gemm::<f32>::new(4, 4, 2), &x, &x, &short)
            .await
            .unwrap_err(),
    );
    assert_eq!((arg.as_deref(), got.as_deref()), (Some("c"), Some("3 elements")));
    let (arg, ..) = field(dev.axpy(1.0f32, &x, &short).await.unwrap_err());
    assert_eq!(arg.as_deref(), Some("y"));
    // Allocation, FFT shapes and lengths, pinned copies, a buffer of another device.
    let (arg, expected, got, _) = field(dev.alloc::<f32>(0).await.unwrap_err());
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("len"), Some("≥ 1"), Some("0"))
    );
    let z = dev.alloc::<atomr_accel_cuda::dtype::c32>(16).await.unwrap();
    let (arg, expected, got, _) = field(
        dev.fft_c2c(&z, &z, &atomr_accel_cuda::FftShape::new(&[8], 1), false)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("input"), Some("8 elements"), Some("16 elements"))
    );
    let (arg, _, got, _) = field(
        dev.fft_c2c(&z, &z, &atomr_accel_cuda::FftShape::new(&[2, 2, 2, 2], 1), false)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (arg.as_deref(), got.as_deref()),
        (Some("shape"), Some("[2, 2, 2, 2] x 1"))
    );
    let r = dev.alloc::<f32>(5).await.unwrap();
    let spectrum = dev.alloc::<atomr_accel_cuda::dtype::c32>(4).await.unwrap();
    let (arg, expected, got, _) = field(
        dev.fft_r2c(&r, &spectrum, &atomr_accel_cuda::FftShape::new(&[5], 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("output"), Some("3 elements"), Some("4 elements")),
        "an R2C of 5 points has 3 outputs"
    );
    let wrong = dev.pinned::<f32>(9).await.unwrap();
    let (arg, expected, got, _) = field(dev.download_pinned(&x, wrong).await.unwrap_err());
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("buf"), Some("8 elements"), Some("9 elements"))
    );
    // GEMM sizes and leading dimensions, RNG parameters, solver orders.
    let (arg, expected, got, _) = field(
        dev.gemm(
            atomr_accel_cuda::Gemm::<f32>::new(2, 2, 2).leading(1, 2, 2),
            &x,
            &x,
            &short,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (arg.as_deref(), expected.as_deref(), got.as_deref()),
        (Some("lda"), Some("≥ 2"), Some("1"))
    );
    let (arg, ..) = field(
        dev.gemm(atomr_accel_cuda::Gemm::<f32>::new(2, 2, 0), &x, &x, &short)
            .await
            .unwrap_err(),
    );
    assert_eq!(arg.as_deref(), Some("k"));
    let (arg, _, got, _) = field(dev.fill_normal(&x, 0.0, -1.0).await.unwrap_err());
    assert_eq!((arg.as_deref(), got.as_deref()), (Some("std"), Some("-1")));
    let sq = dev.upload(vec![4.0f64; 4]).await.unwrap();
    let (arg, expected, ..) = field(dev.cholesky(&sq, 0).await.unwrap_err());
    assert_eq!((arg.as_deref(), expected.as_deref()), (Some("n"), Some("≥ 1")));
    let other = Device::open(
        &ActorSystem::new("structured-other"),
        DeviceConfig {
            device_id: 7,
            ..DeviceConfig::cpu()
        },
    )
    .await
    .unwrap();
    let theirs = other.alloc::<f32>(8).await.unwrap();
    let (_, expected, got, _) = field(dev.copy(&theirs, &x).await.unwrap_err());
    assert_eq!(
        (expected.as_deref(), got.as_deref()),
        (Some("a buffer of device 0"), Some("a buffer of device 7"))
    );
}

async fn pinned_round_trip<T: DType>(dev: &Device, n: usize) {
    let data = to::<T>(&rand_vec(n).iter().map(|x| x * 100.0).collect::<Vec<_>>());
    let mut buf = dev.pinned::<T>(n).await.unwrap();
    assert!(
        buf.as_slice().unwrap().iter().all(|v| *v == T::default()),
        "pinned buffers start zeroed"
    );
    buf.as_mut_slice().unwrap().copy_from_slice(&data);
    let (r, buf) = dev.upload_pinned(buf).await.unwrap();
    assert_eq!(dev.download(&r).await.unwrap(), data, "{} pinned upload", T::NAME);
    let mut buf = dev.download_pinned(&r, buf).await.unwrap();
    buf.as_mut_slice().unwrap().reverse();
    let rev: Vec<T> = data.iter().rev().copied().collect();
    let buf = dev.write_pinned(&r, buf).await.unwrap();
    assert_eq!(dev.download(&r).await.unwrap(), rev, "{} pinned write", T::NAME);
    let back_buf = dev.download_pinned(&r, buf).await.unwrap();
    assert_eq!(back_buf.as_slice().unwrap(), &rev[..], "{} pinned download", T::NAME);
    let wrong = dev.pinned::<T>(n + 1).await.unwrap();
    assert!(matches!(
        dev.download_pinned(&r, wrong).await,
        Err(GpuError::InvalidArgument(_))
    ));
}

async fn pinned_round_trips(config: DeviceConfig) {
    let (_sys, dev) = open(config).await;
    pinned_round_trip::<f32>(&dev, 4096).await;
    pinned_round_trip::<f64>(&dev, 1000).await;
    pinned_round_trip::<bf16>(&dev, 333).await;
    pinned_round_trip::<u8>(&dev, 1 << 20).await;
    // Dropped buffers wait in the pool; the next request of that size reuses one (zeroed).
    let before = dev.pinned_pool_bytes();
    let b = dev.pinned::<f32>(12345).await.unwrap();
    drop(b);
    assert_eq!(dev.pinned_pool_bytes(), before + 12345 * 4);
    let mut b = dev.pinned::<f32>(12345).await.unwrap();
    assert_eq!(dev.pinned_pool_bytes(), before);
    b.as_mut_slice().unwrap()[0] = 7.0;
    drop(b);
    let b = dev.pinned::<f32>(12345).await.unwrap();
    assert_eq!(b.as_slice().unwrap()[0], 0.0, "a reused buffer is zeroed");
    assert!(matches!(dev.pinned::<f32>(0).await, Err(GpuError::InvalidArgument(_))));
}

/// `axpy` between vectors whose windows interleave in one buffer: an elimination step
/// over the rows of a column-major matrix (row r −= l_r · row 0, each row `rows` apart,
/// the windows of all rows overlapping) and the two halves of an interleaved pair
/// (even elements into odd ones), against float64; entries in common refused.
async fn interleaved_rows_typed<T: Blas1Scalar>(d: &Device) {
    let (rows, cols) = (9, 41);
    let a: Vec<f64> = rand_vec(rows * cols).iter().map(|v| v + 2.0).collect();
    let a: Vec<f64> = a.iter().map(|&v| T::from_f64(v).to_f64()).collect();
    let g = d.upload(to::<T>(&a)).await.unwrap();
    let row = |r: usize| Strided::every(&g.view(r..).unwrap(), rows).take(cols);
    let mut want = a.clone();
    for r in 1..rows {
        let l = T::from_f64(-a[r] / a[0]);
        d.axpy_strided(l, row(0), row(r)).await.unwrap();
        for j in 0..cols {
            want[r + j * rows] += l.to_f64() * a[j * rows];
        }
    }
    let got = back(&d.download(&g).await.unwrap());
    let tol = if T::NAME == "f32" { 1e-5 } else { 1e-13 };
    assert!(rel_err(&got, &want) < tol, "{} elimination step", T::NAME);
    for (r, v) in got.iter().enumerate().take(rows).skip(1) {
        assert!(v.abs() < tol * 10.0, "{} column 0 eliminated in row {r}: {v}", T::NAME);
    }
    // Odd elements += 0.5 · even ones, all in one window.
    let n = 1001;
    let v: Vec<f64> = rand_vec(2 * n).iter().map(|&x| T::from_f64(x).to_f64()).collect();
    let h = d.upload(to::<T>(&v)).await.unwrap();
    let (even, odd) = (Strided::every(&h, 2), Strided::every(&h.view(1..).unwrap(), 2));
    d.axpy_strided(T::from_f64(0.5), even.clone(), odd.clone())
        .await
        .unwrap();
    let mut want = v.clone();
    for i in 0..n {
        want[2 * i + 1] += 0.5 * v[2 * i];
    }
    assert!(
        rel_err(&back(&d.download(&h).await.unwrap()), &want) < tol,
        "{} odd += even",
        T::NAME
    );
    // Entries in common: every other element and every third (element 0 in both), and
    // two rows of one progression shifted by a whole stride.
    for (x, y, what) in [
        (
            even.clone().take(300),
            Strided::every(&h, 3).take(300),
            "every 2nd and every 3rd",
        ),
        (
            even.clone().take(500),
            Strided::every(&h.view(4..).unwrap(), 2).take(500),
            "shifted by two strides",
        ),
    ] {
        let r = d.axpy_strided(T::from_f64(1.0), x, y).await;
        assert!(
            matches!(r, Err(GpuError::InvalidArgument(_))),
            "{} {what}: {r:?}",
            T::NAME
        );
    }
    // Refused before anything ran: the buffer is as the last call left it.
    assert!(
        rel_err(&back(&d.download(&h).await.unwrap()), &want) < tol,
        "{} untouched",
        T::NAME
    );
}

async fn interleaved_rows(config: DeviceConfig) {
    let (sys, d) = open(config).await;
    interleaved_rows_typed::<f32>(&d).await;
    interleaved_rows_typed::<f64>(&d).await;
    sys.shutdown().await;
}
