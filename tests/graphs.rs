//! `graph`: a GEMM, `#[kernel]` launches and a copy captured once and replayed, and a
//! cuBLASLt matmul (bf16 inputs, f32 C, bias and ReLU fused) in a graph, checked against
//! float64 references on fresh random data — on the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::{gemm_ref, rand_vec, rel_err};

/// y = max(y, 0).
#[kernel]
pub fn relu<T: Float>(y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = y[i].max(T::zero());
    }
}

/// y += 1: not idempotent, so the number of replays shows in the result.
#[kernel]
pub fn add_one<T: Float>(y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = y[i] + T::one();
    }
}

on_both! {
    replays_match_the_reference => replays;
    bad_graphs_are_typed_errors => bad_graphs;
    a_matmul_replays_in_a_graph => matmul_graph;
    captures_survive_devices_starting_beside_them => captures_beside_starts;
}

/// A matmul (bf16 A and B, f32 C, an f32 bias, ReLU) then `add_one` on C, captured and
/// replayed twice (the matmul's beta = 0 overwrites C, so the result is one replay's),
/// against float64; new inputs between replays are read at the captured addresses.
async fn matmul_graph(config: DeviceConfig) {
    let sys = ActorSystem::new("graph-matmul");
    let d = Device::open(&sys, config).await.unwrap();
    let (m, n, k) = (64, 48, 32);
    let bf = |v: &[f64]| v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>();
    let (a, b, bias) = (rand_vec(m * k), rand_vec(k * n), rand_vec(m));
    let (ga, gb) = (d.upload(bf(&a)).await.unwrap(), d.upload(bf(&b)).await.unwrap());
    let gbias = d.upload(f32s(&bias)).await.unwrap();
    let mut gc = d.alloc::<f32>(m * n).await.unwrap();
    let cfg = LaunchConfig::for_elements(m * n, 128);
    let g = d
        .capture_graph(
            GraphBuilder::new()
                .matmul(
                    Matmul::new(m, n, k),
                    Epilogue::bias(&gbias).then(Activation::Relu),
                    &ga,
                    &gb,
                    gc.clone(),
                )
                .kernel(add_one::call::<f32>(cfg, &mut gc)),
        )
        .await
        .unwrap();
    assert_eq!(g.operations(), 2);
    let want = |a: &[f64]| {
        let wide = |v: Vec<bf16>| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
        let (a, b) = (wide(bf(a)), wide(bf(&b)));
        let mut c = vec![0.0; m * n];
        gemm_ref(false, false, m, n, k, 1.0, &a, m, &b, k, 0.0, &mut c, m);
        let bias32 = f32s(&bias);
        (0..m * n)
            .map(|i| (c[i] + bias32[i % m] as f64).max(0.0) + 1.0)
            .collect::<Vec<f64>>()
    };
    let back = |v: Vec<f32>| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
    d.replay(&g, 2).await.unwrap();
    let e = rel_err(&back(d.download(&gc).await.unwrap()), &want(&a));
    assert!(e < 1e-5, "graph matmul: rel err {e:e}");
    let a2 = rand_vec(m * k);
    d.write(&ga, bf(&a2)).await.unwrap();
    d.replay(&g, 1).await.unwrap();
    let e = rel_err(&back(d.download(&gc).await.unwrap()), &want(&a2));
    assert!(e < 1e-5, "graph matmul after new input: rel err {e:e}");
    // A matmul the checks refuse is the graph's typed error.
    let short = d.alloc::<f32>(m * n - 1).await.unwrap();
    let e = d
        .capture_graph(GraphBuilder::new().matmul(Matmul::new(m, n, k), Epilogue::none(), &ga, &gb, &short))
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    sys.shutdown().await;
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|x| *x as f32).collect()
}

async fn replays(config: DeviceConfig) {
    let sys = ActorSystem::new("graph");
    let d = Device::open(&sys, config).await.unwrap();
    let (m, n, k) = (48, 40, 56);
    let (a, b) = (rand_vec(m * k), rand_vec(k * n));
    let counter = rand_vec(m * n);
    let (da, db) = (d.upload(f32s(&a)).await.unwrap(), d.upload(f32s(&b)).await.unwrap());
    let dc = d.alloc::<f32>(m * n).await.unwrap();
    let out = d.alloc::<f32>(m * n).await.unwrap();
    let mut dcount = d.upload(f32s(&counter)).await.unwrap();
    let mut dc_mut = dc.clone();
    let cfg = LaunchConfig::for_elements(m * n, 128);
    let g = d
        .capture_graph(
            GraphBuilder::new()
                .gemm(Gemm::<f32>::new(m, n, k), &da, &db, &dc)
                .kernel(relu::call::<f32>(cfg, &mut dc_mut))
                .copy(&dc, &out)
                .kernel(add_one::call::<f32>(cfg, &mut dcount)),
        )
        .await
        .unwrap();
    assert_eq!(g.operations(), 4);
    let want = |a: &[f64]| {
        let mut c = vec![0.0; m * n];
        let a32: Vec<f64> = f32s(a).iter().map(|x| *x as f64).collect();
        let b32: Vec<f64> = f32s(&b).iter().map(|x| *x as f64).collect();
        gemm_ref(false, false, m, n, k, 1.0, &a32, m, &b32, k, 0.0, &mut c, m);
        c.iter().map(|v| v.max(0.0)).collect::<Vec<f64>>()
    };
    let back = |v: Vec<f32>| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
    d.replay(&g, 1).await.unwrap();
    let e = rel_err(&back(d.download(&out).await.unwrap()), &want(&a));
    assert!(e < 1e-5, "first replay: {e:e}");
    // New input between replays: the replay reads the buffer's current contents, after
    // the write (ordering), through the captured address.
    let a2 = rand_vec(m * k);
    d.write(&da, f32s(&a2)).await.unwrap();
    d.replay(&g, 4).await.unwrap();
    let e = rel_err(&back(d.download(&out).await.unwrap()), &want(&a2));
    assert!(e < 1e-5, "after new input: {e:e}");
    // add_one ran once per replay: 1 + 4.
    let got = back(d.download(&dcount).await.unwrap());
    for (g, c) in got.iter().zip(&counter) {
        assert!((g - (*c as f32 as f64 + 5.0)).abs() < 1e-5, "{g} vs {c} + 5");
    }
    sys.shutdown().await;
}

async fn bad_graphs(config: DeviceConfig) {
    let sys = ActorSystem::new("graph-bad");
    let d = Device::open(&sys, config).await.unwrap();
    let x = d.upload(f32s(&rand_vec(64))).await.unwrap();
    let y = d.alloc::<f32>(32).await.unwrap();
    let inv = |r: Result<GraphRef, GpuError>, what: &str, needle: &str| match r {
        Err(GpuError::InvalidArgument(m)) => assert!(m.contains(needle), "{what}: {m}"),
        other => panic!("{what}: {other:?}"),
    };
    inv(d.capture_graph(GraphBuilder::new()).await, "empty", "at least one");
    inv(
        d.capture_graph(GraphBuilder::new().copy(&x, &x.clone()).copy(&x, &y))
            .await,
        "copy onto itself",
        "operation 0",
    );
    let z = d.alloc::<f32>(64).await.unwrap();
    inv(
        d.capture_graph(GraphBuilder::new().copy(&x, &z).copy(&x, &y)).await,
        "lengths",
        "operation 1",
    );
    inv(
        d.capture_graph(GraphBuilder::new().gemm(Gemm::<f32>::new(8, 8, 8), &x, &z, &x))
            .await,
        "C is A",
        "must not overlap",
    );
    inv(
        d.capture_graph(GraphBuilder::new().gemm(Gemm::<f32>::new(9, 9, 9), &x, &z, &y))
            .await,
        "GEMM beyond the buffers",
        "operation 0",
    );
    let g = d.capture_graph(GraphBuilder::new().copy(&x, &z)).await.unwrap();
    assert!(matches!(d.replay(&g, 0).await, Err(GpuError::InvalidArgument(_))));
    d.replay(&g, 2).await.unwrap();
    assert_eq!(d.download(&z).await.unwrap(), d.download(&x).await.unwrap());
    // After a rebuild the graph and its buffers are stale.
    d.rebuild().await.unwrap();
    assert!(matches!(d.replay(&g, 1).await, Err(GpuError::Stale { .. })));
    sys.shutdown().await;
}

/// Graphs captured (a GEMM and a kernel, each replay checked) while other devices of the
/// same GPU start, work and stop beside them: a device's start must not break a capture
/// in flight (cudarc synchronises the context when a `CudaContext` makes its first
/// stream; on an H100 that invalidated a concurrent capture — `sys::graph`'s gate).
async fn captures_beside_starts(config: DeviceConfig) {
    let sys = ActorSystem::new("graph-beside");
    let d = Device::open(&sys, config.clone()).await.unwrap();
    let starts = tokio::spawn({
        let config = config.clone();
        async move {
            for i in 0..12 {
                let sys = ActorSystem::new(&format!("beside-{i}"));
                let other = Device::open(&sys, config.clone())
                    .await
                    .expect("a device starts beside captures");
                let v = rand_vec(1000);
                let g = other.upload(f32s(&v)).await.unwrap();
                assert_eq!(other.download(&g).await.unwrap(), f32s(&v));
                sys.shutdown().await;
            }
        }
    });
    let (m, n, k) = (32, 24, 16);
    for round in 0..40 {
        let (a, b) = (rand_vec(m * k), rand_vec(k * n));
        let (da, db) = (d.upload(f32s(&a)).await.unwrap(), d.upload(f32s(&b)).await.unwrap());
        let dc = d.alloc::<f32>(m * n).await.unwrap();
        let cfg = LaunchConfig::for_elements(m * n, 128);
        let g = d
            .capture_graph(
                GraphBuilder::new()
                    .gemm(Gemm::<f32>::new(m, n, k), &da, &db, &dc)
                    .kernel(add_one::call::<f32>(cfg, &mut dc.clone())),
            )
            .await
            .unwrap_or_else(|e| panic!("capture {round}: {e:?}"));
        d.replay(&g, 1).await.unwrap();
        let (a32, b32): (Vec<f64>, Vec<f64>) = (
            f32s(&a).iter().map(|x| *x as f64).collect(),
            f32s(&b).iter().map(|x| *x as f64).collect(),
        );
        let mut want = vec![0.0; m * n];
        gemm_ref(false, false, m, n, k, 1.0, &a32, m, &b32, k, 0.0, &mut want, m);
        want.iter_mut().for_each(|w| *w += 1.0);
        let got: Vec<f64> = d.download(&dc).await.unwrap().iter().map(|x| *x as f64).collect();
        assert!(rel_err(&got, &want) < 1e-5, "round {round}");
    }
    starts.await.unwrap();
    // How often another thread invalidated a capture of this process (made again).
    eprintln!(
        "graph captures made again so far: {}",
        atomr_accel_cuda::testing::recaptures()
    );
    sys.shutdown().await;
}
