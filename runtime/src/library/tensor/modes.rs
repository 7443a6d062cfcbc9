//! Element-wise binary and trinary operations and reductions over chosen modes —
//! cuTENSOR's other two families — in the same einsum notation as contractions:
//! `"ab,ba->ab"` adds A to B transposed, `"ab,ba,b->ab"` takes a third operand, `"abc->ac"`
//! reduces over `b`. Each is one pass of a `#[kernel]` (`kernels.rs`) over the output's
//! elements, reading each input through its own strides (a mode an input lacks is
//! broadcast: stride 0), so permutations, broadcasts and strided views cost no copy.

use std::collections::BTreeMap;

use super::einsum::{bad, check_output, modes, split};
use super::layout::TensorLayout;
use crate::error::GpuError;

/// The operation of an element-wise op or a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TensorOp {
    /// `x + y`; a reduction sums.
    #[default]
    Add,
    /// `x · y`; a reduction multiplies.
    Mul,
    /// The larger (NaN if either is NaN, as `torch.maximum`).
    Max,
    /// The smaller (NaN if either is NaN).
    Min,
}

crate::wire::wire_enum!(TensorOp {
    TensorOp::Add,
    TensorOp::Mul,
    TensorOp::Max,
    TensorOp::Min
});

impl TensorOp {
    /// The kernels' code for it.
    #[cfg_attr(not(feature = "tensor"), allow(dead_code))]
    pub(crate) fn code(self) -> u32 {
        match self {
            TensorOp::Add => 0,
            TensorOp::Mul => 1,
            TensorOp::Max => 2,
            TensorOp::Min => 3,
        }
    }
}

/// `C = op(alpha · A, beta · B)` element by element, the modes of A and B mapped onto
/// C's by an equation (`"ab,ba->ab"`: B transposed; `"abc,c->abc"`: B broadcast over
/// `a` and `b`). Every mode of A and B is one of C's; a mode of C that an input lacks
/// is broadcast. Row-major operands unless layouts are given.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // A + Bᵀ for 2×2 matrices.
/// let a = dev.upload(vec![1.0f32, 2.0, 3.0, 4.0]).await?;
/// let b = dev.upload(vec![10.0f32, 20.0, 30.0, 40.0]).await?;
/// let c = dev.alloc::<f32>(4).await?;
/// dev.elementwise(Elementwise::new("ab,ba->ab", &[2, 2], &[2, 2]), &a, &b, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![11.0, 32.0, 23.0, 44.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Elementwise {
    /// The equation, `"ab,ba->ab"`.
    pub equation: String,
    /// A's shape and strides.
    pub a: TensorLayout,
    /// B's shape and strides.
    pub b: TensorLayout,
    /// C's (`None`: row-major, its shape from the equation).
    pub c: Option<TensorLayout>,
    /// The operation.
    pub op: TensorOp,
    /// Scale of A.
    pub alpha: f64,
    /// Scale of B.
    pub beta: f64,
}

crate::wire::wire_struct!(Elementwise { equation, a, b, c, op, alpha, beta });

impl Elementwise {
    /// `C = A + B` of row-major operands of these shapes into a row-major C.
    pub fn new(equation: &str, a_shape: &[usize], b_shape: &[usize]) -> Self {
        Elementwise {
            equation: equation.to_string(),
            a: TensorLayout::row_major(a_shape),
            b: TensorLayout::row_major(b_shape),
            c: None,
            op: TensorOp::Add,
            alpha: 1.0,
            beta: 1.0,
        }
    }

    /// Sets the operation.
    pub fn op(mut self, op: TensorOp) -> Self {
        self.op = op;
        self
    }

    /// Sets A's and B's layouts.
    pub fn layouts(mut self, a: TensorLayout, b: TensorLayout) -> Self {
        self.a = a;
        self.b = b;
        self
    }

    /// Writes C laid out as given.
    pub fn output(mut self, c: TensorLayout) -> Self {
        self.c = Some(c);
        self
    }

    /// Sets alpha and beta.
    pub fn scaled(mut self, alpha: f64, beta: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// The plan: C's layout and each input's strides along C's modes.
    pub(crate) fn plan(&self) -> Result<ModePlan, GpuError> {
        let (eq, inputs, c) = parse(&self.equation, ["A", "B"], "an element-wise op", "ab,ba->ab")?;
        pointwise_plan(&eq, &inputs, &[(&self.a, "A"), (&self.b, "B")], &c, self.c.as_ref())
    }
}

/// `D = op_abc(op_ab(alpha · A, beta · B), gamma · C)` element by element — cuTENSOR's
/// trinary element-wise op — the modes of A, B and C mapped onto D's by an equation
/// (`"ab,ba,b->ab"`: A plus B transposed, then with C broadcast over `a`). As
/// [`Elementwise`] otherwise: every input mode is one of D's, a mode an input lacks is
/// broadcast, row-major operands unless layouts are given.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // (A + Bᵀ) · c, c scaling each column of 2×2 matrices.
/// let a = dev.upload(vec![1.0f32, 2.0, 3.0, 4.0]).await?;
/// let b = dev.upload(vec![10.0f32, 20.0, 30.0, 40.0]).await?;
/// let c = dev.upload(vec![1.0f32, -1.0]).await?;
/// let d = dev.alloc::<f32>(4).await?;
/// let spec = ElementwiseTrinary::new("ab,ba,b->ab", &[2, 2], &[2, 2], &[2]).ops(TensorOp::Add, TensorOp::Mul);
/// dev.elementwise_trinary(spec, &a, &b, &c, &d).await?;
/// assert_eq!(dev.download(&d).await?, vec![11.0, -32.0, 23.0, -44.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseTrinary {
    /// The equation, `"ab,ba,b->ab"`.
    pub equation: String,
    /// A's shape and strides.
    pub a: TensorLayout,
    /// B's shape and strides.
    pub b: TensorLayout,
    /// C's shape and strides.
    pub c: TensorLayout,
    /// D's (`None`: row-major, its shape from the equation).
    pub d: Option<TensorLayout>,
    /// The operation of A and B.
    pub op_ab: TensorOp,
    /// The operation of that and C.
    pub op_abc: TensorOp,
    /// Scale of A.
    pub alpha: f64,
    /// Scale of B.
    pub beta: f64,
    /// Scale of C.
    pub gamma: f64,
}

crate::wire::wire_struct!(ElementwiseTrinary { equation, a, b, c, d, op_ab, op_abc, alpha, beta, gamma });

impl ElementwiseTrinary {
    /// `D = A + B + C` of row-major operands of these shapes into a row-major D.
    pub fn new(equation: &str, a_shape: &[usize], b_shape: &[usize], c_shape: &[usize]) -> Self {
        ElementwiseTrinary {
            equation: equation.to_string(),
            a: TensorLayout::row_major(a_shape),
            b: TensorLayout::row_major(b_shape),
            c: TensorLayout::row_major(c_shape),
            d: None,
            op_ab: TensorOp::Add,
            op_abc: TensorOp::Add,
            alpha: 1.0,
            beta: 1.0,
            gamma: 1.0,
        }
    }

    /// Sets the operations: `op_abc(op_ab(A, B), C)`.
    pub fn ops(mut self, op_ab: TensorOp, op_abc: TensorOp) -> Self {
        self.op_ab = op_ab;
        self.op_abc = op_abc;
        self
    }

    /// Sets A's, B's and C's layouts.
    pub fn layouts(mut self, a: TensorLayout, b: TensorLayout, c: TensorLayout) -> Self {
        self.a = a;
        self.b = b;
        self.c = c;
        self
    }

    /// Writes D laid out as given.
    pub fn output(mut self, d: TensorLayout) -> Self {
        self.d = Some(d);
        self
    }

    /// Sets alpha, beta and gamma.
    pub fn scaled(mut self, alpha: f64, beta: f64, gamma: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self.gamma = gamma;
        self
    }

    /// The plan: D's layout and each input's strides along D's modes (C's as `x`).
    pub(crate) fn plan(&self) -> Result<ModePlan, GpuError> {
        let (eq, inputs, d) = parse(&self.equation, ["A", "B", "C"], "a trinary element-wise op", "ab,ba,b->ab")?;
        let layouts = [(&self.a, "A"), (&self.b, "B"), (&self.c, "C")];
        pointwise_plan(&eq, &inputs, &layouts, &d, self.d.as_ref())
    }
}

/// The plan of an element-wise op: the output's layout (`out`, else row-major) and each
/// input's strides along the output's modes `o` — every input mode must be one of them.
fn pointwise_plan(
    eq: &str,
    inputs: &[Vec<char>],
    layouts: &[(&TensorLayout, &str)],
    o: &[char],
    out: Option<&TensorLayout>,
) -> Result<ModePlan, GpuError> {
    let operands: Vec<(&[char], &TensorLayout, &str)> =
        inputs.iter().zip(layouts).map(|(m, (l, n))| (m.as_slice(), *l, *n)).collect();
    let size = sizes(eq, &operands)?;
    for (x, _, which) in &operands {
        if let Some(m) = x.iter().find(|m| !o.contains(m)) {
            return Err(bad(
                format!("`{eq}`: mode `{m}` of {which} is not in the output: an element-wise op reduces nothing (reduce first)"),
                "equation",
                "every input mode in the output",
                m,
            ));
        }
    }
    let shape: Vec<usize> = o.iter().map(|m| size[m]).collect();
    let layout = out.cloned().unwrap_or_else(|| TensorLayout::row_major(&shape));
    output_matches(eq, &layout, &shape)?;
    let stride = |k: usize, m: &char| operands.get(k).map_or(0, |(x, l, _)| stride_of(m, x, l));
    Ok(ModePlan {
        dims: o
            .iter()
            .enumerate()
            .map(|(i, m)| ModeDim {
                size: size[m],
                c: layout.strides[i],
                a: stride(0, m),
                b: stride(1, m),
                x: stride(2, m),
            })
            .collect(),
        reduced: vec![],
        c: layout,
    })
}

/// `C = alpha · reduce(A) + beta · C`: A reduced by `op` over the modes the output
/// lacks (`"abc->ac"` reduces over `b`; `"ab->"` to one value), the others permuted as
/// the output names them. Row-major operands unless layouts are given.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // The largest of each column of a 2×3 matrix.
/// let a = dev.upload(vec![1.0f32, 5.0, 3.0, 4.0, 2.0, 6.0]).await?;
/// let c = dev.alloc::<f32>(3).await?;
/// dev.reduce_modes(TensorReduction::new("ij->j", &[2, 3]).op(TensorOp::Max), &a, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![4.0, 5.0, 6.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TensorReduction {
    /// The equation, `"abc->ac"`.
    pub equation: String,
    /// A's shape and strides.
    pub a: TensorLayout,
    /// C's (`None`: row-major, its shape from the equation).
    pub c: Option<TensorLayout>,
    /// The reduction.
    pub op: TensorOp,
    /// Scale of the reduction.
    pub alpha: f64,
    /// Scale of the old C (zero: C is not read).
    pub beta: f64,
}

crate::wire::wire_struct!(TensorReduction { equation, a, c, op, alpha, beta });

impl TensorReduction {
    /// The sum of a row-major A of `shape` over the modes the output lacks, into a
    /// row-major C.
    pub fn new(equation: &str, shape: &[usize]) -> Self {
        TensorReduction {
            equation: equation.to_string(),
            a: TensorLayout::row_major(shape),
            c: None,
            op: TensorOp::Add,
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// Sets the reduction.
    pub fn op(mut self, op: TensorOp) -> Self {
        self.op = op;
        self
    }

    /// Sets A's layout.
    pub fn layout(mut self, a: TensorLayout) -> Self {
        self.a = a;
        self
    }

    /// Writes C laid out as given.
    pub fn output(mut self, c: TensorLayout) -> Self {
        self.c = Some(c);
        self
    }

    /// Sets alpha and beta.
    pub fn scaled(mut self, alpha: f64, beta: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// The plan: C's layout, A's strides along C's modes and along the reduced ones.
    pub(crate) fn plan(&self) -> Result<ModePlan, GpuError> {
        let (eq, inputs, c) = parse(&self.equation, ["A"], "a reduction", "abc->ac")?;
        let a = &inputs[0];
        let size = sizes(&eq, &[(a, &self.a, "A")])?;
        let shape: Vec<usize> = c.iter().map(|m| size[m]).collect();
        let layout = self.c.clone().unwrap_or_else(|| TensorLayout::row_major(&shape));
        output_matches(&eq, &layout, &shape)?;
        let mut reduced: Vec<char> = a.iter().copied().filter(|m| !c.contains(m)).collect();
        reduced.dedup();
        Ok(ModePlan {
            dims: c
                .iter()
                .enumerate()
                .map(|(i, m)| ModeDim {
                    size: size[m],
                    c: layout.strides[i],
                    a: stride_of(m, a, &self.a),
                    b: 0,
                    x: 0,
                })
                .collect(),
            reduced: reduced
                .iter()
                .map(|m| ModeDim {
                    size: size[m],
                    c: 0,
                    a: stride_of(m, a, &self.a),
                    b: 0,
                    x: 0,
                })
                .collect(),
            c: layout,
        })
    }
}

/// One mode of a plan: its size and the stride of the output (`c`), A, B and a trinary
/// op's third input (`x`) along it (0: broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModeDim {
    pub(crate) size: usize,
    pub(crate) c: usize,
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) x: usize,
}

/// An element-wise op or a reduction, planned: C's modes (in C's order) and the reduced
/// ones, with C's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModePlan {
    pub(crate) dims: Vec<ModeDim>,
    pub(crate) reduced: Vec<ModeDim>,
    pub(crate) c: TensorLayout,
}

/// A parsed equation: without spaces, each input's modes, the output's.
type Parsed = (String, Vec<Vec<char>>, Vec<char>);

/// The equation `equation` of `N` operands (named `names`) of the op `what`, its output
/// required (`example` shows the form): the equation without spaces, each operand's
/// modes, the output's.
fn parse<const N: usize>(equation: &str, names: [&str; N], what: &str, example: &str) -> Result<Parsed, GpuError> {
    let (eq, ops, output) = split(equation)?;
    if ops.len() != N {
        return Err(bad(
            format!("`{eq}`: {what} takes {N} operand(s) (`{example}`), got {}", ops.len()),
            "equation",
            format_args!("{N} operand(s)"),
            ops.len(),
        ));
    }
    let Some(c) = output else {
        return Err(bad(format!("`{eq}`: name the output (`{example}`)"), "equation", "`->` and the output's modes", "none"));
    };
    let inputs = ops.iter().zip(names).map(|(o, n)| modes(&eq, o, n)).collect::<Result<Vec<_>, _>>()?;
    let c = modes(&eq, &c, "the output")?;
    check_output(&eq, &c, &inputs.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
    Ok((eq, inputs, c))
}

/// Each mode's size, the operands' shapes checked against their modes and each other
/// (a mode written twice in one operand — a diagonal — is refused).
fn sizes(eq: &str, operands: &[(&[char], &TensorLayout, &str)]) -> Result<BTreeMap<char, usize>, GpuError> {
    let mut size = BTreeMap::new();
    for (letters, layout, which) in operands {
        if letters.len() != layout.shape.len() {
            return Err(bad(
                format!("`{eq}`: {which} has {} modes but {} dimensions", letters.len(), layout.shape.len()),
                "shape",
                format_args!("{} dimensions", letters.len()),
                layout.shape.len(),
            ));
        }
        for (i, (&m, &n)) in letters.iter().zip(&layout.shape).enumerate() {
            if letters[..i].contains(&m) {
                return Err(bad(
                    format!("`{eq}`: mode `{m}` appears twice in {which}; diagonals are for contractions"),
                    "equation",
                    "each mode once per operand",
                    m,
                ));
            }
            match size.insert(m, n) {
                Some(old) if old != n => {
                    return Err(bad(
                        format!("`{eq}`: mode `{m}` is {old} long in one operand and {n} in {which}"),
                        "shape",
                        old,
                        n,
                    ))
                }
                _ => {}
            }
        }
    }
    Ok(size)
}

/// Refuses a given output layout whose shape is not the equation's.
fn output_matches(eq: &str, c: &TensorLayout, shape: &[usize]) -> Result<(), GpuError> {
    if c.shape != shape {
        return Err(bad(
            format!("`{eq}`: the output's layout has shape {:?}, the equation gives {shape:?}", c.shape),
            "c",
            format_args!("{shape:?}"),
            format_args!("{:?}", c.shape),
        ));
    }
    Ok(())
}

/// The stride of mode `m` in an operand of `letters` laid out as `layout` (0 if absent).
fn stride_of(m: &char, letters: &[char], layout: &TensorLayout) -> usize {
    letters.iter().position(|x| x == m).map_or(0, |i| layout.strides[i])
}
