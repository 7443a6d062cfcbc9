//! The CPU device's pooling — a loop accumulating in float64, rounded once to the
//! element type — and the directions of a convolution (whose CPU path is the direct
//! `#[kernel]`s, emulated).

use super::pool::{Pool2d, PoolMode};
use crate::dtype::DTypeBase;

/// Which operand a convolution computes from the other two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Direction {
    /// `y = x ⋆ w`.
    Forward,
    /// `dx` from `dy` and `w`: the gradient of the input.
    BackwardData,
    /// `dw` from `x` and `dy`: the gradient of the filters.
    BackwardFilter,
}

impl Direction {
    /// The operation's name in errors and on the timeline.
    pub(crate) fn op(self) -> &'static str {
        match self {
            Direction::Forward => "conv2d",
            Direction::BackwardData => "conv2d_backward_data",
            Direction::BackwardFilter => "conv2d_backward_filter",
        }
    }
}

/// Pools `x` into `y`.
pub(crate) fn pool<T: DTypeBase>(g: &Pool2d, x: &[T], y: &mut [T]) {
    let (p, q) = g.output();
    let (h, w) = (g.input.0 as isize, g.input.1 as isize);
    let area = (g.window.0 * g.window.1) as f64;
    for n in 0..g.batch {
        for c in 0..g.channels {
            for oh in 0..p {
                for ow in 0..q {
                    let (mut max, mut sum, mut valid) = (f64::NEG_INFINITY, 0.0, 0usize);
                    for r in 0..g.window.0 {
                        let ih = (oh * g.stride.0 + r) as isize - g.padding.0 as isize;
                        for s in 0..g.window.1 {
                            let iw = (ow * g.stride.1 + s) as isize - g.padding.1 as isize;
                            if (0..h).contains(&ih) && (0..w).contains(&iw) {
                                let v = x[g.x_at(n, c, ih as usize, iw as usize)].to_f64();
                                // NaN wins: `max` of f64 would drop it.
                                max = if v.is_nan() || max.is_nan() { f64::NAN } else { max.max(v) };
                                sum += v;
                                valid += 1;
                            }
                        }
                    }
                    y[g.y_at(n, c, oh, ow)] = T::from_f64(match g.mode {
                        PoolMode::Max => max,
                        PoolMode::Average => sum / area,
                        PoolMode::AverageOfValid => sum / valid as f64,
                    });
                }
            }
        }
    }
}
