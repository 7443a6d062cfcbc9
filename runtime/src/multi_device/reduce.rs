//! `ReduceOp` and the element types collectives take.

use crate::dtype::DTypeBase;
use half::{bf16, f16};

/// How an all-reduce or reduce-scatter combines the ranks' elements (NCCL's `ncclSum`,
/// `ncclMax`, `ncclMin`, `ncclAvg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// The sum over ranks.
    Sum,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
    /// The sum divided by the number of ranks.
    Avg,
}

/// The element types of collectives: those NCCL reduces in floating point (f32, f64,
/// f16, bf16). Sealed: NCCL has no complex or 8-bit float reductions to match.
pub trait CollectiveScalar: crate::device::DType + crate::sys::NcclType + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! collective_scalars {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveScalar for $t {}
    )*};
}
collective_scalars!(f32, f64, f16, bf16);

/// Combines every rank's `parts` (equal lengths, rank order) element by element, in
/// float64 and rounded once to `T` (so the result does not depend on the order ranks
/// arrived in).
pub(crate) fn reduce<T: DTypeBase>(op: ReduceOp, parts: &[&[T]]) -> Vec<T> {
    let n = parts.first().map_or(0, |p| p.len());
    (0..n)
        .map(|i| {
            let vals = parts.iter().map(|p| p[i].to_f64());
            let v = match op {
                ReduceOp::Sum => vals.sum(),
                ReduceOp::Avg => vals.sum::<f64>() / parts.len() as f64,
                ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Min => vals.fold(f64::INFINITY, f64::min),
            };
            T::from_f64(v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_op_combines_elementwise() {
        let (a, b, c) = ([1.0f32, -2.0], [3.0f32, 5.0], [-1.0f32, 0.5]);
        let parts: [&[f32]; 3] = [&a, &b, &c];
        assert_eq!(reduce(ReduceOp::Sum, &parts), vec![3.0, 3.5]);
        assert_eq!(reduce(ReduceOp::Max, &parts), vec![3.0, 5.0]);
        assert_eq!(reduce(ReduceOp::Min, &parts), vec![-1.0, -2.0]);
        assert_eq!(reduce(ReduceOp::Avg, &parts), vec![1.0, 3.5 / 3.0]);
    }
}
