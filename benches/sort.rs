//! `Device::sort` (keys only) and `Device::sort_by_key` (u32 values) of 1M and 64M f32
//! and u32 keys — the radix sort's whole call, each awaited, from a fresh copy of the
//! unsorted data every time (the copy untimed), median of rounds. Each result is checked
//! once (keys in order, each value its key's original index). `torch.sort` and CuPy's
//! `sort` / `argsort` on the same data come from `benches/sort_torch.py`, run in the same
//! device session.

use atomr_accel_cuda::device::{SortKey, SortValue};
use atomr_accel_cuda::{Device, DeviceConfig};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::{median, run_gpu};

/// Keys of the benchmarks: a multiplicative hash of the index (as `sort_torch.py`
/// builds them): every bit of a u32 varies; floats of both signs, many distinct.
fn hashed(n: usize) -> Vec<u32> {
    (0..n as u64).map(|i| (i * 2_654_435_761 % (1 << 32)) as u32).collect()
}

async fn case<K: SortKey + SortValue + PartialOrd + Copy>(dev: &Device, dtype: &str, keys: Vec<K>) {
    let n = keys.len();
    let (pristine, k) = (
        dev.upload(keys.clone()).await.unwrap(),
        dev.alloc::<K>(n).await.unwrap(),
    );
    let (order, v) = (
        dev.upload((0..n as u32).collect::<Vec<_>>()).await.unwrap(),
        dev.alloc::<u32>(n).await.unwrap(),
    );
    for pairs in [false, true] {
        let rounds = if n > 1 << 20 { 9 } else { 41 };
        let mut times = vec![];
        for round in 0..3 + rounds {
            dev.copy(&pristine, &k).await.unwrap();
            dev.copy(&order, &v).await.unwrap();
            let t = std::time::Instant::now();
            if pairs {
                dev.sort_by_key(&k, &v).await.unwrap();
            } else {
                dev.sort(&k).await.unwrap();
            }
            if round >= 3 {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        let (got, idx) = (dev.download(&k).await.unwrap(), dev.download(&v).await.unwrap());
        assert!(got.windows(2).all(|w| w[0] <= w[1]), "{dtype} keys out of order");
        if pairs {
            assert!(
                (0..n).all(|i| keys[idx[i] as usize] == got[i]),
                "{dtype} values do not follow their keys"
            );
        }
        let s = median(&mut times);
        let mode = if pairs { "pairs" } else { "keys" };
        println!(
            "RESULT | sort {mode} {}M {dtype} | {:.1} µs per call, {:.2} G keys/s",
            n >> 20,
            s * 1e6,
            n as f64 / s / 1e9
        );
    }
}

fn main() {
    run_gpu("sort", DeviceConfig::cuda(0), |dev, _ctx, _stream| async move {
        for n in [1usize << 20, 64 << 20] {
            let h = hashed(n);
            let floats: Vec<f32> = h.iter().map(|&x| ((x % 2_000_003) as f32 - 1e6) * 1e-3).collect();
            case::<f32>(&dev, "f32", floats).await;
            case::<u32>(&dev, "u32", h).await;
        }
    });
}
