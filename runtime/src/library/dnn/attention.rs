//! Scaled-dot-product attention's shape ([`Attention`]) and the tiles its kernel takes
//! (`attention_kernel.rs`).

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
}

crate::wire::wire_struct!(Attention {
    batch,
    heads,
    queries,
    keys,
    head_dim,
    causal,
    scale,
    layout
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
        }
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
