//! cuBLASLt matmuls: the handle with its workspace, and one plan (descriptors, layouts and
//! the heuristic's algorithm) per distinct matmul, kept for reuse.
//!
//! Why not cudarc's `Matmul` trait: it turns TF32 on for every f32 matmul, takes A, B and
//! D of one type (no FP8 inputs with a wider output), and builds the descriptors and asks
//! the heuristic on every call (tens of µs). Here every choice is explicit in a
//! [`LtKey`], a key's plan is made once, and the heuristic is told the operands' real
//! alignment — a view may start anywhere, and cuBLASLt assumes 256-byte pointers unless
//! told otherwise.
//!
//! The operation's description (`LtType`, `LtEpilogue`, `LtKey`) is plain data that the
//! matmul's checks build in every build; the handle and plans (`handle.rs`) exist with
//! the `blas` feature.

#[cfg(feature = "blas")]
mod handle;
#[cfg(feature = "blas")]
pub(crate) use handle::*;

/// An element type cuBLASLt reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LtType {
    F32,
    F16,
    Bf16,
    E4m3,
    E5m2,
}

impl LtType {
    /// Whether this is one of the FP8 types.
    pub(crate) fn is_fp8(self) -> bool {
        matches!(self, LtType::E4m3 | LtType::E5m2)
    }
}

/// What runs after the product, fused into the matmul's own kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LtEpilogue {
    None,
    Relu,
    Gelu,
    Bias,
    BiasRelu,
    BiasGelu,
}

impl LtEpilogue {
    fn has_bias(self) -> bool {
        matches!(self, LtEpilogue::Bias | LtEpilogue::BiasRelu | LtEpilogue::BiasGelu)
    }
}

/// Everything that decides a matmul's plan. Column-major, `C = act(alpha·op(A)·op(B) +
/// beta·C + bias)` (cuBLASLt's D is C), `batch` matrices apart by the strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LtKey {
    pub a: LtType,
    pub b: LtType,
    pub c: LtType,
    pub bias: Option<LtType>,
    /// TF32 tensor cores for f32 inputs (`CUBLAS_COMPUTE_32F_FAST_TF32`); otherwise
    /// `CUBLAS_COMPUTE_32F`.
    pub tf32: bool,
    pub epilogue: LtEpilogue,
    pub transa: bool,
    pub transb: bool,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub batch: i32,
    pub stride_a: i64,
    pub stride_b: i64,
    pub stride_c: i64,
    /// The largest power of two (≤ 256) dividing the A, B and D addresses: the heuristic
    /// picks only algorithms that work at these alignments.
    pub align: [u32; 3],
}

/// Bytes per element of `t`.
pub(crate) fn elem_bytes(t: LtType) -> u64 {
    match t {
        LtType::F32 => 4,
        LtType::F16 | LtType::Bf16 => 2,
        LtType::E4m3 | LtType::E5m2 => 1,
    }
}

/// The alignment (a power of two, at most 256) of a device address or byte offset (0:
/// any alignment), for [`LtKey::align`].
pub(crate) fn alignment(address: u64) -> u32 {
    if address == 0 {
        256
    } else {
        (1u64 << address.trailing_zeros().min(8)) as u32
    }
}
