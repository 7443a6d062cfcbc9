//! Reductions (`Device::sum`, `min`, `max`, `argmin`, `argmax`) of f16, bf16, f32 and f64 buffers
//! and views, against float64 references on fresh random data of odd lengths (one
//! element, one block ± 1, many blocks); ties go to the first index, NaNs are skipped by
//! min/max/arg* and an all-NaN buffer has no arg; a sum is the same bits every time.
//! Integer buffers (i32, i64, u32, u64) against exact references: 64-bit sums (wrapping
//! past them), minima, maxima, first indices of ties, prefix sums into 64-bit outputs.
//! On the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::kernel::dsl::Float;
use atomr_accel_cuda::prelude::*;
use common::rand_vec;

on_both! {
    reductions_match_a_float64_reference => references;
    ties_nans_and_views => edge_cases;
    scans_match_a_float64_reference => scans;
    integer_reductions_are_exact => integers;
}

/// One integer type's reductions of `n` elements against exact references: the sum in
/// 64 bits with two's-complement wrapping (its `i64` or `u64`), min, max, and the first
/// index of each (the extreme planted twice).
macro_rules! check_int {
    ($d:expr, $t:ty, $sum:ty, $n:expr, $of:expr) => {{
        let n: usize = $n;
        let of: fn(f64) -> $t = $of;
        let mut data: Vec<$t> = rand_vec(n).iter().map(|&x| of(x)).collect();
        if n > 3 {
            let lo = *data.iter().min().unwrap();
            let hi = *data.iter().max().unwrap();
            data[n / 3] = lo;
            data[n - 1] = lo;
            data[1] = hi;
        }
        let g = $d.upload(data.clone()).await.unwrap();
        let want = data.iter().fold(0 as $sum, |a, &v| a.wrapping_add(v as $sum));
        assert_eq!($d.sum(&g).await.unwrap(), want, "{} sum of {n}", stringify!($t));
        let lo = *data.iter().min().unwrap();
        let hi = *data.iter().max().unwrap();
        assert_eq!($d.min(&g).await.unwrap(), lo, "{} min of {n}", stringify!($t));
        assert_eq!($d.max(&g).await.unwrap(), hi, "{} max of {n}", stringify!($t));
        let first = |v: $t| data.iter().position(|&x| x == v);
        assert_eq!(
            $d.argmin(&g).await.unwrap(),
            first(lo),
            "{} argmin of {n}",
            stringify!($t)
        );
        assert_eq!(
            $d.argmax(&g).await.unwrap(),
            first(hi),
            "{} argmax of {n}",
            stringify!($t)
        );
    }};
}

async fn integers(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    let big = if gpu { 10_000_003 } else { 100_003 };
    for n in [1, 257, 4099, big] {
        // Signed values across the range (an i64 sum of many wraps); unsigned ones up to
        // the top of theirs (a u64 sum wraps, a u32 one fits).
        check_int!(&d, i32, i64, n, |x| (x * 2.1e9) as i32);
        check_int!(&d, i64, i64, n, |x| (x * 9.2e18) as i64);
        check_int!(&d, u32, u64, n, |x| ((x + 1.0) * 2.1e9) as u32);
        check_int!(&d, u64, u64, n, |x| ((x + 1.0) * 9.2e18) as u64);
        // The small integer types widen into the same 64-bit sums.
        check_int!(&d, i8, i64, n, |x| (x * 127.0) as i8);
        check_int!(&d, u8, u64, n, |x| ((x + 1.0) * 127.0) as u8);
        check_int!(&d, i16, i64, n, |x| (x * 32_000.0) as i16);
        check_int!(&d, u16, u64, n, |x| ((x + 1.0) * 32_000.0) as u16);
    }
    // Prefix sums into 64-bit outputs, inclusive and exclusive, against exact
    // (wrapping) references.
    for n in [1usize, 17, 4099, big] {
        let x: Vec<i32> = rand_vec(n).iter().map(|&v| (v * 2.1e9) as i32).collect();
        let gx = d.upload(x.clone()).await.unwrap();
        let out = d.alloc::<i64>(n).await.unwrap();
        d.inclusive_scan(&gx, &out).await.unwrap();
        let mut run = 0i64;
        let want: Vec<i64> = x
            .iter()
            .map(|&v| {
                run += v as i64;
                run
            })
            .collect();
        assert_eq!(d.download(&out).await.unwrap(), want, "i32 inclusive scan of {n}");
        let y: Vec<u64> = rand_vec(n).iter().map(|&v| ((v + 1.0) * 9.2e18) as u64).collect();
        let gy = d.upload(y.clone()).await.unwrap();
        d.exclusive_scan(&gy, &gy).await.unwrap(); // in place
        let mut run = 0u64;
        let want: Vec<u64> = y
            .iter()
            .map(|&v| {
                let before = run;
                run = run.wrapping_add(v);
                before
            })
            .collect();
        assert_eq!(
            d.download(&gy).await.unwrap(),
            want,
            "u64 exclusive scan of {n} in place"
        );
        let z: Vec<u8> = rand_vec(n).iter().map(|&v| ((v + 1.0) * 120.0) as u8).collect();
        let (gz, zs) = (d.upload(z.clone()).await.unwrap(), d.alloc::<u64>(n).await.unwrap());
        d.inclusive_scan(&gz, &zs).await.unwrap();
        let want: Vec<u64> = z
            .iter()
            .scan(0u64, |run, &v| {
                *run += v as u64;
                Some(*run)
            })
            .collect();
        assert_eq!(d.download(&zs).await.unwrap(), want, "u8 inclusive scan of {n}");
    }
    let short = d.alloc::<i64>(3).await.unwrap();
    let four = d.upload(vec![1i32, 2, 3, 4]).await.unwrap();
    assert!(matches!(
        d.inclusive_scan(&four, &short).await,
        Err(GpuError::InvalidArgument(_))
    ));
    // A view.
    let g = d
        .upload((0..1000i32).map(|i| (i * 37) % 101 - 50).collect::<Vec<_>>())
        .await
        .unwrap();
    let v = g.view(100..300).unwrap();
    let want: i64 = (100..300i64).map(|i| (i * 37) % 101 - 50).sum();
    assert_eq!(d.sum(&v).await.unwrap(), want);
    assert_eq!(
        d.argmin(&v).await.unwrap(),
        (100..300).position(|i| (i * 37) % 101 - 50 == -50)
    );
}

/// Inclusive and exclusive scans of `n` elements of `T` against float64 prefix sums of
/// the values as `T` holds them: each element within `tol` of the running sum of |x|
/// (one rounding to `T`), the same bits twice, in place too.
async fn check_scan<T: Float + Scan + Reduce<Sum = T>>(d: &Device, n: usize, tol: f64) {
    let data: Vec<T> = rand_vec(n).iter().map(|&x| T::from_f64(x)).collect();
    let wide: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    let x = d.upload(data).await.unwrap();
    let out = d.alloc::<T>(n).await.unwrap();
    for exclusive in [false, true] {
        if exclusive {
            d.exclusive_scan(&x, &out).await.unwrap();
        } else {
            d.inclusive_scan(&x, &out).await.unwrap();
        }
        let got: Vec<f64> = d.download(&out).await.unwrap().iter().map(|v| v.to_f64()).collect();
        let (mut run, mut mag) = (0.0f64, 0.0f64);
        for (i, (g, w)) in got.iter().zip(&wide).enumerate() {
            if !exclusive {
                run += w;
                mag += w.abs();
            }
            let err = (g - run).abs();
            assert!(
                err <= tol * mag.max(1.0),
                "{} {} scan of {n}, element {i}: {g} vs {run}",
                T::NAME,
                if exclusive { "exclusive" } else { "inclusive" }
            );
            if exclusive {
                run += w;
                mag += w.abs();
            }
        }
        let again: Vec<f64> = {
            if exclusive {
                d.exclusive_scan(&x, &out).await.unwrap();
            } else {
                d.inclusive_scan(&x, &out).await.unwrap();
            }
            d.download(&out).await.unwrap().iter().map(|v| v.to_f64()).collect()
        };
        assert!(
            again.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()),
            "same bits"
        );
    }
    // In place: x becomes its own inclusive scan.
    let expect = d
        .download(&{
            d.inclusive_scan(&x, &out).await.unwrap();
            out.clone()
        })
        .await
        .unwrap();
    d.inclusive_scan(&x, &x).await.unwrap();
    assert_eq!(d.download(&x).await.unwrap(), expect, "{} in place", T::NAME);
}

async fn scans(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    // Float scans take tiles of 16 384 (8192 for f64), one block each, in the order
    // blocks start, each looking back at those before it (the GPU's 5 000 011: 306
    // tiles, 611 of f64, windows of 32 stepped back over); 600 007 is 37 tiles, 74 of
    // f64, which the CPU device runs on several threads at once, as a GPU runs many
    // blocks.
    let big = if gpu { 5_000_011 } else { 600_007 };
    for n in [1, 3, 1023, 1024, 1025, 8192, 8193, 10_000, 16_384, 16_387, 32_769, big] {
        check_scan::<f32>(&d, n, 1e-6).await;
        check_scan::<f64>(&d, n, 1e-14).await;
        check_scan::<f16>(&d, n, 1e-3).await;
    }
    // A view in, a view out; lengths must match.
    let all = d.upload(rand_vec(3000)).await.unwrap();
    let (v_in, v_out) = (all.view(10..1510).unwrap(), all.view(1500..3000).unwrap());
    let src = d.download(&v_in).await.unwrap();
    d.inclusive_scan(&v_in, &v_out).await.unwrap();
    let got = d.download(&v_out).await.unwrap();
    let mut run = 0.0;
    for (g, w) in got.iter().zip(&src) {
        run += w;
        assert!((g - run).abs() < 1e-12 * (1.0 + run.abs()), "{g} vs {run}");
    }
    let short = d.alloc::<f64>(10).await.unwrap();
    assert!(matches!(
        d.exclusive_scan(&all, &short).await,
        Err(GpuError::InvalidArgument(_))
    ));
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device, bool) {
    let sys = ActorSystem::new("reductions");
    let d = Device::open(&sys, config).await.unwrap();
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    (sys, d, gpu)
}

fn first_best(v: &[f64], max: bool) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &x) in v.iter().enumerate() {
        if x.is_nan() {
            continue;
        }
        match best {
            Some(b) if (max && x <= v[b]) || (!max && x >= v[b]) => {}
            _ => best = Some(i),
        }
    }
    best
}

async fn check<T: Float + Reduce<Sum = T>>(d: &Device, n: usize, tol: f64, range: f64) {
    let data: Vec<T> = rand_vec(n).iter().map(|&x| T::from_f64(x * range)).collect();
    let wide: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    let g = d.upload(data).await.unwrap();
    let sum = d.sum(&g).await.unwrap().to_f64();
    let want: f64 = wide.iter().sum();
    let scale: f64 = wide.iter().map(|x| x.abs()).sum();
    assert!(
        (sum - want).abs() <= tol * scale.max(1.0),
        "{} sum of {n}: {sum} vs {want}",
        T::NAME
    );
    assert_eq!(
        d.sum(&g).await.unwrap().to_f64().to_bits(),
        sum.to_bits(),
        "same bits again"
    );
    let min = wide.iter().copied().fold(f64::INFINITY, f64::min);
    let max = wide.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(d.min(&g).await.unwrap().to_f64(), min, "{} min of {n}", T::NAME);
    assert_eq!(d.max(&g).await.unwrap().to_f64(), max, "{} max of {n}", T::NAME);
    assert_eq!(
        d.argmin(&g).await.unwrap(),
        first_best(&wide, false),
        "{} argmin of {n}",
        T::NAME
    );
    assert_eq!(
        d.argmax(&g).await.unwrap(),
        first_best(&wide, true),
        "{} argmax of {n}",
        T::NAME
    );
}

async fn references(config: DeviceConfig) {
    let (_s, d, gpu) = open(config).await;
    let big = if gpu { 10_000_003 } else { 300_007 };
    for n in [1, 255, 256, 257, 4099, big] {
        check::<f32>(&d, n, 1e-6, 100.0).await;
        check::<f64>(&d, n, 1e-14, 100.0).await;
        // Half precision: carried in f64, rounded once (values in [-1, 1), so the sums
        // stay far inside f16's range).
        check::<f16>(&d, n, 1e-3, 1.0).await;
        check::<bf16>(&d, n, 8e-3, 1.0).await;
    }
}

async fn edge_cases(config: DeviceConfig) {
    let (_s, d, _) = open(config).await;
    // Ties: the first index wins, across blocks too.
    let mut v = vec![0.0f64; 100_000];
    for i in [70_000, 513, 99_999] {
        v[i] = 5.0;
    }
    for i in [1, 80_000] {
        v[i] = -5.0;
    }
    let g = d.upload(v.clone()).await.unwrap();
    assert_eq!(d.argmax(&g).await.unwrap(), Some(513));
    assert_eq!(d.argmin(&g).await.unwrap(), Some(1));
    // A view: indices relative to it, only its elements.
    let w = g.view(600..90_000).unwrap();
    assert_eq!(d.argmax(&w).await.unwrap(), Some(70_000 - 600));
    assert_eq!(d.argmin(&w).await.unwrap(), Some(80_000 - 600));
    assert_eq!(d.sum(&w).await.unwrap(), 0.0);
    assert_eq!(d.max(&g.view(2..500).unwrap()).await.unwrap(), 0.0);
    // A view not starting at a multiple of four (the passes read four at a time: it is
    // read through a copy); ties inside one four-element load and in the tail.
    let w = g.view(601..90_001).unwrap();
    assert_eq!(d.argmax(&w).await.unwrap(), Some(70_000 - 601));
    assert_eq!(d.argmin(&w).await.unwrap(), Some(80_000 - 601));
    let mut t = vec![1.0f32; 11];
    for i in [6, 5, 10] {
        t[i] = 9.0;
    }
    t[9] = -3.0;
    t[10] = -3.0;
    let t = d.upload(t).await.unwrap();
    assert_eq!(d.argmax(&t).await.unwrap(), Some(5));
    assert_eq!(d.argmin(&t).await.unwrap(), Some(9));
    // NaNs are skipped by min/max and arg*, and propagate through a sum.
    let nan = d
        .upload(vec![f32::NAN, 2.0, f32::NAN, -1.0, 7.0, f32::NAN])
        .await
        .unwrap();
    assert_eq!(d.max(&nan).await.unwrap(), 7.0);
    assert_eq!(d.min(&nan).await.unwrap(), -1.0);
    assert_eq!(d.argmax(&nan).await.unwrap(), Some(4));
    assert_eq!(d.argmin(&nan).await.unwrap(), Some(3));
    assert!(d.sum(&nan).await.unwrap().is_nan());
    let all_nan = d.upload(vec![f64::NAN; 1000]).await.unwrap();
    assert_eq!(d.argmax(&all_nan).await.unwrap(), None);
    assert_eq!(d.argmin(&all_nan).await.unwrap(), None);
    assert_eq!(d.max(&all_nan).await.unwrap(), f64::NEG_INFINITY);
    // Infinities are values.
    let inf = d
        .upload(vec![1.0f32, f32::INFINITY, 3.0, f32::NEG_INFINITY])
        .await
        .unwrap();
    assert_eq!(d.argmax(&inf).await.unwrap(), Some(1));
    assert_eq!(d.argmin(&inf).await.unwrap(), Some(3));
}
