//! Scaled-dot-product attention's shape ([`Attention`]), how it is computed
//! ([`AttentionMethod`]), and the tiles its kernel takes (`attention_kernel.rs`).

use super::conv::at_least_one;
use crate::error::{GpuError, Invalid};

/// How attention's Q, K, V and O lie in memory (row-major, `seq` the queries or keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AttentionLayout {
    /// `[batch, heads, seq, head_dim]`: PyTorch's `scaled_dot_product_attention`.
    #[default]
    Bhsd,
    /// `[batch, seq, heads, head_dim]`: what a projection of `[batch, seq, model]`
    /// gives with the model axis split into heads (FlashAttention's layout) — no
    /// transpose needed.
    Bshd,
}

crate::wire::wire_enum!(AttentionLayout {
    AttentionLayout::Bhsd,
    AttentionLayout::Bshd
});

/// How [`Attention`] is computed.
///
/// Why several ways: the kernel language has no tensor-core instructions yet, so our one
/// fused kernel runs on CUDA cores — memory-lean (the scores never reach memory) but an
/// order of magnitude behind tensor-core attention in f16/bf16. cuDNN's fused (flash)
/// attention keeps the scores on chip and runs on tensor cores, for f16 and bf16.
/// Through cuBLAS, the two products run on tensor cores for every type, at the price
/// of the scores in memory (PyTorch's "math" attention does the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AttentionMethod {
    /// On a GPU, [`AttentionMethod::Cudnn`] where cuDNN has a fused engine for the
    /// call (f16 or bf16, `head_dim` a multiple of 8, 16-byte aligned operands); else
    /// [`AttentionMethod::Gemm`] where one head's scores take at most
    /// [`GEMM_SCORES_MAX`] bytes and `keys` is a multiple of 4; else
    /// [`AttentionMethod::Tiled`].
    #[default]
    Auto,
    /// One tiled kernel in the manner of FlashAttention: memory O(queries·head_dim),
    /// CUDA cores.
    Tiled,
    /// `S = Q·Kᵀ` and `O = P·V` as strided-batched GEMMs (cuBLAS on a GPU: tensor cores
    /// for f16/bf16), the scaled, masked softmax in place between them, a batch of heads
    /// at a time: a temporary of at most 256 MiB of scores in the element type (one
    /// head's, `queries·keys` elements, where that is more). Needs `keys` a multiple of
    /// 4.
    Gemm,
    /// cuDNN's fused attention (its graph API: the scores stay on chip, tensor cores),
    /// planned once per shape through cuDNN's heuristics: f16 and bf16, `head_dim` a
    /// multiple of 8 up to 256, Q, K, V and O starting on 16-byte boundaries.
    /// `Unsupported` on a GPU where cuDNN is missing or has no engine for the call. On
    /// the CPU device (no cuDNN) it computes what [`AttentionMethod::Tiled`] does.
    Cudnn,
}

crate::wire::wire_enum!(AttentionMethod {
    AttentionMethod::Auto,
    AttentionMethod::Tiled,
    AttentionMethod::Gemm,
    AttentionMethod::Cudnn
});

/// The most bytes of one head's scores (`queries·keys` elements) for which
/// [`AttentionMethod::Auto`] takes the GEMMs (1 GiB).
pub const GEMM_SCORES_MAX: usize = 1 << 30;

/// Scaled-dot-product attention, `O = softmax(Q·Kᵀ · scale [+ causal mask]) · V`, as
/// PyTorch's `scaled_dot_product_attention`: Q of `queries` and K, V of `keys` vectors
/// of `head_dim` per head, O like Q, laid out as [`AttentionLayout`] says
/// (`[batch, heads, seq, head_dim]` by default).
///
/// Causal masking is PyTorch's `is_causal`: query `i` sees keys `0..=i` (aligned at the
/// top left). The default scale is `1/√head_dim`.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // One head, two queries over two keys of dimension 1; causal: the first query
/// // sees only the first key, so its output is that key's value.
/// let att = Attention::new(1, 1, 2, 2, 1).causal(true);
/// let q = dev.upload(vec![1.0f32, 1.0]).await?;
/// let k = dev.upload(vec![0.0f32, 0.0]).await?;
/// let v = dev.upload(vec![3.0f32, 5.0]).await?;
/// let o = dev.alloc::<f32>(2).await?;
/// dev.attention(att, &q, &k, &v, &o).await?;
/// // Equal scores: the second query averages both values.
/// assert_eq!(dev.download(&o).await?, vec![3.0, 4.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attention {
    /// Batch size.
    pub batch: usize,
    /// Heads per batch item.
    pub heads: usize,
    /// Query positions (rows of Q and O).
    pub queries: usize,
    /// Key positions (rows of K and V).
    pub keys: usize,
    /// Elements of each query, key and value vector.
    pub head_dim: usize,
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
    /// The factor on `Q·Kᵀ`; `None`: `1/√head_dim`.
    pub scale: Option<f64>,
    /// How the tensors lie in memory.
    pub layout: AttentionLayout,
    /// How it is computed.
    pub method: AttentionMethod,
}

crate::wire::wire_struct!(Attention {
    batch,
    heads,
    queries,
    keys,
    head_dim,
    causal,
    scale,
    layout,
    method
});

/// The largest head dimension the kernel's tiles hold.
pub const MAX_HEAD_DIM: usize = 256;

impl Attention {
    /// Attention over `[batch, heads, queries, head_dim]` queries and `[batch, heads,
    /// keys, head_dim]` keys and values: not causal, scale `1/√head_dim`.
    pub fn new(batch: usize, heads: usize, queries: usize, keys: usize, head_dim: usize) -> Self {
        Attention {
            batch,
            heads,
            queries,
            keys,
            head_dim,
            causal: false,
            scale: None,
            layout: AttentionLayout::Bhsd,
            method: AttentionMethod::Auto,
        }
    }

    /// Sets how it is computed.
    pub fn method(mut self, method: AttentionMethod) -> Self {
        self.method = method;
        self
    }

    /// Sets the memory layout.
    pub fn layout(mut self, layout: AttentionLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets causal masking.
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }

    /// Sets the factor on `Q·Kᵀ`.
    pub fn scale(mut self, scale: f64) -> Self {
        self.scale = Some(scale);
        self
    }

    /// The factor on `Q·Kᵀ`.
    pub fn scale_factor(&self) -> f64 {
        self.scale.unwrap_or(1.0 / (self.head_dim as f64).sqrt())
    }

    /// Elements of Q and of O.
    pub fn query_len(&self) -> usize {
        self.batch * self.heads * self.queries * self.head_dim
    }

    /// Elements of K and of V.
    pub fn key_len(&self) -> usize {
        self.batch * self.heads * self.keys * self.head_dim
    }

    /// Elements of one head's scores (`queries·keys`); `None` where they overflow.
    pub fn scores_len(&self) -> Option<usize> {
        self.queries.checked_mul(self.keys)
    }

    /// The method `Auto` resolves to for elements of `elem_bytes` where cuDNN's fused
    /// attention did not take the call (tried first, on a GPU); `Cudnn` here is the CPU
    /// device's, which runs the tiled kernel; an error where `Gemm` was asked for a
    /// shape it cannot take.
    pub(crate) fn resolved(&self, op: &str, elem_bytes: usize) -> Result<AttentionMethod, GpuError> {
        let fits = self
            .scores_len()
            .and_then(|n| n.checked_mul(elem_bytes))
            .is_some_and(|b| b <= GEMM_SCORES_MAX);
        let aligned = self.keys % 4 == 0;
        match self.method {
            AttentionMethod::Auto if fits && aligned => Ok(AttentionMethod::Gemm),
            AttentionMethod::Auto | AttentionMethod::Cudnn => Ok(AttentionMethod::Tiled),
            AttentionMethod::Gemm if !aligned => Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{op}: AttentionMethod::Gemm needs keys a multiple of 4, got {}; use Tiled or Auto",
                    self.keys
                ))
                .arg("keys")
                .mismatch("a multiple of 4", self.keys),
            )),
            AttentionMethod::Gemm if self.scores_len().is_none() => {
                Err(GpuError::invalid(format!("{op}: the scores' element count overflows; use Tiled")))
            }
            m => Ok(m),
        }
    }

    /// Checks the shape for `op`: every extent at least 1, the head dimension within
    /// [`MAX_HEAD_DIM`], the heads within a grid's second dimension, a finite scale.
    pub(crate) fn check(&self, op: &str) -> Result<(), GpuError> {
        at_least_one(
            op,
            &[
                ("batch", self.batch),
                ("heads", self.heads),
                ("queries", self.queries),
                ("keys", self.keys),
                ("head_dim", self.head_dim),
            ],
        )?;
        if self.head_dim > MAX_HEAD_DIM {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("{op}: head_dim {} is over {MAX_HEAD_DIM}, what the kernel's tiles hold", self.head_dim))
                    .arg("head_dim")
                    .mismatch(format_args!("≤ {MAX_HEAD_DIM}"), self.head_dim),
            ));
        }
        let bh = self.batch.checked_mul(self.heads).filter(|&v| v <= 65_535);
        if bh.is_none() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{op}: batch × heads = {} × {} is over 65 535 (a grid's second dimension); split the batch",
                    self.batch, self.heads
                ))
                .arg("batch")
                .mismatch("batch × heads ≤ 65 535", "more"),
            ));
        }
        let s = self.scale_factor();
        if !s.is_finite() {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("{op}: the scale must be finite, got {s}"))
                    .arg("scale")
                    .mismatch("finite", s),
            ));
        }
        for (what, n) in [("queries", self.queries), ("keys", self.keys)] {
            let total = self.batch.checked_mul(self.heads).and_then(|v| v.checked_mul(n)).and_then(|v| v.checked_mul(self.head_dim));
            if total.is_none() {
                return Err(GpuError::invalid(format!("{op}: the {what}' element count overflows")));
            }
        }
        Ok(())
    }

    /// The kernel's tiles for elements whose accumulator is `acc_bytes` wide: query rows
    /// and key rows per tile (multiples of four: a thread takes four rows by two keys),
    /// and the shared memory they take — the largest tiles that fit 48 KiB (what a
    /// block may take without opting in).
    pub(crate) fn tiles(&self, acc_bytes: usize) -> (usize, usize, usize) {
        let d = self.head_dim;
        for (br, bc) in [(32, 32), (16, 32), (16, 16), (8, 16), (8, 8), (4, 8), (4, 4)] {
            // Q and O tiles, K (rows padded by one against bank conflicts) and V tiles,
            // the scores, and per row: running max, sum and rescale.
            let bytes = acc_bytes * (2 * br * d + bc * (d + 1) + bc * d + br * bc + 3 * br);
            if bytes <= 48 * 1024 {
                return (br, bc, bytes);
            }
        }
        unreachable!("head_dim ≤ MAX_HEAD_DIM fits the smallest tiles")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Auto` takes the GEMMs only where their scores fit and the keys come in fours;
    /// `Gemm` asked for keys that do not is an error naming them.
    #[test]
    fn auto_resolves_by_shape_and_gemm_refuses_odd_keys() {
        let a = Attention::new(8, 16, 1024, 1024, 64);
        assert_eq!(a.resolved("t", 2).unwrap(), AttentionMethod::Gemm);
        // One head's 32768² f16 scores: 2 GiB, over the bound (8192²: 128 MiB, under).
        assert_eq!(Attention::new(8, 16, 8192, 8192, 64).resolved("t", 2).unwrap(), AttentionMethod::Gemm);
        let long = Attention::new(1, 1, 32768, 32768, 64);
        assert_eq!(long.resolved("t", 2).unwrap(), AttentionMethod::Tiled);
        assert_eq!(long.method(AttentionMethod::Gemm).resolved("t", 2).unwrap(), AttentionMethod::Gemm);
        let odd = Attention::new(1, 1, 5, 7, 8);
        assert_eq!(odd.resolved("t", 4).unwrap(), AttentionMethod::Tiled);
        assert_eq!(odd.method(AttentionMethod::Tiled).resolved("t", 4).unwrap(), AttentionMethod::Tiled);
        let e = odd.method(AttentionMethod::Gemm).resolved("t", 4).unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)) && e.to_string().contains("keys"), "{e}");
    }
}
