//! Matmuls through cuBLASLt: f32 (exact or TF32), f16, bf16 and FP8 (E4M3, E5M2) inputs
//! with f32 accumulation, an output type of the caller's choice, and fused epilogues (a
//! bias per row, ReLU, GELU) — on the CPU device, the same arithmetic emulated.
//!
//! `C = act(alpha·op(A)·op(B) + beta·C + bias)`, column-major as in cuBLAS; C is read
//! only when `beta ≠ 0`. Why its own call beside `gemm`: the precision is a per-call
//! choice ([`Compute`]; TF32 is never on unless asked), inputs and output may differ in
//! type, and the epilogue runs inside the matmul's kernel instead of as another pass over
//! C. Per-tensor FP8 scales are folded into `alpha` (the product of the two dequantizing
//! scales).

#[cfg(feature = "blas")]
mod cpu;
#[cfg(feature = "blas")]
mod cuda;
mod operand;

pub(crate) use operand::lock_all;
pub use operand::MatmulBuffer;

use super::gemm::{validate as validate_gemm, Batch, Gemm};
use crate::error::{GpuError, Invalid};
use crate::sys::cublaslt::{LtEpilogue, LtKey, LtType};

/// How the products accumulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compute {
    /// f32 arithmetic throughout (`CUBLAS_COMPUTE_32F`): exact f32 for f32 inputs; f32
    /// accumulation for f16, bf16 and FP8 inputs. The default.
    #[default]
    F32,
    /// TF32 tensor cores for f32 inputs (`CUBLAS_COMPUTE_32F_FAST_TF32`): inputs rounded
    /// to 10 mantissa bits, f32 accumulation — ~8× the f32 rate on an H200, ~1e-3
    /// relative error. f32 inputs only.
    Tf32,
}

crate::wire::wire_enum!(Compute { Compute::F32, Compute::Tf32 });

/// The activation an epilogue applies last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Activation {
    /// None.
    #[default]
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// GELU in its tanh form, as cuBLASLt computes it:
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu,
}

crate::wire::wire_enum!(Activation {
    Activation::Identity,
    Activation::Relu,
    Activation::Gelu
});

/// What a matmul does to its result before writing it: add a bias (one value per row of
/// C, the same for every column and every matrix of a batch), then an activation.
#[derive(Debug, Clone, Default)]
pub struct Epilogue {
    /// The activation, applied after the bias.
    pub activation: Activation,
    /// A vector of `m` values added to each column (its type: C's; bf16 for FP8
    /// inputs with an f32 C, as cuBLASLt requires). A view as the bias must start a
    /// multiple of 16 bytes into its buffer.
    pub bias: Option<MatmulBuffer>,
}

crate::wire::wire_struct!(Epilogue { activation, bias });

impl Epilogue {
    /// Nothing: C is the scaled product.
    pub fn none() -> Self {
        Epilogue::default()
    }

    /// ReLU of the result.
    pub fn relu() -> Self {
        Epilogue::none().then(Activation::Relu)
    }

    /// GELU (tanh form) of the result.
    pub fn gelu() -> Self {
        Epilogue::none().then(Activation::Gelu)
    }

    /// Adds `bias` (m values) to every column; chain [`Epilogue::then`] for an activation.
    pub fn bias(bias: impl Into<MatmulBuffer>) -> Self {
        Epilogue {
            activation: Activation::Identity,
            bias: Some(bias.into()),
        }
    }

    /// Applies `activation` after the bias.
    pub fn then(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    fn lt(&self) -> LtEpilogue {
        match (self.bias.is_some(), self.activation) {
            (false, Activation::Identity) => LtEpilogue::None,
            (false, Activation::Relu) => LtEpilogue::Relu,
            (false, Activation::Gelu) => LtEpilogue::Gelu,
            (true, Activation::Identity) => LtEpilogue::Bias,
            (true, Activation::Relu) => LtEpilogue::BiasRelu,
            (true, Activation::Gelu) => LtEpilogue::BiasGelu,
        }
    }
}

/// One matmul: its shape, transposes, scales and leading dimensions as a [`Gemm`] (f32
/// scales: cuBLASLt's scale type for every input type here), the arithmetic and the
/// batch. Column-major: `op(A)` is m×k, `op(B)` k×n, C m×n. FP8 inputs require A
/// transposed and B not (cuBLASLt's "TN" layout); `alpha` carries their per-tensor
/// dequantizing scales (the product of the two).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // bf16 inputs, f32 output, C = relu(A·B + bias).
/// let a = dev.upload(vec![bf16::from_f32(1.0), bf16::from_f32(-2.0)]).await?; // 2×1
/// let b = dev.upload(vec![bf16::from_f32(3.0)]).await?; // 1×1
/// let c = dev.alloc::<f32>(2).await?;
/// let bias = dev.upload(vec![0.5f32, 0.5]).await?;
/// dev.matmul(Matmul::new(2, 1, 1), Epilogue::bias(&bias).then(Activation::Relu), &a, &b, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![3.5, 0.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Matmul {
    /// Shape, transposes, alpha and beta, leading dimensions (as for `gemm`).
    pub shape: Gemm<f32>,
    /// The arithmetic: [`Compute::F32`] unless TF32 is asked for.
    pub compute: Compute,
    /// Strided batch (`Batch::one()`: a single matmul).
    pub batch: Batch,
}

crate::wire::wire_struct!(Matmul { shape, compute, batch });

impl Matmul {
    /// `C = A·B` with tight leading dimensions, f32 arithmetic, no batch.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Matmul {
            shape: Gemm::new(m, n, k),
            compute: Compute::F32,
            batch: Batch::one(),
        }
    }

    /// Uses the transposes given, with tight leading dimensions for them
    /// ([`Gemm::transposed`]).
    pub fn transposed(mut self, transa: bool, transb: bool) -> Self {
        self.shape = self.shape.transposed(transa, transb);
        self
    }

    /// Sets alpha and beta.
    pub fn scaled(mut self, alpha: f32, beta: f32) -> Self {
        self.shape = self.shape.scaled(alpha, beta);
        self
    }

    /// Sets the leading dimensions.
    pub fn leading(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.shape = self.shape.leading(lda, ldb, ldc);
        self
    }

    /// Chooses the arithmetic.
    pub fn compute(mut self, compute: Compute) -> Self {
        self.compute = compute;
        self
    }

    /// Runs `batch.count` matmuls over strided matrices (the bias shared by all).
    pub fn batched(mut self, batch: Batch) -> Self {
        self.batch = batch;
        self
    }

    /// Checks the call on both backends alike: the type combination cuBLASLt runs, the
    /// precision, FP8's layout, shapes against lengths, the bias, and C apart from every
    /// input. Returns the plan's key without addresses (alignments at 256).
    pub(crate) fn check(
        &self,
        epilogue: &Epilogue,
        a: &MatmulBuffer,
        b: &MatmulBuffer,
        c: &MatmulBuffer,
    ) -> Result<LtKey, GpuError> {
        let g = &self.shape;
        let (ta, tb, tc) = (a.lt_type(), b.lt_type(), c.lt_type());
        let inputs_ok = match (ta, tb) {
            (LtType::E5m2, LtType::E5m2) => false,
            (x, y) if x.is_fp8() && y.is_fp8() => true,
            (x, y) => x == y,
        };
        if !inputs_ok {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a matmul of {} by {}: A and B must both be f32, both f16, both bf16, or FP8 \
                     (E4M3×E4M3, E4M3×E5M2, E5M2×E4M3; not E5M2×E5M2)",
                    a.dtype_name(),
                    b.dtype_name()
                ))
                .arg("b")
                .mismatch(
                    format_args!("a type paired with A's {}", a.dtype_name()),
                    b.dtype_name(),
                ),
            ));
        }
        let outputs: &[LtType] = match ta {
            LtType::F32 => &[LtType::F32],
            LtType::F16 => &[LtType::F16, LtType::F32],
            LtType::Bf16 => &[LtType::Bf16, LtType::F32],
            LtType::E4m3 | LtType::E5m2 => &[LtType::F32, LtType::Bf16, LtType::F16],
        };
        if tc.is_fp8() {
            return Err(GpuError::Unsupported(
                "FP8 outputs (with their output scale and amax) are not supported yet: write C as f32, bf16 or f16"
                    .into(),
            ));
        }
        if !outputs.contains(&tc) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "a matmul of {} inputs cannot write {}: C may be {}",
                    a.dtype_name(),
                    c.dtype_name(),
                    names(outputs)
                ))
                .arg("c")
                .mismatch(names(outputs), c.dtype_name()),
            ));
        }
        if self.compute == Compute::Tf32 && ta != LtType::F32 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "TF32 rounds f32 inputs; these are {}: use Compute::F32 (their products accumulate in f32)",
                    a.dtype_name()
                ))
                .arg("compute")
                .mismatch("Compute::F32 for non-f32 inputs", "Compute::Tf32"),
            ));
        }
        if ta.is_fp8() && (!self.shape.transa || self.shape.transb) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(
                    "FP8 matmuls take A transposed and B not (cuBLASLt's \"TN\" layout): store A as k×m \
                     (each column of op(A)'s rows contiguous) and use .transposed(true, false)",
                )
                .arg("transa")
                .mismatch(
                    "transposed(true, false)",
                    format_args!("transposed({}, {})", g.transa, g.transb),
                ),
            ));
        }
        validate_gemm(g, &self.batch, a.len(), b.len(), c.len())?;
        let bias = epilogue.bias.as_ref();
        if let Some(bias) = bias {
            let want = if ta.is_fp8() && tc == LtType::F32 {
                LtType::Bf16
            } else {
                tc
            };
            if bias.lt_type() != want {
                let want_name = names(&[want]);
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "the bias of a matmul writing {} from {} inputs must be {want_name}, not {}",
                        c.dtype_name(),
                        a.dtype_name(),
                        bias.dtype_name()
                    ))
                    .arg("bias")
                    .mismatch(want_name, bias.dtype_name()),
                ));
            }
            if bias.len() != g.m {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "the bias holds one value per row of C: {} values, not {}",
                        g.m,
                        bias.len()
                    ))
                    .arg("bias")
                    .mismatch(
                        format_args!("{} elements", g.m),
                        format_args!("{} elements", bias.len()),
                    ),
                ));
            }
            if bias.byte_offset() % 16 != 0 {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "a bias view must start at a multiple of 16 bytes into its buffer (this one starts {} \
                         bytes in): cuBLASLt reads the bias in aligned vectors",
                        bias.byte_offset()
                    ))
                    .arg("bias")
                    .mismatch(
                        "an offset of a multiple of 16 bytes",
                        format_args!("{} bytes", bias.byte_offset()),
                    ),
                ));
            }
        }
        for (name, input) in [("A", Some(a)), ("B", Some(b)), ("bias", bias)] {
            if input.is_some_and(|i| c.overlaps(i)) {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "the output C must not overlap {name} (disjoint views of one buffer may)"
                    ))
                    .arg("c")
                    .mismatch(
                        format_args!("elements apart from {name}'s"),
                        format_args!("elements of {name}"),
                    ),
                ));
            }
        }
        let to_i = |v: usize| v as i64;
        Ok(LtKey {
            a: ta,
            b: tb,
            c: tc,
            bias: bias.map(|b| b.lt_type()),
            tf32: self.compute == Compute::Tf32,
            epilogue: epilogue.lt(),
            transa: g.transa,
            transb: g.transb,
            m: g.m as u64,
            n: g.n as u64,
            k: g.k as u64,
            lda: to_i(g.lda),
            ldb: to_i(g.ldb),
            ldc: to_i(g.ldc),
            batch: self.batch.count as i32,
            stride_a: to_i(self.batch.stride_a),
            stride_b: to_i(self.batch.stride_b),
            stride_c: to_i(self.batch.stride_c),
            align: [256; 3],
        })
    }
}

/// `"f32, bf16"`: element types for a message.
fn names(types: &[LtType]) -> String {
    types
        .iter()
        .map(|t| match t {
            LtType::F32 => "f32",
            LtType::F16 => "f16",
            LtType::Bf16 => "bf16",
            LtType::E4m3 => "f8e4m3",
            LtType::E5m2 => "f8e5m2",
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `"matmul<bf16→f32>"`, for the timeline.
pub(crate) fn timeline_name(a: &MatmulBuffer, c: &MatmulBuffer) -> String {
    format!("matmul<{}→{}>", a.dtype_name(), c.dtype_name())
}

#[cfg(feature = "blas")]
pub(crate) use cpu::run as run_cpu;
#[cfg(feature = "blas")]
pub(crate) use cuda::{enqueue_at, run as run_cuda};
