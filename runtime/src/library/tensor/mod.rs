//! `TensorActor`: tensor contractions in einsum notation (`"ij,jk->ik"`,
//! `"bhqd,bhkd->bhqk"`, any modes, strides from views) over f16, bf16, f32 and f64, and
//! in the same notation element-wise binary ops with permutation and broadcast
//! (`"ab,ba->ab"`) and reductions over chosen modes (`"abc->ac"`), as our own kernels
//! (`modes.rs`).
//!
//! A contraction runs as one strided-batched GEMM (the way `torch.einsum` lowers to
//! `bmm`): operands whose strides already lay them out as a (transposed) matrix batch are
//! read in place, any other is first gathered by a `#[kernel]` of ours into a tight
//! batch on the device, and an output that is no such batch is written through a
//! temporary and a scatter kernel — never a copy through the host (`einsum.rs` plans it).
//! The cuBLAS handle lives in this actor, on its own stream; the CPU device runs the same
//! plan (the kernels emulated, the host GEMM, which accumulates f16/bf16/f32 in f32 and
//! f64 in f64 as cuBLAS does).
//!
//! cuTENSOR itself is not used: the lent GPU hosts this was built on have no
//! `libcutensor`, and the GEMM plan reaches cuBLAS's ceiling for contractions that map
//! to a batched GEMM, which is what einsum's two-operand form always is.

mod einsum;
#[cfg(feature = "tensor")]
mod exec;
#[cfg(feature = "tensor")]
mod kernels;
mod layout;
mod modes;
#[cfg(feature = "tensor")]
mod plans;

use std::collections::BTreeMap;

use atomr_accel_cuda_macros::gpu_actor;

use crate::actor::{Context, Deferred};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::library::shell::Library;

pub use layout::TensorLayout;
pub use modes::{Elementwise, ElementwiseTrinary, TensorOp, TensorReduction};

/// Element types of the tensor library: f16, bf16, f32, f64 (the GEMM's dtypes; f16
/// and bf16 accumulate in f32).
pub trait TensorFloat: crate::dtype::BlasBase + crate::kernel::dsl::Float {
    /// What element-wise ops and reductions compute in: f32 for f16, bf16 and f32; f64
    /// for f64.
    type Compute: crate::kernel::dsl::Float;
}
impl TensorFloat for half::f16 {
    type Compute = f32;
}
impl TensorFloat for half::bf16 {
    type Compute = f32;
}
impl TensorFloat for f32 {
    type Compute = f32;
}
impl TensorFloat for f64 {
    type Compute = f64;
}

/// One contraction `C = alpha · einsum(A, B) + beta · C`: the equation and how each
/// operand lies in its buffer (row-major unless given; a view's strides are relative to
/// the view's start).
///
/// Each letter is a mode; a mode in both operands and not in the output is summed over,
/// one in a single operand and not in the output is summed too, one written twice in an
/// operand reads its diagonal. Without `->` the output is NumPy's: the letters that
/// appear once, in alphabetical order.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// use atomr_accel_cuda_runtime::library::tensor::{Contraction, TensorLayout};
/// // C = A·B for 2×2 matrices stored column-major, as cuBLAS keeps them.
/// let col = TensorLayout::column_major(&[2, 2]);
/// let a = dev.upload(vec![1.0f32, 3.0, 2.0, 4.0]).await?; // [[1, 2], [3, 4]]
/// let b = dev.upload(vec![5.0f32, 7.0, 6.0, 8.0]).await?; // [[5, 6], [7, 8]]
/// let c = dev.alloc::<f32>(4).await?;
/// let op = Contraction::with_layouts("ij,jk->ik", col.clone(), col.clone()).output(col);
/// dev.contract(op, &a, &b, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![19.0, 43.0, 22.0, 50.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Contraction {
    /// The einsum equation, `"ij,jk->ik"`.
    pub equation: String,
    /// A's shape and strides.
    pub a: TensorLayout,
    /// B's shape and strides.
    pub b: TensorLayout,
    /// C's shape and strides (`None`: row-major, its shape from the equation).
    pub c: Option<TensorLayout>,
    /// Scale of the contraction.
    pub alpha: f64,
    /// Scale of the old C (zero: C is not read).
    pub beta: f64,
}

crate::wire::wire_struct!(Contraction { equation, a, b, c, alpha, beta });

impl Contraction {
    /// `C = einsum(A, B)` of row-major operands of these shapes into a row-major C.
    pub fn new(equation: &str, a_shape: &[usize], b_shape: &[usize]) -> Self {
        Contraction::with_layouts(equation, TensorLayout::row_major(a_shape), TensorLayout::row_major(b_shape))
    }

    /// `C = einsum(A, B)` of operands laid out as given, into a row-major C.
    pub fn with_layouts(equation: &str, a: TensorLayout, b: TensorLayout) -> Self {
        Contraction {
            equation: equation.to_string(),
            a,
            b,
            c: None,
            alpha: 1.0,
            beta: 0.0,
        }
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

    /// The output's shape, from the equation and the operands' shapes: what to allocate
    /// C for (its elements: the product).
    pub fn output_shape(&self) -> Result<Vec<usize>, GpuError> {
        let eq = einsum::Equation::parse(&self.equation)?;
        let mut size = BTreeMap::new();
        for (letters, layout) in [(&eq.a, &self.a), (&eq.b, &self.b)] {
            if letters.len() != layout.shape.len() {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "einsum `{}`: an operand has {} modes but {} dimensions",
                        self.equation,
                        letters.len(),
                        layout.shape.len()
                    ))
                    .arg("shape")
                    .mismatch(format_args!("{} dimensions", letters.len()), layout.shape.len()),
                ));
            }
            size.extend(letters.iter().copied().zip(layout.shape.iter().copied()));
        }
        Ok(eq.c.iter().map(|m| size[m]).collect())
    }

    /// C's layout: the one given, or row-major.
    fn output_layout(&self) -> Result<TensorLayout, GpuError> {
        match &self.c {
            Some(c) => Ok(c.clone()),
            None => Ok(TensorLayout::row_major(&self.output_shape()?)),
        }
    }
}

#[cfg(feature = "tensor")]
pub(crate) use exec::TensorCore;
#[cfg(not(feature = "tensor"))]
use crate::library::shell::Absent as TensorCore;

/// The tensor library of a device: contractions, on its own cuBLAS handle and stream.
pub struct TensorActor(pub(crate) Library<TensorCore>);

#[gpu_actor(crate = crate, wire, device, feature = "tensor")]
impl TensorActor {
    /// Creates the cuBLAS handle on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// `C = alpha · einsum(A, B) + beta · C` as `spec` describes it (see
    /// [`Contraction`]). C must not overlap A or B, and no two of its elements may share
    /// memory; every operand must fit its buffer or view.
    #[handler(dtypes(float), device)]
    fn contract<T: TensorFloat>(
        &mut self,
        spec: Contraction,
        a: GpuRef<T>,
        b: GpuRef<T>,
        c: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.contract(&spec, &a, &b, &c)
    }

    /// `C = op(alpha · A, beta · B)` element by element, A's and B's modes mapped onto
    /// C's as `spec` says (see [`Elementwise`]): permutations and broadcasts read in
    /// place. Computed in f32 (f64 for f64). C must not overlap A or B.
    #[handler(dtypes(float), device)]
    fn elementwise<T: TensorFloat>(
        &mut self,
        spec: Elementwise,
        a: GpuRef<T>,
        b: GpuRef<T>,
        c: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.elementwise(&spec, &a, &b, &c)
    }

    /// `D = op_abc(op_ab(alpha · A, beta · B), gamma · C)` element by element, the
    /// inputs' modes mapped onto D's as `spec` says (see [`ElementwiseTrinary`]): one
    /// pass where two binary ops would write and re-read a temporary. Computed in f32
    /// (f64 for f64). D must not overlap an input.
    #[handler(dtypes(float), device)]
    fn elementwise_trinary<T: TensorFloat>(
        &mut self,
        spec: ElementwiseTrinary,
        a: GpuRef<T>,
        b: GpuRef<T>,
        c: GpuRef<T>,
        d: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.elementwise_trinary(&spec, [&a, &b, &c], &d)
    }

    /// `C = alpha · reduce(A) + beta · C` over the modes `spec`'s output lacks (see
    /// [`TensorReduction`]). Each element of C is one thread's loop: for a whole-buffer
    /// sum, `Device::sum` is the fast path. C must not overlap A.
    #[handler(dtypes(float), device)]
    fn reduce_modes<T: TensorFloat>(&mut self, spec: TensorReduction, a: GpuRef<T>, c: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.reduce_modes(&spec, &a, &c)
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::{Contraction, Elementwise, ElementwiseTrinary, TensorLayout, TensorOp, TensorReduction};
}
