//! The contraction plans a tensor actor has made, kept for the next call of the same
//! equation and layouts.
//!
//! Why: parsing the equation and planning the GEMM allocate a dozen small vectors and
//! maps — about 1 µs of host time per call, a measurable share of an awaited contraction
//! of ~0.1 ms (attention's scores, 8 × 16 heads of 1024² f16: 123 µs on an H100). A
//! model calls the same few contractions again and again, so the plan is looked up by
//! equality (a few tens of ns) instead. `alpha` and `beta` are not part of the key: the
//! plan does not depend on them.

use std::collections::VecDeque;

use super::einsum::{self, Equation, Plan};
use super::{Contraction, TensorLayout};
use crate::error::GpuError;

/// Plans kept; the oldest goes when a new one would exceed this. A program with more
/// distinct contractions in rotation plans again, as every call did before.
const KEPT: usize = 64;

/// A contraction planned: the GEMM plan and the output's layout (the spec's, or row-major
/// of the output shape).
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) c_layout: TensorLayout,
}

impl Planned {
    /// Plans `spec` from scratch: parses its equation, takes its output layout, plans
    /// the GEMM.
    fn of(spec: &Contraction) -> Result<Self, GpuError> {
        let eq = Equation::parse(&spec.equation)?;
        let c_layout = spec.output_layout()?;
        let plan = einsum::plan(&eq, &spec.a, &spec.b, &c_layout)?;
        Ok(Planned { plan, c_layout })
    }
}

/// The plans of one tensor actor, newest first.
#[derive(Default)]
pub(crate) struct Plans(VecDeque<(Key, Planned)>);

/// What a plan depends on: the equation and the three layouts.
struct Key {
    equation: String,
    a: TensorLayout,
    b: TensorLayout,
    c: Option<TensorLayout>,
}

impl Key {
    fn of(spec: &Contraction) -> Self {
        Key {
            equation: spec.equation.clone(),
            a: spec.a.clone(),
            b: spec.b.clone(),
            c: spec.c.clone(),
        }
    }

    fn matches(&self, spec: &Contraction) -> bool {
        self.equation == spec.equation && self.a == spec.a && self.b == spec.b && self.c == spec.c
    }
}

impl Plans {
    /// The plan of `spec`: the kept one, or a new one (kept when planning succeeds; an
    /// error is returned each time, never kept).
    pub(crate) fn of(&mut self, spec: &Contraction) -> Result<&Planned, GpuError> {
        if let Some(i) = self.0.iter().position(|(k, _)| k.matches(spec)) {
            return Ok(&self.0[i].1);
        }
        let planned = Planned::of(spec)?;
        if self.0.len() == KEPT {
            self.0.pop_back();
        }
        self.0.push_front((Key::of(spec), planned));
        Ok(&self.0[0].1)
    }

    /// Plans kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same equation and layouts plan once; a different layout, equation or output
    /// plans anew, and each spec gets the plan planning it from scratch gives.
    #[test]
    fn a_repeated_contraction_is_planned_once() {
        let mut plans = Plans::default();
        let scores = Contraction::new("bhqd,bhkd->bhqk", &[2, 3, 5, 4], &[2, 3, 7, 4]);
        let fresh = |s: &Contraction| Planned::of(s).unwrap().plan;
        assert_eq!(plans.of(&scores).unwrap().plan, fresh(&scores));
        assert_eq!(plans.of(&scores.clone().scaled(0.5, 1.0)).unwrap().plan, fresh(&scores));
        assert_eq!(plans.len(), 1, "alpha and beta are not part of the key");
        let transposed_out = scores
            .clone()
            .output(TensorLayout::strided(&[2, 3, 5, 7], &[105, 35, 1, 5]).unwrap());
        let other = Contraction::new("bhqd,bhkd->bhkq", &[2, 3, 5, 4], &[2, 3, 7, 4]);
        for s in [&transposed_out, &other] {
            assert_eq!(plans.of(s).unwrap().plan, fresh(s));
        }
        assert_eq!(plans.len(), 3);
        let again = plans.of(&transposed_out).unwrap().plan.clone();
        assert_ne!(again, plans.of(&scores).unwrap().plan, "each spec finds its own plan");
        assert_eq!(plans.len(), 3);
    }

    /// A spec that does not plan is an error each time and keeps nothing.
    #[test]
    fn a_bad_spec_is_refused_every_time() {
        let mut plans = Plans::default();
        let bad = Contraction::new("ij,jk->ik", &[2, 3], &[4, 5]);
        for _ in 0..2 {
            assert!(matches!(plans.of(&bad), Err(GpuError::InvalidArgument(_))));
        }
        assert_eq!(plans.len(), 0);
    }

    /// At most `KEPT` plans stay; the oldest goes first.
    #[test]
    fn the_oldest_plan_goes_first() {
        let mut plans = Plans::default();
        let spec = |n: usize| Contraction::new("ij,jk->ik", &[n, 2], &[2, 3]);
        for n in 1..=KEPT + 1 {
            plans.of(&spec(n)).unwrap();
        }
        assert_eq!(plans.len(), KEPT);
        assert!(!plans.0.iter().any(|(k, _)| k.matches(&spec(1))), "the first planned went");
        assert!(plans.0.iter().any(|(k, _)| k.matches(&spec(2))));
    }
}
