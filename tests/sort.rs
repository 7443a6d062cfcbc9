//! `Device::sort_by_key`: keys sorted ascending in place, stable (equal keys keep their
//! order), NaNs last, values permuted alike — checked on fresh random data with many
//! ties against a stable sort on the host, for float and integer keys (64-bit ones beyond
//! 2^53 compared exactly) and values of
//! other types, odd lengths and views. On the CPU device (through the kernels, and past
//! 65 536 keys on the host) and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use common::rand_vec;

on_both! {
    sorts_match_a_stable_host_sort => sorts;
    radix_tiles_and_digits_at_their_edges => radix_edges;
    bad_input_is_a_typed_error => bad_input;
}

/// The host's stable sort of `keys` (NaNs last) as the permutation of indices.
fn stable_order(keys: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (keys[a], keys[b]);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ => x.partial_cmp(&y).unwrap(),
        }
    });
    order
}

/// Sorts `keys` (as `K`) with their indices as `i64` values; checks both against the
/// host's stable order.
async fn check<K: SortKey + SortValue>(d: &Device, keys: Vec<K>) {
    let n = keys.len();
    let wide: Vec<f64> = keys.iter().map(|k| k.to_f64()).collect();
    let gk = d.upload(keys.clone()).await.unwrap();
    let gv = d.upload((0..n as i64).collect::<Vec<_>>()).await.unwrap();
    d.sort_by_key(&gk, &gv).await.unwrap();
    let order = stable_order(&wide);
    let got_v = d.download(&gv).await.unwrap();
    let want_v: Vec<i64> = order.iter().map(|&i| i as i64).collect();
    if let Some(i) = (0..n).find(|&i| got_v[i] != want_v[i]) {
        panic!(
            "{} sort of {n}: position {i} holds index {}, want {}",
            K::NAME,
            got_v[i],
            want_v[i]
        );
    }
    let got_k: Vec<f64> = d.download(&gk).await.unwrap().iter().map(|k| k.to_f64()).collect();
    for (i, &j) in order.iter().enumerate() {
        let (g, w) = (got_k[i], wide[j]);
        // The same bits (a -0 stays -0), or both NaN.
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{} key {i}: {g:?} vs {w:?}",
            K::NAME
        );
    }
    // `argsort` gives the same order and leaves the keys; `sort` sorts them alike.
    let again = d.upload(keys.clone()).await.unwrap();
    let idx = d.argsort(&again).await.unwrap();
    let want_idx: Vec<u32> = order.iter().map(|&i| i as u32).collect();
    assert!(
        d.download(&idx).await.unwrap() == want_idx,
        "{} argsort of {n}",
        K::NAME
    );
    let left: Vec<f64> = d.download(&again).await.unwrap().iter().map(|k| k.to_f64()).collect();
    assert!(
        left.iter()
            .zip(&wide)
            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
        "argsort leaves the keys"
    );
    d.sort(&again).await.unwrap();
    let sorted: Vec<f64> = d.download(&again).await.unwrap().iter().map(|k| k.to_f64()).collect();
    assert!(
        sorted
            .iter()
            .zip(&got_k)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
        "{} sort of {n} as sort_by_key's keys",
        K::NAME
    );
}

/// Float keys come back bit for bit from `sort`: a NaN's sign and payload too.
async fn same_bits_f32(d: &Device, keys: &[f32]) {
    let order = stable_order(&keys.iter().map(|&k| k as f64).collect::<Vec<_>>());
    let g = d.upload(keys.to_vec()).await.unwrap();
    d.sort(&g).await.unwrap();
    let got = d.download(&g).await.unwrap();
    for (i, &j) in order.iter().enumerate() {
        assert_eq!(got[i].to_bits(), keys[j].to_bits(), "f32 key {i} of {}", keys.len());
    }
}

/// As [`check`], for integer keys compared exactly (64-bit keys beyond 2^53 included).
async fn check_int<K: SortKey + SortValue + Ord + std::fmt::Debug>(d: &Device, keys: Vec<K>) {
    let n = keys.len();
    let gk = d.upload(keys.clone()).await.unwrap();
    let gv = d.upload((0..n as i64).collect::<Vec<_>>()).await.unwrap();
    d.sort_by_key(&gk, &gv).await.unwrap();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| keys[i]);
    let got_v = d.download(&gv).await.unwrap();
    if let Some(i) = (0..n).find(|&i| got_v[i] != order[i] as i64) {
        panic!(
            "{} sort of {n}: position {i} holds index {}, want {}",
            K::NAME,
            got_v[i],
            order[i]
        );
    }
    let got_k = d.download(&gk).await.unwrap();
    assert!(
        order.iter().enumerate().all(|(i, &j)| got_k[i] == keys[j]),
        "{} keys out of order",
        K::NAME
    );
    // Float values (gathered through the order, the keys back from their radix forms),
    // `argsort` (the keys left), and `sort` (keys only through the passes).
    let (gk, gf) = (
        d.upload(keys.clone()).await.unwrap(),
        d.upload((0..n).map(|i| i as f32 + 0.5).collect::<Vec<_>>())
            .await
            .unwrap(),
    );
    d.sort_by_key(&gk, &gf).await.unwrap();
    let got_f = d.download(&gf).await.unwrap();
    assert!(
        (0..n).all(|i| got_f[i] == order[i] as f32 + 0.5),
        "{} sort of {n} with f32 values",
        K::NAME
    );
    assert!(
        d.download(&gk).await.unwrap() == got_k,
        "{} keys with f32 values",
        K::NAME
    );
    let again = d.upload(keys.clone()).await.unwrap();
    let idx = d.argsort(&again).await.unwrap();
    let want: Vec<u32> = order.iter().map(|&i| i as u32).collect();
    assert!(d.download(&idx).await.unwrap() == want, "{} argsort of {n}", K::NAME);
    assert!(d.download(&again).await.unwrap() == keys, "argsort leaves the keys");
    d.sort(&again).await.unwrap();
    assert!(d.download(&again).await.unwrap() == got_k, "{} sort of {n}", K::NAME);
}

/// `n` 64-bit keys far beyond 2^53 that differ in their last bits (a float could not
/// tell them apart), with many ties: `grid · 2^55 + (0..4)`, around `center`.
fn keys_wide(n: usize) -> Vec<i64> {
    rand_vec(n)
        .iter()
        .zip(rand_vec(n))
        .map(|(x, y)| ((x * 9.0).floor() as i64) * (1 << 55) + ((y + 1.0) * 2.0).floor() as i64)
        .collect()
}

/// `n` keys in [-range, range) on a grid of `steps` values: many ties.
fn keys_f64(n: usize, steps: f64) -> Vec<f64> {
    rand_vec(n).iter().map(|x| (x * steps).floor()).collect()
}

async fn sorts(config: DeviceConfig) {
    let sys = ActorSystem::new("sort");
    let d = Device::open(&sys, config).await.unwrap();
    for n in [1usize, 2, 7, 256, 1000, 4097] {
        let mut f: Vec<f32> = keys_f64(n, 50.0).iter().map(|&x| x as f32 / 7.0).collect();
        check::<f32>(&d, f.clone()).await;
        let mut wide = keys_f64(n, 1e6);
        let mut narrow: Vec<half::f16> = keys_f64(n, 30.0).iter().map(|&x| half::f16::from_f64(x)).collect();
        if n > 10 {
            // A -0 alone (no NaN): it keeps its sign, and its order among the +0s.
            let mut z = f.clone();
            z[n / 2] = -0.0;
            z[n / 3] = 0.0;
            check::<f32>(&d, z).await;
            // NaNs of both signs and with payloads go last, in their order, bits kept
            // (quiet ones: a conversion may quiet a signalling NaN).
            f[3] = f32::NAN;
            f[n - 2] = f32::from_bits(0xFFC0_1234);
            f[4] = f32::from_bits(0x7FC0_0001);
            f[5] = f32::INFINITY;
            f[6] = f32::NEG_INFINITY;
            // -0 and +0 are equal keys: they keep their order.
            f[7] = -0.0;
            f[8] = 0.0;
            same_bits_f32(&d, &f).await;
            (wide[1], wide[2], wide[3], wide[n - 1]) = (-0.0, f64::NAN, 0.0, -f64::NAN);
            (wide[4], wide[5]) = (f64::NEG_INFINITY, f64::from_bits(0xFFF8_0000_0000_0001));
            (narrow[1], narrow[2], narrow[3]) = (half::f16::NEG_ZERO, half::f16::NAN, half::f16::ZERO);
            (narrow[4], narrow[n - 1]) = (-half::f16::NAN, half::f16::NEG_INFINITY);
        }
        check::<f32>(&d, f).await;
        check::<f64>(&d, wide).await;
        check::<half::f16>(&d, narrow).await;
        check_int::<i32>(&d, keys_f64(n, 2e9).iter().map(|&x| x as i32).collect()).await;
        check_int::<u32>(&d, keys_f64(n, 9.0).iter().map(|&x| (x + 9.0) as u32).collect()).await;
        check_int::<u32>(
            &d,
            keys_f64(n, 9.0)
                .iter()
                .map(|&x| (x as i64 + (1 << 31)) as u32)
                .collect(),
        )
        .await;
        check_int::<i64>(&d, keys_wide(n)).await;
        check_int::<u8>(&d, keys_f64(n, 100.0).iter().map(|&x| (x + 100.0) as u8).collect()).await;
        check_int::<i16>(&d, keys_f64(n, 3e4).iter().map(|&x| x as i16).collect()).await;
        // u64 keys on both sides of 2^63.
        check_int::<u64>(
            &d,
            keys_wide(n).iter().map(|&k| (k as u64).wrapping_add(1 << 63)).collect(),
        )
        .await;
    }
    // Many blocks: on a GPU millions of keys (radix passes over thousands of tiles),
    // on the CPU device's emulated grid tens of thousands.
    let big = if d.config().backend == atomr_accel_cuda::device::BackendChoice::Cuda {
        5_000_003
    } else {
        30_011
    };
    let mut f: Vec<f32> = keys_f64(big, 1e5).iter().map(|&x| x as f32 / 3.0).collect();
    f[big / 2] = f32::NAN;
    check::<f32>(&d, f).await;
    check_int::<u64>(
        &d,
        keys_wide(big)
            .iter()
            .map(|&k| (k as u64).wrapping_add(1 << 63))
            .collect(),
    )
    .await;
    check_int::<i32>(&d, keys_f64(big, 300.0).iter().map(|&x| x as i32).collect()).await;
    // Past the CPU device's host-sort threshold (65 536 keys; on a GPU, more radix
    // tiles): the same orders, -0 and +0 equal, NaNs last.
    let many = 100_003;
    let mut f: Vec<f32> = keys_f64(many, 1e4).iter().map(|&x| x as f32 / 3.0).collect();
    (f[7], f[8], f[9], f[10], f[many - 1]) = (0.0, -0.0, f32::NAN, 0.0, f32::NEG_INFINITY);
    check::<f32>(&d, f).await;
    check::<f64>(&d, keys_f64(many, 1e6)).await;
    check_int::<i64>(&d, keys_wide(many)).await;
    check_int::<u8>(&d, keys_f64(many, 100.0).iter().map(|&x| (x + 100.0) as u8).collect()).await;
    // Narrow integer values ride along as the passes' payload too.
    let n = 5000;
    let keys: Vec<i32> = keys_f64(n, 40.0).iter().map(|&x| x as i32).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| keys[i]);
    let (gk, g8, g16) = (
        d.upload(keys.clone()).await.unwrap(),
        d.upload((0..n).map(|i| (i % 251) as u8).collect::<Vec<_>>())
            .await
            .unwrap(),
        d.upload((0..n).map(|i| i as i16 - 2500).collect::<Vec<_>>())
            .await
            .unwrap(),
    );
    d.sort_by_key(&gk, &g8).await.unwrap();
    let again = d.upload(keys.clone()).await.unwrap();
    d.sort_by_key(&again, &g16).await.unwrap();
    let (v8, v16) = (d.download(&g8).await.unwrap(), d.download(&g16).await.unwrap());
    for (i, &j) in order.iter().enumerate() {
        assert_eq!(
            (v8[i], v16[i]),
            ((j % 251) as u8, j as i16 - 2500),
            "narrow values at {i}"
        );
    }
    // f32 keys with f64 values, and a view: only its window moves.
    let keys: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32).collect();
    let gk = d.upload(keys.clone()).await.unwrap();
    let gv = d
        .upload((0..100).map(|i| i as f64 * 0.5).collect::<Vec<_>>())
        .await
        .unwrap();
    let (kw, vw) = (gk.view(20..60).unwrap(), gv.view(20..60).unwrap());
    d.sort_by_key(&kw, &vw).await.unwrap();
    let (k, v) = (d.download(&gk).await.unwrap(), d.download(&gv).await.unwrap());
    assert_eq!(&k[..20], &keys[..20]);
    assert_eq!(&k[60..], &keys[60..]);
    let wide: Vec<f64> = keys[20..60].iter().map(|&x| x as f64).collect();
    for (i, j) in stable_order(&wide).into_iter().enumerate() {
        assert_eq!(k[20 + i], keys[20 + j]);
        assert_eq!(v[20 + i], (20 + j) as f64 * 0.5);
    }
    // Keys and values as two halves of one buffer (several radix passes, both tiles).
    let n = 3000;
    let keys = keys_f64(n, 1e4);
    let values: Vec<f64> = (0..n).map(|i| i as f64 + 0.25).collect();
    let one = d.upload([keys.clone(), values].concat()).await.unwrap();
    d.sort_by_key(&one.view(0..n).unwrap(), &one.view(n..2 * n).unwrap())
        .await
        .unwrap();
    let got = d.download(&one).await.unwrap();
    for (i, j) in stable_order(&keys).into_iter().enumerate() {
        assert_eq!(
            (got[i], got[n + i]),
            (keys[j], j as f64 + 0.25),
            "halves of one buffer at {i}"
        );
    }
    sys.shutdown().await;
}

/// Past 2 GiB of keys: 2^29 + 3 f32 keys with u32 values (8 GiB moved by each pass),
/// so every kernel of the sort addresses bytes beyond 32 bits — the floats read and
/// written by the passes themselves, a partial last tile. GPU only: the CPU device sorts
/// that many on the host. Fresh random keys with many ties (about a million distinct
/// values), a NaN and both zeros among them; checked in order, each value naming its
/// key, equal keys in index order (stable), every index once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn a_sort_past_two_gib_of_keys() {
    let sys = ActorSystem::new("sort-big");
    let d = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let n = (1usize << 29) + 3;
    let mut keys: Vec<f32> = rand_vec(n).iter().map(|&x| (x * 5e5).round() as f32).collect();
    (keys[1], keys[n / 2], keys[n - 1]) = (f32::NAN, -0.0, 0.0);
    let gk = d.upload(keys.clone()).await.unwrap();
    let gv = d.upload((0..n as u32).collect::<Vec<_>>()).await.unwrap();
    d.sort_by_key(&gk, &gv).await.unwrap();
    let (k, v) = (d.download(&gk).await.unwrap(), d.download(&gv).await.unwrap());
    let mut seen = vec![false; n];
    for i in 0..n {
        let j = v[i] as usize;
        assert!(!std::mem::replace(&mut seen[j], true), "index {j} twice");
        assert_eq!(k[i].to_bits(), keys[j].to_bits(), "position {i} holds key {j}'s value");
        if i > 0 {
            let (a, b) = (k[i - 1], k[i]);
            let tied = a == b || (a.is_nan() && b.is_nan());
            assert!(
                (tied && v[i - 1] < v[i]) || (!tied && (a < b || b.is_nan())),
                "out of order at {i}: {a} (index {}) before {b} (index {j})",
                v[i - 1]
            );
        }
    }
    sys.shutdown().await;
}

async fn bad_input(config: DeviceConfig) {
    let sys = ActorSystem::new("sort-bad");
    let d = Device::open(&sys, config).await.unwrap();
    let k = d.upload(vec![3.0f32, 1.0, 2.0]).await.unwrap();
    let short = d.upload(vec![1u32, 2]).await.unwrap();
    let e = d.sort_by_key(&k, &short).await.unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(i) if i.arg.as_deref() == Some("values")),
        "{e:?}"
    );
    let e = d.sort_by_key(&k, &k).await.unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(i) if i.arg.as_deref() == Some("values")),
        "{e:?}"
    );
    // Overlapping views of one buffer; views lying apart are keys and values.
    let both = d.upload(vec![3.0f32, 1.0, 2.0, 10.0, 11.0, 12.0]).await.unwrap();
    let e = d
        .sort_by_key(&both.view(0..3).unwrap(), &both.view(2..5).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(i) if i.arg.as_deref() == Some("values") && i.to_string().contains("overlapping")),
        "{e:?}"
    );
    d.sort_by_key(&both.view(0..3).unwrap(), &both.view(3..6).unwrap())
        .await
        .unwrap();
    assert_eq!(d.download(&both).await.unwrap(), vec![1.0, 2.0, 3.0, 11.0, 12.0, 10.0]);
    // Still serving; the keys untouched by the refused calls.
    assert_eq!(d.download(&k).await.unwrap(), vec![3.0, 1.0, 2.0]);
    sys.shutdown().await;
}

/// The radix sort at its seams: lengths around its 3072-key tiles and the histogram's
/// 2048-key ones (a lone key in the last tile, exactly full tiles), keys all equal (every digit the same: each pass moves its
/// tiles as they are), already sorted and reversed, keys that differ in one 8-bit digit
/// only (one pass that reorders), in the top digit only (u64 across 2^63), and negative
/// and positive zeros and infinities among floats.
async fn radix_edges(config: DeviceConfig) {
    let sys = ActorSystem::new("sort-edges");
    let d = Device::open(&sys, config).await.unwrap();
    for n in [2047usize, 2048, 2049, 3071, 3072, 3073, 6144, 9217] {
        check_int::<u32>(&d, vec![7; n]).await;
        check_int::<i32>(&d, (0..n as i32).collect()).await;
        check_int::<i32>(&d, (0..n as i32).rev().collect()).await;
        // One digit varies (bits 8..16): a single pass reorders.
        check_int::<u32>(&d, (0..n as u32).map(|i| 0xABCD_0000 | ((i * 7 % 256) << 8)).collect()).await;
        // Only the top digit varies.
        check_int::<u64>(&d, (0..n as u64).map(|i| (i * 5 % 256) << 56).collect()).await;
        let f: Vec<f64> = (0..n)
            .map(|i| match i % 6 {
                0 => -0.0,
                1 => 0.0,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => -(i as f64),
                _ => i as f64 * 1e-300,
            })
            .collect();
        check::<f64>(&d, f).await;
    }
    sys.shutdown().await;
}
