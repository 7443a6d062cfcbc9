//! `RngActor`: distributions (mean and variance within statistical bounds), seeding and
//! reproducibility, bad parameters, each generator kind, the Sobol sequence (the same
//! points on both backends, stratified) — on the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::BackendKind;
use atomr_accel_cuda::device::RandomScalar;
use atomr_accel_cuda::{Device, DeviceConfig, GpuError, RngKind};

on_both! {
    distributions_have_the_right_mean_and_variance => distributions;
    same_seed_same_numbers => reproducible;
    bad_parameters_are_typed_errors => bad_parameters;
    each_generator_kind_is_reproducible_and_well_distributed => kinds;
    sobol_is_the_same_low_discrepancy_sequence_on_every_backend => sobol;
    sobol_in_many_dimensions_plain_scrambled_and_64_bit => sobol_dimensions;
    uniform_ranges_stay_in_bounds_with_uniform_moments => ranges;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device, usize) {
    let sys = ActorSystem::new("rng");
    let dev = Device::open(&sys, config).await.unwrap();
    // 10M samples on the GPU; 1M on the CPU device (a debug build in CI).
    let n = if dev.ready().await.unwrap().backend == BackendKind::Cuda {
        10_000_000
    } else {
        1_000_000
    };
    (sys, dev, n)
}

fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Checks sample moments against the distribution's: the mean within `k` standard errors,
/// the variance within `k` standard errors of the sample variance (given the fourth
/// central moment `m4`).
fn assert_moments(what: &str, v: &[f64], mean: f64, var: f64, m4: f64, k: f64) {
    let n = v.len() as f64;
    let (m, s2) = moments(v);
    let se_mean = (var / n).sqrt();
    let se_var = ((m4 - var * var) / n).sqrt();
    assert!(
        (m - mean).abs() < k * se_mean,
        "{what}: mean {m} vs {mean} (±{})",
        k * se_mean
    );
    assert!(
        (s2 - var).abs() < k * se_var,
        "{what}: variance {s2} vs {var} (±{})",
        k * se_var
    );
}

async fn sample<T: RandomScalar>(
    dev: &Device,
    n: usize,
    f: impl AsyncFnOnce(&atomr_accel_cuda::GpuRef<T>),
) -> Vec<f64> {
    let g = dev.alloc::<T>(n).await.unwrap();
    f(&g).await;
    dev.download(&g).await.unwrap().iter().map(|x| x.to_f64()).collect()
}

async fn distributions_of<T: RandomScalar>(dev: &Device, n: usize) {
    let u = sample::<T>(dev, n, async |g| dev.fill_uniform(g).await.unwrap()).await;
    assert!(
        u.iter().all(|x| *x > 0.0 && *x <= 1.0),
        "{} uniform outside (0, 1]",
        T::NAME
    );
    assert_moments(&format!("{} uniform", T::NAME), &u, 0.5, 1.0 / 12.0, 1.0 / 80.0, 6.0);

    let (mu, sd) = (2.0, 3.0);
    // An odd length: cuRAND's normal generator needs even counts; the actor handles it.
    let z = sample::<T>(dev, n + 1, async |g| {
        dev.fill_normal(g, T::from_f64(mu), T::from_f64(sd)).await.unwrap()
    })
    .await;
    assert_moments(&format!("{} normal", T::NAME), &z, mu, sd * sd, 3.0 * sd.powi(4), 6.0);

    let (lm, ls) = (0.0f64, 0.5f64);
    let l = sample::<T>(dev, n, async |g| {
        dev.fill_log_normal(g, T::from_f64(lm), T::from_f64(ls)).await.unwrap()
    })
    .await;
    let mean = (lm + ls * ls / 2.0).exp();
    let var = ((ls * ls).exp() - 1.0) * (2.0 * lm + ls * ls).exp();
    // Fourth central moment of a log-normal.
    let s2 = ls * ls;
    let m4 = (4.0 * lm + 2.0 * s2).exp()
        * (s2.exp() - 1.0).powi(2)
        * ((4.0 * s2).exp() + 2.0 * (3.0 * s2).exp() + 3.0 * (2.0 * s2).exp() - 3.0);
    assert!(l.iter().all(|x| *x > 0.0));
    assert_moments(&format!("{} log-normal", T::NAME), &l, mean, var, m4, 6.0);
}

async fn distributions(config: DeviceConfig) {
    let (_sys, dev, n) = open(config).await;
    distributions_of::<f32>(&dev, n).await;
    distributions_of::<f64>(&dev, n).await;
    let lambda = 4.5;
    let g = dev.alloc::<u32>(n).await.unwrap();
    dev.fill_poisson(&g, lambda).await.unwrap();
    let p: Vec<f64> = dev.download(&g).await.unwrap().iter().map(|x| *x as f64).collect();
    assert_moments("poisson", &p, lambda, lambda, lambda * (1.0 + 3.0 * lambda), 6.0);
}

async fn reproducible(config: DeviceConfig) {
    let (_sys, dev, _) = open(config).await;
    let n = 100_001;
    let g = dev.alloc::<f32>(n).await.unwrap();
    let draw = async |seed: u64| {
        dev.seed_rng(seed).await.unwrap();
        dev.fill_normal(&g, 0.0f32, 1.0).await.unwrap();
        let a = dev.download(&g).await.unwrap();
        dev.fill_uniform(&g).await.unwrap();
        (a, dev.download(&g).await.unwrap())
    };
    let first = draw(42).await;
    let again = draw(42).await;
    let other = draw(43).await;
    assert_eq!(first, again, "the same seed gives the same numbers");
    assert_ne!(first.0, other.0);
    assert_ne!(first.1, other.1);
    // The stream goes on between fills: two fills after one seed differ.
    assert_ne!(first.0[..1000], first.1[..1000]);
}

async fn bad_parameters(config: DeviceConfig) {
    let (_sys, dev, _) = open(config).await;
    let g = dev.alloc::<f64>(16).await.unwrap();
    let u = dev.alloc::<u32>(16).await.unwrap();
    let inv = |r: Result<(), GpuError>| matches!(r, Err(GpuError::InvalidArgument(_)));
    assert!(inv(dev.fill_normal(&g, 0.0, 0.0).await));
    assert!(inv(dev.fill_normal(&g, f64::NAN, 1.0).await));
    assert!(inv(dev.fill_log_normal(&g, 0.0, -1.0).await));
    assert!(inv(dev.fill_poisson(&u, 0.0).await));
    assert!(inv(dev.fill_poisson(&u, f64::INFINITY).await));
    dev.fill_uniform(&g).await.unwrap();
    assert!(dev.download(&g).await.unwrap().iter().all(|x| *x > 0.0 && *x <= 1.0));
}

/// Each pseudo-random kind: the same kind and seed give the same numbers, two kinds of
/// one seed differ, and each fills uniform and normal numbers with the right moments.
async fn kinds(config: DeviceConfig) {
    let (_sys, dev, n) = open(config).await;
    let mut firsts = vec![];
    for kind in [RngKind::Xorwow, RngKind::Philox, RngKind::Mrg32k3a] {
        let draw = async || {
            dev.rng_generator(kind, 7).await.unwrap();
            sample::<f32>(&dev, 10_001, async |g| dev.fill_normal(g, 0.0f32, 1.0).await.unwrap()).await
        };
        let (a, b) = (draw().await, draw().await);
        assert_eq!(a, b, "{kind:?}: same seed, same numbers");
        firsts.push(a);
        let u = sample::<f64>(&dev, n, async |g| dev.fill_uniform(g).await.unwrap()).await;
        assert_moments(&format!("{kind:?} uniform"), &u, 0.5, 1.0 / 12.0, 1.0 / 80.0, 6.0);
        let z = sample::<f64>(&dev, n, async |g| dev.fill_normal(g, 0.0, 1.0).await.unwrap()).await;
        assert_moments(&format!("{kind:?} normal"), &z, 0.0, 1.0, 3.0, 6.0);
    }
    assert_ne!(firsts[0], firsts[1]);
    assert_ne!(firsts[1], firsts[2]);
}

/// The 1-D Sobol sequence: its first 2^k points fall one into each interval of width
/// 2^-k, it restarts on a reseed, the first points are those of the definition, and it
/// fills uniform numbers only.
async fn sobol(config: DeviceConfig) {
    let (_sys, dev, _) = open(config).await;
    dev.rng_generator(RngKind::Sobol32, 0).await.unwrap();
    let n = 1 << 16;
    let x = sample::<f64>(&dev, n, async |g| dev.fill_uniform(g).await.unwrap()).await;
    // Gray-code order: 0, ½, ¾, ¼, 3/8, 7/8, 5/8, 1/8, … each + 2^-32 (cuRAND's (0, 1]).
    let first = [0.0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125];
    for (i, (g, w)) in x.iter().zip(first).enumerate() {
        assert_eq!(*g, w + 1.0 / 4_294_967_296.0, "point {i}");
    }
    for k in [4, 10, 16] {
        let mut seen = vec![false; 1 << k];
        for v in &x[..1 << k] {
            // (0, 1]: cell j holds (j / 2^k, (j + 1) / 2^k].
            let cell = (v * (1 << k) as f64).ceil() as usize - 1;
            assert!(!seen[cell], "two of the first 2^{k} points in cell {cell}");
            seen[cell] = true;
        }
    }
    dev.seed_rng(99).await.unwrap();
    let again = sample::<f64>(&dev, n, async |g| dev.fill_uniform(g).await.unwrap()).await;
    assert_eq!(x, again, "a reseed restarts the sequence");
    dev.seed_rng(0).await.unwrap();
    let f = sample::<f32>(&dev, 8, async |g| dev.fill_uniform(g).await.unwrap()).await;
    for (g, w) in f.iter().zip(first) {
        assert!((g - w).abs() < 1e-7, "f32 point {g} vs {w}");
    }
    let g = dev.alloc::<f32>(16).await.unwrap();
    let e = dev.fill_normal(&g, 0.0f32, 1.0).await.unwrap_err();
    assert!(matches!(e, GpuError::Unsupported(_)), "{e:?}");
    let u = dev.alloc::<u32>(16).await.unwrap();
    assert!(matches!(dev.fill_poisson(&u, 2.0).await, Err(GpuError::Unsupported(_))));
    dev.rng_generator(RngKind::Philox, 1).await.unwrap();
    dev.fill_normal(&g, 0.0f32, 1.0).await.unwrap();
}

/// `cell` of `x` among the 2^k intervals: 32-bit points lie in (0, 1] (cell j is
/// (j / 2^k, (j + 1) / 2^k]), 64-bit ones in (0, 1) (cell j is [j / 2^k, (j + 1) / 2^k)).
fn cell(x: f64, k: u32, wide: bool) -> usize {
    let scaled = x * (1u64 << k) as f64;
    if wide {
        scaled.floor() as usize
    } else {
        scaled.ceil() as usize - 1
    }
}

/// Sobol sequences in 50 dimensions, 32- and 64-bit, plain and scrambled: a fill holds
/// whole points ordered by dimension, the first 2^k points of every dimension fall one
/// into each interval of width 2^-k, fills continue the sequence and a reseed restarts
/// it, the plain ones are the CPU device's points on every backend (the GPU's cuRAND vs
/// the CPU device's Joe–Kuo numbers), a scrambled one differs from its plain one; bad
/// dimensions and lengths are typed errors.
async fn sobol_dimensions(config: DeviceConfig) {
    let (_sys, dev, _) = open(config).await;
    let cpu_sys = ActorSystem::new("rng-cpu");
    let cpu = Device::open(&cpu_sys, DeviceConfig::cpu()).await.unwrap();
    let (dims, per) = (50usize, 1usize << 12);
    for kind in [
        RngKind::Sobol32,
        RngKind::Sobol64,
        RngKind::ScrambledSobol32,
        RngKind::ScrambledSobol64,
    ] {
        let wide = matches!(kind, RngKind::Sobol64 | RngKind::ScrambledSobol64);
        let scrambled = matches!(kind, RngKind::ScrambledSobol32 | RngKind::ScrambledSobol64);
        for d in [&dev, &cpu] {
            d.rng_generator(kind, 0).await.unwrap();
            d.rng_dimensions(dims as u32).await.unwrap();
        }
        let x = sample::<f64>(&dev, per * dims, async |g| dev.fill_uniform(g).await.unwrap()).await;
        for d in 0..dims {
            let pts = &x[d * per..(d + 1) * per];
            assert!(
                pts.iter().all(|v| *v > 0.0 && *v <= 1.0),
                "{kind:?} dimension {d}: outside (0, 1]"
            );
            for k in [4, 9, 12] {
                let mut seen = vec![false; 1 << k];
                for v in &pts[..1 << k] {
                    let c = cell(*v, k, wide);
                    assert!(
                        !seen[c],
                        "{kind:?} dimension {d}: two of the first 2^{k} points in cell {c}"
                    );
                    seen[c] = true;
                }
            }
        }
        // Two fills of half as many points: the same points, each fill by dimension.
        dev.seed_rng(1).await.unwrap();
        let half = per / 2;
        let a = sample::<f64>(&dev, half * dims, async |g| dev.fill_uniform(g).await.unwrap()).await;
        let b = sample::<f64>(&dev, half * dims, async |g| dev.fill_uniform(g).await.unwrap()).await;
        for d in 0..dims {
            assert_eq!(
                a[d * half..(d + 1) * half],
                x[d * per..d * per + half],
                "{kind:?} dimension {d}"
            );
            assert_eq!(
                b[d * half..(d + 1) * half],
                x[d * per + half..(d + 1) * per],
                "{kind:?} dimension {d}"
            );
        }
        let on_cpu = sample::<f64>(&cpu, per * dims, async |g| cpu.fill_uniform(g).await.unwrap()).await;
        if scrambled {
            dev.rng_generator(if wide { RngKind::Sobol64 } else { RngKind::Sobol32 }, 0)
                .await
                .unwrap();
            dev.rng_dimensions(dims as u32).await.unwrap();
            let plain = sample::<f64>(&dev, per * dims, async |g| dev.fill_uniform(g).await.unwrap()).await;
            let same = plain.iter().zip(&x).filter(|(p, s)| p == s).count();
            assert!(
                same < per * dims / 100,
                "{kind:?}: {same} points as the plain sequence's"
            );
        } else {
            // The plain sequences are the CPU device's on every backend (a 64-bit point
            // within the last bit of its conversion to a double).
            let tol = if wide { 2f64.powi(-52) } else { 0.0 };
            let bad = x.iter().zip(&on_cpu).position(|(g, c)| (g - c).abs() > tol);
            if let Some(i) = bad {
                panic!(
                    "{kind:?}: number {i} (dimension {}, point {}) is {} here, {} on the CPU device",
                    i / per,
                    i % per,
                    x[i],
                    on_cpu[i]
                );
            }
            // f32 fills: the same points, rounded.
            dev.seed_rng(0).await.unwrap();
            let f = sample::<f32>(&dev, 64 * dims, async |g| dev.fill_uniform(g).await.unwrap()).await;
            for d in 0..dims {
                for k in 0..64 {
                    let (g, w) = (f[d * 64 + k], x[d * per + k]);
                    assert!(
                        (g - w).abs() <= 1.2e-7,
                        "{kind:?} f32 dimension {d} point {k}: {g} vs {w}"
                    );
                }
            }
        }
    }
    // Bad input: a length that is not whole points, dimensions out of range, dimensions
    // of a pseudo-random kind.
    dev.rng_generator(RngKind::Sobol32, 0).await.unwrap();
    dev.rng_dimensions(3).await.unwrap();
    let g = dev.alloc::<f32>(10).await.unwrap();
    for e in [
        dev.fill_uniform(&g).await.unwrap_err(),
        dev.fill_uniform_range(&g, 0.0, 1.0).await.unwrap_err(),
        dev.rng_dimensions(0).await.unwrap_err(),
        dev.rng_dimensions(20_001).await.unwrap_err(),
    ] {
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    }
    dev.fill_uniform(&g.view(..9).unwrap()).await.unwrap();
    dev.rng_generator(RngKind::Philox, 0).await.unwrap();
    let e = dev.rng_dimensions(2).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    dev.fill_uniform(&g).await.unwrap();
    cpu.stop().await;
}

/// Uniform fills over `[lo, hi)` from every kind: every number in its bounds, moments of
/// the uniform distribution, the same numbers again from the same seed, only a view's
/// window touched; an empty, reversed or non-finite range is an `InvalidArgument`.
async fn ranges(config: DeviceConfig) {
    let (_sys, dev, n) = open(config).await;
    let (lo, hi) = (-3.0f64, 5.0f64);
    let w = hi - lo;
    for kind in [RngKind::Xorwow, RngKind::Philox, RngKind::Mrg32k3a, RngKind::Sobol32] {
        dev.rng_generator(kind, 11).await.unwrap();
        let v = sample::<f64>(&dev, n, async |g| dev.fill_uniform_range(g, lo, hi).await.unwrap()).await;
        assert!(
            v.iter().all(|x| (lo..hi).contains(x)),
            "{kind:?}: a number outside [{lo}, {hi})"
        );
        assert_moments(&format!("{kind:?} range"), &v, 1.0, w * w / 12.0, w.powi(4) / 80.0, 6.0);
        let f = sample::<f32>(&dev, n / 10, async |g| {
            dev.fill_uniform_range(g, 1.0f32, 1.5).await.unwrap()
        })
        .await;
        assert!(
            f.iter().all(|x| (1.0..1.5).contains(x)),
            "{kind:?}: an f32 outside [1, 1.5)"
        );
        let again = async || {
            dev.rng_generator(kind, 5).await.unwrap();
            sample::<f32>(&dev, 4097, async |g| {
                dev.fill_uniform_range(g, -1.0f32, 1.0).await.unwrap()
            })
            .await
        };
        assert_eq!(again().await, again().await, "{kind:?}: same seed, same numbers");
    }
    // A narrow range next to a large magnitude: every f32 in bounds after rounding.
    let narrow = sample::<f32>(&dev, n / 10, async |g| {
        dev.fill_uniform_range(g, 1.0e6f32, 1.0e6 + 0.25).await.unwrap()
    })
    .await;
    assert!(narrow.iter().all(|x| (1.0e6..1.0e6 + 0.25).contains(x)));
    // Only a view's window.
    let buf = dev.upload(vec![9.0f64; 1000]).await.unwrap();
    dev.fill_uniform_range(&buf.view(100..900).unwrap(), 0.0, 1.0)
        .await
        .unwrap();
    let got = dev.download(&buf).await.unwrap();
    assert!(got[..100].iter().chain(&got[900..]).all(|&x| x == 9.0));
    assert!(got[100..900].iter().all(|x| (0.0..1.0).contains(x)));
    let inv = |r: Result<(), GpuError>| matches!(r, Err(GpuError::InvalidArgument(_)));
    let g = dev.alloc::<f64>(16).await.unwrap();
    assert!(inv(dev.fill_uniform_range(&g, 1.0, 1.0).await));
    assert!(inv(dev.fill_uniform_range(&g, 2.0, 1.0).await));
    assert!(inv(dev.fill_uniform_range(&g, f64::NAN, 1.0).await));
    assert!(inv(dev.fill_uniform_range(&g, 0.0, f64::INFINITY).await));
    assert!(inv(dev.fill_uniform_range(&g, -f64::MAX, f64::MAX).await));
}
