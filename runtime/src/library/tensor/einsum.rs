//! Einsum equations and how a contraction of two tensors becomes one strided-batched
//! GEMM: each mode is a batch mode (in A, B and C), a row mode (A and C), a column mode
//! (B and C) or a contracted one (A and B, or one input only: summed, the other operand
//! broadcast along it with stride 0). An operand whose strides already lay its groups out
//! as a (transposed) column-major matrix batch is read in place; any other is gathered
//! into one first, and an output that is not such a batch is written through a temporary
//! (the way `torch.einsum` lowers to `bmm`). Pure planning, checked here without a device.

// Without the `tensor` feature only the parser serves (`Contraction::output_shape`).
#![cfg_attr(not(feature = "tensor"), allow(dead_code))]

use std::collections::BTreeMap;

use super::layout::TensorLayout;
use crate::error::{GpuError, Invalid};

/// The most dimensions a gather or scatter takes after merging contiguous ones.
pub(crate) const MAX_RANK: usize = 8;

pub(crate) fn bad(what: String, arg: &str, expected: impl std::fmt::Display, got: impl std::fmt::Display) -> GpuError {
    GpuError::InvalidArgument(Invalid::new(what).arg(arg).mismatch(expected, got))
}

/// A parsed equation: the mode letters of A, B and C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Equation {
    pub(crate) a: Vec<char>,
    pub(crate) b: Vec<char>,
    pub(crate) c: Vec<char>,
}

/// The operands of an equation without spaces, and its output if it has `->`.
pub(crate) fn split(eq: &str) -> Result<(String, Vec<String>, Option<String>), GpuError> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(GpuError::Unsupported(format!(
            "einsum `{eq}`: ellipses (`...`) are not supported; name every mode with a letter"
        )));
    }
    let (inputs, output) = match eq.split_once("->") {
        Some((i, o)) => (i.to_string(), Some(o.to_string())),
        None => (eq.clone(), None),
    };
    let ops = inputs.split(',').map(str::to_string).collect();
    Ok((eq, ops, output))
}

/// The modes of `s`, one operand of `eq` (`which` names it): letters only.
pub(crate) fn modes(eq: &str, s: &str, which: &str) -> Result<Vec<char>, GpuError> {
    match s.chars().find(|c| !c.is_ascii_alphabetic()) {
        Some(ch) => Err(bad(
            format!("einsum `{eq}`: `{ch}` in {which} is not a mode; modes are letters a–z, A–Z"),
            "equation",
            "letters",
            ch,
        )),
        None => Ok(s.chars().collect()),
    }
}

/// Refuses an output of `eq` with a mode twice or one in no input.
pub(crate) fn check_output(eq: &str, c: &[char], inputs: &[&[char]]) -> Result<(), GpuError> {
    for (i, &m) in c.iter().enumerate() {
        if c[..i].contains(&m) {
            return Err(bad(
                format!("einsum `{eq}`: mode `{m}` appears twice in the output"),
                "equation",
                "each output mode once",
                m,
            ));
        }
        if !inputs.iter().any(|x| x.contains(&m)) {
            return Err(bad(
                format!("einsum `{eq}`: output mode `{m}` is in no operand"),
                "equation",
                "output modes taken from the operands",
                m,
            ));
        }
    }
    Ok(())
}

impl Equation {
    /// Parses `"ij,jk->ik"` (spaces ignored). Without `->` the output is numpy's: the
    /// letters that appear once, in alphabetical order.
    pub(crate) fn parse(eq: &str) -> Result<Equation, GpuError> {
        let (eq, ops, output) = split(eq)?;
        if ops.len() != 2 {
            return Err(bad(
                format!("einsum `{eq}`: a contraction takes two operands (`ij,jk->ik`), got {}", ops.len()),
                "equation",
                "two operands",
                ops.len(),
            ));
        }
        let a = modes(&eq, &ops[0], "A")?;
        let b = modes(&eq, &ops[1], "B")?;
        let c = match output {
            Some(o) => modes(&eq, &o, "the output")?,
            None => {
                let mut count: BTreeMap<char, usize> = BTreeMap::new();
                for &m in a.iter().chain(&b) {
                    *count.entry(m).or_default() += 1;
                }
                count.into_iter().filter(|&(_, n)| n == 1).map(|(m, _)| m).collect()
            }
        };
        check_output(&eq, &c, &[&a, &b])?;
        Ok(Equation { a, b, c })
    }
}

/// One dimension of a gather or scatter: its size and the stride of the strided side.
pub(crate) type Dim = (usize, usize);

/// Merges dimensions (listed fastest first) that are contiguous in the strided side and
/// drops those of size 1, so fewer remain for the kernel.
pub(crate) fn merge(dims: &[Dim]) -> Vec<Dim> {
    let mut out: Vec<Dim> = Vec::new();
    for &(size, stride) in dims.iter().filter(|d| d.0 != 1) {
        match out.last_mut() {
            Some(last) if last.1 * last.0 == stride => last.0 *= size,
            _ => out.push((size, stride)),
        }
    }
    out
}

/// How one operand of the GEMM is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// In place: transposed or not, its leading dimension, its batch stride.
    Direct { trans: bool, ld: usize, batch_stride: usize },
    /// Gathered into a tight column-major batch; the dimensions fastest first, with the
    /// operand's strides.
    Gather(Vec<Dim>),
}

/// How the GEMM's result reaches C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sink {
    /// Straight into C (alpha and beta applied by the GEMM).
    Direct { ld: usize, batch_stride: usize },
    /// Into a tight temporary (scaled by alpha), then added to beta·C through C's strides
    /// (the dimensions fastest first).
    Scatter(Vec<Dim>),
}

/// A contraction as one strided-batched GEMM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows, columns and inner size of each product, and the batch count.
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) batch: usize,
    /// The GEMM's first operand is B (C is computed transposed: Cᵀ = Bᵀ·Aᵀ).
    pub(crate) swapped: bool,
    pub(crate) first: Source,
    pub(crate) second: Source,
    pub(crate) sink: Sink,
    /// Elements of C (0: nothing to write).
    pub(crate) out_len: usize,
}

/// The size and effective stride of each mode of one operand (a mode written twice —
/// a diagonal — strides by the sum); 0 for modes it lacks.
struct Modes<'a> {
    letters: &'a [char],
    layout: &'a TensorLayout,
}

impl Modes<'_> {
    fn stride(&self, m: char) -> usize {
        self.letters
            .iter()
            .zip(&self.layout.strides)
            .filter(|(l, _)| **l == m)
            .map(|(_, s)| *s)
            .sum()
    }

    /// The stride of a group of modes read as one index (the last mode fastest), if the
    /// operand's strides make it one arithmetic progression; any stride for a group of
    /// size ≤ 1.
    fn group(&self, group: &[char], size: &BTreeMap<char, usize>) -> Option<usize> {
        let mut run: Option<(usize, usize)> = None; // (stride of the index, extent so far)
        for &m in group.iter().rev() {
            let (sz, st) = (size[&m], self.stride(m));
            if sz == 1 {
                continue;
            }
            run = match run {
                None => Some((st, sz)),
                Some((s, e)) if st == s * e => Some((s, e * sz)),
                Some(_) => return None,
            };
        }
        Some(run.map_or(0, |(s, _)| s))
    }

    /// Dimensions fastest first for the groups in order (each group's last mode fastest).
    fn dims(&self, groups: &[&[char]], size: &BTreeMap<char, usize>) -> Vec<Dim> {
        groups
            .iter()
            .flat_map(|g| g.iter().rev())
            .map(|&m| (size[&m], self.stride(m)))
            .collect()
    }
}

/// Plans `c = alpha · einsum(a, b) + beta · c`. `c_layout` is the output's layout (its
/// shape checked against the modes' sizes).
pub(crate) fn plan(
    eq: &Equation,
    a: &TensorLayout,
    b: &TensorLayout,
    c: &TensorLayout,
) -> Result<Plan, GpuError> {
    for (letters, layout, what) in [(&eq.a, a, "A"), (&eq.b, b, "B"), (&eq.c, c, "C")] {
        if letters.len() != layout.shape.len() {
            return Err(bad(
                format!(
                    "einsum: {what} has {} modes in the equation but {} dimensions",
                    letters.len(),
                    layout.shape.len()
                ),
                what,
                format_args!("{} dimensions", letters.len()),
                layout.shape.len(),
            ));
        }
    }
    let mut size: BTreeMap<char, usize> = BTreeMap::new();
    for (letters, layout, what) in [(&eq.a, a, "A"), (&eq.b, b, "B"), (&eq.c, c, "C")] {
        for (&m, &s) in letters.iter().zip(&layout.shape) {
            match size.insert(m, s) {
                Some(prev) if prev != s => {
                    return Err(bad(
                        format!("einsum: mode `{m}` has size {prev} in one place and {s} in {what}"),
                        what,
                        format_args!("`{m}` of size {prev}"),
                        s,
                    ))
                }
                _ => {}
            }
        }
    }
    let in_a = |m: &char| eq.a.contains(m);
    let in_b = |m: &char| eq.b.contains(m);
    let in_c = |m: &char| eq.c.contains(m);
    let batch: Vec<char> = eq.c.iter().copied().filter(|m| in_a(m) && in_b(m)).collect();
    let rows: Vec<char> = eq.c.iter().copied().filter(|m| in_a(m) && !in_b(m)).collect();
    let cols: Vec<char> = eq.c.iter().copied().filter(|m| in_b(m) && !in_a(m)).collect();
    let mut inner: Vec<char> = Vec::new();
    for &m in eq.a.iter().chain(&eq.b) {
        if !in_c(&m) && !inner.contains(&m) {
            inner.push(m);
        }
    }
    let extent = |g: &[char]| g.iter().fold(1usize, |acc, m| acc.saturating_mul(size[m]));
    let (m, n, k, count) = (extent(&rows), extent(&cols), extent(&inner), extent(&batch));
    let out_len = extent(&eq.c);

    let (ma, mb, mc) = (
        Modes { letters: &eq.a, layout: a },
        Modes { letters: &eq.b, layout: b },
        Modes { letters: &eq.c, layout: c },
    );
    // C: column-major (rows fastest), or its transpose (columns fastest: compute Cᵀ).
    let direct_c = |r: &[char], q: &[char], rn: usize| -> Option<(usize, usize)> {
        let (sr, sq, sb) = (mc.group(r, &size)?, mc.group(q, &size)?, mc.group(&batch, &size)?);
        let ld = if extent(q) <= 1 { rn.max(1) } else { sq };
        ((extent(r) <= 1 || sr == 1) && ld >= rn.max(1)).then_some((ld, sb))
    };
    let (swapped, sink) = match (direct_c(&rows, &cols, m), direct_c(&cols, &rows, n)) {
        (Some((ld, sb)), _) => (false, Sink::Direct { ld, batch_stride: sb }),
        (None, Some((ld, sb))) => (true, Sink::Direct { ld, batch_stride: sb }),
        (None, None) => (false, Sink::Scatter(mc.dims(&[&rows, &cols, &batch], &size))),
    };
    // The first operand gives the rows × inner matrix, the second inner × columns.
    let (first, r1, second, r2) = if swapped { (&mb, &cols, &ma, &rows) } else { (&ma, &rows, &mb, &cols) };
    let read = |x: &Modes<'_>, outer: &[char], first: bool| -> Source {
        let (on, kn) = (extent(outer), k);
        let fits = || -> Option<Source> {
            let (so, sk, sb) = (x.group(outer, &size)?, x.group(&inner, &size)?, x.group(&batch, &size)?);
            // Untransposed: the first operand is rows × inner (rows fastest), the
            // second inner × columns (inner fastest).
            let (fast, fast_n, slow, slow_n) = if first { (so, on, sk, kn) } else { (sk, kn, so, on) };
            if fast_n <= 1 || fast == 1 {
                let ld = if slow_n <= 1 { fast_n.max(1) } else { slow };
                if ld >= fast_n.max(1) {
                    return Some(Source::Direct { trans: false, ld, batch_stride: sb });
                }
            }
            if slow_n <= 1 || slow == 1 {
                let ld = if fast_n <= 1 { slow_n.max(1) } else { fast };
                if ld >= slow_n.max(1) {
                    return Some(Source::Direct { trans: true, ld, batch_stride: sb });
                }
            }
            None
        };
        fits().unwrap_or_else(|| {
            let groups: [&[char]; 3] = if first { [outer, &inner, &batch] } else { [&inner, outer, &batch] };
            Source::Gather(x.dims(&groups, &size))
        })
    };
    let (gm, gn) = if swapped { (n, m) } else { (m, n) };
    Ok(Plan {
        m: gm,
        n: gn,
        k,
        batch: count,
        swapped,
        first: read(first, r1, true),
        second: read(second, r2, false),
        sink,
        out_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rm(shape: &[usize]) -> TensorLayout {
        TensorLayout::row_major(shape)
    }

    #[test]
    fn equations_parse_with_numpy_s_implicit_output() {
        let e = Equation::parse("ij, jk -> ik").unwrap();
        assert_eq!((e.a, e.b, e.c), (vec!['i', 'j'], vec!['j', 'k'], vec!['i', 'k']));
        assert_eq!(Equation::parse("kj,ji").unwrap().c, vec!['i', 'k']);
        for bad in ["ij->i", "ij,jk,kl->il", "i1,1k->ik", "ij,jk->ii", "ij,jk->iz"] {
            assert!(matches!(Equation::parse(bad), Err(GpuError::InvalidArgument(_))), "{bad}");
        }
        assert!(matches!(Equation::parse("...ij,jk->ik"), Err(GpuError::Unsupported(_))));
    }

    #[test]
    fn row_major_matrices_multiply_in_place_as_a_transposed_product() {
        // Row-major C (i × k) is column-major Cᵀ: computed as Bᵀ·Aᵀ, nothing gathered.
        let e = Equation::parse("ij,jk->ik").unwrap();
        let p = plan(&e, &rm(&[2, 3]), &rm(&[3, 4]), &rm(&[2, 4])).unwrap();
        assert!(p.swapped);
        assert_eq!((p.m, p.n, p.k, p.batch), (4, 2, 3, 1));
        assert_eq!(p.first, Source::Direct { trans: false, ld: 4, batch_stride: 0 });
        assert_eq!(p.second, Source::Direct { trans: false, ld: 3, batch_stride: 0 });
        assert_eq!(p.sink, Sink::Direct { ld: 4, batch_stride: 0 });
    }

    #[test]
    fn attention_scores_batch_over_heads_with_a_transposed_key() {
        let e = Equation::parse("bhqd,bhkd->bhqk").unwrap();
        let p = plan(&e, &rm(&[2, 3, 5, 8]), &rm(&[2, 3, 7, 8]), &rm(&[2, 3, 5, 7])).unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (7, 5, 8, 6));
        assert!(matches!(p.first, Source::Direct { trans: true, ld: 8, batch_stride: 56 }));
        assert!(matches!(p.second, Source::Direct { trans: false, ld: 8, batch_stride: 40 }));
    }

    #[test]
    fn a_permuted_output_goes_through_a_scatter() {
        // The batch mode is C's fastest: no column-major batch of either orientation.
        let e = Equation::parse("bij,bjk->bik").unwrap();
        let c = TensorLayout::strided(&[2, 2, 4], &[1, 16, 2]).unwrap();
        let p = plan(&e, &rm(&[2, 2, 3]), &rm(&[2, 3, 4]), &c).unwrap();
        assert!(matches!(p.sink, Sink::Scatter(_)));
    }

    #[test]
    fn modes_of_one_input_are_summed_by_a_zero_stride() {
        let e = Equation::parse("ijs,jk->ik").unwrap();
        let p = plan(&e, &rm(&[2, 3, 5]), &rm(&[3, 4]), &rm(&[2, 4])).unwrap();
        assert_eq!(p.k, 15);
        assert!(matches!(&p.first, Source::Gather(d) if d.iter().any(|&(s, st)| s == 5 && st == 0)));
    }

    #[test]
    fn mismatched_sizes_and_ranks_are_refused() {
        let e = Equation::parse("ij,jk->ik").unwrap();
        assert!(plan(&e, &rm(&[2, 3]), &rm(&[4, 4]), &rm(&[2, 4])).is_err());
        assert!(plan(&e, &rm(&[2, 3, 1]), &rm(&[3, 4]), &rm(&[2, 4])).is_err());
    }

    #[test]
    fn contiguous_dimensions_merge() {
        assert_eq!(merge(&[(2, 1), (3, 2), (1, 99), (4, 100)]), vec![(6, 1), (4, 100)]);
    }
}
