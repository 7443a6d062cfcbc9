//! Sparse matrices (CSR and COO): SpMV and SpMM in both orientations, dense ↔ CSR, CSR ↔ COO,
//! coordinates with duplicates, against float64 references on fresh random matrices; bad input as
//! typed errors. The CPU device runs in CI (sprs); the GPU cases (cuSPARSE) on the H200.

mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::{SparseMatrix, SparseOp, SparseScalar};
use atomr_accel_cuda::{Device, DeviceConfig, GpuError};
use common::{gemm_ref, rand_vec, rel_err};

/// A random `rows × cols` matrix as coordinates (about `density` of it stored, with
/// some duplicates).
fn random_coo(rows: usize, cols: usize, density: f64) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let n = ((rows * cols) as f64 * density).ceil() as usize;
    let pick = rand_vec(3 * n);
    let (mut ri, mut ci, mut v) = (vec![], vec![], vec![]);
    for k in 0..n {
        let r = (((pick[3 * k] + 1.0) / 2.0 * rows as f64) as usize).min(rows - 1);
        let c = (((pick[3 * k + 1] + 1.0) / 2.0 * cols as f64) as usize).min(cols - 1);
        let value = pick[3 * k + 2];
        ri.push(r as i32);
        ci.push(c as i32);
        v.push(value);
        if k % 7 == 0 {
            // A duplicate of this element: summed.
            ri.push(r as i32);
            ci.push(c as i32);
            v.push(0.5);
        }
    }
    (ri, ci, v)
}

/// The dense column-major matrix of triplets of `T`, duplicates summed in float64 and
/// rounded once to `T` (as `upload_coo` stores them), in float64.
fn dense_of<T: SparseScalar>((rows, cols): (usize, usize), ri: &[i32], ci: &[i32], v: &[T]) -> Vec<f64> {
    let mut dense = vec![0.0; rows * cols];
    for ((&r, &c), x) in ri.iter().zip(ci).zip(v) {
        dense[c as usize * rows + r as usize] += x.to_f64();
    }
    dense.iter().map(|&x| T::from_f64(x).to_f64()).collect()
}

/// The first index where `got` and `want` differ, if any.
fn first_difference(got: &[f64], want: &[f64]) -> Option<(usize, f64, f64)> {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .enumerate()
        .find(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| (i, *g, *w))
}

fn cast<T: SparseScalar>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

fn wide<T: SparseScalar>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// Products and conversions of one element type against float64.
async fn check_products<T: SparseScalar>(dev: &Device, tol: f64) {
    let (rows, cols) = (173, 121);
    let (ri, ci, v) = random_coo(rows, cols, 0.06);
    let vt = cast::<T>(&v);
    let a = dev.upload_coo((rows, cols), &ri, &ci, &vt).await.unwrap();
    assert_eq!((a.rows(), a.cols()), (rows, cols));
    let dense_t = dense_of((rows, cols), &ri, &ci, &vt);
    let stored = dense_t.iter().filter(|&&x| x != 0.0).count();
    assert_eq!(a.nnz(), stored);
    // The COO form: one row index per element, in the CSR's order; back to CSR exactly.
    let coo = dev.csr_to_coo(&a).await.unwrap();
    assert_eq!((coo.rows(), coo.cols(), coo.nnz()), (rows, cols, stored));
    let host = dev.download_csr(&a).await.unwrap();
    let (cr, cc, cv) = dev.download_coo(&coo).await.unwrap();
    let want_rows: Vec<i32> = (0..rows)
        .flat_map(|r| std::iter::repeat_n(r as i32, (host.offsets[r + 1] - host.offsets[r]) as usize))
        .collect();
    assert_eq!(cr, want_rows, "csr_to_coo's row indices");
    assert_eq!(
        (cc, cv),
        (host.indices.clone(), host.values.clone()),
        "csr_to_coo's columns and values"
    );
    let round = dev.coo_to_csr(&coo).await.unwrap();
    assert_eq!(
        dev.download_csr(&round).await.unwrap(),
        host,
        "coo_to_csr of csr_to_coo"
    );
    for (form, m) in [("CSR", SparseMatrix::from(&a)), ("COO", SparseMatrix::from(&coo))] {
        check_forms(dev, (rows, cols), &m, &dense_t, tol, form).await;
    }
    // To dense and back: exact.
    let gd = dev.alloc::<T>(rows * cols).await.unwrap();
    dev.csr_to_dense(&a, &gd).await.unwrap();
    let back = dev.download(&gd).await.unwrap();
    assert_eq!(first_difference(&wide(&back), &dense_t), None, "csr_to_dense");
    dev.csr_to_dense(&coo, &gd).await.unwrap();
    assert_eq!(
        first_difference(&wide(&dev.download(&gd).await.unwrap()), &dense_t),
        None,
        "COO to dense"
    );
    let again = dev.dense_to_csr(&gd, rows, cols).await.unwrap();
    let (got, want) = (
        dev.download_csr(&again).await.unwrap(),
        dev.download_csr(&a).await.unwrap(),
    );
    let differs = |g: &[i32], w: &[i32]| (g.len(), w.len(), g.iter().zip(w).position(|(x, y)| x != y));
    assert!(
        got == want,
        "dense_to_csr of csr_to_dense is the matrix: nnz {} vs {}; offsets {:?}; indices {:?}; first values {:?} vs {:?}",
        got.values.len(),
        want.values.len(),
        differs(&got.offsets, &want.offsets),
        differs(&got.indices, &want.indices),
        &got.values[..got.values.len().min(4)],
        &want.values[..want.values.len().min(4)]
    );
    // An all-zero matrix has no stored elements: y = beta·y, in either form.
    let zeros = dev.alloc::<T>(6 * 4).await.unwrap();
    let z = dev.dense_to_csr(&zeros, 6, 4).await.unwrap();
    assert_eq!(z.nnz(), 0);
    let zc = dev.csr_to_coo(&z).await.unwrap();
    assert_eq!(zc.nnz(), 0);
    assert_eq!(dev.coo_to_csr(&zc).await.unwrap().nnz(), 0);
    for m in [SparseMatrix::from(&z), SparseMatrix::from(&zc)] {
        let (gx, gy) = (
            dev.upload(cast::<T>(&[1.0; 4])).await.unwrap(),
            dev.upload(cast::<T>(&[2.0; 6])).await.unwrap(),
        );
        dev.spmv(m, &gx, &gy, SparseOp::new().beta(T::from_f64(0.5)))
            .await
            .unwrap();
        assert_eq!(wide(&dev.download(&gy).await.unwrap()), vec![1.0; 6]);
    }
}

/// SpMV and SpMM of one form of the matrix, both ways, against float64.
async fn check_forms<T: SparseScalar>(
    dev: &Device,
    (rows, cols): (usize, usize),
    a: &SparseMatrix<T>,
    dense_t: &[f64],
    tol: f64,
    form: &str,
) {
    for transpose in [false, true] {
        let (inner, outer) = if transpose { (rows, cols) } else { (cols, rows) };
        let (x, y0) = (rand_vec(inner), rand_vec(outer));
        let (alpha, beta) = (1.25, -0.5);
        let (gx, gy) = (
            dev.upload(cast::<T>(&x)).await.unwrap(),
            dev.upload(cast::<T>(&y0)).await.unwrap(),
        );
        let how = SparseOp {
            alpha: T::from_f64(alpha),
            beta: T::from_f64(beta),
            transpose,
        };
        dev.spmv(a.clone(), &gx, &gy, how).await.unwrap();
        let (x_t, y_t) = (wide(&cast::<T>(&x)), wide(&cast::<T>(&y0)));
        let mut want = y_t.clone();
        gemm_ref(
            transpose, false, outer, 1, inner, alpha, dense_t, rows, &x_t, inner, beta, &mut want, outer,
        );
        let got = wide(&dev.download(&gy).await.unwrap());
        let e = rel_err(&got, &want);
        assert!(e < tol, "{form} spmv (transpose {transpose}) {}: rel err {e}", T::NAME);
        // SpMM over 5 columns.
        let n = 5;
        let (b, c0) = (rand_vec(inner * n), rand_vec(outer * n));
        let (gb, gc) = (
            dev.upload(cast::<T>(&b)).await.unwrap(),
            dev.upload(cast::<T>(&c0)).await.unwrap(),
        );
        dev.spmm(a.clone(), &gb, &gc, n, how).await.unwrap();
        let (b_t, mut want) = (wide(&cast::<T>(&b)), wide(&cast::<T>(&c0)));
        gemm_ref(
            transpose, false, outer, n, inner, alpha, dense_t, rows, &b_t, inner, beta, &mut want, outer,
        );
        let got = wide(&dev.download(&gc).await.unwrap());
        let e = rel_err(&got, &want);
        assert!(e < tol, "{form} spmm (transpose {transpose}) {}: rel err {e}", T::NAME);
    }
}
/// Each fault a typed error naming it; the device keeps serving.
async fn check_bad_input(dev: &Device) {
    let bad = |e: GpuError, arg: &str| match e {
        GpuError::InvalidArgument(i) => assert_eq!(i.arg.as_deref(), Some(arg), "{i}"),
        other => panic!("{arg}: {other:?}"),
    };
    // [[1, 0, 2], [0, 0, 3]]
    let e = dev
        .upload_csr(2, 3, &[0, 2], &[0, 2, 2], &[1.0f32, 2.0, 3.0])
        .await
        .unwrap_err();
    bad(e, "row_offsets");
    let e = dev
        .upload_csr(2, 3, &[0, 2, 3], &[0, 3, 2], &[1.0f32, 2.0, 3.0])
        .await
        .unwrap_err();
    bad(e, "col_indices");
    let e = dev
        .upload_csr(2, 3, &[0, 2, 3], &[2, 0, 2], &[1.0f32, 2.0, 3.0])
        .await
        .unwrap_err();
    bad(e, "col_indices");
    let e = dev
        .upload_csr(2, 3, &[0, 2, 3], &[0, 2, 2], &[1.0f32, 2.0])
        .await
        .unwrap_err();
    bad(e, "values");
    let e = dev
        .upload_coo((2, 3), &[0, 2], &[0, 1], &[1.0f32, 2.0])
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    let a = dev
        .upload_csr(2, 3, &[0, 2, 3], &[0, 2, 2], &[1.0f32, 2.0, 3.0])
        .await
        .unwrap();
    let (x, y) = (
        dev.upload(vec![1.0f32; 3]).await.unwrap(),
        dev.alloc::<f32>(2).await.unwrap(),
    );
    let e = dev.spmv(&a, &y, &x, SparseOp::new()).await.unwrap_err();
    bad(e, "x"); // 2 elements where A has 3 columns
    let e = dev.spmv(&a, &x, &x, SparseOp::new()).await.unwrap_err();
    bad(e, "y");
    let e = dev.spmv(&a, &x, a.values(), SparseOp::new()).await.unwrap_err();
    bad(e, "y");
    let e = dev.spmm(&a, &x, &y, 0, SparseOp::new()).await.unwrap_err();
    bad(e, "n");
    let e = dev.dense_to_csr(&x, 2, 2).await.unwrap_err();
    bad(e, "dense");
    // The COO form is checked alike: a short x, y one of its buffers.
    let coo = dev.csr_to_coo(&a).await.unwrap();
    let e = dev.spmv(&coo, &y, &x, SparseOp::new()).await.unwrap_err();
    bad(e, "x");
    let e = dev.spmv(&coo, &x, coo.values(), SparseOp::new()).await.unwrap_err();
    bad(e, "y");
    // Still serving.
    dev.spmv(&a, &x, &y, SparseOp::new()).await.unwrap();
    assert_eq!(dev.download(&y).await.unwrap(), vec![3.0, 3.0]);
}

async fn all(config: DeviceConfig) {
    let sys = ActorSystem::new("sparse");
    let dev = Device::open(&sys, config).await.unwrap();
    check_products::<f64>(&dev, 1e-12).await;
    check_products::<f32>(&dev, 1e-5).await;
    check_bad_input(&dev).await;
    sys.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cpu_sparse_products_and_conversions_match_float64() {
    all(DeviceConfig::cpu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gpu_sparse_products_and_conversions_match_float64() {
    all(DeviceConfig::cuda(0)).await;
}

/// The CSR form of a dense column-major matrix, built on the host: row by row, columns
/// in order, every element `!= 0` stored (a NaN is, −0 is not).
fn host_csr<T: SparseScalar>(dense: &[T], rows: usize, cols: usize) -> (Vec<i32>, Vec<i32>, Vec<T>) {
    let (mut offsets, mut indices, mut values) = (vec![0], vec![], vec![]);
    for r in 0..rows {
        for c in 0..cols {
            let v = dense[c * rows + r];
            if v.to_f64() != 0.0 {
                indices.push(c as i32);
                values.push(v);
            }
        }
        offsets.push(indices.len() as i32);
    }
    (offsets, indices, values)
}

/// `dense_to_csr` of tall, wide, square and single-element matrices (a wide one is
/// split into many runs of columns per row; up to 2^20 elements in one request, a larger
/// one in two), with empty and full rows, NaN, ±0 and ±∞, from a view into a larger
/// buffer: exactly the host's structure and values.
async fn dense_to_csr_shapes<T: SparseScalar>(dev: &Device) {
    for (rows, cols) in [
        (1, 1),
        (1, 5000),
        (3, 1000),
        (40, 700),
        (173, 121),
        (5000, 3),
        (3, 200_000),
        // Past 2^20 elements: the buffers wait for the count (a second request).
        (1030, 1024),
    ] {
        let n = rows * cols;
        let pick = rand_vec(n);
        let mut dense: Vec<T> = pick
            .iter()
            .map(|&x| T::from_f64(if x.abs() < 0.8 { 0.0 } else { x }))
            .collect();
        // Row 0 full, the last row empty (when there are two), and the odd values.
        for c in 0..cols {
            dense[c * rows] = T::from_f64(1.0 + c as f64);
            if rows > 1 {
                dense[c * rows + rows - 1] = T::from_f64(0.0);
            }
        }
        if n > 8 {
            dense[n / 2] = T::from_f64(f64::NAN);
            dense[n / 3] = T::from_f64(-0.0);
            dense[n / 5] = T::from_f64(f64::NEG_INFINITY);
        }
        let (offsets, indices, values) = host_csr(&dense, rows, cols);
        // The matrix sits 7 elements into its buffer.
        let mut padded = cast::<T>(&rand_vec(7));
        padded.extend(&dense);
        let g = dev.upload(padded).await.unwrap();
        let a = dev.dense_to_csr(&g.view(7..7 + n).unwrap(), rows, cols).await.unwrap();
        assert_eq!(
            (a.rows(), a.cols(), a.nnz()),
            (rows, cols, values.len()),
            "{rows}×{cols}"
        );
        let got = dev.download_csr(&a).await.unwrap();
        assert_eq!(got.offsets, offsets, "{rows}×{cols}: row offsets");
        assert_eq!(got.indices, indices, "{rows}×{cols}: column indices");
        let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got.values), bits(&values), "{rows}×{cols}: values");
    }
}

async fn dense_conversions(config: DeviceConfig) {
    let sys = ActorSystem::new("sparse-dense");
    let dev = Device::open(&sys, config).await.unwrap();
    dense_to_csr_shapes::<f64>(&dev).await;
    dense_to_csr_shapes::<f32>(&dev).await;
    sys.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cpu_dense_to_csr_of_every_shape() {
    dense_conversions(DeviceConfig::cpu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gpu_dense_to_csr_of_every_shape() {
    dense_conversions(DeviceConfig::cuda(0)).await;
}

/// An actor's own GPU has the sparse calls too (its handle, on its stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_gpu_multiplies_too() {
    let sys = ActorSystem::new("sparse-actor-gpu");
    let dev = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let gpu = dev.actor_gpu();
    let a = dev
        .upload_csr(2, 2, &[0, 1, 2], &[1, 0], &[3.0f32, -1.0])
        .await
        .unwrap();
    let x = dev.upload(vec![2.0f32, 5.0]).await.unwrap();
    let y = dev.alloc::<f32>(2).await.unwrap();
    gpu.spmv(&a, &x, &y, SparseOp::new().transposed()).await.unwrap();
    // Aᵀ = [[0, -1], [3, 0]]
    assert_eq!(dev.download(&y).await.unwrap(), vec![-5.0, 6.0]);
}

#[tokio::test]
async fn a_device_without_the_sparse_library_says_so() {
    let sys = ActorSystem::new("sparse-off");
    let mut config = DeviceConfig::cpu();
    config.libraries.sparse = false;
    let dev = Device::open(&sys, config).await.unwrap();
    let a = dev.upload_csr(1, 1, &[0, 1], &[0], &[2.0f64]).await.unwrap();
    let x = dev.upload(vec![1.0f64]).await.unwrap();
    let y = dev.alloc::<f64>(1).await.unwrap();
    let e = dev.spmv(&a, &x, &y, SparseOp::new()).await.unwrap_err();
    assert!(
        matches!(&e, GpuError::Unsupported(m) if m.contains("cuSPARSE")),
        "{e:?}"
    );
}

/// A Krylov basis in one buffer: column j + 1 = A · column j by SpMV between views of
/// it (CSR and COO, plain and transposed with alpha and beta), and an SpMM between two
/// panels of one buffer — against float64 and the same products on separate buffers;
/// the elements around the windows untouched; an output overlapping its input refused.
async fn one_buffer(config: DeviceConfig) {
    let sys = ActorSystem::new("sparse-one-buffer");
    let dev = Device::open(&sys, config).await.unwrap();
    let n = 97;
    let (ri, ci, v) = random_coo(n, n, 0.1);
    let a = dev.upload_coo((n, n), &ri, &ci, &v).await.unwrap();
    let coo = dev.csr_to_coo(&a).await.unwrap();
    let dense = dense_of((n, n), &ri, &ci, &v);
    // A·x or alpha·Aᵀ·x + beta·y in float64 (column-major dense).
    let product = |x: &[f64], y: &[f64], (alpha, beta, t): (f64, f64, bool)| -> Vec<f64> {
        (0..n)
            .map(|i| {
                let s: f64 = (0..n)
                    .map(|k| if t { dense[k + i * n] } else { dense[i + k * n] } * x[k])
                    .sum();
                alpha * s + beta * y[i]
            })
            .collect()
    };
    let k = 4;
    for (form, m) in [("CSR", SparseMatrix::from(&a)), ("COO", SparseMatrix::from(&coo))] {
        for (alpha, beta, t) in [(1.0, 0.0, false), (0.5, -2.0, true)] {
            let mut host = rand_vec((k + 1) * n + 2);
            let basis = dev.upload(host.clone()).await.unwrap();
            let col = |j: usize| basis.view(1 + j * n..1 + (j + 1) * n).unwrap();
            let mut how = SparseOp::new().alpha(alpha).beta(beta);
            if t {
                how = how.transposed();
            }
            for j in 0..k {
                dev.spmv(m.clone(), &col(j), &col(j + 1), how).await.unwrap();
                let (x, y) = (
                    host[1 + j * n..1 + (j + 1) * n].to_vec(),
                    &host[1 + (j + 1) * n..1 + (j + 2) * n],
                );
                let want = product(&x, y, (alpha, beta, t));
                host[1 + (j + 1) * n..1 + (j + 2) * n].copy_from_slice(&want);
            }
            let got = dev.download(&basis).await.unwrap();
            assert!(
                rel_err(&got, &host) < 1e-12,
                "{form} basis (transposed: {t}): {}",
                rel_err(&got, &host)
            );
            assert_eq!(
                (got[0], got[got.len() - 1]),
                (host[0], host[host.len() - 1]),
                "{form}: the ends untouched"
            );
            // The same product on separate buffers gives the same column.
            let (x, y) = (
                dev.upload(host[1..1 + n].to_vec()).await.unwrap(),
                dev.upload(got[1 + n..1 + 2 * n].to_vec()).await.unwrap(),
            );
            let again = dev.upload(got.clone()).await.unwrap();
            dev.spmv(m.clone(), &x, &y, how).await.unwrap();
            dev.spmv(
                m.clone(),
                &again.view(1..1 + n).unwrap(),
                &again.view(1 + n..1 + 2 * n).unwrap(),
                how,
            )
            .await
            .unwrap();
            assert!(
                rel_err(
                    &dev.download(&y).await.unwrap(),
                    &dev.download(&again.view(1 + n..1 + 2 * n).unwrap()).await.unwrap()
                ) < 1e-14,
                "{form}: views of one buffer vs separate buffers"
            );
        }
        // SpMM: B (n×3) and C (n×3) panels of one buffer.
        let cols = 3;
        let b = rand_vec(n * cols);
        let mut host = rand_vec(2 * n * cols + 5);
        host[..n * cols].copy_from_slice(&b);
        let buf = dev.upload(host.clone()).await.unwrap();
        let (bv, cv) = (
            buf.view(0..n * cols).unwrap(),
            buf.view(n * cols + 5..2 * n * cols + 5).unwrap(),
        );
        dev.spmm(m.clone(), &bv, &cv, cols, SparseOp::new()).await.unwrap();
        let got = dev.download(&buf).await.unwrap();
        let want: Vec<f64> = (0..cols)
            .flat_map(|c| product(&b[c * n..(c + 1) * n], &[0.0; 97], (1.0, 0.0, false)))
            .collect();
        assert!(rel_err(&got[n * cols + 5..], &want) < 1e-12, "{form} spmm on panels");
        assert_eq!(
            got[..n * cols + 5],
            host[..n * cols + 5],
            "{form}: B and the gap untouched"
        );
        // An output overlapping its input.
        let e = dev
            .spmv(
                m.clone(),
                &basis_view(&buf, 0, n),
                &basis_view(&buf, n - 1, n),
                SparseOp::new(),
            )
            .await
            .unwrap_err();
        match e {
            GpuError::InvalidArgument(i) => {
                assert_eq!(i.arg.as_deref(), Some("y"), "{i}");
                assert!(i.to_string().contains("overlapping views of one buffer"), "{i}");
            }
            other => panic!("{form}: overlapping y: {other:?}"),
        }
    }
    sys.shutdown().await;
}

fn basis_view(buf: &atomr_accel_cuda::GpuRef<f64>, at: usize, len: usize) -> atomr_accel_cuda::GpuRef<f64> {
    buf.view(at..at + len).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cpu_products_between_views_of_one_buffer() {
    one_buffer(DeviceConfig::cpu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gpu_products_between_views_of_one_buffer() {
    one_buffer(DeviceConfig::cuda(0)).await;
}
