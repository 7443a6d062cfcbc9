//! The CPU device's factorizations, through `nalgebra` in float64, written back in the
//! layouts cuSOLVER produces (column-major, LAPACK's pivots and `info`), so a program
//! reads the same results on either backend.
//!
//! Each function returns LAPACK's `info` (0: success) and touches only what cuSOLVER
//! would touch; the caller has validated every length.

use nalgebra::linalg::{Cholesky, LU, QR, SVD};
use nalgebra::{DMatrix, DVector, SymmetricEigen};

use crate::dtype::DTypeBase;

/// The leading `rows × cols` column-major matrix of `a` in float64.
fn load<T: DTypeBase>(a: &[T], rows: usize, cols: usize) -> DMatrix<f64> {
    DMatrix::from_iterator(rows, cols, a[..rows * cols].iter().map(|v| v.to_f64()))
}

/// Writes `m` column-major into `out`, for the entries `keep(row, col)` selects.
fn store<T: DTypeBase>(m: &DMatrix<f64>, out: &mut [T], keep: impl Fn(usize, usize) -> bool) {
    let rows = m.nrows();
    for c in 0..m.ncols() {
        for r in 0..rows {
            if keep(r, c) {
                out[c * rows + r] = T::from_f64(m[(r, c)]);
            }
        }
    }
}

/// LAPACK's 1-based sequential row swaps that produce the row order `perm` (`perm[k]`:
/// the original row that ends up at position `k`).
fn swaps_of(perm: &[usize]) -> Vec<i32> {
    let n = perm.len();
    let mut at: Vec<usize> = (0..n).collect(); // at[position] = original row there now
    let mut pos: Vec<usize> = (0..n).collect(); // pos[original row] = its position now
    (0..n)
        .map(|k| {
            let j = pos[perm[k]];
            at.swap(k, j);
            pos[at[k]] = k;
            pos[at[j]] = j;
            (j + 1) as i32
        })
        .collect()
}

/// `getrf`: `a` (n×n) becomes L (unit diagonal, not stored) and U; `pivots` LAPACK's.
pub(super) fn lu_factor<T: DTypeBase>(a: &mut [T], pivots: &mut [i32], n: usize) -> i32 {
    let lu = LU::new(load(a, n, n));
    let (l, u) = (lu.l(), lu.u());
    let packed = DMatrix::from_fn(n, n, |r, c| if r > c { l[(r, c)] } else { u[(r, c)] });
    store(&packed, a, |_, _| true);
    let mut order = DVector::from_iterator(n, (0..n).map(|i| i as f64));
    lu.p().permute_rows(&mut order);
    let perm: Vec<usize> = order.iter().map(|&v| v as usize).collect();
    pivots[..n].copy_from_slice(&swaps_of(&perm));
    (0..n).find(|&k| u[(k, k)] == 0.0).map_or(0, |k| k as i32 + 1)
}

/// `getrs`: `b` (n×nrhs) becomes the solution of `A·X = B` from `lu_factor`'s output.
pub(super) fn lu_solve<T: DTypeBase>(lu: &[T], pivots: &[i32], b: &mut [T], n: usize, nrhs: usize) {
    let f = load(lu, n, n);
    let mut x = load(b, n, nrhs);
    for (k, &p) in pivots[..n].iter().enumerate() {
        x.swap_rows(k, p as usize - 1);
    }
    let l = DMatrix::from_fn(n, n, |r, c| match r.cmp(&c) {
        std::cmp::Ordering::Greater => f[(r, c)],
        std::cmp::Ordering::Equal => 1.0,
        std::cmp::Ordering::Less => 0.0,
    });
    // A zero pivot gives infinities, as cuSOLVER's getrs does; the bool only says so.
    let _ = l.solve_lower_triangular_mut(&mut x);
    let _ = f.upper_triangle().solve_upper_triangular_mut(&mut x);
    store(&x, b, |_, _| true);
}

/// `potrf` (lower): the lower triangle of `a` becomes L; the strict upper is untouched.
pub(super) fn cholesky<T: DTypeBase>(a: &mut [T], n: usize) -> i32 {
    let m = load(a, n, n);
    match Cholesky::new(m.clone()) {
        Some(c) => {
            store(&c.l(), a, |r, c| r >= c);
            0
        }
        None => {
            // LAPACK's info: the order of the first leading minor that is not positive
            // definite (failure is monotone in the order, so a binary search finds it).
            let (mut lo, mut hi) = (1, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if Cholesky::new(m.view((0, 0), (mid, mid)).into_owned()).is_some() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo as i32
        }
    }
}

/// `potrs`: `b` (n×nrhs) becomes the solution of `A·X = B` from `cholesky`'s L.
pub(super) fn cholesky_solve<T: DTypeBase>(l: &[T], b: &mut [T], n: usize, nrhs: usize) {
    let l = load(l, n, n).lower_triangle();
    let mut x = load(b, n, nrhs);
    let _ = l.solve_lower_triangular_mut(&mut x);
    let _ = l.tr_solve_lower_triangular_mut(&mut x);
    store(&x, b, |_, _| true);
}

/// Thin QR of the m×n `a` (m ≥ n): `q` m×n with orthonormal columns, `r` n×n upper.
pub(super) fn qr<T: DTypeBase>(a: &[T], q: &mut [T], r: &mut [T], m: usize, n: usize) {
    let f = QR::new(load(a, m, n));
    store(&f.q(), q, |_, _| true);
    store(&f.r(), r, |_, _| true);
}

/// Thin SVD of the m×n `a` (m ≥ n): `s` descending, `u` m×n, `vt` n×n.
pub(super) fn svd<T: DTypeBase>(a: &[T], u: &mut [T], s: &mut [T], vt: &mut [T], m: usize, n: usize) -> i32 {
    match SVD::try_new(load(a, m, n), true, true, f64::EPSILON, 0) {
        Some(d) => {
            store(d.u.as_ref().expect("requested"), u, |_, _| true);
            store(d.v_t.as_ref().expect("requested"), vt, |_, _| true);
            for (o, v) in s.iter_mut().zip(d.singular_values.iter()) {
                *o = T::from_f64(*v);
            }
            0
        }
        None => n as i32,
    }
}

/// The full SVD of the m×n `a` (any shape), as `gesvdjBatched` gives it: the min(m, n)
/// singular values descending into `s`, U (m×m) into `u` and V (n×n, V itself, not Vᵀ)
/// into `v`, both orthonormal and column-major. nalgebra gives the thin factors (min(m, n)
/// columns); the remaining columns — any orthonormal basis of the complement, as
/// LAPACK's are — are completed by [`complete_basis`].
pub(super) fn svd_full<T: DTypeBase>(a: &[T], s: &mut [T], u: &mut [T], v: &mut [T], m: usize, n: usize) -> i32 {
    let Some(d) = SVD::try_new(load(a, m, n), true, true, f64::EPSILON, 0) else {
        return m.min(n) as i32;
    };
    let thin_u = d.u.as_ref().expect("requested");
    let thin_v = d.v_t.as_ref().expect("requested").transpose();
    store(&complete_basis(thin_u), u, |_, _| true);
    store(&complete_basis(&thin_v), v, |_, _| true);
    for (o, x) in s.iter_mut().zip(d.singular_values.iter()) {
        *o = T::from_f64(*x);
    }
    0
}

/// The r×r orthonormal matrix whose first columns are `q`'s (r×k, orthonormal columns)
/// and whose others complete them to a basis: each unit vector in turn, orthogonalised
/// against the columns so far (twice — classical Gram–Schmidt repeated, which is
/// orthogonal to working precision), kept when enough of it is left.
fn complete_basis(q: &DMatrix<f64>) -> DMatrix<f64> {
    let r = q.nrows();
    let mut cols: Vec<nalgebra::DVector<f64>> = q.column_iter().map(|c| c.into_owned()).collect();
    let mut e = 0;
    while cols.len() < r && e < r {
        let mut x = nalgebra::DVector::<f64>::zeros(r);
        x[e] = 1.0;
        e += 1;
        for _ in 0..2 {
            for c in &cols {
                let proj = c.dot(&x);
                x.axpy(-proj, c, 1.0);
            }
        }
        // Of r unit vectors, at least r − k keep more than 1/√r of their length
        // outside a k-dimensional span; a smaller remainder is rounding.
        let norm = x.norm();
        if norm > 0.5 / (r as f64).sqrt() {
            cols.push(x / norm);
        }
    }
    DMatrix::from_columns(&cols)
}

/// The singular values of the m×n `a` (m ≥ n), descending, into `s`.
pub(super) fn svd_values<T: DTypeBase>(a: &[T], s: &mut [T], m: usize, n: usize) -> i32 {
    match SVD::try_new(load(a, m, n), false, false, f64::EPSILON, 0) {
        Some(d) => {
            let mut values: Vec<f64> = d.singular_values.iter().copied().collect();
            values.sort_by(|x, y| y.total_cmp(x));
            for (o, v) in s.iter_mut().zip(values) {
                *o = T::from_f64(v);
            }
            0
        }
        None => n as i32,
    }
}

/// `syevd`: eigenvalues ascending into `w` and, when asked, eigenvectors into the
/// columns of `a` (left as it was otherwise), from the triangle `how` names.
pub(super) fn eigh<T: DTypeBase>(a: &mut [T], w: &mut [T], n: usize, how: super::Eigh) -> i32 {
    let full = load(a, n, n);
    // nalgebra reads the lower triangle: give it the upper one mirrored there.
    let m = match how.triangle {
        super::Triangle::Lower => full,
        super::Triangle::Upper => full.transpose(),
    };
    let Some(e) = SymmetricEigen::try_new(m, f64::EPSILON, 0) else {
        return n as i32;
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| e.eigenvalues[i].total_cmp(&e.eigenvalues[j]));
    if how.vectors {
        let vectors = DMatrix::from_fn(n, n, |r, c| e.eigenvectors[(r, order[c])]);
        store(&vectors, a, |_, _| true);
    }
    for (o, &i) in w.iter_mut().zip(&order) {
        *o = T::from_f64(e.eigenvalues[i]);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::{complete_basis, swaps_of};
    use nalgebra::DMatrix;

    /// A thin orthonormal basis completed to a square one: orthonormal, its first
    /// columns kept.
    #[test]
    fn a_basis_is_completed_orthonormally() {
        for (r, k) in [(5, 2), (7, 7), (32, 5), (3, 1)] {
            let a = DMatrix::from_fn(r, k, |i, j| {
                ((i * 7 + j * 13) % 11) as f64 - 5.0 + (i == j) as u8 as f64 * 9.0
            });
            let q = a.qr().q();
            let full = complete_basis(&q);
            assert_eq!(full.shape(), (r, r));
            let gram = full.transpose() * &full;
            assert!((gram - DMatrix::<f64>::identity(r, r)).amax() < 1e-12, "{r}×{k}");
            assert_eq!(full.columns(0, k), q.columns(0, k));
        }
    }

    /// Applying the swaps in order to 0..n gives back the permutation.
    #[test]
    fn swaps_rebuild_the_permutation() {
        for perm in [vec![0, 1, 2, 3], vec![3, 2, 1, 0], vec![2, 0, 3, 1], vec![1, 3, 0, 2]] {
            let piv = swaps_of(&perm);
            let mut rows: Vec<usize> = (0..perm.len()).collect();
            for (k, p) in piv.iter().enumerate() {
                assert!(*p as usize > k, "LAPACK swaps only with rows at or below k");
                rows.swap(k, *p as usize - 1);
            }
            assert_eq!(rows, perm);
        }
    }
}
