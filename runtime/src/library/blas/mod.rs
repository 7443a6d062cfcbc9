//! `BlasActor`: GEMM through cuBLAS on the GPU, through a CPU GEMM crate on the CPU
//! device. Matrices are column-major, as in cuBLAS.

use std::sync::Arc;

#[cfg(feature = "blas")]
use cudarc::cublas::{sys as cbsys, CudaBlas, GemmConfig, GemvConfig, StridedBatchedConfig};
#[cfg(feature = "blas")]
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use self::matmul::{Epilogue, Matmul, MatmulBuffer};
use crate::actor::Context;
use crate::actor::Deferred;
use crate::backend::state::DeviceShared;
use crate::completion::{Completer, Completion};
use crate::dtype::{Blas1Base, BlasBase, DTypeBase};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{with_inputs, with_operands, with_span, GpuRef, Region, RegionMut};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};
#[cfg(feature = "blas")]
use crate::sys::cublaslt::LtHandle;
#[cfg(feature = "blas")]
use crate::sys::{Vector, VectorMut};
use atomr_accel_cuda_macros::gpu_actor;

mod gemm;
pub mod matmul;
mod strided;

#[cfg(feature = "blas")]
pub(crate) use gemm::cpu_gemm;
pub(crate) use gemm::validate;
use gemm::{invalid, over_32_bits, span};
pub use gemm::{Batch, Gemm};
pub use strided::Strided;

/// One GEMV: `y = alpha·op(A)·x + beta·y`, A stored column-major m×n.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let a = dev.upload(vec![1.0f64, 2.0, 3.0, 4.0]).await?; // [[1, 3], [2, 4]]
/// let x = dev.upload(vec![1.0f64, 1.0]).await?;
/// let y = dev.alloc::<f64>(2).await?;
/// dev.gemv(Gemv::new(2, 2), &a, &x, &y).await?;
/// assert_eq!(dev.download(&y).await?, vec![4.0, 6.0]);
/// dev.gemv(Gemv::new(2, 2).transposed(true), &a, &x, &y).await?;
/// assert_eq!(dev.download(&y).await?, vec![3.0, 7.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Gemv<T> {
    /// Use Aᵀ (then x has m elements and y has n).
    pub trans: bool,
    /// Rows of A as stored.
    pub m: usize,
    /// Columns of A as stored.
    pub n: usize,
    /// Scale of the product.
    pub alpha: T,
    /// Scale of the old y (zero: y is not read).
    pub beta: T,
    /// Leading dimension of A.
    pub lda: usize,
    /// Elements between consecutive entries of x (1: contiguous; `lda` of a matrix: a
    /// row of it).
    pub incx: usize,
    /// Elements between consecutive entries of y.
    pub incy: usize,
}

crate::wire::wire_struct!(Gemv<T: crate::dtype::FloatDType> { trans, m, n, alpha, beta, lda, incx, incy });

impl<T: BlasBase> Gemv<T> {
    /// `y = A·x` with a tight leading dimension.
    pub fn new(m: usize, n: usize) -> Self {
        Gemv {
            trans: false,
            m,
            n,
            alpha: T::from_f64(1.0),
            beta: T::from_f64(0.0),
            lda: m,
            incx: 1,
            incy: 1,
        }
    }

    /// Reads x and writes y with strides (BLAS `incx`/`incy`, ≥ 1): x's entries are
    /// elements 0, incx, 2·incx … of its buffer or view — a row of a column-major matrix
    /// is a view from the row's first element with stride `lda`.
    pub fn strides(mut self, incx: usize, incy: usize) -> Self {
        self.incx = incx;
        self.incy = incy;
        self
    }

    /// Uses Aᵀ.
    pub fn transposed(mut self, trans: bool) -> Self {
        self.trans = trans;
        self
    }

    /// Sets alpha and beta.
    pub fn scaled(mut self, alpha: T, beta: T) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// Sets the leading dimension of A.
    pub fn leading(mut self, lda: usize) -> Self {
        self.lda = lda;
        self
    }

    /// (length of x, length of y).
    fn vector_lengths(&self) -> (usize, usize) {
        if self.trans {
            (self.m, self.n)
        } else {
            (self.n, self.m)
        }
    }

    fn validate(&self, a: usize, x: usize, y: usize) -> Result<(), GpuError> {
        if self.m == 0 || self.n == 0 {
            let arg = if self.m == 0 { "m" } else { "n" };
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("GEMV sizes must be positive: m={} n={}", self.m, self.n))
                    .arg(arg)
                    .mismatch("≥ 1", 0),
            ));
        }
        for (what, v) in [("m", self.m), ("n", self.n), ("lda", self.lda)] {
            over_32_bits(what, v)?;
        }
        for (what, inc) in [("incx", self.incx), ("incy", self.incy)] {
            if inc == 0 {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!("GEMV {what} must be at least 1"))
                        .arg(what)
                        .mismatch("≥ 1", 0),
                ));
            }
            over_32_bits(what, inc)?;
        }
        let need_a = span("a", self.m, self.n, self.lda)?;
        let (nx, ny) = self.vector_lengths();
        let (need_x, need_y) = (span("x", 1, nx, self.incx)?, span("y", 1, ny, self.incy)?);
        for (name, need, have) in [("A", need_a, a), ("x", need_x, x), ("y", need_y, y)] {
            if need > have {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "{name} needs {need} elements for this GEMV but its buffer holds {have}"
                    ))
                    .arg(name.to_lowercase())
                    .mismatch(format_args!("≥ {need} elements"), format_args!("{have} elements")),
                ));
            }
        }
        Ok(())
    }
}

/// `"gemm<f32>"`, for the timeline.
fn op_name<T: DTypeBase>(op: &str) -> String {
    format!("{op}<{}>", T::NAME)
}

#[cfg(feature = "blas")]
/// Enqueues one GEMM (strided-batched when `batch.count > 1`) on `blas`'s stream, over
/// any device slices — the BLAS actor passes its buffers, a graph's capture untracked
/// views of them. `g` and `batch` must have passed [`validate`] for the slices' lengths.
pub(crate) fn enqueue_gemm<T: BlasBase, A: DevicePtr<T>, B: DevicePtr<T>, C: DevicePtrMut<T>>(
    blas: &CudaBlas,
    g: &Gemm<T>,
    batch: &Batch,
    a: &A,
    b: &B,
    c: &mut C,
) -> Result<(), cudarc::cublas::result::CublasError> {
    let cfg = GemmConfig {
        transa: op(g.transa),
        transb: op(g.transb),
        m: g.m as i32,
        n: g.n as i32,
        k: g.k as i32,
        alpha: g.alpha,
        lda: g.lda as i32,
        ldb: g.ldb as i32,
        beta: g.beta,
        ldc: g.ldc as i32,
    };
    if batch.count == 1 {
        <T as crate::sys::CublasGemm>::gemm(blas, cfg, a, b, c)
    } else {
        let cfg = StridedBatchedConfig {
            gemm: cfg,
            batch_size: batch.count as i32,
            stride_a: batch.stride_a as i64,
            stride_b: batch.stride_b as i64,
            stride_c: batch.stride_c as i64,
        };
        <T as crate::sys::CublasGemm>::gemm_batched(blas, cfg, a, b, c)
    }
}

#[cfg(feature = "blas")]
/// One GEMM (strided-batched when `batch.count > 1`) over handles, checked first: on
/// `blas`'s stream, or — `None`, the CPU device — the host GEMM. For the libraries
/// whose compositions multiply between their own kernels (the tensor library's
/// contractions, attention's two products).
pub(crate) fn gemm_on<T: BlasBase>(
    blas: Option<&CudaBlas>,
    g: &Gemm<T>,
    batch: &Batch,
    (a, b, c): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
) -> Result<(), GpuError> {
    validate(g, batch, a.len(), b.len(), c.len())?;
    with_operands([a, b], c, |[ra, rb], rc| match (blas, ra, rb, rc) {
        (None, Region::Cpu(av), Region::Cpu(bv), RegionMut::Cpu(cv)) => {
            cpu_gemm(g, batch, av, bv, cv);
            Ok(())
        }
        (Some(blas), Region::Cuda(av), Region::Cuda(bv), RegionMut::Cuda(mut cv)) => {
            enqueue_gemm(blas, g, batch, &av, &bv, &mut cv).map_err(GpuError::from)
        }
        _ => Err(GpuError::invalid("a GEMM over buffers of another backend")),
    })?
}

#[cfg(feature = "blas")]
/// The BLAS actor's state for one generation: the cuBLAS handle and its stream, or the
/// CPU device.
pub(crate) struct BlasCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: BlasEngine,
}

#[cfg(feature = "blas")]
enum BlasEngine {
    Cpu,
    Cuda {
        blas: CudaBlas,
        stream: Arc<CudaStream>,
        completer: Completer,
        /// The cuBLASLt handle of `matmul`, made on the first one (it holds a 32 MiB
        /// workspace a program without matmuls should not pay for).
        lt: Option<LtHandle>,
    },
}

#[cfg(feature = "blas")]
impl Core for BlasCore {
    const WHAT: &'static str = "BLAS actor";

    /// Builds the BLAS core of a generation.
    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match seed.cuda_stream()? {
            None => BlasEngine::Cpu,
            Some((stream, completer)) => BlasEngine::Cuda {
                blas: CudaBlas::new(stream.clone())?,
                stream,
                completer,
                lt: None,
            },
        };
        Ok(BlasCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

#[cfg(feature = "blas")]
impl BlasCore {
    fn check<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.shared.config.device_id, self.generation)
    }

    /// Enqueues a (strided-batched) GEMM; completes when the GPU is done.
    pub(crate) fn gemm<T: BlasBase>(
        &mut self,
        g: Gemm<T>,
        batch: Batch,
        a: &GpuRef<T>,
        b: &GpuRef<T>,
        c: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        for r in [a, b, c] {
            self.check(r)?;
        }
        if c.overlaps(a) || c.overlaps(b) {
            return Err(GpuError::InvalidArgument(
                Invalid::new("the output C must not overlap A or B (disjoint views of one buffer may)")
                    .arg("c")
                    .mismatch("elements apart from A's and B's", "elements of A or B"),
            ));
        }
        validate(&g, &batch, a.len(), b.len(), c.len())?;
        with_operands([a, b], c, |[ra, rb], rc| self.gemm_regions(&g, &batch, ra, rb, rc))?
    }

    fn gemm_regions<T: BlasBase>(
        &self,
        g: &Gemm<T>,
        batch: &Batch,
        a: Region<'_, T>,
        b: Region<'_, T>,
        c: RegionMut<'_, T>,
    ) -> Result<Deferred<()>, GpuError> {
        let (g, batch) = (*g, *batch);
        match (&self.engine, a, b, c) {
            (BlasEngine::Cpu, Region::Cpu(av), Region::Cpu(bv), RegionMut::Cpu(cv)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("gemm"));
                cpu_gemm(&g, &batch, av, bv, cv);
                Ok(Deferred::Now(()))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(av),
                Region::Cuda(bv),
                RegionMut::Cuda(mut cv),
            ) => {
                self.timed::<T>(stream, "gemm", || {
                    enqueue_gemm(blas, &g, &batch, &av, &bv, &mut cv).map_err(GpuError::from)
                })?;
                Ok(self.pending(completer.done(stream)))
            }
            _ => Err(invalid("buffers of another backend".into())),
        }
    }

    /// Enqueues a GEMV.
    pub(crate) fn gemv<T: Blas1Base>(
        &mut self,
        g: Gemv<T>,
        a: &GpuRef<T>,
        x: &GpuRef<T>,
        y: &GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        for r in [a, x, y] {
            self.check(r)?;
        }
        if y.overlaps(a) || y.overlaps(x) {
            return Err(GpuError::InvalidArgument(
                Invalid::new("the output y must not overlap A or x (disjoint views of one buffer may)")
                    .arg("y")
                    .mismatch("elements apart from A's and x's", "elements of A or x"),
            ));
        }
        g.validate(a.len(), x.len(), y.len())?;
        with_operands([a, x], y, |[ra, rx], ry| self.gemv_regions(&g, ra, rx, ry))?
    }

    fn gemv_regions<T: Blas1Base>(
        &self,
        g: &Gemv<T>,
        a: Region<'_, T>,
        x: Region<'_, T>,
        y: RegionMut<'_, T>,
    ) -> Result<Deferred<()>, GpuError> {
        match (&self.engine, a, x, y) {
            (BlasEngine::Cpu, Region::Cpu(av), Region::Cpu(xv), RegionMut::Cpu(yv)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("gemv"));
                let (nx, ny) = g.vector_lengths();
                for (i, out) in yv.iter_mut().step_by(g.incy).take(ny).enumerate() {
                    let mut acc = T::from_f64(0.0);
                    for (j, xj) in xv.iter().step_by(g.incx).take(nx).enumerate() {
                        let aij = if g.trans { av[j + i * g.lda] } else { av[i + j * g.lda] };
                        acc = aij.mul_add(*xj, acc);
                    }
                    let old = if g.beta == T::from_f64(0.0) {
                        T::from_f64(0.0)
                    } else {
                        g.beta * *out
                    };
                    *out = g.alpha.mul_add(acc, old);
                }
                Ok(Deferred::Now(()))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(av),
                Region::Cuda(xv),
                RegionMut::Cuda(mut yv),
            ) => {
                let cfg = GemvConfig {
                    trans: op(g.trans),
                    m: g.m as i32,
                    n: g.n as i32,
                    alpha: g.alpha,
                    lda: g.lda as i32,
                    incx: g.incx as i32,
                    beta: g.beta,
                    incy: g.incy as i32,
                };
                self.timed::<T>(stream, "gemv", || T::gemv(blas, cfg, &av, &xv, &mut yv))?;
                Ok(self.pending(completer.done(stream)))
            }
            _ => Err(invalid("buffers of another backend".into())),
        }
    }

    /// `y += alpha·x` over the entries of two strided vectors of as many entries.
    pub(crate) fn axpy<T: Blas1Base>(
        &mut self,
        alpha: T,
        x: &Strided<T>,
        y: &Strided<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.check(&x.data)?;
        self.check(&y.data)?;
        same_count("axpy", x, y)?;
        if x.data.same_buffer(&y.data) && x.data.window() == y.data.window() && x.inc == y.inc {
            // y += alpha·y is a scaling.
            return self.scal(T::from_f64(1.0) + alpha, y);
        }
        if x.data.overlaps(&y.data) {
            return self.axpy_interleaved(alpha, x, y);
        }
        let n = x.n;
        with_operands([&x.data], &y.data, |[rx], ry| match (&self.engine, rx, ry) {
            (BlasEngine::Cpu, Region::Cpu(xv), RegionMut::Cpu(yv)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("axpy"));
                for (yi, xi) in yv.iter_mut().step_by(y.inc).zip(xv.iter().step_by(x.inc)).take(n) {
                    *yi = alpha.mul_add(*xi, *yi);
                }
                Ok(Deferred::Now(()))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(xv),
                RegionMut::Cuda(mut yv),
            ) => {
                let (vx, vy) = (vector(&xv, x.inc), vector_mut(&mut yv, y.inc));
                self.timed::<T>(stream, "axpy", || T::axpy(blas, stream, (n, alpha), vx, vy))?;
                Ok(self.pending(completer.done(stream)))
            }
            _ => Err(invalid("buffers of another backend".into())),
        })?
    }

    /// `y += alpha·x` where the windows of `x` and `y`, views of one buffer, overlap
    /// but their entries interleave (two rows of a column-major matrix: a row operation
    /// of an elimination): one lock, one span, each vector at its offset in it. Entries
    /// in common are an `InvalidArgument` — cuBLAS would read entries it had written.
    fn axpy_interleaved<T: Blas1Base>(
        &mut self,
        alpha: T,
        x: &Strided<T>,
        y: &Strided<T>,
    ) -> Result<Deferred<()>, GpuError> {
        if x.shares_entries_with(y) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "axpy's y (elements {:?} of the buffer, every {}) overlaps x (elements {:?}, every {}) \
                     in shared entries: pass vectors with no element in common, or copy x first",
                    y.data.window(),
                    y.inc,
                    x.data.window(),
                    x.inc
                ))
                .arg("y")
                .mismatch("entries apart from x's", "entries of x"),
            ));
        }
        let n = x.n;
        with_span([&x.data, &y.data], |span, [ox, oy]| match (&self.engine, span) {
            (BlasEngine::Cpu, RegionMut::Cpu(v)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("axpy"));
                for i in 0..n {
                    let (xi, yi) = (ox + i * x.inc, oy + i * y.inc);
                    v[yi] = alpha.mul_add(v[xi], v[yi]);
                }
                Ok(Deferred::Now(()))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                RegionMut::Cuda(mut v),
            ) => {
                let (sx, sy) = ((ox, x.inc), (oy, y.inc));
                self.timed::<T>(stream, "axpy", || {
                    T::axpy_within(blas, stream, (n, alpha), &mut v, sx, sy)
                })?;
                Ok(self.pending(completer.done(stream)))
            }
            _ => Err(invalid("a buffer of another backend".into())),
        })?
    }

    /// `x *= alpha` over a strided vector's entries.
    pub(crate) fn scal<T: Blas1Base>(&mut self, alpha: T, x: &Strided<T>) -> Result<Deferred<()>, GpuError> {
        self.check(&x.data)?;
        x.validate("x")?;
        let (n, inc) = (x.n, x.inc);
        let mut sx = x.data.lock();
        match (&self.engine, sx.region_mut()) {
            (BlasEngine::Cpu, RegionMut::Cpu(xv)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("scal"));
                xv.iter_mut().step_by(inc).take(n).for_each(|v| *v = *v * alpha);
                Ok(Deferred::Now(()))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                RegionMut::Cuda(mut xv),
            ) => {
                let vx = vector_mut(&mut xv, inc);
                self.timed::<T>(stream, "scal", || T::scal(blas, stream, (n, alpha), vx))?;
                Ok(self.pending(completer.done(stream)))
            }
            _ => Err(invalid("a buffer of another backend".into())),
        }
    }

    /// `x · y` over two strided vectors of as many entries; computed on the device.
    pub(crate) fn dot<T: Blas1Base>(&mut self, x: &Strided<T>, y: &Strided<T>) -> Result<Deferred<T>, GpuError> {
        self.check(&x.data)?;
        self.check(&y.data)?;
        same_count("dot", x, y)?;
        let n = x.n;
        with_inputs([&x.data, &y.data], |[rx, ry]| match (&self.engine, rx, ry) {
            (BlasEngine::Cpu, Region::Cpu(xv), Region::Cpu(yv)) => Ok(Deferred::Now({
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("dot"));
                xv.iter()
                    .step_by(x.inc)
                    .zip(yv.iter().step_by(y.inc))
                    .take(n)
                    .fold(T::from_f64(0.0), |acc, (a, b)| a.mul_add(*b, acc))
            })),
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(xv),
                Region::Cuda(yv),
            ) => {
                let mut out = stream.alloc_zeros::<T>(1).map_err(|e| self.shared.observe(e.into()))?;
                let (vx, vy) = (vector(&xv, x.inc), vector(&yv, y.inc));
                self.timed::<T>(stream, "dot", || T::dot(blas, stream, n, (vx, vy), &mut out))?;
                Ok(self.scalar_result(completer.done(stream), stream.clone(), out))
            }
            _ => Err(invalid("buffers of another backend".into())),
        })
    }

    /// `‖x‖₂` over a strided vector's entries; computed on the device.
    pub(crate) fn nrm2<T: Blas1Base>(&mut self, x: &Strided<T>) -> Result<Deferred<T>, GpuError> {
        self.check(&x.data)?;
        x.validate("x")?;
        let (n, inc) = (x.n, x.inc);
        let sx = x.data.lock();
        match (&self.engine, sx.region()) {
            (BlasEngine::Cpu, Region::Cpu(xv)) => Ok(Deferred::Now({
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("nrm2"));
                xv.iter()
                    .step_by(inc)
                    .take(n)
                    .fold(T::from_f64(0.0), |acc, a| a.mul_add(*a, acc))
                    .sqrt()
            })),
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(xv),
            ) => {
                let mut out = stream.alloc_zeros::<T>(1).map_err(|e| self.shared.observe(e.into()))?;
                let vx = vector(&xv, inc);
                self.timed::<T>(stream, "nrm2", || T::nrm2(blas, stream, n, vx, &mut out))?;
                Ok(self.scalar_result(completer.done(stream), stream.clone(), out))
            }
            _ => Err(invalid("a buffer of another backend".into())),
        }
    }

    /// The 0-based position, among a strided vector's entries, of the first of largest
    /// magnitude (cuBLAS's `i?amax`, whose 1-based answer is shifted here).
    pub(crate) fn iamax<T: Blas1Base>(&mut self, x: &Strided<T>) -> Result<Deferred<usize>, GpuError> {
        self.check(&x.data)?;
        x.validate("x")?;
        let (n, inc) = (x.n, x.inc);
        let sx = x.data.lock();
        match (&self.engine, sx.region()) {
            (BlasEngine::Cpu, Region::Cpu(xv)) => {
                let _timed = cpu_op(self.shared.config.device_id, "blas", op_name::<T>("iamax"));
                // The first position of the largest |x|, as cuBLAS picks it.
                let mut best: Option<(usize, T)> = None;
                for (i, v) in xv.iter().step_by(inc).take(n).enumerate() {
                    if best.is_none_or(|(_, b)| v.abs() > b) {
                        best = Some((i, v.abs()));
                    }
                }
                Ok(Deferred::Now(best.map_or(0, |(i, _)| i)))
            }
            (
                BlasEngine::Cuda {
                    blas,
                    stream,
                    completer,
                    ..
                },
                Region::Cuda(xv),
            ) => {
                let mut out = stream
                    .alloc_zeros::<i64>(1)
                    .map_err(|e| self.shared.observe(e.into()))?;
                let vx = vector(&xv, inc);
                self.timed::<T>(stream, "iamax", || T::iamax(blas, stream, n, vx, &mut out))?;
                Ok(self
                    .scalar_result(completer.done(stream), stream.clone(), out)
                    .map(|one_based| (one_based - 1) as usize))
            }
            _ => Err(invalid("a buffer of another backend".into())),
        }
    }

    /// Enqueues one cuBLAS call, timed as `op<T>` on the timeline; a failure classified
    /// (`library_failure`).
    fn timed<T: DTypeBase>(
        &self,
        stream: &Arc<CudaStream>,
        op: &str,
        enqueue: impl FnOnce() -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        gpu_timed(stream, self.shared.config.device_id, "blas", op_name::<T>(op), enqueue)
            .map_err(|e| self.library_failure(stream, e))
    }

    /// Waits for `done`, then reads the 1-element device result.
    fn scalar_result<T: cudarc::driver::DeviceRepr + Copy + Send + 'static>(
        &self,
        done: Completion,
        stream: Arc<CudaStream>,
        out: CudaSlice<T>,
    ) -> Deferred<T> {
        let shared = self.shared.clone();
        Deferred::later(async move {
            done.await.map_err(|e| shared.observe(e))?;
            let v = stream.clone_dtoh(&out).map_err(|e| shared.observe(e.into()))?;
            Ok(v[0])
        })
    }

    /// Classifies a failed cuBLAS call (see [`library_failure`]).
    fn library_failure(&self, stream: &Arc<CudaStream>, e: GpuError) -> GpuError {
        library_failure(&self.shared, stream, e)
    }

    /// Enqueues a cuBLASLt matmul (see [`crate::library::blas::matmul`]); completes when the
    /// GPU is done.
    pub(crate) fn matmul(
        &mut self,
        op: Matmul,
        epilogue: Epilogue,
        [a, b, c]: [&MatmulBuffer; 3],
    ) -> Result<Deferred<()>, GpuError> {
        let device = self.shared.config.device_id;
        for r in [a, b, c].into_iter().chain(epilogue.bias.as_ref()) {
            r.validate(device, self.generation)?;
        }
        let key = op.check(&epilogue, a, b, c)?;
        let mut operands = vec![a, b, c];
        operands.extend(epilogue.bias.as_ref());
        let mut held = matmul::lock_all(&operands);
        match &mut self.engine {
            BlasEngine::Cpu => {
                let _timed = cpu_op(device, "blas", matmul::timeline_name(a, c));
                matmul::run_cpu(&op, &epilogue, key.tf32, [a, b, c], &mut held)?;
                Ok(Deferred::Now(()))
            }
            BlasEngine::Cuda {
                stream, completer, lt, ..
            } => {
                let handle = match lt {
                    Some(h) => h,
                    None => lt.insert(LtHandle::new(stream.clone()).map_err(|e| self.shared.observe(e))?),
                };
                let r = matmul::run_cuda(handle, stream, device, (&op, &epilogue), [a, b, c], &mut held, key);
                r.map_err(|e| library_failure(&self.shared, stream, e))?;
                Ok(self.shared.deferred(completer.done(stream)))
            }
        }
    }

    fn pending(&self, fut: Completion) -> Deferred<()> {
        self.shared.deferred(fut)
    }
}

#[cfg(feature = "blas")]
/// Classifies a failed cuBLAS call: after a sticky fault cuBLAS only says
/// EXECUTION_FAILED, so the stream is asked for the real (sticky) error.
fn library_failure(shared: &DeviceShared, stream: &Arc<CudaStream>, e: GpuError) -> GpuError {
    if let Some(sticky) = crate::completion::stream_fault(stream) {
        return shared.observe(sticky);
    }
    shared.observe(e)
}

/// Checks two strided vectors of one call: each valid, as many entries in both.
fn same_count<T: DTypeBase>(what: &str, x: &Strided<T>, y: &Strided<T>) -> Result<(), GpuError> {
    x.validate("x")?;
    y.validate("y")?;
    if x.n != y.n {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!("{what} of vectors of {} and {} entries", x.n, y.n))
                .arg("y")
                .mismatch(format_args!("{} entries (as x)", x.n), format_args!("{} entries", y.n)),
        ));
    }
    Ok(())
}

#[cfg(feature = "blas")]
/// A locked window as cuBLAS's strided vector.
fn vector<'a, T>(data: &'a CudaView<'a, T>, inc: usize) -> Vector<'a, CudaView<'a, T>> {
    Vector { data, inc }
}

#[cfg(feature = "blas")]
/// As [`vector`], written.
fn vector_mut<'a, 'b, T>(data: &'a mut CudaViewMut<'b, T>, inc: usize) -> VectorMut<'a, CudaViewMut<'b, T>> {
    VectorMut { data, inc }
}

#[cfg(feature = "blas")]
fn op(t: bool) -> cbsys::cublasOperation_t {
    if t {
        cbsys::cublasOperation_t::CUBLAS_OP_T
    } else {
        cbsys::cublasOperation_t::CUBLAS_OP_N
    }
}

/// The BLAS actor: owns a `BlasCore` (the cuBLAS handle and its stream, or the CPU
/// device). It runs on a dispatcher thread of its own so a long CPU GEMM or a blocking
/// completion never stalls the context actor. Written with `#[gpu_actor]`.
pub struct BlasActor(pub(crate) Library<BlasCore>);

#[cfg(not(feature = "blas"))]
use crate::library::shell::Absent as BlasCore;

#[gpu_actor(crate = crate, wire, device, feature = "blas")]
impl BlasActor {
    /// Creates the cuBLAS handle on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// `batch.count` GEMMs over strided matrices in one cuBLAS call:
    /// `C = alpha·op(A)·op(B) + beta·C` for each.
    #[handler(dtypes(float), device(name = gemm_strided_batched))]
    fn gemm<T: BlasBase>(
        &mut self,
        g: Gemm<T>,
        batch: Batch,
        a: GpuRef<T>,
        b: GpuRef<T>,
        c: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.gemm(g, batch, &a, &b, &c)
    }

    /// `y = alpha·op(A)·x + beta·y` (f32, f64).
    #[handler(dtypes(blas1), device)]
    fn gemv<T: Blas1Base>(
        &mut self,
        g: Gemv<T>,
        a: GpuRef<T>,
        x: GpuRef<T>,
        y: GpuRef<T>,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.gemv(g, &a, &x, &y)
    }

    /// `y += alpha·x` over equal-length vectors (f32, f64).
    #[handler(dtypes(blas1), device)]
    fn axpy<T: Blas1Base>(&mut self, alpha: T, x: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.axpy(alpha, &(&x).into(), &(&y).into())
    }

    /// `y += alpha·x` over the entries of strided vectors (BLAS `incx`/`incy`: a row of a
    /// column-major matrix is `Strided::every(&row_start, lda)`) of as many entries.
    #[handler(dtypes(blas1), device)]
    fn axpy_strided<T: Blas1Base>(&mut self, alpha: T, x: Strided<T>, y: Strided<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.axpy(alpha, &x, &y)
    }

    /// `x *= alpha` (f32, f64).
    #[handler(dtypes(blas1), device)]
    fn scal<T: Blas1Base>(&mut self, alpha: T, x: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.scal(alpha, &(&x).into())
    }

    /// `x *= alpha` over a strided vector's entries.
    #[handler(dtypes(blas1), device)]
    fn scal_strided<T: Blas1Base>(&mut self, alpha: T, x: Strided<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.scal(alpha, &x)
    }

    /// The dot product of equal-length vectors (f32, f64); computed on the device.
    #[handler(dtypes(blas1), device)]
    fn dot<T: Blas1Base>(&mut self, x: GpuRef<T>, y: GpuRef<T>) -> Result<Deferred<T>, GpuError> {
        self.0.core()?.dot(&(&x).into(), &(&y).into())
    }

    /// The dot product of strided vectors of as many entries; computed on the device.
    #[handler(dtypes(blas1), device)]
    fn dot_strided<T: Blas1Base>(&mut self, x: Strided<T>, y: Strided<T>) -> Result<Deferred<T>, GpuError> {
        self.0.core()?.dot(&x, &y)
    }

    /// The Euclidean norm (f32, f64); computed on the device.
    #[handler(dtypes(blas1), device)]
    fn nrm2<T: Blas1Base>(&mut self, x: GpuRef<T>) -> Result<Deferred<T>, GpuError> {
        self.0.core()?.nrm2(&(&x).into())
    }

    /// The Euclidean norm of a strided vector's entries; computed on the device.
    #[handler(dtypes(blas1), device)]
    fn nrm2_strided<T: Blas1Base>(&mut self, x: Strided<T>) -> Result<Deferred<T>, GpuError> {
        self.0.core()?.nrm2(&x)
    }

    /// The index (0-based) of the first element of largest magnitude (f32, f64);
    /// computed on the device.
    #[handler(dtypes(blas1), device)]
    fn iamax<T: Blas1Base>(&mut self, x: GpuRef<T>) -> Result<Deferred<usize>, GpuError> {
        self.0.core()?.iamax(&(&x).into())
    }

    /// The position (0-based, among the entries) of the first entry of largest magnitude
    /// of a strided vector; computed on the device.
    #[handler(dtypes(blas1), device)]
    fn iamax_strided<T: Blas1Base>(&mut self, x: Strided<T>) -> Result<Deferred<usize>, GpuError> {
        self.0.core()?.iamax(&x)
    }

    /// A cuBLASLt matmul, `C = act(alpha·op(A)·op(B) + beta·C + bias)`: f32 (exact or
    /// TF32, as `op.compute` says), f16, bf16 or FP8 inputs, f32 accumulation, C of
    /// the caller's type, the epilogue fused (see [`crate::library::blas::matmul`]).
    #[handler(device(into(a, b, c)))]
    fn matmul(
        &mut self,
        op: Matmul,
        epilogue: Epilogue,
        a: MatmulBuffer,
        b: MatmulBuffer,
        c: MatmulBuffer,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.matmul(op, epilogue, [&a, &b, &c])
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::matmul::{Activation, Compute, Epilogue, Matmul, MatmulBuffer};
    pub use super::{Batch, Gemm, Gemv, Strided};
}
