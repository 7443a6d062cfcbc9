//! Reductions as library calls (`Device::sum`, `min`, `max`, `argmin`, `argmax`) over
//! 64M and 1M f32 and bf16, prefix sums (`Device::inclusive_scan`, into a second buffer)
//! of f32, the sum of 64M and 1M i32 (sorts: `benches/sort.rs`): each call awaited (a reduction's answer read
//! back to the host), median of rounds; the same ops in PyTorch and CuPy on
//! the same GPU come from `benches/reductions_torch.py`, run in the same device session.
//! Reported as effective bandwidth (input bytes / time).

use atomr_accel_cuda::DeviceConfig;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::run_gpu;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    run_gpu("reductions", DeviceConfig::cuda(0), |dev, _ctx, _stream| async move {
        for n in [64usize << 20, 1 << 20] {
            let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 1e-3).collect();
            let half = dev
                .upload(data.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>())
                .await
                .unwrap();
            let x = dev.upload(data).await.unwrap();
            let out = dev.alloc::<f32>(n).await.unwrap();
            let ints = dev
                .upload((0..n).map(|i| (i % 1000) as i32 - 500).collect::<Vec<_>>())
                .await
                .unwrap();
            for (op, dtype) in [
                ("sum", "f32"),
                ("min", "f32"),
                ("max", "f32"),
                ("argmin", "f32"),
                ("argmax", "f32"),
                ("sum", "bf16"),
                ("max", "bf16"),
                ("argmax", "bf16"),
                ("cumsum", "f32"),
                ("sum", "i32"),
            ] {
                let call = || async {
                    match (op, dtype) {
                        ("sum", "i32") => drop(std::hint::black_box(dev.sum(&ints).await.unwrap())),
                        ("sum", "bf16") => drop(std::hint::black_box(dev.sum(&half).await.unwrap())),
                        ("max", "bf16") => drop(std::hint::black_box(dev.max(&half).await.unwrap())),
                        ("argmax", "bf16") => drop(dev.argmax(&half).await.unwrap()),
                        ("sum", _) => drop(std::hint::black_box(dev.sum(&x).await.unwrap())),
                        ("min", _) => drop(std::hint::black_box(dev.min(&x).await.unwrap())),
                        ("max", _) => drop(std::hint::black_box(dev.max(&x).await.unwrap())),
                        ("argmin", _) => drop(dev.argmin(&x).await.unwrap()),
                        ("argmax", _) => drop(dev.argmax(&x).await.unwrap()),
                        _ => dev.inclusive_scan(&x, &out).await.unwrap(),
                    }
                };
                for _ in 0..3 {
                    call().await;
                }
                let reps = if n > 1 << 20 { 20 } else { 200 };
                let mut rounds = vec![];
                for _ in 0..7 {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        call().await;
                    }
                    rounds.push(t.elapsed().as_secs_f64() / reps as f64);
                }
                let s = median(rounds);
                let bytes = if dtype == "bf16" { 2 } else { 4 };
                println!(
                    "RESULT | reductions.{op} {}M {dtype} | {:.1} µs per call, {:.0} GB/s",
                    n >> 20,
                    s * 1e6,
                    (n * bytes) as f64 / s / 1e9
                );
            }
        }
    });
}
