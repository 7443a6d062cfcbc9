//! [`TensorLayout`]: how an N-D tensor lies in a buffer (or view) — its shape and the
//! stride of each dimension in elements — and the checks a layout must pass before a
//! kernel or cuBLAS reads through it.

use crate::error::{GpuError, Invalid};

/// The shape of an N-D tensor and the stride of each dimension, in elements, from the
/// start of its buffer or view. Row-major (C order: the last dimension fastest, as
/// NumPy and PyTorch lay tensors out) unless strides are given — a transposed or sliced
/// tensor is the same memory with other strides, so no copy is needed to describe it.
///
/// # Example
///
/// ```
/// use atomr_accel_cuda_runtime::library::tensor::TensorLayout;
/// let a = TensorLayout::row_major(&[2, 3]);
/// assert_eq!(a.strides, vec![3, 1]);
/// // Its transpose: the same memory read 3 × 2.
/// let at = TensorLayout::strided(&[3, 2], &[1, 3]).unwrap();
/// assert_eq!(at.span(), 6);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorLayout {
    /// The size of each dimension.
    pub shape: Vec<usize>,
    /// Elements between neighbours along each dimension (0: broadcast, for inputs).
    pub strides: Vec<usize>,
}

crate::wire::wire_struct!(TensorLayout { shape, strides });

impl TensorLayout {
    /// A tight row-major (C order) tensor of `shape`.
    pub fn row_major(shape: &[usize]) -> Self {
        let mut strides = vec![0; shape.len()];
        let mut s = 1usize;
        for (d, &n) in shape.iter().enumerate().rev() {
            strides[d] = s;
            s = s.saturating_mul(n);
        }
        TensorLayout {
            shape: shape.to_vec(),
            strides,
        }
    }

    /// A tight column-major (Fortran order: the first dimension fastest) tensor, as
    /// cuBLAS lays out matrices.
    pub fn column_major(shape: &[usize]) -> Self {
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let mut l = TensorLayout::row_major(&rev);
        l.shape.reverse();
        l.strides.reverse();
        l
    }

    /// A tensor of `shape` with the given `strides` (in elements).
    pub fn strided(shape: &[usize], strides: &[usize]) -> Result<Self, GpuError> {
        if shape.len() != strides.len() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a tensor layout needs one stride per dimension: {} dimensions, {} strides",
                    shape.len(),
                    strides.len()
                ))
                .arg("strides")
                .mismatch(format_args!("{} strides", shape.len()), strides.len()),
            ));
        }
        Ok(TensorLayout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        })
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Elements of the buffer the tensor reaches: one past its last element (0 when it
    /// is empty). Saturates rather than wraps, so an absurd layout fails the length check.
    pub fn span(&self) -> usize {
        if self.shape.contains(&0) {
            return 0;
        }
        self.shape
            .iter()
            .zip(&self.strides)
            .fold(1usize, |acc, (&n, &s)| acc.saturating_add((n - 1).saturating_mul(s)))
    }

    /// Checks that the tensor fits a buffer of `len` elements (and, for an output, that
    /// no two of its elements share memory).
    pub(crate) fn check(&self, len: usize, what: &str, output: bool) -> Result<(), GpuError> {
        let span = self.span();
        if span > len {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{what}: a tensor of shape {:?} and strides {:?} reaches {span} elements, the buffer has {len}",
                    self.shape, self.strides
                ))
                .arg(what)
                .mismatch(format_args!("≥ {span} elements"), format_args!("{len} elements")),
            ));
        }
        if output && self.overlapping() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{what}: strides {:?} of shape {:?} make elements of the output share memory",
                    self.strides, self.shape
                ))
                .arg(what)
                .mismatch("strides that keep elements apart", format_args!("{:?}", self.strides)),
            ));
        }
        Ok(())
    }

    /// Whether two elements may share memory: with the dimensions of size > 1 sorted by
    /// stride, each must step over everything the faster ones reach (sufficient, and what
    /// every tight, sliced or permuted layout satisfies).
    fn overlapping(&self) -> bool {
        let mut dims: Vec<(usize, usize)> = self
            .strides
            .iter()
            .copied()
            .zip(self.shape.iter().copied())
            .filter(|&(_, n)| n > 1)
            .collect();
        dims.sort_unstable();
        let mut reach = 0usize; // the largest offset the faster dimensions reach
        for (s, n) in dims {
            if s <= reach {
                return true;
            }
            reach = reach.saturating_add((n - 1).saturating_mul(s));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_know_their_span_and_overlaps() {
        let r = TensorLayout::row_major(&[2, 3, 4]);
        assert_eq!((r.strides.clone(), r.span(), r.elements()), (vec![12, 4, 1], 24, 24));
        let c = TensorLayout::column_major(&[2, 3, 4]);
        assert_eq!(c.strides, vec![1, 2, 6]);
        assert!(!r.overlapping() && !c.overlapping());
        assert!(TensorLayout::strided(&[2, 3], &[0, 1]).unwrap().overlapping());
        assert!(TensorLayout::strided(&[3, 3], &[1, 2]).unwrap().overlapping());
        assert!(!TensorLayout::strided(&[3, 1], &[1, 0]).unwrap().overlapping());
        assert_eq!(TensorLayout::row_major(&[3, 0]).span(), 0);
        assert!(r.check(23, "A", false).is_err() && r.check(24, "C", true).is_ok());
        assert!(TensorLayout::strided(&[2], &[1, 1]).is_err());
    }
}
