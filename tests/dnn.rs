//! The dnn library's row-wise ops — softmax, log-softmax, layer norm, RMS norm, bias +
//! activation (identity, ReLU, GELU, SiLU) — of f16, bf16, f32 and f64 against float64
//! references on fresh random data (rows of odd lengths, shorter and longer than a
//! block; large magnitudes that overflow a naive softmax); bad shapes, short buffers,
//! bad epsilons and overlapping outputs as typed errors. 2-D convolutions (forward,
//! backward-data, backward-filter; NCHW and NHWC; padding, stride, dilation, groups)
//! and pooling (max with NaNs, average with and without the padding counted) against
//! float64 references, the two backward directions also through the adjoint identity
//! ⟨conv(x, w), dy⟩ = ⟨x, dx⟩ = ⟨w, dw⟩. Scaled-dot-product attention (causal or not,
//! head dimensions 1 to 256, partial tiles; the tiled kernel and the GEMMs) against
//! float64. On the CPU device and the
//! GPU.

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
    convolutions_match_a_float64_reference => convolutions;
    pooling_matches_a_float64_reference => poolings;
    bad_convolutions_and_pooling_are_typed_errors => conv_errors;
    attention_matches_a_float64_reference => attentions;
    bad_attention_calls_are_typed_errors => attention_errors;
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

/// The element `(n, c, h, w)` of images of `(channels, height, width)` in `layout`.
fn at(layout: ImageLayout, (cs, hs, ws): (usize, usize, usize), (n, c, h, w): (usize, usize, usize, usize)) -> usize {
    match layout {
        ImageLayout::Nchw => n * cs * hs * ws + c * hs * ws + h * ws + w,
        ImageLayout::Nhwc => n * hs * ws * cs + h * ws * cs + w * cs + c,
    }
}

/// Every multiply-add of `g`: (input, filter, output) elements.
fn taps(g: &Conv2d) -> Vec<(usize, usize, usize)> {
    let (p, q) = g.output();
    let (cg, kg) = (g.in_channels / g.groups, g.out_channels / g.groups);
    let mut t = vec![];
    for n in 0..g.batch {
        for k in 0..g.out_channels {
            for oh in 0..p {
                for ow in 0..q {
                    for c in 0..cg {
                        for r in 0..g.kernel.0 {
                            for s in 0..g.kernel.1 {
                                let ih = (oh * g.stride.0 + r * g.dilation.0) as i64 - g.padding.0 as i64;
                                let iw = (ow * g.stride.1 + s * g.dilation.1) as i64 - g.padding.1 as i64;
                                if ih < 0 || iw < 0 || ih >= g.input.0 as i64 || iw >= g.input.1 as i64 {
                                    continue;
                                }
                                let ci = (k / kg) * cg + c;
                                t.push((
                                    at(
                                        g.layout,
                                        (g.in_channels, g.input.0, g.input.1),
                                        (n, ci, ih as usize, iw as usize),
                                    ),
                                    at(g.layout, (cg, g.kernel.0, g.kernel.1), (k, c, r, s)),
                                    at(g.layout, (g.out_channels, p, q), (n, k, oh, ow)),
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    t
}

/// Sums of products into `len` outputs, and the sums of their magnitudes (the scale of
/// each one's rounding error).
fn accumulate(len: usize, terms: impl Iterator<Item = (usize, f64)>) -> (Vec<f64>, Vec<f64>) {
    let (mut sum, mut mag) = (vec![0.0; len], vec![0.0; len]);
    for (i, v) in terms {
        sum[i] += v;
        mag[i] += v.abs();
    }
    (sum, mag)
}

/// `got` against `want` within `tol` of each element's magnitude sum (plus a hair).
fn close_sums(what: &str, got: &[f64], (want, mag): &(Vec<f64>, Vec<f64>), tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for i in 0..got.len() {
        assert!(
            (got[i] - want[i]).abs() <= tol * mag[i] + 1e-30,
            "{what}: element {i} is {}, want {} (terms' magnitude {})",
            got[i],
            want[i],
            mag[i]
        );
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Shapes: plain 3×3 with padding; strided, dilated, grouped NHWC; depthwise; 1×1;
/// on a GPU a ResNet-like layer.
fn convs(gpu: bool) -> Vec<Conv2d> {
    let mut v = vec![
        Conv2d::new(2, 3, (9, 7), 4, (3, 3)).padding((1, 1)),
        Conv2d::new(1, 4, (8, 10), 6, (3, 2))
            .padding((0, 1))
            .stride((2, 1))
            .dilation((1, 2))
            .groups(2)
            .layout(ImageLayout::Nhwc),
        Conv2d::new(2, 6, (7, 7), 6, (3, 3)).padding((1, 1)).groups(6),
        Conv2d::new(3, 16, (5, 5), 8, (1, 1)).layout(ImageLayout::Nhwc),
        Conv2d::new(1, 2, (6, 5), 3, (5, 4)).padding((2, 1)).stride((3, 2)),
    ];
    if gpu {
        for (layout, search) in [
            (ImageLayout::Nchw, AlgoSearch::Heuristic),
            (ImageLayout::Nhwc, AlgoSearch::Benchmark),
        ] {
            v.push(
                Conv2d::new(2, 16, (20, 20), 24, (3, 3))
                    .padding((1, 1))
                    .layout(layout)
                    .search(search),
            );
        }
    }
    v
}

async fn convolutions_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    let name = std::any::type_name::<T>();
    for g in convs(gpu) {
        let x = through::<T>(&rand_vec(g.input_len()));
        let w = through::<T>(&rand_vec(g.filter_len()));
        let dy = through::<T>(&rand_vec(g.output_len()));
        let (gx, gw, gdy) = (
            upload::<T>(d, &x).await,
            upload::<T>(d, &w).await,
            upload::<T>(d, &dy).await,
        );
        let (gy, gdx, gdw) = (
            d.alloc::<T>(g.output_len()).await.unwrap(),
            d.alloc::<T>(g.input_len()).await.unwrap(),
            d.alloc::<T>(g.filter_len()).await.unwrap(),
        );
        d.conv2d(g, &gx, &gw, &gy).await.unwrap();
        d.conv2d_backward_data(g, &gdy, &gw, &gdx).await.unwrap();
        d.conv2d_backward_filter(g, &gx, &gdy, &gdw).await.unwrap();
        let (y, dx, dw) = (download(d, &gy).await, download(d, &gdx).await, download(d, &gdw).await);
        let t = taps(&g);
        let tol = tol::<T>() * 2.0;
        close_sums(
            &format!("conv2d {name} {g:?}"),
            &y,
            &accumulate(y.len(), t.iter().map(|&(xi, wi, yi)| (yi, x[xi] * w[wi]))),
            tol,
        );
        close_sums(
            &format!("conv2d_backward_data {name} {g:?}"),
            &dx,
            &accumulate(dx.len(), t.iter().map(|&(xi, wi, yi)| (xi, dy[yi] * w[wi]))),
            tol,
        );
        close_sums(
            &format!("conv2d_backward_filter {name} {g:?}"),
            &dw,
            &accumulate(dw.len(), t.iter().map(|&(xi, wi, yi)| (wi, x[xi] * dy[yi]))),
            tol,
        );
        // The adjoint identity ties the three directions together.
        let (a, b, c) = (dot(&y, &dy), dot(&x, &dx), dot(&w, &dw));
        let scale: f64 = t.iter().map(|&(xi, wi, yi)| (x[xi] * w[wi] * dy[yi]).abs()).sum();
        for (what, v) in [("⟨x, dx⟩", b), ("⟨w, dw⟩", c)] {
            assert!(
                (v - a).abs() <= 4.0 * tol * scale,
                "{name} {g:?}: {what} = {v}, ⟨y, dy⟩ = {a}"
            );
        }
    }
}

async fn convolutions(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    convolutions_of::<f64>(&d, gpu).await;
    convolutions_of::<f32>(&d, gpu).await;
    convolutions_of::<f16>(&d, gpu).await;
    convolutions_of::<bf16>(&d, gpu).await;
}

/// The pooling `g` of `x` in float64.
fn pool_reference(g: &Pool2d, x: &[f64]) -> Vec<f64> {
    let (p, q) = g.output();
    let mut y = vec![0.0; g.output_len()];
    for n in 0..g.batch {
        for c in 0..g.channels {
            for oh in 0..p {
                for ow in 0..q {
                    let mut vals = vec![];
                    for r in 0..g.window.0 {
                        for s in 0..g.window.1 {
                            let ih = (oh * g.stride.0 + r) as i64 - g.padding.0 as i64;
                            let iw = (ow * g.stride.1 + s) as i64 - g.padding.1 as i64;
                            if ih >= 0 && iw >= 0 && ih < g.input.0 as i64 && iw < g.input.1 as i64 {
                                vals.push(
                                    x[at(
                                        g.layout,
                                        (g.channels, g.input.0, g.input.1),
                                        (n, c, ih as usize, iw as usize),
                                    )],
                                );
                            }
                        }
                    }
                    let sum: f64 = vals.iter().sum();
                    y[at(g.layout, (g.channels, p, q), (n, c, oh, ow))] = match g.mode {
                        PoolMode::Max if vals.iter().any(|v| v.is_nan()) => f64::NAN,
                        PoolMode::Max => vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                        PoolMode::Average => sum / (g.window.0 * g.window.1) as f64,
                        PoolMode::AverageOfValid => sum / vals.len() as f64,
                    };
                }
            }
        }
    }
    y
}

async fn pooling_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    let name = std::any::type_name::<T>();
    let mut shapes = vec![
        Pool2d::new(2, 3, (8, 9), (2, 2), PoolMode::Max),
        Pool2d::new(1, 5, (7, 7), (3, 3), PoolMode::Max)
            .stride((2, 2))
            .padding((1, 1))
            .layout(ImageLayout::Nhwc),
        Pool2d::new(2, 4, (9, 6), (3, 2), PoolMode::Average)
            .stride((2, 1))
            .padding((1, 1)),
        Pool2d::new(3, 2, (5, 5), (3, 3), PoolMode::AverageOfValid)
            .stride((1, 2))
            .padding((1, 1))
            .layout(ImageLayout::Nhwc),
    ];
    if gpu {
        shapes.push(
            Pool2d::new(8, 64, (56, 56), (3, 3), PoolMode::Max)
                .stride((2, 2))
                .padding((1, 1))
                .layout(ImageLayout::Nhwc),
        );
    }
    for g in shapes {
        let mut x = through::<T>(&rand_vec(g.input_len()));
        x[g.input_len() / 3] = f64::NAN;
        let gx = upload::<T>(d, &x).await;
        let gy = d.alloc::<T>(g.output_len()).await.unwrap();
        d.pool2d(g, &gx, &gy).await.unwrap();
        let (got, want) = (download(d, &gy).await, pool_reference(&g, &x));
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol::<T>() * (b.abs() + 1.0),
                "pool2d {name} {g:?}: element {i} is {a}, want {b}"
            );
        }
    }
}

async fn poolings(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    pooling_of::<f64>(&d, gpu).await;
    pooling_of::<f32>(&d, gpu).await;
    pooling_of::<f16>(&d, gpu).await;
    pooling_of::<bf16>(&d, gpu).await;
}

async fn conv_errors(config: DeviceConfig) {
    let (_s, d, _gpu) = open(config).await;
    let g = Conv2d::new(1, 4, (6, 6), 4, (3, 3));
    let x = d.upload(vec![0.5f32; 256]).await.unwrap();
    let w = d.upload(vec![0.25f32; g.filter_len()]).await.unwrap();
    let y = d.alloc::<f32>(256).await.unwrap();
    let invalid = |r: Result<(), GpuError>, what: &str| {
        assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    };
    invalid(
        d.conv2d(g.groups(3), &x, &w, &y).await,
        "groups do not divide the channels",
    );
    invalid(
        d.conv2d(Conv2d::new(1, 4, (6, 6), 0, (3, 3)), &x, &w, &y).await,
        "no filters",
    );
    invalid(d.conv2d(g.stride((0, 1)), &x, &w, &y).await, "stride 0");
    invalid(
        d.conv2d(Conv2d::new(1, 4, (2, 6), 4, (3, 3)), &x, &w, &y).await,
        "filter taller than the input",
    );
    invalid(
        d.conv2d(Conv2d::new(2, 4, (6, 6), 4, (3, 3)), &x.view(..200).unwrap(), &w, &y)
            .await,
        "x too short",
    );
    invalid(d.conv2d(g, &x, &w.view(1..).unwrap(), &y).await, "w too short");
    invalid(d.conv2d(g, &x, &w, &x.view(144..).unwrap()).await, "y overlaps x");
    invalid(
        d.conv2d_backward_filter(g, &x, &y, &y.view(64..).unwrap()).await,
        "dw overlaps dy",
    );
    let p = Pool2d::new(1, 4, (6, 6), (2, 2), PoolMode::Max);
    invalid(
        d.pool2d(p.padding((2, 0)), &x, &y).await,
        "padding over half the window",
    );
    invalid(
        d.pool2d(Pool2d::new(1, 4, (6, 6), (7, 7), PoolMode::Max), &x, &y).await,
        "window over the input",
    );
    invalid(d.pool2d(p, &x, &x.view(100..).unwrap()).await, "y overlaps x");
    invalid(
        d.pool2d(Pool2d::new(4, 4, (6, 6), (2, 2), PoolMode::Max), &x, &y).await,
        "x too short",
    );
    // The device still serves.
    d.conv2d(g, &x, &w, &y).await.unwrap();
    let out = d.download(&y.view(..g.output_len()).unwrap()).await.unwrap();
    assert!(out.iter().all(|&v| (v - 4.0 * 9.0 * 0.125).abs() < 1e-5), "{out:?}");
}

/// Attention in float64, in `a`'s layout.
fn attention_reference(a: &Attention, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
    let (lq, lk, d, nh) = (a.queries, a.keys, a.head_dim, a.heads);
    // Element c of row i of head h (of batch item b) of a sequence of `len`.
    let el = |len: usize, b: usize, h: usize, i: usize, c: usize| match a.layout {
        AttentionLayout::Bhsd => ((b * nh + h) * len + i) * d + c,
        AttentionLayout::Bshd => ((b * len + i) * nh + h) * d + c,
    };
    let mut o = vec![0.0; a.query_len()];
    for b in 0..a.batch {
        for h in 0..nh {
            for i in 0..lq {
                let seen = if a.causal { (i + 1).min(lk) } else { lk };
                let s: Vec<f64> = (0..seen)
                    .map(|j| {
                        (0..d)
                            .map(|c| q[el(lq, b, h, i, c)] * k[el(lk, b, h, j, c)])
                            .sum::<f64>()
                            * a.scale_factor()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let l: f64 = p.iter().sum();
                for c in 0..d {
                    o[el(lq, b, h, i, c)] = (0..seen).map(|j| p[j] * v[el(lk, b, h, j, c)]).sum::<f64>() / l;
                }
            }
        }
    }
    o
}

async fn attention_of<T: DnnScalar + Float>(d: &Device, gpu: bool) {
    let name = std::any::type_name::<T>();
    let mut shapes = vec![
        Attention::new(2, 3, 5, 7, 8),
        Attention::new(1, 2, 33, 33, 16).causal(true),
        Attention::new(2, 3, 17, 21, 8).layout(AttentionLayout::Bshd),
        Attention::new(1, 1, 40, 70, 64).scale(0.3),
        Attention::new(2, 1, 19, 50, 128).causal(true),
        Attention::new(1, 1, 9, 37, 256),
        Attention::new(1, 2, 6, 1, 1).causal(true),
        // Keys a multiple of 4: the GEMM method too. More queries than keys (the last
        // rows see every key), causal across quads of the scores, both layouts.
        Attention::new(2, 3, 6, 12, 8).causal(true),
        Attention::new(1, 2, 24, 16, 32).causal(true),
        Attention::new(2, 2, 13, 20, 16)
            .layout(AttentionLayout::Bshd)
            .causal(true),
        Attention::new(2, 2, 7, 36, 8).layout(AttentionLayout::Bshd).scale(0.4),
        Attention::new(1, 1, 3, 4, 256),
    ];
    if gpu {
        shapes.push(
            Attention::new(2, 4, 512, 512, 64)
                .causal(true)
                .layout(AttentionLayout::Bshd),
        );
        shapes.push(Attention::new(1, 8, 300, 700, 128));
        // Longer sequences: 2.4 and 2.3 million scores per head.
        shapes.push(Attention::new(2, 3, 1500, 1600, 16).causal(true));
        shapes.push(Attention::new(1, 3, 1100, 2048, 8).layout(AttentionLayout::Bshd));
    }
    // cuDNN's fused attention takes f16 and bf16 with head_dim a multiple of 8; the
    // shapes it must take on a GPU (others it may refuse, with `Unsupported`).
    let fusable = |a: &Attention| std::mem::size_of::<T>() == 2 && a.head_dim % 8 == 0;
    let must_fuse = |a: &Attention| fusable(a) && a.queries >= 300;
    let (mut fused, mut refused) = (0, vec![]);
    for shape in shapes {
        let mut methods = vec![AttentionMethod::Auto, AttentionMethod::Tiled, AttentionMethod::Cudnn];
        if shape.keys % 4 == 0 {
            methods.push(AttentionMethod::Gemm);
        }
        let q = through::<T>(&rand_vec(shape.query_len()));
        let k = through::<T>(&rand_vec(shape.key_len()));
        let v = through::<T>(&rand_vec(shape.key_len()));
        let (gq, gk, gv) = (
            upload::<T>(d, &q).await,
            upload::<T>(d, &k).await,
            upload::<T>(d, &v).await,
        );
        let want = attention_reference(&shape, &q, &k, &v);
        for method in methods {
            let a = shape.method(method);
            let go = d.alloc::<T>(a.query_len()).await.unwrap();
            let r = d.attention(a, &gq, &gk, &gv, &go).await;
            if gpu && method == AttentionMethod::Cudnn {
                match r {
                    Err(GpuError::Unsupported(why)) if !must_fuse(&a) => {
                        assert!(why.contains("AttentionMethod::Cudnn"), "{why}");
                        refused.push(format!("{a:?}: {why}"));
                        continue;
                    }
                    r => r.unwrap_or_else(|e| panic!("attention {name} {a:?}: {e}")),
                }
                assert!(fusable(&a), "cuDNN took {a:?} in {name}, which it does not fuse");
                fused += 1;
            } else {
                r.unwrap_or_else(|e| panic!("attention {name} {a:?}: {e}"));
            }
            // Each output is a weighted mean of values in [-1, 1].
            close(
                &format!("attention {name} {a:?}"),
                &download(d, &go).await,
                &want,
                tol::<T>(),
                1.0,
            );
        }
    }
    if gpu {
        eprintln!("attention {name}: cuDNN fused {fused} shapes; refused: {refused:#?}");
        assert_eq!(
            fused > 0,
            std::mem::size_of::<T>() == 2,
            "{name}: cuDNN fused {fused} shapes"
        );
    }
}

async fn attentions(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    attention_of::<f64>(&d, gpu).await;
    attention_of::<f32>(&d, gpu).await;
    attention_of::<f16>(&d, gpu).await;
    attention_of::<bf16>(&d, gpu).await;
}

async fn attention_errors(config: DeviceConfig) {
    let (_s, d, _gpu) = open(config).await;
    let a = Attention::new(1, 2, 4, 4, 8);
    let q = d
        .upload(rand_vec(64).iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let k = d
        .upload(rand_vec(64).iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let o = d.alloc::<f32>(64).await.unwrap();
    let invalid = |r: Result<(), GpuError>, what: &str| {
        assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    };
    invalid(
        d.attention(Attention::new(1, 2, 4, 0, 8), &q, &k, &k, &o).await,
        "no keys",
    );
    invalid(
        d.attention(Attention::new(1, 1, 1, 1, 300), &q, &k, &k, &o).await,
        "head_dim over the tiles",
    );
    invalid(
        d.attention(a.scale(f64::INFINITY), &q, &k, &k, &o).await,
        "infinite scale",
    );
    invalid(
        d.attention(Attention::new(1, 2, 5, 4, 8), &q, &k, &k, &o).await,
        "q too short",
    );
    invalid(
        d.attention(Attention::new(1, 2, 4, 5, 8), &q, &k, &k, &o).await,
        "k too short",
    );
    invalid(d.attention(a, &q, &k, &k, &q).await, "o is q");
    invalid(
        d.attention(Attention::new(70_000, 1, 1, 1, 1), &q, &k, &k, &o).await,
        "batch × heads over a grid",
    );
    invalid(
        d.attention(
            Attention::new(1, 2, 5, 3, 8).method(AttentionMethod::Gemm),
            &q,
            &k,
            &k,
            &o,
        )
        .await,
        "the GEMM method with keys not a multiple of 4",
    );
    // Self-attention: q, k and v may be one buffer. The device still serves.
    d.attention(a, &q, &q, &q, &o).await.unwrap();
    let got: Vec<f64> = d.download(&o).await.unwrap().iter().map(|&v| v as f64).collect();
    let host: Vec<f64> = d.download(&q).await.unwrap().iter().map(|&v| v as f64).collect();
    close(
        "self-attention",
        &got,
        &attention_reference(&a, &host, &host, &host),
        2e-5,
        1.0,
    );
}
