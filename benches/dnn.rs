//! The dnn library's row-wise ops (`Device::softmax`, `layer_norm`, `rms_norm`,
//! `bias_activation` with GELU) on transformer-sized f32 and f16 tensors, and
//! scaled-dot-product attention (`Device::attention`, causal and not), each call
//! awaited, median of rounds; the same ops in PyTorch on the same card come from
//! `benches/dnn_torch.py`, run in the same device session. Reported as time per call and
//! effective bandwidth (bytes read and written once / time).

use atomr_accel_cuda::prelude::*;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;
#[path = "support/random.rs"]
mod random;

use gpu_bench::run_gpu;

async fn measure<T: DnnScalar + Float>(dev: &Device, dtype: &str) {
    // Attention probabilities (8 × 16 heads × 1024 queries, 1024 keys); a hidden state
    // of 16 384 tokens × 4096.
    for (what, rows, cols) in [
        ("softmax", 8 * 16 * 1024, 1024),
        ("layer_norm", 16384, 4096),
        ("rms_norm", 16384, 4096),
        ("bias_gelu", 16384, 4096),
    ] {
        let n = rows * cols;
        let host = |len: usize, seed: u64| {
            random::random_f32(len, seed)
                .into_iter()
                .map(|v| T::from_f64(v as f64))
                .collect::<Vec<T>>()
        };
        let x = dev.upload(host(n, 1)).await.unwrap();
        let g = dev.upload(host(cols, 2)).await.unwrap();
        let b = dev.upload(host(cols, 3)).await.unwrap();
        let y = dev.alloc::<T>(n).await.unwrap();
        let s = match what {
            "softmax" => {
                gpu_bench::per_call(20, || async {
                    dev.softmax(Rows::new(rows, cols), &x, &y).await.unwrap()
                })
                .await
            }
            "layer_norm" => {
                gpu_bench::per_call(20, || async {
                    dev.layer_norm(Norm::new(rows, cols), &x, &g, &b, &y).await.unwrap()
                })
                .await
            }
            "rms_norm" => {
                gpu_bench::per_call(20, || async {
                    dev.rms_norm(Norm::new(rows, cols), &x, &g, &y).await.unwrap()
                })
                .await
            }
            _ => {
                gpu_bench::per_call(20, || async {
                    dev.bias_activation(Rows::new(rows, cols), Nonlinearity::Gelu, &x, &b, &y)
                        .await
                        .unwrap()
                })
                .await
            }
        };
        let bytes = 2.0 * (n * std::mem::size_of::<T>()) as f64;
        println!(
            "RESULT | dnn.{what} {rows}x{cols} {dtype} | {:.1} µs per call, {:.0} GB/s",
            s * 1e6,
            bytes / s / 1e9
        );
    }
}

/// Attention of `b` × `h` heads × `l` queries over `l` keys, head dimension `d` (the
/// `[batch, heads, seq, head_dim]` layout), causal and not, through each method.
async fn attention<T: DnnScalar + Float>(dev: &Device, dtype: &str, (b, h, l, d): (usize, usize, usize, usize)) {
    let host = |seed: u64| {
        random::random_f32(b * h * l * d, seed)
            .into_iter()
            .map(|v| T::from_f64(v as f64))
            .collect::<Vec<T>>()
    };
    let (q, k, v) = (
        dev.upload(host(1)).await.unwrap(),
        dev.upload(host(2)).await.unwrap(),
        dev.upload(host(3)).await.unwrap(),
    );
    let o = dev.alloc::<T>(b * h * l * d).await.unwrap();
    let mut methods = vec![AttentionMethod::Gemm, AttentionMethod::Tiled];
    if std::mem::size_of::<T>() == 2 {
        // cuDNN's fused attention: f16 and bf16.
        methods.insert(0, AttentionMethod::Cudnn);
    }
    for method in methods {
        for causal in [false, true] {
            let a = Attention::new(b, h, l, l, d).causal(causal).method(method);
            let s = gpu_bench::per_call(5, || async { dev.attention(a, &q, &k, &v, &o).await.unwrap() }).await;
            // Two products of 2·l·l·d per head (half of them under a causal mask).
            let flops = 4.0 * (b * h * l * l * d) as f64 / if causal { 2.0 } else { 1.0 };
            println!(
                "RESULT | dnn.attention {b}x{h}x{l}x{d}{} {dtype} {method:?} | {:.1} µs per call, {:.1} TFLOP/s",
                if causal { " causal" } else { "" },
                s * 1e6,
                flops / s / 1e12
            );
        }
    }
}

fn main() {
    run_gpu("dnn", DeviceConfig::cuda(0), |dev, _ctx, _stream| async move {
        measure::<f32>(&dev, "f32").await;
        measure::<f16>(&dev, "f16").await;
        attention::<f32>(&dev, "f32", (8, 16, 1024, 64)).await;
        attention::<f16>(&dev, "f16", (8, 16, 1024, 64)).await;
        attention::<bf16>(&dev, "bf16", (8, 16, 1024, 64)).await;
        // A long sequence: 2 GiB of f16 scores in all, 128 MiB a head.
        attention::<f16>(&dev, "f16", (1, 16, 8192, 64)).await;
    });
}
