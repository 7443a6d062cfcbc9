//! A vector of a level-1 BLAS call as BLAS addresses it: `n` entries `inc` elements apart
//! in a buffer or view — a row of a column-major matrix (`inc` = its leading dimension),
//! every other element, a column of a batch.

use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;

/// `n` entries `inc` apart, from the first element of `data` (BLAS `x, incx`). A whole
/// buffer or view is `Strided::from(&x)` (every element).
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
