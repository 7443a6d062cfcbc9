//! One pre-norm transformer block — layer norm, Q/K/V projections, multi-head attention,
//! output projection with the residual, layer norm, an MLP with GELU, the second
//! residual — through the tensor and dnn libraries' calls (`contract`, `attention`,
//! `layer_norm`, `bias_activation`), in f32 and bf16 with fresh random weights, checked
//! against a float64 reference of the same block on the host, and timed.
//!
//! `cargo run --release --example transformer_block [batch seq model heads]` (default
//! 2 64 128 4; on the GPU try 8 1024 1024 16). Opens the GPU when present, else the
//! CPU device. Attention is not causal: one `attention` call on the projections as they
//! lie (`[batch, seq, heads, head_dim]`), through batched GEMMs where its scores fit.

use std::time::Instant;

use atomr_accel_cuda::library::tensor::Contraction;
use atomr_accel_cuda::prelude::*;

/// Uniform values in [-scale, scale) from a seeded xorshift.
fn random(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The block's sizes.
#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    t: usize,
    d: usize,
    h: usize,
    f: usize,
}

/// The block's parameters in float64 (each element type rounds its own copy).
struct Weights {
    wq: Vec<f64>,
    wk: Vec<f64>,
    wv: Vec<f64>,
    wo: Vec<f64>,
    w1: Vec<f64>,
    b1: Vec<f64>,
    w2: Vec<f64>,
    b2: Vec<f64>,
    g1: Vec<f64>,
    be1: Vec<f64>,
    g2: Vec<f64>,
    be2: Vec<f64>,
}

impl Weights {
    fn new(z: Dims, seed: u64) -> Self {
        let (d, f) = (z.d, z.f);
        let w = |n: usize, k: u64, fan_in: usize| random(n, seed + k, 1.0 / (fan_in as f64).sqrt());
        Weights {
            wq: w(d * d, 1, d),
            wk: w(d * d, 2, d),
            wv: w(d * d, 3, d),
            wo: w(d * d, 4, d),
            w1: w(d * f, 5, d),
            b1: random(f, seed + 6, 0.1),
            w2: w(f * d, 7, f),
            b2: random(d, seed + 8, 0.1),
            g1: random(d, seed + 9, 0.2).iter().map(|v| 1.0 + v).collect(),
            be1: random(d, seed + 10, 0.1),
            g2: random(d, seed + 11, 0.2).iter().map(|v| 1.0 + v).collect(),
            be2: random(d, seed + 12, 0.1),
        }
    }

    /// Each parameter rounded to `T` (what the device computes with).
    fn rounded<T: TensorScalar + Float>(&self) -> Weights {
        let r = |v: &[f64]| v.iter().map(|&x| T::from_f64(x).to_f64()).collect();
        Weights {
            wq: r(&self.wq),
            wk: r(&self.wk),
            wv: r(&self.wv),
            wo: r(&self.wo),
            w1: r(&self.w1),
            b1: r(&self.b1),
            w2: r(&self.w2),
            b2: r(&self.b2),
            g1: r(&self.g1),
            be1: r(&self.be1),
            g2: r(&self.g2),
            be2: r(&self.be2),
        }
    }
}

/// `x · w` of row-major `rows × k` and `k × n`.
fn matmul(x: &[f64], w: &[f64], rows: usize, k: usize, n: usize) -> Vec<f64> {
    let mut y = vec![0.0; rows * n];
    for r in 0..rows {
        for j in 0..k {
            let a = x[r * k + j];
            for c in 0..n {
                y[r * n + c] += a * w[j * n + c];
            }
        }
    }
    y
}

fn layer_norm(x: &[f64], g: &[f64], b: &[f64], d: usize) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|r| {
            let mean = r.iter().sum::<f64>() / d as f64;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
            let s = 1.0 / (var + 1e-5).sqrt();
            r.iter()
                .enumerate()
                .map(move |(j, v)| (v - mean) * s * g[j] + b[j])
                .collect::<Vec<_>>()
        })
        .collect()
}

fn gelu(v: f64) -> f64 {
    0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
}

/// The block in float64: `x` is `b × t × d` row-major.
fn reference(z: Dims, x: &[f64], w: &Weights) -> Vec<f64> {
    let (rows, d, dh) = (z.b * z.t, z.d, z.d / z.h);
    let ln1 = layer_norm(x, &w.g1, &w.be1, d);
    let (q, k, v) = (
        matmul(&ln1, &w.wq, rows, d, d),
        matmul(&ln1, &w.wk, rows, d, d),
        matmul(&ln1, &w.wv, rows, d, d),
    );
    let mut o = vec![0.0; rows * d];
    let scale = 1.0 / (dh as f64).sqrt();
    for b in 0..z.b {
        for h in 0..z.h {
            for i in 0..z.t {
                let at = |m: &[f64], t: usize, c: usize| m[(b * z.t + t) * d + h * dh + c];
                let s: Vec<f64> = (0..z.t)
                    .map(|j| (0..dh).map(|c| at(&q, i, c) * at(&k, j, c)).sum::<f64>() * scale)
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                let sum: f64 = e.iter().sum();
                for c in 0..dh {
                    o[(b * z.t + i) * d + h * dh + c] = (0..z.t).map(|j| e[j] / sum * at(&v, j, c)).sum();
                }
            }
        }
    }
    let proj = matmul(&o, &w.wo, rows, d, d);
    let hid: Vec<f64> = x.iter().zip(&proj).map(|(a, b)| a + b).collect();
    let ln2 = layer_norm(&hid, &w.g2, &w.be2, d);
    let mut u = matmul(&ln2, &w.w1, rows, d, z.f);
    for (i, v) in u.iter_mut().enumerate() {
        *v = gelu(*v + w.b1[i % z.f]);
    }
    let down = matmul(&u, &w.w2, rows, z.f, d);
    hid.iter()
        .zip(&down)
        .enumerate()
        .map(|(i, (h, m))| h + m + w.b2[i % d])
        .collect()
}

/// The block on `dev` in `T`; returns the output and the median time of `reps` runs.
async fn block<T: TensorScalar + DnnScalar + Float>(
    dev: &Device,
    z: Dims,
    x: &[f64],
    w: &Weights,
    reps: usize,
) -> Result<(Vec<f64>, f64), GpuError> {
    let (rows, d, f, dh) = (z.b * z.t, z.d, z.f, z.d / z.h);
    let up = |v: &[f64]| v.iter().map(|&e| T::from_f64(e)).collect::<Vec<T>>();
    let gx = dev.upload(up(x)).await?;
    let p = |v: &Vec<f64>| dev.upload(up(v));
    let (wq, wk, wv, wo) = (p(&w.wq).await?, p(&w.wk).await?, p(&w.wv).await?, p(&w.wo).await?);
    let (w1, b1, w2, b2) = (p(&w.w1).await?, p(&w.b1).await?, p(&w.w2).await?, p(&w.b2).await?);
    let (g1, be1, g2, be2) = (p(&w.g1).await?, p(&w.be1).await?, p(&w.g2).await?, p(&w.be2).await?);
    let buf = |n: usize| dev.alloc::<T>(n);
    let (ln, q, k, v, o) = (
        buf(rows * d).await?,
        buf(rows * d).await?,
        buf(rows * d).await?,
        buf(rows * d).await?,
        buf(rows * d).await?,
    );
    let (hid, u, y) = (buf(rows * d).await?, buf(rows * f).await?, buf(rows * d).await?);
    let attention = Attention::new(z.b, z.h, z.t, z.t, dh).layout(AttentionLayout::Bshd);
    let proj = |k: usize, n: usize| Contraction::new("rk,kn->rn", &[rows, k], &[k, n]);
    let mut took = vec![];
    for _ in 0..reps {
        let t0 = Instant::now();
        dev.layer_norm(Norm::new(rows, d), &gx, &g1, &be1, &ln).await?;
        // Q, K and V: three projections, independent, in flight together.
        let (rq, rk, rv) = tokio::join!(
            dev.contract(proj(d, d), &ln, &wq, &q),
            dev.contract(proj(d, d), &ln, &wk, &k),
            dev.contract(proj(d, d), &ln, &wv, &v)
        );
        rq?;
        rk?;
        rv?;
        // Heads are a view of the model axis: q, k, v are [b, t, h, dh] as they stand.
        dev.attention(attention, &q, &k, &v, &o).await?;
        // hid = x + o·Wo: the residual is the GEMM's beta.
        dev.copy(&gx, &hid).await?;
        dev.contract(proj(d, d).scaled(1.0, 1.0), &o, &wo, &hid).await?;
        dev.layer_norm(Norm::new(rows, d), &hid, &g2, &be2, &ln).await?;
        dev.contract(proj(d, f), &ln, &w1, &u).await?;
        dev.bias_activation(Rows::new(rows, f), Nonlinearity::Gelu, &u, &b1, &u)
            .await?;
        dev.copy(&hid, &y).await?;
        dev.contract(proj(f, d).scaled(1.0, 1.0), &u, &w2, &y).await?;
        dev.bias_activation(Rows::new(rows, d), Nonlinearity::Identity, &y, &b2, &y)
            .await?;
        took.push(t0.elapsed().as_secs_f64());
    }
    took.sort_by(f64::total_cmp);
    let out = dev.download(&y).await?.iter().map(|e| e.to_f64()).collect();
    Ok((out, took[took.len() / 2]))
}

/// The largest error of `got` relative to the output's largest magnitude.
fn error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max) / scale
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let get = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (b, t, d, h) = (get(0, 2), get(1, 64), get(2, 128), get(3, 4));
    assert!(d % h == 0, "the model size must divide into the heads");
    let z = Dims { b, t, d, h, f: 4 * d };
    let system = ActorSystem::new("transformer");
    let dev = Device::open(&system, DeviceConfig::auto()).await?;
    let info = dev.ready().await?;
    let gpu = info.backend == BackendKind::Cuda;
    println!(
        "device: {} ({:?}); block of batch {b}, sequence {t}, model {d}, {h} heads, MLP {}",
        info.name, info.backend, z.f
    );
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7);
    let weights = Weights::new(z, seed);
    let x = random(b * t * d, seed ^ 0xABCD, 1.0);
    // The reference costs O(b·t²·d + b·t·d·f) in float64 on one core: skip it for large blocks.
    let check = (b * t * d) * (t + 8 * d) <= 4 << 30;
    let reps = if gpu { 20 } else { 1 };
    for (name, tol) in [("f32", 1e-4), ("bf16", 5e-2)] {
        let (got, took) = match name {
            "f32" => block::<f32>(&dev, z, &x, &weights.rounded::<f32>(), reps).await?,
            _ => block::<bf16>(&dev, z, &x, &weights.rounded::<bf16>(), reps).await?,
        };
        let flops =
            2.0 * (b * t) as f64 * (4.0 * (d * d) as f64 + 2.0 * (d * z.f) as f64) + 4.0 * (b * t * t * d) as f64;
        print!(
            "{name}: {:.3} ms per block ({:.1} TFLOP/s)",
            took * 1e3,
            flops / took / 1e12
        );
        if check {
            let want = match name {
                "f32" => reference(z, &round::<f32>(&x), &weights.rounded::<f32>()),
                _ => reference(z, &round::<bf16>(&x), &weights.rounded::<bf16>()),
            };
            let e = error(&got, &want);
            println!(", largest error {e:.2e} of the output's scale (float64 reference)");
            assert!(e < tol, "{name}: error {e} over {tol}");
        } else {
            println!(" (too large for the float64 reference)");
        }
    }
    system.shutdown().await;
    Ok(())
}

/// `v` rounded through `T`.
fn round<T: TensorScalar + Float>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&e| T::from_f64(e).to_f64()).collect()
}
