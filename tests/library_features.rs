//! Builds with and without the library features (CI also runs this file with
//! `--no-default-features`): every library call compiles in every build; one whose
//! feature this build left out answers `Unsupported` naming that feature — from the
//! `Device`, from an `ActorGpu`, inside a graph — while the rest of the device (buffers,
//! copies, `#[kernel]` reductions, COO → CSR on the host) works; one whose feature is in
//! answers (its own tests check the numbers). The same for isolated devices (`isolation`).

use atomr_accel_cuda::graph::GraphBuilder;
use atomr_accel_cuda::prelude::SparseOp;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::{FftShape, GpuError};

/// `r` is the answer to a call of the library that `feature` brings: a success when
/// this build has it (`built`), else `Unsupported` naming the feature.
fn answered<T: std::fmt::Debug>(built: bool, r: Result<T, GpuError>, feature: &str) {
    match r {
        Ok(_) if built => {}
        Err(GpuError::Unsupported(m)) if !built => assert!(
            m.contains(&format!("`{feature}` cargo feature of atomr-accel-cuda")),
            "the error should name the `{feature}` feature: {m}"
        ),
        other => panic!("`{feature}` built in: {built}; got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_library_answers_or_names_its_missing_feature() {
    let system = ActorSystem::new("lean");
    let dev = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let xs: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    let a = dev.upload(xs.clone()).await.unwrap();
    let c = dev.alloc::<f32>(64).await.unwrap();

    // What needs no library: buffers, copies, our own kernels.
    dev.copy(&a, &c).await.unwrap();
    assert_eq!(dev.download(&c).await.unwrap(), xs);
    let want: f64 = xs.iter().map(|&v| v as f64).sum();
    let got = dev.sum(&a).await.unwrap() as f64;
    assert!((got - want).abs() < 1e-4, "sum {got} vs {want}");

    answered(
        cfg!(feature = "blas"),
        dev.gemm(Gemm::new(8, 8, 8), &a, &a, &c).await,
        "blas",
    );
    answered(cfg!(feature = "rand"), dev.fill_uniform(&c).await, "rand");
    answered(cfg!(feature = "dnn"), dev.softmax(Rows::new(8, 8), &a, &c).await, "dnn");
    answered(
        cfg!(feature = "tensor"),
        dev.contract(Contraction::new("ij,jk->ik", &[8, 8], &[8, 8]), &a, &a, &c)
            .await,
        "tensor",
    );
    let z = dev.alloc::<c32>(8).await.unwrap();
    answered(
        cfg!(feature = "fft"),
        dev.fft_c2c(&z, &z, &FftShape::new(&[8], 1), false).await,
        "fft",
    );
    let eye: Vec<f32> = (0..64).map(|k| if k % 9 == 0 { 2.0 } else { 0.0 }).collect();
    let spd = dev.upload(eye).await.unwrap();
    answered(cfg!(feature = "solver"), dev.cholesky(&spd, 8).await, "solver");
    // COO → CSR is host code; the product is cuSPARSE's / sprs'.
    let m = dev
        .upload_coo((8, 8), &[0, 3, 3], &[1, 2, 2], &[1.0f32, 2.0, 0.5])
        .await
        .unwrap();
    let host = dev.download_csr(&m).await.unwrap();
    assert_eq!((host.offsets[4], host.values.clone()), (2, vec![1.0, 2.5]));
    let (x, y) = (
        dev.upload(vec![1.0f32; 8]).await.unwrap(),
        dev.alloc::<f32>(8).await.unwrap(),
    );
    answered(
        cfg!(feature = "sparse"),
        dev.spmv(&m, &x, &y, SparseOp::new()).await,
        "sparse",
    );

    // An actor's own GPU runs the same checks in place.
    let gpu = dev.actor_gpu();
    answered(
        cfg!(feature = "blas"),
        gpu.gemm(Gemm::new(8, 8, 8), &a, &a, &c).await,
        "blas",
    );
    answered(cfg!(feature = "rand"), gpu.fill_normal(&c, 0.0, 1.0).await, "rand");

    // A graph with a GEMM is refused before anything is captured without cuBLAS.
    answered(
        cfg!(feature = "blas"),
        dev.capture_graph(GraphBuilder::new().gemm(Gemm::new(8, 8, 8), &a, &a, &c))
            .await,
        "blas",
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_device_opens_or_names_its_feature() {
    let system = ActorSystem::new("lean-isolated");
    let opened = Device::open(&system, DeviceConfig::cpu().isolated()).await;
    // The test binary is not `#[gpu_main]`: a worker it spawned could not serve, so
    // with the feature the device is refused by the worker, not by the build.
    match opened {
        Err(GpuError::Unsupported(m)) if cfg!(feature = "isolation") => {
            assert!(!m.contains("cargo feature"), "{m}")
        }
        other => answered(cfg!(feature = "isolation"), other, "isolation"),
    }
    system.shutdown().await;
}
