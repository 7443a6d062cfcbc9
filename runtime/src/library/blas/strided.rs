//! A vector of a level-1 BLAS call as BLAS addresses it: `n` entries `inc` elements apart
//! in a buffer or view — a row of a column-major matrix (`inc` = its leading dimension),
//! every other element, a column of a batch.

use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

/// `n` entries `inc` apart, from the first element of `data` (BLAS `x, incx`). A whole
/// buffer or view is `Strided::from(&x)` (every element).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // Row 1 of a 3×4 column-major matrix: every third element from index 1.
/// let m = dev.upload((0..12).map(|i| i as f32).collect::<Vec<_>>()).await?;
/// let row = Strided::every(&m.view(1..)?, 3).take(4);
/// assert_eq!(dev.dot_strided(row.clone(), row).await?, 1.0 + 16.0 + 49.0 + 100.0);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Strided<T: DTypeBase> {
    /// The buffer or view the entries lie in (entry 0 is its first element).
    pub data: GpuRef<T>,
    /// Elements between consecutive entries (≥ 1).
    pub inc: usize,
    /// Entries.
    pub n: usize,
}

crate::wire::wire_struct!(Strided<T: crate::dtype::DTypeBase> { data, inc, n });

impl<T: DTypeBase> From<&GpuRef<T>> for Strided<T> {
    /// Every element of `data`.
    fn from(data: &GpuRef<T>) -> Self {
        Strided {
            data: data.clone(),
            inc: 1,
            n: data.len(),
        }
    }
}

impl<T: DTypeBase> Strided<T> {
    /// Every `inc`-th element of `data` from its first: `⌈len / inc⌉` entries.
    pub fn every(data: &GpuRef<T>, inc: usize) -> Self {
        Strided {
            data: data.clone(),
            inc,
            n: if inc == 0 { 0 } else { data.len().div_ceil(inc) },
        }
    }

    /// The first `n` entries only.
    pub fn take(mut self, n: usize) -> Self {
        self.n = n;
        self
    }

    /// Whether the two vectors share an element: views of one buffer whose entries
    /// interleave (two rows of a column-major matrix) share none although their windows
    /// overlap. Solved exactly — the entries are two arithmetic progressions in the
    /// buffer, meeting where `start_x + i·inc_x = start_y + j·inc_y` has a solution with
    /// `i`, `j` among the entries' positions — so no entry is ever compared one by one.
    pub(crate) fn shares_entries_with(&self, other: &Strided<T>) -> bool {
        if !self.data.overlaps(&other.data) || self.n == 0 || other.n == 0 {
            return false;
        }
        progressions_meet(
            (self.data.window().start, self.inc, self.n),
            (other.data.window().start, other.inc, other.n),
        )
    }

    /// Checks `inc ≥ 1`, `n ≥ 1`, cuBLAS's 64-bit limits and that the entries lie in
    /// `data`; `name` is the argument's (`"x"`, `"y"`).
    pub(crate) fn validate(&self, name: &str) -> Result<(), GpuError> {
        let bad = |what: String, arg: String, expected: String, got: String| {
            Err(GpuError::InvalidArgument(
                Invalid::new(what).arg(arg).mismatch(expected, got),
            ))
        };
        if self.inc == 0 || self.inc > i64::MAX as usize {
            return bad(
                format!("{name}'s stride must be at least 1 (and fit in 64 bits)"),
                format!("inc{name}"),
                "≥ 1".into(),
                self.inc.to_string(),
            );
        }
        if self.n == 0 {
            return bad(
                format!("{name} has no entries"),
                name.into(),
                "≥ 1 entry".into(),
                "0".into(),
            );
        }
        let span = (self.n - 1)
            .checked_mul(self.inc)
            .and_then(|v| v.checked_add(1))
            .filter(|&s| s <= self.data.len());
        if span.is_none() {
            return bad(
                format!(
                    "{name}'s {} entries {} apart do not fit its {} elements",
                    self.n,
                    self.inc,
                    self.data.len()
                ),
                name.into(),
                format!("≥ {} elements", (self.n - 1).saturating_mul(self.inc).saturating_add(1)),
                format!("{} elements", self.data.len()),
            );
        }
        Ok(())
    }
}

/// Whether `{s + i·inc : i < n}` of the two `(s, inc, n)` (`inc`, `n` ≥ 1) share a
/// value: `i·a − j·b = d` (d the starts' difference) solved by the extended Euclid
/// algorithm, then the solutions' family `i = i₀ + k·b/g`, `j = j₀ + k·a/g` intersected
/// with `0 ≤ i < n`, `0 ≤ j < m`. In `i128`: every product stays below 2^127 for sizes
/// that fit a `usize` of 64 bits.
fn progressions_meet((xs, a, n): (usize, usize, usize), (ys, b, m): (usize, usize, usize)) -> bool {
    let (a, b, n, m) = (a as i128, b as i128, n as i128, m as i128);
    let d = ys as i128 - xs as i128;
    let (g, u, v) = extended_gcd(a, b);
    if d % g != 0 {
        return false;
    }
    let (i0, j0) = (u * (d / g), -v * (d / g));
    let (bi, aj) = (b / g, a / g);
    // k such that 0 ≤ i0 + k·bi ≤ n − 1 and 0 ≤ j0 + k·aj ≤ m − 1 (bi, aj > 0).
    let lo = div_ceil(-i0, bi).max(div_ceil(-j0, aj));
    let hi = div_floor(n - 1 - i0, bi).min(div_floor(m - 1 - j0, aj));
    lo <= hi
}

/// `(g, u, v)` with `a·u + b·v = g = gcd(a, b)`, for `a`, `b` ≥ 1.
fn extended_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, u, v) = extended_gcd(b, a % b);
        (g, v, u - (a / b) * v)
    }
}

/// `⌊p / q⌋` for `q > 0`.
fn div_floor(p: i128, q: i128) -> i128 {
    p.div_euclid(q)
}

/// `⌈p / q⌉` for `q > 0`.
fn div_ceil(p: i128, q: i128) -> i128 {
    -(-p).div_euclid(q)
}

#[cfg(test)]
mod tests {
    use super::progressions_meet;

    /// Every small pair of progressions against listing their elements.
    #[test]
    fn progressions_meet_exactly_when_an_element_is_shared() {
        let set = |(s, inc, n): (usize, usize, usize)| (0..n).map(|i| s + i * inc).collect::<Vec<_>>();
        let mut checked = 0;
        for xs in 0..6 {
            for a in 1..7 {
                for n in 1..6 {
                    for ys in 0..9 {
                        for b in 1..7 {
                            for m in 1..6 {
                                let (x, y) = ((xs, a, n), (ys, b, m));
                                let truth = set(x).iter().any(|e| set(y).contains(e));
                                assert_eq!(progressions_meet(x, y), truth, "{x:?} {y:?}");
                                assert_eq!(progressions_meet(y, x), truth, "{y:?} {x:?}");
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 6 * 6 * 5 * 9 * 6 * 5);
    }

    /// Rows of a huge column-major matrix: far apart starts, strides near 2^40.
    #[test]
    fn large_strides_do_not_overflow() {
        let lda = 1usize << 40;
        assert!(!progressions_meet((0, lda, 1 << 20), (1, lda, 1 << 20)));
        assert!(progressions_meet((0, lda, 1 << 20), (lda * 5, lda, 2)));
        assert!(!progressions_meet((0, lda, 3), (lda * 3, 1, 2)));
        assert!(progressions_meet((3, 2, usize::MAX / 4), (usize::MAX / 2, 1, 2)));
    }
}
