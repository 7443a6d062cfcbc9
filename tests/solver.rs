//! `SolverActor`: LU, Cholesky, QR, SVD and the symmetric eigensolver for f32 and f64 on
//! fresh random matrices — each checked by what defines it, in float64 (P·A = L·U, a
//! small residual, orthonormal factors that rebuild A, ascending eigenpairs), on the CPU
//! device and on the GPU; `info` failures and bad input as typed errors.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::{gemm_ref, rand_vec, rel_err, spd};

on_both! {
    lu_factors_and_solves => lu;
    cholesky_factors_and_solves => cholesky;
    qr_gives_orthonormal_q_and_upper_r => qr;
    svd_rebuilds_the_matrix => svd;
    eigh_gives_ascending_eigenpairs => eigh;
    eigh_reads_either_triangle_and_values_only_and_svd_values => options;
    batched_factorizations_factor_every_matrix_and_name_a_failure => batched;
    batched_solves_solve_every_system => batched_solves;
    pivots_made_on_one_thread_solve_on_another => pivots_across_threads;
    numerical_failures_are_typed_errors => numerical;
    calls_in_flight_report_their_own_info => info_in_flight;
    bad_input_is_a_typed_error => bad_input;
}

fn to<T: SolverScalar>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

async fn back<T: SolverScalar>(d: &Device, r: &GpuRef<T>) -> Vec<f64> {
    d.download(r).await.unwrap().iter().map(|x| x.to_f64()).collect()
}

/// `a` (rows×k) · `b` (k×cols), column-major, in float64.
fn mul(a: &[f64], b: &[f64], rows: usize, k: usize, cols: usize, ta: bool) -> Vec<f64> {
    let mut c = vec![0.0; rows * cols];
    let lda = if ta { k } else { rows };
    gemm_ref(ta, false, rows, cols, k, 1.0, a, lda, b, k, 0.0, &mut c, rows);
    c
}

fn identity(n: usize) -> Vec<f64> {
    (0..n * n).map(|i| if i % (n + 1) == 0 { 1.0 } else { 0.0 }).collect()
}

/// The tolerance of a dtype's results relative to the data's scale.
fn tol<T: SolverScalar>() -> f64 {
    if T::NAME == "f32" {
        2e-4
    } else {
        1e-11
    }
}

/// A random n×m matrix in [-1, 1): full rank with probability one; the checks are
/// relative, so its conditioning only scales the rounding they allow for.
fn random(n: usize, m: usize) -> Vec<f64> {
    rand_vec(n * m)
}

async fn lu_typed<T: SolverScalar>(d: &Device) {
    for (n, nrhs) in [(1, 1), (37, 3), (96, 5)] {
        let a = random(n, n);
        let b = random(n, nrhs);
        let ad = d.upload(to::<T>(&a)).await.unwrap();
        let piv = d.lu_factor(&ad, n).await.unwrap();
        let f = back(d, &ad).await;
        let p: Vec<i32> = d.download(&piv).await.unwrap();
        // P·A from the pivots, L·U from the packed factors.
        let mut pa = a.clone();
        for (k, &pk) in p.iter().enumerate() {
            assert!(pk >= 1 && pk as usize <= n, "pivot {k} = {pk}");
            for c in 0..n {
                pa.swap(c * n + k, c * n + pk as usize - 1);
            }
        }
        let l: Vec<f64> = (0..n * n)
            .map(|i| match (i % n).cmp(&(i / n)) {
                std::cmp::Ordering::Greater => f[i],
                std::cmp::Ordering::Equal => 1.0,
                std::cmp::Ordering::Less => 0.0,
            })
            .collect();
        let u: Vec<f64> = (0..n * n).map(|i| if i % n <= i / n { f[i] } else { 0.0 }).collect();
        let e = rel_err(&mul(&l, &u, n, n, n, false), &pa);
        assert!(e < tol::<T>(), "{} LU of {n}: P·A vs L·U {e:e}", T::NAME);
        // Partial pivoting keeps every multiplier at most 1 in magnitude.
        assert!(l.iter().all(|v| v.abs() <= 1.0 + 1e-6));
        let bd = d.upload(to::<T>(&b)).await.unwrap();
        d.lu_solve(&ad, &piv, &bd, n, nrhs).await.unwrap();
        let x = back(d, &bd).await;
        let ax = mul(&a, &x, n, n, nrhs, false);
        let bt: Vec<f64> = to::<T>(&b).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(&ax, &bt);
        assert!(e < tol::<T>() * n as f64, "{} LU solve of {n}: residual {e:e}", T::NAME);
    }
}

async fn lu(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-lu");
    let d = Device::open(&sys, config).await.unwrap();
    lu_typed::<f32>(&d).await;
    lu_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn cholesky_typed<T: SolverScalar>(d: &Device) {
    for (n, nrhs) in [(1, 2), (45, 4), (128, 1)] {
        let a = spd(n);
        // The strict upper triangle is neither read nor written: fill it with noise.
        let noise = rand_vec(n * n);
        let given: Vec<f64> = (0..n * n)
            .map(|i| if i % n < i / n { noise[i] } else { a[i] })
            .collect();
        let ad = d.upload(to::<T>(&given)).await.unwrap();
        d.cholesky(&ad, n).await.unwrap();
        let f = back(d, &ad).await;
        for i in 0..n * n {
            if i % n < i / n {
                assert_eq!(f[i], T::from_f64(noise[i]).to_f64(), "upper triangle touched at {i}");
            }
        }
        let l: Vec<f64> = (0..n * n).map(|i| if i % n >= i / n { f[i] } else { 0.0 }).collect();
        let llt = {
            let mut c = vec![0.0; n * n];
            gemm_ref(false, true, n, n, n, 1.0, &l, n, &l, n, 0.0, &mut c, n);
            c
        };
        let e = rel_err(&llt, &a);
        assert!(e < tol::<T>(), "{} Cholesky of {n}: L·Lᵀ vs A {e:e}", T::NAME);
        let b = rand_vec(n * nrhs);
        let bd = d.upload(to::<T>(&b)).await.unwrap();
        d.cholesky_solve(&ad, &bd, n, nrhs).await.unwrap();
        let x = back(d, &bd).await;
        let bt: Vec<f64> = to::<T>(&b).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(&mul(&a, &x, n, n, nrhs, false), &bt);
        assert!(
            e < tol::<T>() * 10.0,
            "{} Cholesky solve of {n}: residual {e:e}",
            T::NAME
        );
    }
}

async fn cholesky(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-chol");
    let d = Device::open(&sys, config).await.unwrap();
    cholesky_typed::<f32>(&d).await;
    cholesky_typed::<f64>(&d).await;
    sys.shutdown().await;
}

/// ‖QᵀQ − I‖ relative to √n.
fn orthonormality(q: &[f64], rows: usize, cols: usize) -> f64 {
    rel_err(&mul(q, q, cols, rows, cols, true), &identity(cols))
}

async fn qr_typed<T: SolverScalar>(d: &Device) {
    for (m, n) in [(1, 1), (50, 20), (64, 64), (300, 7)] {
        let a = random(m, n);
        let ad = d.upload(to::<T>(&a)).await.unwrap();
        let (q, r) = d.qr(&ad, m, n).await.unwrap();
        let (q, r) = (back(d, &q).await, back(d, &r).await);
        for (i, v) in r.iter().enumerate() {
            if i % n > i / n {
                assert_eq!(*v, 0.0, "R below the diagonal at {i}");
            }
        }
        let at: Vec<f64> = to::<T>(&a).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(&mul(&q, &r, m, n, n, false), &at);
        assert!(e < tol::<T>(), "{} QR {m}×{n}: Q·R vs A {e:e}", T::NAME);
        let o = orthonormality(&q, m, n);
        assert!(o < tol::<T>(), "{} QR {m}×{n}: QᵀQ vs I {o:e}", T::NAME);
        assert_eq!(back(d, &ad).await, at, "A is left intact");
    }
}

async fn qr(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-qr");
    let d = Device::open(&sys, config).await.unwrap();
    qr_typed::<f32>(&d).await;
    qr_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn svd_typed<T: SolverScalar>(d: &Device) {
    for (m, n) in [(1, 1), (40, 17), (64, 64), (200, 3)] {
        let a = random(m, n);
        let ad = d.upload(to::<T>(&a)).await.unwrap();
        let out = d.svd(&ad, m, n).await.unwrap();
        let (u, s, vt) = (back(d, &out.u).await, back(d, &out.s).await, back(d, &out.vt).await);
        assert!(s.windows(2).all(|w| w[0] >= w[1]), "descending: {s:?}");
        assert!(s.iter().all(|v| *v >= 0.0));
        let us: Vec<f64> = (0..m * n).map(|i| u[i] * s[i / m]).collect();
        let at: Vec<f64> = to::<T>(&a).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(&mul(&us, &vt, m, n, n, false), &at);
        assert!(e < tol::<T>(), "{} SVD {m}×{n}: U·S·Vᵀ vs A {e:e}", T::NAME);
        assert!(orthonormality(&u, m, n) < tol::<T>(), "UᵀU");
        // Vᵀ's rows are orthonormal: (Vᵀ)ᵀ is V, whose columns are.
        let v: Vec<f64> = (0..n * n).map(|i| vt[(i % n) * n + i / n]).collect();
        assert!(orthonormality(&v, n, n) < tol::<T>(), "VᵀV");
        assert_eq!(back(d, &ad).await, at, "A is left intact");
    }
}

async fn svd(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-svd");
    let d = Device::open(&sys, config).await.unwrap();
    svd_typed::<f32>(&d).await;
    svd_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn eigh_typed<T: SolverScalar>(d: &Device) {
    for n in [1, 33, 100] {
        let r = rand_vec(n * n);
        // Symmetric from the lower triangle; the upper triangle gets unrelated noise,
        // which the solver must not read.
        let sym: Vec<f64> = (0..n * n)
            .map(|i| {
                let (row, col) = (i % n, i / n);
                if row >= col {
                    r[i]
                } else {
                    r[row * n + col]
                }
            })
            .collect();
        let noise = rand_vec(n * n);
        let given: Vec<f64> = (0..n * n)
            .map(|i| if i % n < i / n { noise[i] } else { sym[i] })
            .collect();
        let ad = d.upload(to::<T>(&given)).await.unwrap();
        let w = d.eigh(&ad, n).await.unwrap();
        let (v, w) = (back(d, &ad).await, back(d, &w).await);
        assert!(w.windows(2).all(|p| p[0] <= p[1]), "ascending");
        let symt: Vec<f64> = to::<T>(&sym).iter().map(|x| x.to_f64()).collect();
        let av = mul(&symt, &v, n, n, n, false);
        let vw: Vec<f64> = (0..n * n).map(|i| v[i] * w[i / n]).collect();
        let e = rel_err(&av, &vw);
        assert!(e < tol::<T>() * 5.0, "{} eigh {n}: A·V vs V·Λ {e:e}", T::NAME);
        assert!(orthonormality(&v, n, n) < tol::<T>(), "VᵀV");
    }
}

/// `Eigh::upper()` reads the upper triangle (the lower holds noise); values-only modes
/// (`Eigh::values_only()`, `svd_values`) give the same values as the full routines.
async fn options_typed<T: SolverScalar>(d: &Device) {
    let n = 33;
    let r = rand_vec(n * n);
    let sym: Vec<f64> = (0..n * n)
        .map(|i| {
            let (row, col) = (i % n, i / n);
            r[row.max(col) * n + row.min(col)]
        })
        .collect();
    let noise = rand_vec(n * n);
    let upper_given: Vec<f64> = (0..n * n)
        .map(|i| if i % n > i / n { noise[i] } else { sym[i] })
        .collect();
    let symt: Vec<f64> = to::<T>(&sym).iter().map(|x| x.to_f64()).collect();
    let a = d.upload(to::<T>(&upper_given)).await.unwrap();
    let w = d.alloc::<T>(n).await.unwrap();
    d.eigh_into(&a, &w, n, Eigh::default().upper()).await.unwrap();
    let (v, wv) = (back(d, &a).await, back(d, &w).await);
    let av = mul(&symt, &v, n, n, n, false);
    let vw: Vec<f64> = (0..n * n).map(|i| v[i] * wv[i / n]).collect();
    let e = rel_err(&av, &vw);
    assert!(e < tol::<T>() * 5.0, "{} eigh (upper) {n}: A·V vs V·Λ {e:e}", T::NAME);
    for how in [Eigh::values_only().upper(), Eigh::values_only()] {
        let given = if how.triangle == Triangle::Upper {
            &upper_given
        } else {
            &sym
        };
        let a = d.upload(to::<T>(given)).await.unwrap();
        d.eigh_into(&a, &w, n, how).await.unwrap();
        let e = rel_err(&back(d, &w).await, &wv);
        assert!(
            e < tol::<T>() * 5.0,
            "{} eigenvalues only ({how:?}) vs with vectors: {e:e}",
            T::NAME
        );
    }
    for (m, k) in [(40, 17), (9, 9)] {
        let a = d.upload(to::<T>(&random(m, k))).await.unwrap();
        let full = d.svd(&a, m, k).await.unwrap();
        let s = d.alloc::<T>(k).await.unwrap();
        d.svd_values(&a, &s, m, k).await.unwrap();
        let e = rel_err(&back(d, &s).await, &back(d, &full.s).await);
        assert!(
            e < tol::<T>(),
            "{} singular values only {m}×{k} vs the full SVD: {e:e}",
            T::NAME
        );
    }
    let s = d.alloc::<T>(8).await.unwrap();
    let wide = d.upload(to::<T>(&random(4, 8))).await.unwrap();
    assert!(matches!(
        d.svd_values(&wide, &s, 4, 8).await,
        Err(GpuError::InvalidArgument(_))
    ));
}

/// `cholesky_batched` and `lu_factor_batched` over many small matrices: each matrix's
/// factors rebuild it (L·Lᵀ = A; solves through its LU window and pivot window leave a
/// small residual); a failing matrix is named and the others still factored.
async fn batched_typed<T: SolverScalar>(d: &Device) {
    let (n, count) = (12, 40);
    let spds: Vec<Vec<f64>> = (0..count).map(|_| spd(n)).collect();
    let mut flat: Vec<f64> = spds.concat();
    let a = d.upload(to::<T>(&flat)).await.unwrap();
    d.cholesky_batched(&a, n, count).await.unwrap();
    let l_all = back(d, &a).await;
    for (k, want) in spds.iter().enumerate() {
        let l: Vec<f64> = (0..n * n)
            .map(|i| if i % n >= i / n { l_all[k * n * n + i] } else { 0.0 })
            .collect();
        let llt = {
            let mut c = vec![0.0; n * n];
            gemm_ref(false, true, n, n, n, 1.0, &l, n, &l, n, 0.0, &mut c, n);
            c
        };
        let wt: Vec<f64> = to::<T>(want).iter().map(|x| x.to_f64()).collect();
        let e = rel_err(&llt, &wt);
        assert!(
            e < tol::<T>(),
            "{} batched Cholesky matrix {k}: L·Lᵀ vs A {e:e}",
            T::NAME
        );
    }
    // Matrix 7 not positive definite: named; the others factored.
    for v in &mut flat[7 * n * n..8 * n * n] {
        *v = -v.abs();
    }
    let a = d.upload(to::<T>(&flat)).await.unwrap();
    match d.cholesky_batched(&a, n, count).await {
        Err(GpuError::Numerical { op, issue, .. }) => {
            assert!(op.contains("matrix 7"), "{op}");
            assert_eq!(issue, NumericalIssue::NotPositiveDefinite);
        }
        other => panic!("{} batched Cholesky with a bad matrix: {other:?}", T::NAME),
    }
    let after = back(d, &a).await;
    assert_eq!(after[..n * n], l_all[..n * n], "matrix 0 was still factored");

    let mats: Vec<f64> = random(n * n, count);
    let ad = d.upload(to::<T>(&mats)).await.unwrap();
    let piv = d.alloc::<i32>(n * count).await.unwrap();
    d.lu_factor_batched(&ad, &piv, n, count).await.unwrap();
    for k in [0, 1, 17, count - 1] {
        let b = random(n, 1);
        let bd = d.upload(to::<T>(&b)).await.unwrap();
        let (lu_k, piv_k) = (
            ad.view(k * n * n..(k + 1) * n * n).unwrap(),
            piv.view(k * n..(k + 1) * n).unwrap(),
        );
        d.lu_solve(&lu_k, &piv_k, &bd, n, 1).await.unwrap();
        let x = back(d, &bd).await;
        let ak: Vec<f64> = to::<T>(&mats[k * n * n..(k + 1) * n * n])
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let bt: Vec<f64> = to::<T>(&b).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(&mul(&ak, &x, n, n, 1, false), &bt);
        assert!(
            e < tol::<T>() * 50.0,
            "{} batched LU matrix {k}: A·x vs b {e:e}",
            T::NAME
        );
    }
    let mut singular = mats.clone();
    for v in &mut singular[3 * n * n + 2 * n..3 * n * n + 3 * n] {
        *v = 0.0; // column 2 of matrix 3
    }
    let sd = d.upload(to::<T>(&singular)).await.unwrap();
    match d.lu_factor_batched(&sd, &piv, n, count).await {
        Err(GpuError::Numerical { op, issue, info }) => {
            assert!(op.contains("matrix 3"), "{op}");
            assert_eq!((issue, info), (NumericalIssue::Singular, 3));
        }
        other => panic!("{} batched LU with a singular matrix: {other:?}", T::NAME),
    }
    let inv =
        |r: Result<(), GpuError>, what: &str| assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    inv(d.cholesky_batched(&a, n, 0).await, "count 0");
    inv(d.cholesky_batched(&a, n, count + 1).await, "more matrices than A holds");
    let short = d.alloc::<i32>(n * count - 1).await.unwrap();
    inv(d.lu_factor_batched(&ad, &short, n, count).await, "too few pivots");

    // Batched SVD, square, tall and wide: U·S·Vᵀ rebuilds each matrix, U (m×m) and V
    // (n×n) orthonormal, values descending and equal to the values-only call's; A left
    // intact.
    for (m, nn) in [(8usize, 8usize), (20, 7), (5, 12), (32, 1)] {
        svd_batched_checked::<T>(d, m, nn, 30).await;
    }
    let (k, count) = (8, 30);
    let a = d.upload(to::<T>(&random(k * k, count))).await.unwrap();
    let (s, u) = (
        d.alloc::<T>(k * count).await.unwrap(),
        d.alloc::<T>(k * k * count).await.unwrap(),
    );
    let big = d.alloc::<T>(33 * 33).await.unwrap();
    let sb = d.alloc::<T>(33).await.unwrap();
    inv(d.svd_values_batched(&big, &sb, 33, 33, 1).await, "order 33");
    inv(d.svd_values_batched(&big, &sb, 2, 33, 1).await, "33 columns");
    // Non-square batches: tall and wide, each matrix's values as the one-matrix
    // `svd_values` gives them (a wide matrix's through its transpose).
    for (m, nn) in [(20usize, 7usize), (5, 12)] {
        let cnt = 9;
        let mats: Vec<f64> = random(m * nn, cnt);
        let a = d.upload(to::<T>(&mats)).await.unwrap();
        let kk = m.min(nn);
        let s = d.alloc::<T>(kk * cnt).await.unwrap();
        d.svd_values_batched(&a, &s, m, nn, cnt).await.unwrap();
        let got = back(d, &s).await;
        for c in [0, 4, cnt - 1] {
            let mat = &mats[c * m * nn..(c + 1) * m * nn];
            let (tall, rows, cols): (Vec<f64>, usize, usize) = if m >= nn {
                (mat.to_vec(), m, nn)
            } else {
                ((0..m * nn).map(|i| mat[(i % nn) * m + i / nn]).collect(), nn, m)
            };
            let ga = d.upload(to::<T>(&tall)).await.unwrap();
            let one = d.alloc::<T>(kk).await.unwrap();
            d.svd_values(&ga, &one, rows, cols).await.unwrap();
            let want = back(d, &one).await;
            let e = rel_err(&got[c * kk..(c + 1) * kk], &want);
            assert!(
                e < tol::<T>() * 5.0,
                "{} {m}×{nn} batched values, matrix {c}: {e:e}",
                T::NAME
            );
        }
    }
    inv(
        d.svd_batched(&a, &s, &u, &u, k, k, count).await,
        "U and V the same buffer",
    );
    let (tall_u, v) = (
        d.alloc::<T>(20 * 20 * 3 - 1).await.unwrap(),
        d.alloc::<T>(7 * 7 * 3).await.unwrap(),
    );
    let (ta, ts) = (
        d.alloc::<T>(20 * 7 * 3).await.unwrap(),
        d.alloc::<T>(7 * 3).await.unwrap(),
    );
    inv(
        d.svd_batched(&ta, &ts, &tall_u, &v, 20, 7, 3).await,
        "U shorter than m·m per matrix",
    );
}

/// `svd_batched` of `count` random m×n matrices, each checked in float64.
async fn svd_batched_checked<T: SolverScalar>(d: &Device, m: usize, n: usize, count: usize) {
    let k = m.min(n);
    let mats: Vec<f64> = random(m * n, count);
    let a = d.upload(to::<T>(&mats)).await.unwrap();
    let (s, u, v) = (
        d.alloc::<T>(k * count).await.unwrap(),
        d.alloc::<T>(m * m * count).await.unwrap(),
        d.alloc::<T>(n * n * count).await.unwrap(),
    );
    d.svd_batched(&a, &s, &u, &v, m, n, count).await.unwrap();
    let (sv, uv, vv) = (back(d, &s).await, back(d, &u).await, back(d, &v).await);
    let what = format!("{} {m}×{n} batched SVD", T::NAME);
    for c in [0, count / 2, count - 1] {
        let (um, vm, sm) = (
            &uv[c * m * m..(c + 1) * m * m],
            &vv[c * n * n..(c + 1) * n * n],
            &sv[c * k..(c + 1) * k],
        );
        assert!(sm.windows(2).all(|w| w[0] >= w[1]), "{what}: descending {sm:?}");
        // U·S (m×n: U's first k columns scaled, the rest zero) · Vᵀ.
        let us: Vec<f64> = (0..m * n)
            .map(|i| if i / m < k { um[i] * sm[i / m] } else { 0.0 })
            .collect();
        let vt: Vec<f64> = (0..n * n).map(|i| vm[(i % n) * n + i / n]).collect();
        let want: Vec<f64> = to::<T>(&mats[c * m * n..(c + 1) * m * n])
            .iter()
            .map(|x| x.to_f64())
            .collect();
        let e = rel_err(&mul(&us, &vt, m, n, n, false), &want);
        assert!(e < tol::<T>() * 5.0, "{what}, matrix {c}: U·S·Vᵀ vs A {e:e}");
        assert!(orthonormality(um, m, m) < tol::<T>() * 5.0, "{what}: UᵀU");
        assert!(orthonormality(vm, n, n) < tol::<T>() * 5.0, "{what}: VᵀV");
    }
    let s2 = d.alloc::<T>(k * count).await.unwrap();
    d.svd_values_batched(&a, &s2, m, n, count).await.unwrap();
    let e = rel_err(&back(d, &s2).await, &sv);
    assert!(e < tol::<T>(), "{what}: values only vs with vectors {e:e}");
    assert_eq!(
        back(d, &a).await,
        to::<T>(&mats).iter().map(|x| x.to_f64()).collect::<Vec<_>>(),
        "{what}: A intact"
    );
}

async fn batched(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-batched");
    let d = Device::open(&sys, config).await.unwrap();
    batched_typed::<f32>(&d).await;
    batched_typed::<f64>(&d).await;
    sys.shutdown().await;
}

/// `lu_solve_batched` and `cholesky_solve_batched` over many small systems: every
/// system's residual is small (A·X = B in float64 from the factored matrices as T);
/// pivots of no batched LU, short buffers and B aliasing the factors are typed errors.
async fn batched_solves_typed<T: SolverScalar>(d: &Device) {
    let (n, nrhs, count) = (10, 3, 50);
    // Random, plus n on the diagonal: well conditioned, so the residual measures the
    // solve and not the luck of the draw.
    let mats: Vec<f64> = random(n * n, count)
        .iter()
        .enumerate()
        .map(|(i, v)| if (i % (n * n)) % (n + 1) == 0 { v + n as f64 } else { *v })
        .collect();
    let rhs: Vec<f64> = random(n * nrhs, count);
    let lu = d.upload(to::<T>(&mats)).await.unwrap();
    let piv = d.alloc::<i32>(n * count).await.unwrap();
    d.lu_factor_batched(&lu, &piv, n, count).await.unwrap();
    let b = d.upload(to::<T>(&rhs)).await.unwrap();
    d.lu_solve_batched(&lu, &piv, &b, n, nrhs, count).await.unwrap();
    let x = back(d, &b).await;
    let (mats_t, rhs_t) = (
        to::<T>(&mats).iter().map(|v| v.to_f64()).collect::<Vec<_>>(),
        to::<T>(&rhs).iter().map(|v| v.to_f64()).collect::<Vec<_>>(),
    );
    for k in 0..count {
        let (ak, xk, bk) = (
            &mats_t[k * n * n..(k + 1) * n * n],
            &x[k * n * nrhs..(k + 1) * n * nrhs],
            &rhs_t[k * n * nrhs..(k + 1) * n * nrhs],
        );
        let e = rel_err(&mul(ak, xk, n, n, nrhs, false), bk);
        assert!(
            e < tol::<T>() * 50.0,
            "{} lu_solve_batched system {k}: A·X vs B {e:e}",
            T::NAME
        );
    }
    let spds: Vec<Vec<f64>> = (0..count).map(|_| spd(n)).collect();
    let l = d.upload(to::<T>(&spds.concat())).await.unwrap();
    d.cholesky_batched(&l, n, count).await.unwrap();
    let one = random(n, count);
    let b1 = d.upload(to::<T>(&one)).await.unwrap();
    d.cholesky_solve_batched(&l, &b1, n, count).await.unwrap();
    let x1 = back(d, &b1).await;
    let one_t: Vec<f64> = to::<T>(&one).iter().map(|v| v.to_f64()).collect();
    for (k, a) in spds.iter().enumerate() {
        let at: Vec<f64> = to::<T>(a).iter().map(|v| v.to_f64()).collect();
        let e = rel_err(
            &mul(&at, &x1[k * n..(k + 1) * n], n, n, 1, false),
            &one_t[k * n..(k + 1) * n],
        );
        assert!(
            e < tol::<T>() * 50.0,
            "{} cholesky_solve_batched system {k}: A·x vs b {e:e}",
            T::NAME
        );
    }
    let inv =
        |r: Result<(), GpuError>, what: &str| assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    let fresh = d.upload(vec![1i32; n * count]).await.unwrap();
    let fresh_lu = d.upload(to::<T>(&mats)).await.unwrap();
    if d.config().backend == atomr_accel_cuda::device::BackendChoice::Cuda {
        // cuBLAS trusts pivots: ones that no batched LU of this device wrote are refused.
        inv(
            d.lu_solve_batched(&fresh_lu, &fresh, &b, n, nrhs, count).await,
            "pivots of no LU",
        );
        // Views of part of the batch carry its pivots: matrices 10..20 solve, and match
        // what the whole batch's solve gave.
        let part = |r: &GpuRef<T>, per: usize| r.view(10 * per..20 * per).unwrap();
        let bp = d.upload(to::<T>(&rhs[10 * n * nrhs..20 * n * nrhs])).await.unwrap();
        d.lu_solve_batched(&part(&lu, n * n), &piv.view(10 * n..20 * n).unwrap(), &bp, n, nrhs, 10)
            .await
            .unwrap();
        let xp = back(d, &bp).await;
        assert_eq!(xp, x[10 * n * nrhs..20 * n * nrhs], "a view of the batch solves alike");
        // A view not on a matrix's boundary names no factorization's pivots.
        inv(
            d.lu_solve_batched(
                &part(&lu, n * n),
                &piv.view(10 * n + 1..20 * n + 1).unwrap(),
                &bp,
                n,
                nrhs,
                10,
            )
            .await,
            "pivots off a matrix boundary",
        );
        // Matrix 3's pivots overwritten by an order-5 LU: the batch no longer solves as a
        // whole, the matrices after the overwrite still do.
        let small = d.upload(to::<T>(&spd(5))).await.unwrap();
        d.lu_factor_into(&small, &piv.view(3 * n..3 * n + 5).unwrap(), 5)
            .await
            .unwrap();
        inv(
            d.lu_solve_batched(&lu, &piv, &b, n, nrhs, count).await,
            "pivots partly overwritten",
        );
        d.lu_solve_batched(&part(&lu, n * n), &piv.view(10 * n..20 * n).unwrap(), &bp, n, nrhs, 10)
            .await
            .unwrap();
    }
    let zero = d.alloc::<i32>(n * count).await.unwrap();
    let bad_piv = d.lu_solve_batched(&fresh_lu, &zero, &b, n, nrhs, count).await;
    inv(bad_piv, "pivots out of range");
    let short = d.alloc::<T>(n * nrhs * count - 1).await.unwrap();
    inv(
        d.lu_solve_batched(&lu, &piv, &short, n, nrhs, count).await,
        "B too short",
    );
    inv(d.cholesky_solve_batched(&l, &l, n, count).await, "B is L");
    inv(d.cholesky_solve_batched(&l, &b1, n, 0).await, "count 0");
}

async fn batched_solves(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-batched-solves");
    let d = Device::open(&sys, config).await.unwrap();
    batched_solves_typed::<f32>(&d).await;
    batched_solves_typed::<f64>(&d).await;
    sys.shutdown().await;
}

/// A factorization and the solve of its pivots from two different threads (on a GPU,
/// each thread's calls run in place on a slot of its own, each with its own solver): the
/// pivots are known to every solver of the device, single and batched alike.
async fn pivots_across_threads(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-pivots-threads");
    let d = Device::open(&sys, config).await.unwrap();
    let (n, count) = (12, 40);
    let mats: Vec<f64> = random(n * n, count)
        .iter()
        .enumerate()
        .map(|(i, v)| if (i % (n * n)) % (n + 1) == 0 { v + n as f64 } else { *v })
        .collect();
    let rhs = random(n, count);
    let on_thread = |work: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>| {
        std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(work)
            })
            .join()
            .unwrap()
        })
    };
    let lu = d.upload(to::<f64>(&mats)).await.unwrap();
    let piv = d.alloc::<i32>(n * count).await.unwrap();
    let b = d.upload(rhs.clone()).await.unwrap();
    let one = d.upload(mats[..n * n].to_vec()).await.unwrap();
    let one_b = d.upload(rhs[..n].to_vec()).await.unwrap();
    let (dd, lu2, piv2, one2) = (d.clone(), lu.clone(), piv.clone(), one.clone());
    let one_piv = std::sync::Arc::new(std::sync::Mutex::new(None));
    let keep = one_piv.clone();
    on_thread(Box::pin(async move {
        dd.lu_factor_batched(&lu2, &piv2, n, count).await.unwrap();
        *keep.lock().unwrap() = Some(dd.lu_factor(&one2, n).await.unwrap());
    }));
    let (dd, lu2, piv2, b2, one2, ob2) = (
        d.clone(),
        lu.clone(),
        piv.clone(),
        b.clone(),
        one.clone(),
        one_b.clone(),
    );
    let op = one_piv.lock().unwrap().take().unwrap();
    on_thread(Box::pin(async move {
        dd.lu_solve_batched(&lu2, &piv2, &b2, n, 1, count).await.unwrap();
        dd.lu_solve(&one2, &op, &ob2, n, 1).await.unwrap();
    }));
    let (x, x1) = (back(&d, &b).await, back(&d, &one_b).await);
    for k in 0..count {
        let ak = &mats[k * n * n..(k + 1) * n * n];
        let e = rel_err(
            &mul(ak, &x[k * n..(k + 1) * n], n, n, 1, false),
            &rhs[k * n..(k + 1) * n],
        );
        assert!(e < 1e-10, "system {k} solved on another thread: {e:e}");
    }
    let e = rel_err(&mul(&mats[..n * n], &x1, n, n, 1, false), &rhs[..n]);
    assert!(e < 1e-10, "the single solve on another thread: {e:e}");
    sys.shutdown().await;
}

async fn options(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-options");
    let d = Device::open(&sys, config).await.unwrap();
    options_typed::<f32>(&d).await;
    options_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn eigh(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-eigh");
    let d = Device::open(&sys, config).await.unwrap();
    eigh_typed::<f32>(&d).await;
    eigh_typed::<f64>(&d).await;
    sys.shutdown().await;
}

async fn numerical(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-num");
    let d = Device::open(&sys, config).await.unwrap();
    let n = 24;
    // A zero column j: elimination keeps it exactly zero, so pivot j + 1 is zero.
    let j = 9;
    let mut a = rand_vec(n * n);
    a[j * n..(j + 1) * n].iter_mut().for_each(|v| *v = 0.0);
    let ad = d.upload(to::<f64>(&a)).await.unwrap();
    match d.lu_factor(&ad, n).await {
        Err(GpuError::Numerical { issue, info, .. }) => {
            assert_eq!(issue, NumericalIssue::Singular);
            assert_eq!(info, j as i32 + 1);
        }
        other => panic!("a singular matrix gave {other:?}"),
    }
    // SPD except for a negative diagonal entry at k: the leading minor of order k + 1
    // fails first.
    let k = 15;
    let mut s = identity(n);
    s[k * n + k] = -2.0;
    let sd = d.upload(to::<f32>(&s)).await.unwrap();
    match d.cholesky(&sd, n).await {
        Err(GpuError::Numerical { issue, info, .. }) => {
            assert_eq!(issue, NumericalIssue::NotPositiveDefinite);
            assert_eq!(info, k as i32 + 1);
        }
        other => panic!("an indefinite matrix gave {other:?}"),
    }
    // Still serving.
    let good = d.upload(to::<f32>(&spd(n))).await.unwrap();
    d.cholesky(&good, n).await.unwrap();
    sys.shutdown().await;
}

/// Many factorizations in flight at once, failing and succeeding in turn: each reply
/// carries its own call's `info` (the GPU writes each call's verdict into a cell of its
/// own, reused once that call is answered), never a neighbour's or a stale one.
async fn info_in_flight(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-info");
    let d = Device::open(&sys, config).await.unwrap();
    let n = 20;
    for round in 0..3 {
        let mut calls = Vec::new();
        for c in 0..16 {
            // Odd calls: SPD but for a negative diagonal entry at k, so potrf's info is
            // k + 1 (a different k per call); even calls: SPD, info 0.
            let k = (c + round * 5) % n;
            let mut a = spd(n);
            if c % 2 == 1 {
                a[k * n + k] = -1e3;
            }
            let a = d.upload(to::<f64>(&a)).await.unwrap();
            let d = d.clone();
            calls.push(async move { (c, k, d.cholesky(&a, n).await) });
        }
        for (c, k, r) in futures::future::join_all(calls).await {
            match (c % 2, r) {
                (0, Ok(())) => {}
                (1, Err(GpuError::Numerical { issue, info, .. })) => {
                    assert_eq!(issue, NumericalIssue::NotPositiveDefinite);
                    assert_eq!(info, k as i32 + 1, "call {c} of round {round}");
                }
                (_, other) => panic!("call {c} of round {round} gave {other:?}"),
            }
        }
    }
    sys.shutdown().await;
}

async fn bad_input(config: DeviceConfig) {
    let sys = ActorSystem::new("solver-bad");
    let d = Device::open(&sys, config).await.unwrap();
    let inv = |r: Result<(), GpuError>, what: &str| match r {
        Err(GpuError::InvalidArgument(_)) => {}
        other => panic!("{what}: {other:?}"),
    };
    let a = d.upload(to::<f32>(&rand_vec(64))).await.unwrap();
    let b = d.upload(to::<f32>(&rand_vec(16))).await.unwrap();
    let piv = d.alloc::<i32>(8).await.unwrap();
    inv(d.lu_factor_into(&a, &piv, 0).await, "n = 0");
    inv(d.lu_factor_into(&a, &piv, 9).await, "a 9×9 in 64 elements");
    inv(
        d.lu_factor_into(&a, &d.alloc::<i32>(4).await.unwrap(), 8).await,
        "4 pivots for n = 8",
    );
    inv(d.lu_solve(&a, &piv, &b, 8, 3).await, "B of 8×3 in 16 elements");
    inv(d.lu_solve(&a, &piv, &a, 8, 1).await, "B is the factors");
    // Pivots lu_factor did not write: out of range on any backend (checked by value on
    // the CPU device, by provenance on a GPU, where cuSOLVER would trust them).
    let junk = d.upload(vec![9i32; 8]).await.unwrap();
    let b8 = d.upload(to::<f32>(&rand_vec(8))).await.unwrap();
    inv(d.lu_solve(&a, &junk, &b8, 8, 1).await, "pivots lu_factor did not write");
    inv(d.cholesky(&a, 1 << 20).await, "n² beyond the buffer");
    inv(d.cholesky_solve(&a, &b, 8, 0).await, "nrhs = 0");
    inv(d.qr(&a, 4, 8).await.map(|_| ()), "m < n");
    inv(d.qr_into(&a, &a, &b, 8, 4).await, "Q is A");
    inv(d.svd(&a, 2, 8).await.map(|_| ()), "SVD of a wide matrix");
    inv(d.eigh(&a, 0).await.map(|_| ()), "eigh of n = 0");
    inv(d.qr(&a, usize::MAX, 2).await.map(|_| ()), "an overflowing shape");
    // A buffer of an earlier generation.
    d.rebuild().await.unwrap();
    match d.cholesky(&a, 8).await {
        Err(GpuError::Stale { .. }) => {}
        other => panic!("a stale buffer gave {other:?}"),
    }
    // A device configured without the solver.
    let mut cfg = DeviceConfig {
        device_id: 1,
        ..DeviceConfig::cpu()
    };
    cfg.libraries.solver = false;
    let off = Device::open(&sys, cfg).await.unwrap();
    let x = off.upload(to::<f64>(&identity(4))).await.unwrap();
    assert!(matches!(off.cholesky(&x, 4).await, Err(GpuError::Unsupported(_))));
    // Still serving after all of it.
    let good = d.upload(to::<f64>(&spd(8))).await.unwrap();
    d.cholesky(&good, 8).await.unwrap();
    sys.shutdown().await;
}

/// While a long factorization runs on the GPU, the solver actor keeps taking requests:
/// a bad request sent after it is answered before it finishes (with a blocking wait on
/// the actor's thread, that answer would come after the factorization).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn the_solver_answers_while_a_factorization_runs() {
    let sys = ActorSystem::new("solver-free");
    // One solver actor, so the bad request meets the actor that runs the factorization
    // (with a pool it would go to another member).
    let d = Device::open(&sys, DeviceConfig::cuda(0).with_library_pool(1))
        .await
        .unwrap();
    let n = 8192;
    let a = d.upload(rand_vec(n * n)).await.unwrap();
    let big = {
        let (d, a) = (d.clone(), a.clone());
        tokio::spawn(async move { d.lu_factor(&a, n).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let small = d.upload(rand_vec(4)).await.unwrap();
    let e = d.cholesky(&small, 0).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e}");
    assert!(!big.is_finished(), "the bad request waited for the factorization");
    big.await.unwrap().unwrap();
    sys.shutdown().await;
}

/// Solves over the same two buffers in opposite argument orders, concurrently, through
/// the device's pool of solver actors: each call locks its buffers in buffer-id order,
/// so none waits on another forever (argument-order locking could deadlock here).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn solves_over_the_same_buffers_in_opposite_orders_do_not_deadlock() {
    let sys = ActorSystem::new("solver-order");
    let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let n = 96;
    let x = d.upload(spd(n)).await.unwrap();
    let y = d.upload(spd(n)).await.unwrap();
    let mut tasks = vec![];
    for t in 0..4 {
        let (d, x, y) = (d.clone(), x.clone(), y.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let (l, b) = if t % 2 == 0 { (&x, &y) } else { (&y, &x) };
                // The values are whatever the other tasks left: only the locking matters.
                d.cholesky_solve(l, b, n, n).await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(std::time::Duration::from_secs(120), t)
            .await
            .expect("no deadlock between solves locking the same buffers")
            .unwrap();
    }
    sys.shutdown().await;
}
