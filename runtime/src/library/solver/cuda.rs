//! The GPU side of the `SolverActor`: cuSOLVER's dense routines on the actor's stream.
//!
//! Nothing here waits on the actor's thread: each operation enqueues its routines, which
//! write LAPACK's `info` straight into host-mapped memory (`sys::mapped`: no copy back),
//! and returns a future that awaits the stream's completion (off the actor's thread) and
//! reads `info` there — no extra synchronisation, so later work on the stream never
//! delays the reply.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut};

use super::SolverFloat;
use super::{first_failure, numerical, Op};
use crate::actor::Deferred;
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::error::GpuError;
use crate::gpu_ref::{lock2, with_parts, with_parts_and, GpuRef, Locked, RegionMut};
use crate::kernel::dsl::prelude::*;
use crate::launch::LaunchConfig;
use crate::library::pivots::PivotLedger;
use crate::sys::cusolver::Dense;
use crate::sys::mapped::MappedCell;

/// Copies the upper triangle of the leading n×n block of `a` (leading dimension `lda`)
/// into the n×n `r`, zeros below — R out of `geqrf`'s packed output. Written with our
/// own `#[kernel]`, so it is compiled per dtype and served from the disk cache.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn upper_triangle<T: Float>(a: &[T], lda: usize, r: &mut [T], n: usize) {
    let i = global_index();
    if i < n * n {
        let row = i % n;
        let col = i / n;
        if row <= col {
            r[i] = a[col * lda + row];
        } else {
            r[i] = T::zero();
        }
    }
}

/// Cells of finished calls' `info`, reused (mapping memory costs driver calls).
type InfoPool = Arc<Mutex<Vec<MappedCell<i32>>>>;

/// How many batch-sized `info` cells are kept for reuse: one per batch in flight.
const BATCH_INFOS_KEPT: usize = 4;

/// The cuSOLVER handle of one generation and how its work is waited for.
pub(super) struct CudaSolver {
    dense: Dense,
    stream: Arc<CudaStream>,
    completer: Completer,
    slots: InfoPool,
    /// Batched routines' `info` cells (a batch's worth each), reused likewise.
    batch_infos: InfoPool,
    /// Where `lu_factor` and `lu_factor_batched` wrote pivots: `getrs` trusts its pivots
    /// (out-of-range ones would make it read and write outside B, a sticky fault), and
    /// checking their values would mean a synchronous read on the actor's thread.
    /// Shared by every solver of the generation (the seed's).
    factored: Arc<Mutex<PivotLedger>>,
    /// The cuBLAS handle of the batched LU (`getrfBatched` is cuBLAS's), made on first
    /// use on the solver's stream.
    blas: std::cell::OnceCell<cudarc::cublas::CudaBlas>,
}

/// The device memory of a locked handle (its window).
fn cuda<'a, T>(s: &'a mut Locked<'_, T>) -> Result<CudaViewMut<'a, T>, GpuError> {
    match s.region_mut() {
        RegionMut::Cuda(c) => Ok(c),
        RegionMut::Cpu(_) => Err(GpuError::invalid("a buffer of another backend")),
    }
}

impl CudaSolver {
    pub(super) fn new(
        stream: Arc<CudaStream>,
        completer: Completer,
        factored: Arc<Mutex<PivotLedger>>,
    ) -> Result<Self, GpuError> {
        Ok(CudaSolver {
            dense: Dense::new(stream.clone())?,
            stream,
            completer,
            slots: Arc::new(Mutex::new(Vec::new())),
            batch_infos: Arc::new(Mutex::new(Vec::new())),
            factored,
            blas: std::cell::OnceCell::new(),
        })
    }

    /// The generation's pivot ledger.
    fn ledger(&self) -> std::sync::MutexGuard<'_, PivotLedger> {
        self.factored.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stream its routines run on.
    pub(super) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A free `info` cell (a new one when all are in flight).
    fn slot(&self) -> Result<MappedCell<i32>, GpuError> {
        if let Some(s) = self.slots.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(s);
        }
        MappedCell::zeroed(&self.stream)
    }

    /// An `info` cell of at least `count` values, the first `count` zeroed, for a batched
    /// routine: the smallest kept one that is large enough, else a new one (rounded up,
    /// so that batches of nearby sizes share it).
    fn batch_info(&self, count: usize) -> Result<MappedCell<i32>, GpuError> {
        let mut kept = self.batch_infos.lock().unwrap_or_else(|p| p.into_inner());
        let fitting = kept.iter().enumerate().filter(|(_, c)| c.len() >= count);
        if let Some(i) = fitting.min_by_key(|(_, c)| c.len()).map(|(i, _)| i) {
            let mut cell = kept.swap_remove(i);
            cell.clear(count);
            return Ok(cell);
        }
        drop(kept);
        MappedCell::zeroed_many(&self.stream, count.next_power_of_two())
    }

    /// The future that awaits the stream and classifies `info` for `op`.
    fn finish(&self, shared: &Arc<DeviceShared>, op: Op, mut slot: MappedCell<i32>) -> Deferred<()> {
        let done = self.completer.done(&self.stream);
        let (shared, slots) = (shared.clone(), self.slots.clone());
        Deferred::later(async move {
            if let Err(e) = done.await {
                // The GPU may still write the cell (a timeout): never wait for it here.
                slot.leak();
                return Err(shared.observe(e));
            }
            // Every routine of the call was enqueued before `done`'s point on the stream.
            let info = slot.read_completed();
            slots.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
            numerical(op, info)
        })
    }

    pub(super) fn lu_factor<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        let (mut sa, mut sp) = lock2(a, pivots);
        self.dense
            .getrf(n, &mut cuda(&mut sa)?, &mut cuda(&mut sp)?, &mut slot)?;
        self.ledger().record(pivots.id(), pivots.offset(), n, 1);
        Ok(self.finish(shared, Op::LuFactor, slot))
    }

    /// `count` LUs at once (cuBLAS `getrfBatched`); each matrix's pivots are recorded
    /// for `lu_solve` as `lu_factor`'s are.
    pub(super) fn lu_factor_batched<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let blas = match self.blas.get() {
            Some(b) => b,
            None => {
                let b = cudarc::cublas::CudaBlas::new(self.stream.clone())?;
                self.blas.get_or_init(|| b)
            }
        };
        let mut info = self.batch_info(count)?;
        let (mut sa, mut sp) = lock2(a, pivots);
        T::getrf_batched(
            blas,
            self.dense.pointers(),
            &self.stream,
            (n, count),
            &mut cuda(&mut sa)?,
            &mut cuda(&mut sp)?,
            &mut info,
        )?;
        self.ledger().record(pivots.id(), pivots.offset(), n, count);
        Ok(self.finish_batched(shared, Op::LuFactorBatched, (info, count), ()))
    }

    /// `count` SVDs of m×n matrices at once (`gesvdjBatched`, on a scratch copy: it
    /// destroys its input); U and V when `vectors` holds them.
    pub(super) fn svd_batched<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (a, s, vectors): super::SvdOperands<'_, T>,
        (m, n, count): (usize, usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut scratch = self.scratch_copy(a, m * n * count)?;
        let mut info = self.batch_info(count)?;
        match vectors {
            // S, U and V may be panels of one buffer: locked once, cut into the three.
            Some((u, v)) => with_parts(Op::SvdBatched.name(), [(s, "S"), (u, "U"), (v, "V")], |[s, u, v]| {
                self.dense.gesvdj_batched(
                    (m, n, count),
                    &mut scratch,
                    &mut s.into_cuda()?,
                    Some((&mut u.into_cuda()?, &mut v.into_cuda()?)),
                    &mut info,
                )
            })??,
            // Values only of square matrices: no U, V (null, as cuSOLVER allows).
            None if m == n => self.dense.gesvdj_batched(
                (m, n, count),
                &mut scratch,
                &mut cuda(&mut s.lock())?,
                None::<(&mut CudaViewMut<'_, T>, &mut CudaViewMut<'_, T>)>,
                &mut info,
            )?,
            // Values only of non-square ones: gesvdjBatched touches U and V even when
            // asked for no vectors — with null pointers it faults (700: the H200,
            // 2026-12-05; `benches/gesvdj_probe.py`: 20×7, 7×20 and 32×5 fault with
            // nulls, and are right with buffers, vectors asked for or not) —, so the
            // vectors go to scratch buffers.
            None => {
                let mut su = self.stream.alloc_zeros::<T>(m * m * count)?;
                let mut sv = self.stream.alloc_zeros::<T>(n * n * count)?;
                self.dense.gesvdj_batched(
                    (m, n, count),
                    &mut scratch,
                    &mut cuda(&mut s.lock())?,
                    Some((&mut su, &mut sv)),
                    &mut info,
                )?;
            }
        }
        Ok(self.finish_batched(shared, Op::SvdBatched, (info, count), scratch))
    }

    /// `count` Choleskys at once (`potrfBatched`).
    pub(super) fn cholesky_batched<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.batch_info(count)?;
        self.dense
            .potrf_batched((n, count), &mut cuda(&mut a.lock())?, &mut info)?;
        Ok(self.finish_batched(shared, Op::CholeskyBatched, (info, count), ()))
    }

    /// The future that awaits the stream, then reads the batch's `info`s (the first
    /// `count` of the mapped cell: no copy) and reports the first matrix that failed;
    /// `keep` (what the routine reads beyond its operands: a scratch input) lives until
    /// then, and the cell goes back to the pool.
    fn finish_batched<K: Send + 'static>(
        &self,
        shared: &Arc<DeviceShared>,
        op: Op,
        (mut info, count): (MappedCell<i32>, usize),
        keep: K,
    ) -> Deferred<()> {
        let done = self.completer.done(&self.stream);
        let (shared, pool) = (shared.clone(), self.batch_infos.clone());
        Deferred::later(async move {
            if let Err(e) = done.await {
                // The GPU may still write the cell (a timeout): never wait for it here.
                info.leak();
                return Err(shared.observe(e));
            }
            drop(keep);
            let verdict = first_failure(op, &info.completed()[..count]);
            let mut kept = pool.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < BATCH_INFOS_KEPT {
                kept.push(info);
            }
            verdict
        })
    }

    pub(super) fn lu_solve<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        lu: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        if self.ledger().check(pivots.id(), pivots.offset(), n, 1).is_err() {
            return Err(GpuError::invalid(format!(
                "lu_solve: buffer #{} holds no pivots of an order-{n} lu_factor on this device; pass lu_factor's pivots",
                pivots.id()
            )));
        }
        let mut slot = self.slot()?;
        let named = [(lu, "the LU factors"), (b, "B")];
        with_parts_and(Op::LuSolve.name(), named, Some(pivots), |[l, b], p| {
            let p = cuda(p.expect("the pivots are locked"))?;
            self.dense
                .getrs(n, nrhs, &l.into_cuda()?, &p, &mut b.into_cuda()?, &mut slot)
        })??;
        Ok(self.finish(shared, Op::LuSolve, slot))
    }

    /// Solves `count` systems from `lu_factor_batched`'s factors and pivots at once
    /// (cuBLAS `getrsBatched`); every matrix's pivots must be a batched (or single)
    /// factorization's of order n on this device, as for `lu_solve`.
    pub(super) fn lu_solve_batched<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (lu, pivots, b): (&GpuRef<T>, &GpuRef<i32>, &GpuRef<T>),
        (n, nrhs, count): (usize, usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        if let Err(k) = self.ledger().check(pivots.id(), pivots.offset(), n, count) {
            return Err(GpuError::invalid(format!(
                "lu_solve_batched: the pivots of matrix {k} (buffer #{}) are no order-{n} lu_factor's on this device; \
                 pass lu_factor_batched's pivots",
                pivots.id()
            )));
        }
        let blas = match self.blas.get() {
            Some(b) => b,
            None => {
                let b = cudarc::cublas::CudaBlas::new(self.stream.clone())?;
                self.blas.get_or_init(|| b)
            }
        };
        let named = [(lu, "the LU factors"), (b, "B")];
        with_parts_and(Op::LuSolveBatched.name(), named, Some(pivots), |[l, b], p| {
            T::getrs_batched(
                blas,
                self.dense.pointers(),
                &self.stream,
                (n, nrhs, count),
                &l.into_cuda()?,
                &cuda(p.expect("the pivots are locked"))?,
                &mut b.into_cuda()?,
            )
        })??;
        // getrsBatched reports bad parameters on the host (checked above), no `info`
        // on the device: the reply is the stream's completion alone.
        Ok(shared.deferred(self.completer.done(&self.stream)))
    }

    /// Solves `count` systems from `cholesky_batched`'s factors at once, one right-hand
    /// side each (`potrsBatched`).
    pub(super) fn cholesky_solve_batched<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (l, b): (&GpuRef<T>, &GpuRef<T>),
        (n, count): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.batch_info(1)?;
        with_parts(Op::CholeskySolveBatched.name(), [(l, "L"), (b, "B")], |[l, b]| {
            self.dense
                .potrs_batched((n, count), &l.into_cuda()?, &mut b.into_cuda()?, &mut info)
        })??;
        Ok(self.finish_batched(shared, Op::CholeskySolveBatched, (info, 1), ()))
    }

    pub(super) fn cholesky<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        self.dense.potrf(n, &mut cuda(&mut a.lock())?, &mut slot)?;
        Ok(self.finish(shared, Op::Cholesky, slot))
    }

    pub(super) fn cholesky_solve<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        l: &GpuRef<T>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        with_parts(Op::CholeskySolve.name(), [(l, "L"), (b, "B")], |[l, b]| {
            self.dense
                .potrs(n, nrhs, &l.into_cuda()?, &mut b.into_cuda()?, &mut slot)
        })??;
        Ok(self.finish(shared, Op::CholeskySolve, slot))
    }

    /// Q into `q` (a copy of `a`, factored in place), R extracted between `geqrf` and
    /// `orgqr`; `a` is left as it was.
    pub(super) fn qr<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (a, q, r): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        let mut tau = self.stream.alloc_zeros::<T>(n)?;
        with_parts(Op::Qr.name(), [(a, "A"), (q, "Q")], |[a, q]| {
            let mut qv = q.into_cuda()?;
            self.stream
                .memcpy_dtod(&a.into_cuda()?.slice(..m * n), &mut qv.slice_mut(..m * n))?;
            self.dense.geqrf(m, n, &mut qv, &mut tau, &mut slot)
        })??;
        let mut r = r.clone();
        upper_triangle::launch_on::<T>(&self.stream, LaunchConfig::for_elements(n * n, 256), q, m, &mut r, n)?;
        self.dense.orgqr(m, n, &mut cuda(&mut q.lock())?, &tau, &mut slot)?;
        Ok(self.finish(shared, Op::Qr, slot))
    }

    /// The SVD of a scratch copy of `a` (gesvd destroys its input).
    pub(super) fn svd<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (a, u, s, vt): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        let mut scratch = self.scratch_copy(a, m * n)?;
        with_parts(Op::Svd.name(), [(u, "U"), (s, "S"), (vt, "Vᵀ")], |[u, s, vt]| {
            self.dense.gesvd(
                (m, n),
                &mut scratch,
                &mut s.into_cuda()?,
                Some((&mut u.into_cuda()?, &mut vt.into_cuda()?)),
                &mut slot,
            )
        })??;
        Ok(self.finish(shared, Op::Svd, slot))
    }

    /// A copy of `a`'s first `len` elements, for a routine that destroys its input.
    fn scratch_copy<T: SolverFloat>(&self, a: &GpuRef<T>, len: usize) -> Result<CudaSlice<T>, GpuError> {
        let mut scratch = self.stream.alloc_zeros::<T>(len)?;
        self.stream
            .memcpy_dtod(&cuda(&mut a.lock())?.slice(..len), &mut scratch)?;
        Ok(scratch)
    }

    /// The singular values only, of a scratch copy of `a`.
    pub(super) fn svd_values<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        s: &GpuRef<T>,
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        let mut scratch = self.scratch_copy(a, m * n)?;
        let mut ss = s.lock();
        self.dense.gesvd(
            (m, n),
            &mut scratch,
            &mut cuda(&mut ss)?,
            None::<(&mut CudaViewMut<'_, T>, &mut CudaViewMut<'_, T>)>,
            &mut slot,
        )?;
        Ok(self.finish(shared, Op::SvdValues, slot))
    }

    pub(super) fn eigh<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        w: &GpuRef<T>,
        n: usize,
        how: super::Eigh,
    ) -> Result<Deferred<()>, GpuError> {
        let mut slot = self.slot()?;
        let upper = how.triangle == super::Triangle::Upper;
        with_parts(Op::Eigh.name(), [(a, "A"), (w, "W")], |[a, w]| {
            self.dense.syevd(
                (n, how.vectors, upper),
                &mut a.into_cuda()?,
                &mut w.into_cuda()?,
                &mut slot,
            )
        })??;
        Ok(self.finish(shared, Op::Eigh, slot))
    }
}
