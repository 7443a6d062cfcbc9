//! The dnn library's row-wise ops — softmax, log-softmax, layer norm, RMS norm, bias +
//! activation (identity, ReLU, GELU, SiLU) — of f16, bf16, f32 and f64 against float64
//! references on fresh random data (rows of odd lengths, shorter and longer than a
//! block; large magnitudes that overflow a naive softmax); bad shapes, short buffers,
//! bad epsilons and overlapping outputs as typed errors. On the CPU device and the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use common::rand_vec;

on_both! {
    softmax_matches_a_float64_reference => softmaxes;
    norms_match_a_float64_reference => norms;
    bias_activations_match_a_float64_reference => activations;
    bad_dnn_calls_are_typed_errors => errors;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device, bool) {
    let sys = ActorSystem::new("dnn");
    let d = Device::open(&sys, config).await.unwrap();
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    (sys, d, gpu)
}

/// Shapes: (rows, cols) — one element, under a warp, odd, over a block, wide.
fn shapes(gpu: bool) -> Vec<(usize, usize)> {
    let mut s = vec![(1, 1), (3, 17), (5, 255), (7, 257), (2, 1000), (2, 1500)];
    if gpu {
        s.extend([(4096, 1024), (129, 8191)]);
    }
    s
}

/// `v` rounded through `T`.
fn through<T: DnnScalar + Float>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| T::from_f64(x).to_f64()).collect()
}

async fn upload<T: DnnScalar + Float>(d: &Device, v: &[f64]) -> GpuRef<T> {
    d.upload(v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>())
        .await
        .unwrap()
}

async fn download<T: DnnScalar + Float>(d: &Device, g: &GpuRef<T>) -> Vec<f64> {
    d.download(g).await.unwrap().iter().map(|v| v.to_f64()).collect()
}

/// `got` against `want` within `tol` · (|want| + `floor`).
fn close(what: &str, got: &[f64], want: &[f64], tol: f64, floor: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (w.abs() + floor),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// The relative tolerance of an output of `T` (its rounding, plus f32 arithmetic).
fn tol<T: 'static>() -> f64 {
    match std::any::type_name::<T>() {
        n if n.ends_with("f64") => 1e-12,
        n if n.ends_with("bf16") => 1e-2,
        n if n.ends_with("f16") => 2e-3,
        _ => 2e-5,
    }
}

async fn softmax_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    for (rows, cols) in shapes(gpu) {
        // Magnitudes up to 200: exp overflows f32 without the max subtracted.
        let x = through::<T>(&rand_vec(rows * cols).iter().map(|v| v * 200.0).collect::<Vec<_>>());
        let gx = upload::<T>(d, &x).await;
        let gy = d.alloc::<T>(rows * cols).await.unwrap();
        let (mut soft, mut logs) = (vec![], vec![]);
        for r in x.chunks(cols) {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
            soft.extend(r.iter().map(|v| (v - m).exp() / s));
            logs.extend(r.iter().map(|v| v - m - s.ln()));
        }
        let name = std::any::type_name::<T>();
        d.softmax(Rows::new(rows, cols), &gx, &gy).await.unwrap();
        // Probabilities: relative to each, absolute below 1e-4 (f16 flushes the
        // smallest to subnormals or zero).
        close(
            &format!("softmax {name} {rows}×{cols}"),
            &download(d, &gy).await,
            &soft,
            tol::<T>(),
            1e-4,
        );
        d.log_softmax(Rows::new(rows, cols), &gx, &gy).await.unwrap();
        // log_softmax ≈ x − max − ln s: its error scales with |x|.
        close(
            &format!("log_softmax {name} {rows}×{cols}"),
            &download(d, &gy).await,
            &logs,
            tol::<T>(),
            200.0,
        );
    }
}

async fn softmaxes(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    softmax_of::<f64>(&d, gpu).await;
    softmax_of::<f32>(&d, gpu).await;
    softmax_of::<f16>(&d, gpu).await;
    softmax_of::<bf16>(&d, gpu).await;
}

async fn norms_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    for (rows, cols) in shapes(gpu) {
        // An offset of 3 makes the mean matter (a one-pass variance would lose digits).
        let x = through::<T>(&rand_vec(rows * cols).iter().map(|v| v + 3.0).collect::<Vec<_>>());
        let (g, b) = (through::<T>(&rand_vec(cols)), through::<T>(&rand_vec(cols)));
        let (gx, gg, gb) = (
            upload::<T>(d, &x).await,
            upload::<T>(d, &g).await,
            upload::<T>(d, &b).await,
        );
        let gy = d.alloc::<T>(rows * cols).await.unwrap();
        let eps = 1e-5;
        let (mut ln, mut rms) = (vec![], vec![]);
        for r in x.chunks(cols) {
            let n = cols as f64;
            let mean = r.iter().sum::<f64>() / n;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let ms = r.iter().map(|v| v * v).sum::<f64>() / n;
            for (j, v) in r.iter().enumerate() {
                ln.push((v - mean) / (var + eps).sqrt() * g[j] + b[j]);
                rms.push(v / (ms + eps).sqrt() * g[j]);
            }
        }
        let name = std::any::type_name::<T>();
        d.layer_norm(Norm::new(rows, cols).eps(eps), &gx, &gg, &gb, &gy)
            .await
            .unwrap();
        // Normalized values are O(1), so the error is absolute; an f32 variance of
        // values near 3 loses ~1e-6 of them.
        let t = tol::<T>().max(if name.ends_with("f64") { 0.0 } else { 1e-4 });
        close(
            &format!("layer_norm {name} {rows}×{cols}"),
            &download(d, &gy).await,
            &ln,
            t,
            1.0,
        );
        d.rms_norm(Norm::new(rows, cols).eps(eps), &gx, &gg, &gy).await.unwrap();
        close(
            &format!("rms_norm {name} {rows}×{cols}"),
            &download(d, &gy).await,
            &rms,
            tol::<T>() * 4.0,
            1.0,
        );
    }
}

async fn norms(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    norms_of::<f64>(&d, gpu).await;
    norms_of::<f32>(&d, gpu).await;
    norms_of::<f16>(&d, gpu).await;
    norms_of::<bf16>(&d, gpu).await;
}

/// The nonlinearity in float64.
fn reference(act: Nonlinearity, v: f64) -> f64 {
    match act {
        Nonlinearity::Relu => v.max(0.0),
        Nonlinearity::Gelu => {
            0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
        }
        Nonlinearity::Silu => v / (1.0 + (-v).exp()),
        _ => v,
    }
}

async fn activations_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    let (rows, cols) = if gpu { (1000, 4097) } else { (7, 33) };
    let x = through::<T>(&rand_vec(rows * cols).iter().map(|v| v * 4.0).collect::<Vec<_>>());
    let bias = through::<T>(&rand_vec(cols));
    let (gx, gb) = (upload::<T>(d, &x).await, upload::<T>(d, &bias).await);
    let gy = d.alloc::<T>(rows * cols).await.unwrap();
    for act in [
        Nonlinearity::Identity,
        Nonlinearity::Relu,
        Nonlinearity::Gelu,
        Nonlinearity::Silu,
    ] {
        d.bias_activation(Rows::new(rows, cols), act, &gx, &gb, &gy)
            .await
            .unwrap();
        let want: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| reference(act, v + bias[i % cols]))
            .collect();
        let name = std::any::type_name::<T>();
        // Absolute near zero: GELU and SiLU of a negative input cancel to tiny values.
        close(
            &format!("{act:?} {name}"),
            &download(d, &gy).await,
            &want,
            tol::<T>() * 2.0,
            1.0,
        );
    }
}

async fn activations(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    activations_of::<f64>(&d, gpu).await;
    activations_of::<f32>(&d, gpu).await;
    activations_of::<f16>(&d, gpu).await;
    activations_of::<bf16>(&d, gpu).await;
}

async fn errors(config: DeviceConfig) {
    let (_s, d, _gpu) = open(config).await;
    let x = d
        .upload(rand_vec(64).iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let g = d.upload(vec![1.0f32; 8]).await.unwrap();
    let y = d.alloc::<f32>(64).await.unwrap();
    let invalid = |r: Result<(), GpuError>, what: &str| {
        assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    };
    invalid(d.softmax(Rows::new(4, 0), &x, &y).await, "no columns");
    invalid(d.softmax(Rows::new(9, 8), &x, &y).await, "x too short");
    invalid(d.layer_norm(Norm::new(4, 16), &x, &g, &g, &y).await, "gamma too short");
    invalid(d.rms_norm(Norm::new(8, 8).eps(-1.0), &x, &g, &y).await, "negative eps");
    invalid(d.rms_norm(Norm::new(8, 8).eps(f64::NAN), &x, &g, &y).await, "NaN eps");
    invalid(
        d.bias_activation(Rows::new(8, 8), Nonlinearity::Relu, &x, &g, &x.view(8..).unwrap())
            .await,
        "y overlaps x",
    );
    invalid(
        d.softmax(Rows::new(4, 8), &x, &x.view(4..36).unwrap()).await,
        "softmax y overlaps x",
    );
    invalid(d.rms_norm(Norm::new(1, 8), &x, &g, &g).await, "y is gamma");
    // In place: y is exactly x's window.
    let w = x.view(0..32).unwrap();
    let before: Vec<f64> = d.download(&w).await.unwrap().iter().map(|&v| v as f64).collect();
    d.bias_activation(Rows::new(4, 8), Nonlinearity::Relu, &w, &g, &w)
        .await
        .unwrap();
    let after = d.download(&w).await.unwrap();
    for (a, b) in after.iter().zip(&before) {
        assert!((*a as f64 - (b + 1.0).max(0.0)).abs() < 1e-6, "in place: {a} vs {b}");
    }
    // Zero rows: nothing to do. The device still serves.
    d.softmax(Rows::new(0, 8), &x, &y).await.unwrap();
    d.softmax(Rows::new(8, 8), &x, &y).await.unwrap();
}
