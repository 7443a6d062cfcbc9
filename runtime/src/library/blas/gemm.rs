//! A GEMM as the BLAS calls describe it — shape, transposes, scales, leading
//! dimensions, strided batch — the checks of one against its buffers, and the CPU
//! device's GEMM. Shared by `gemm` (cuBLAS), `matmul` (cuBLASLt) and graph captures.

use crate::dtype::BlasBase;
use crate::error::{GpuError, Invalid};

/// One GEMM: `C = alpha · op(A) · op(B) + beta · C`, column-major, `op(A)` m×k, `op(B)`
/// k×n, `C` m×n.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // C = 0.5·Aᵀ·B + 2·C, A stored k×m.
/// let (m, n, k) = (2, 1, 3);
/// let a = dev.upload(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).await?;
/// let b = dev.upload(vec![1.0f32; k * n]).await?;
/// let c = dev.upload(vec![1.0f32; m * n]).await?;
/// let op = Gemm::new(m, n, k).transposed(true, false).scaled(0.5, 2.0);
/// dev.gemm(op, &a, &b, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![5.0, 9.5]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Gemm<T> {
    /// Use Aᵀ (A stored k×m).
    pub transa: bool,
    /// Use Bᵀ (B stored n×k).
    pub transb: bool,
    /// Rows of op(A) and C.
    pub m: usize,
    /// Columns of op(B) and C.
    pub n: usize,
    /// Columns of op(A), rows of op(B).
    pub k: usize,
    /// Scale of the product.
    pub alpha: T,
    /// Scale of the old C (zero: C is not read).
    pub beta: T,
    /// Leading dimension of A as stored.
    pub lda: usize,
    /// Leading dimension of B as stored.
    pub ldb: usize,
    /// Leading dimension of C.
    pub ldc: usize,
}

crate::wire::wire_struct!(Gemm<T: crate::dtype::FloatDType> { transa, transb, m, n, k, alpha, beta, lda, ldb, ldc });

impl<T: BlasBase> Gemm<T> {
    /// `C = A·B` with tight leading dimensions.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            transa: false,
            transb: false,
            m,
            n,
            k,
            alpha: T::from_f64(1.0),
            beta: T::from_f64(0.0),
            lda: m,
            ldb: k,
            ldc: m,
        }
    }

    /// Uses the transposes given, with tight leading dimensions for them.
    pub fn transposed(mut self, transa: bool, transb: bool) -> Self {
        self.transa = transa;
        self.transb = transb;
        self.lda = if transa { self.k } else { self.m };
        self.ldb = if transb { self.n } else { self.k };
        self
    }

    /// Sets alpha and beta.
    pub fn scaled(mut self, alpha: T, beta: T) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// Sets the leading dimensions.
    pub fn leading(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.lda = lda;
        self.ldb = ldb;
        self.ldc = ldc;
        self
    }

    /// (rows, cols) of A as stored.
    fn a_shape(&self) -> (usize, usize) {
        if self.transa {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }

    /// (rows, cols) of B as stored.
    fn b_shape(&self) -> (usize, usize) {
        if self.transb {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }
}

/// Strides (in elements) between the matrices of a strided batch.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // Two 2×2 products in one call, each matrix after the previous one.
/// let a = dev.upload(vec![1.0f64, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0]).await?; // I, 2I
/// let b = dev.upload(vec![1.0f64, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]).await?;
/// let c = dev.alloc::<f64>(8).await?;
/// let batch = Batch { count: 2, stride_a: 4, stride_b: 4, stride_c: 4 };
/// dev.gemm_strided_batched(Gemm::new(2, 2, 2), batch, &a, &b, &c).await?;
/// assert_eq!(dev.download(&c).await?, vec![1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 6.0, 8.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Number of GEMMs.
    pub count: usize,
    /// Stride between consecutive A matrices.
    pub stride_a: usize,
    /// Stride between consecutive B matrices.
    pub stride_b: usize,
    /// Stride between consecutive C matrices.
    pub stride_c: usize,
}

crate::wire::wire_struct!(Batch {
    count,
    stride_a,
    stride_b,
    stride_c
});

impl Batch {
    /// A single GEMM (no batch).
    pub const fn one() -> Self {
        Batch {
            count: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
        }
    }
}

pub(super) fn invalid(msg: String) -> GpuError {
    GpuError::invalid(msg)
}

/// Refuses a size or leading dimension beyond cuBLAS's 32-bit integers.
pub(super) fn over_32_bits(what: &str, v: usize) -> Result<(), GpuError> {
    if v > i32::MAX as usize {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{what} = {v} exceeds cuBLAS's 32-bit limit"))
                .arg(what)
                .mismatch(format_args!("≤ {}", i32::MAX), v),
        ));
    }
    Ok(())
}

/// Elements a column-major `rows × cols` matrix with leading dimension `ld` spans, and
/// the checks on `ld`.
pub(super) fn span(name: &str, rows: usize, cols: usize, ld: usize) -> Result<usize, GpuError> {
    if ld < rows.max(1) {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("ld{name} = {ld} is smaller than the {rows} rows of {name}"))
                .arg(format!("ld{name}"))
                .mismatch(format_args!("≥ {}", rows.max(1)), ld),
        ));
    }
    ld.checked_mul(cols - 1)
        .and_then(|v| v.checked_add(rows))
        .ok_or_else(|| invalid(format!("{name} overflows the address space")))
}

/// Checks a GEMM (and batch) against the buffers' lengths. Returns nothing: every later
/// index is in bounds once this passes.
pub(crate) fn validate<T: BlasBase>(g: &Gemm<T>, batch: &Batch, a: usize, b: usize, c: usize) -> Result<(), GpuError> {
    if g.m == 0 || g.n == 0 || g.k == 0 || batch.count == 0 {
        let arg = [("m", g.m), ("n", g.n), ("k", g.k), ("batch", batch.count)]
            .into_iter()
            .find(|(_, v)| *v == 0)
            .map_or("m", |(a, _)| a);
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "GEMM sizes must be positive: m={} n={} k={} batch={}",
                g.m, g.n, g.k, batch.count
            ))
            .arg(arg)
            .mismatch("≥ 1", 0),
        ));
    }
    for (what, v) in [
        ("m", g.m),
        ("n", g.n),
        ("k", g.k),
        ("lda", g.lda),
        ("ldb", g.ldb),
        ("ldc", g.ldc),
        ("batch", batch.count),
    ] {
        over_32_bits(what, v)?;
    }
    let (ar, ac) = g.a_shape();
    let (br, bc) = g.b_shape();
    let need = |name: &str, one: usize, stride: usize, have: usize| -> Result<(), GpuError> {
        let total = stride
            .checked_mul(batch.count - 1)
            .and_then(|v| v.checked_add(one))
            .ok_or_else(|| invalid(format!("{name} batch overflows the address space")))?;
        if total > have {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{name} needs {total} elements for this GEMM but its buffer holds {have}"
                ))
                .arg(name.to_lowercase())
                .mismatch(format_args!("≥ {total} elements"), format_args!("{have} elements")),
            ));
        }
        Ok(())
    };
    need("A", span("a", ar, ac, g.lda)?, batch.stride_a, a)?;
    need("B", span("b", br, bc, g.ldb)?, batch.stride_b, b)?;
    let c_one = span("c", g.m, g.n, g.ldc)?;
    need("C", c_one, batch.stride_c, c)?;
    // The C matrices must be apart: one after another (each spans `c_one`), or side by
    // side within each column — rows interleaved, `m` apart at least, the last ending
    // within `ldc` (the heads of a `[batch, seq, heads, dim]` tensor).
    let side_by_side = batch.stride_c >= g.m
        && batch
            .stride_c
            .checked_mul(batch.count - 1)
            .and_then(|v| v.checked_add(g.m))
            .is_some_and(|end| end <= g.ldc);
    if batch.count > 1 && batch.stride_c < c_one && !side_by_side {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "stride_c = {} makes the C matrices of the batch overlap (each spans {c_one}; side by side within ldc = {} they need stride_c ≥ m = {} and {} · stride_c + m ≤ ldc)",
                batch.stride_c,
                g.ldc,
                g.m,
                batch.count - 1
            ))
            .arg("stride_c")
            .mismatch(format_args!("≥ {c_one}"), batch.stride_c),
        ));
    }
    Ok(())
}

#[cfg(feature = "blas")]
/// The CPU device's GEMM: widen to the accumulation type, multiply with the `gemm`
/// crate, round back — the arithmetic cuBLAS does for f16/bf16 (f32 accumulation).
pub(crate) fn cpu_gemm<T: BlasBase>(g: &Gemm<T>, batch: &Batch, a: &[T], b: &[T], c: &mut [T]) {
    let widen = |v: &[T]| v.iter().map(|x| x.to_acc()).collect::<Vec<T::Acc>>();
    let (aw, bw) = (widen(a), widen(b));
    let mut cw = widen(c);
    let (a_rs, a_cs) = if g.transa { (g.lda, 1) } else { (1, g.lda) };
    let (b_rs, b_cs) = if g.transb { (g.ldb, 1) } else { (1, g.ldb) };
    let read_dst = g.beta.to_f64() != 0.0;
    for i in 0..batch.count {
        let (oa, ob, oc) = (i * batch.stride_a, i * batch.stride_b, i * batch.stride_c);
        // SAFETY: `validate` proved that every element this GEMM touches — offsets
        // `oa + r*a_rs + c*a_cs` for r < rows, c < cols, and likewise for B and C — lies
        // inside `aw`, `bw` and `cw`; C does not overlap A or B (separate vectors).
        unsafe {
            gemm::gemm(
                g.m,
                g.n,
                g.k,
                cw.as_mut_ptr().add(oc),
                g.ldc as isize,
                1,
                read_dst,
                aw.as_ptr().add(oa),
                a_cs as isize,
                a_rs as isize,
                bw.as_ptr().add(ob),
                b_cs as isize,
                b_rs as isize,
                g.beta.to_acc(),
                g.alpha.to_acc(),
                false,
                false,
                false,
                gemm::Parallelism::Rayon(0),
            );
        }
    }
    for (dst, v) in c.iter_mut().zip(cw) {
        *dst = T::from_acc(v);
    }
}
