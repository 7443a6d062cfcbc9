//! The GPU side of the `SolverActor`: cuSOLVER's dense routines on the actor's stream.
//!
//! Nothing here waits on the actor's thread: each operation enqueues its routines and
//! returns a future that awaits the stream's completion and only then reads LAPACK's
//! `info` back (4 bytes) to turn it into a typed error.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::{numerical, Op};
use crate::actor::Deferred;
use crate::completion::Completer;
use crate::device::state::DeviceShared;
use crate::dtype::SolverFloat;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Storage};
use crate::kernel::dsl::prelude::*;
use crate::module::LaunchConfig;
use crate::sys::cusolver::Dense;

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

/// The cuSOLVER handle of one generation and how its work is waited for.
pub(super) struct CudaSolver {
    dense: Dense,
    stream: Arc<CudaStream>,
    completer: Completer,
}

fn cuda<T>(s: &mut Storage<T>) -> Result<&mut CudaSlice<T>, GpuError> {
    match s {
        Storage::Cuda(c) => Ok(c),
        Storage::Cpu(_) => Err(GpuError::InvalidArgument("a buffer of another backend".into())),
    }
}

impl CudaSolver {
    pub(super) fn new(stream: Arc<CudaStream>, completer: Completer) -> Result<Self, GpuError> {
        Ok(CudaSolver {
            dense: Dense::new(stream.clone())?,
            stream,
            completer,
        })
    }

    fn info(&self) -> Result<CudaSlice<i32>, GpuError> {
        Ok(self.stream.alloc_zeros::<i32>(1)?)
    }

    /// Awaits the stream, then reads `info` and classifies it for `op`.
    fn finish(&self, shared: &Arc<DeviceShared>, op: Op, info: CudaSlice<i32>) -> Deferred<()> {
        let done = self.completer.done(&self.stream);
        let (shared, stream) = (shared.clone(), self.stream.clone());
        Deferred::later(async move {
            done.await.map_err(|e| shared.observe(e))?;
            let v = stream.clone_dtoh(&info).map_err(|e| shared.observe(e.into()))?;
            numerical(op, v[0])
        })
    }

    pub(super) fn lu_factor<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let (mut sa, mut sp) = (a.lock(), pivots.lock());
        self.dense.getrf(n, cuda(&mut sa)?, cuda(&mut sp)?, &mut info)?;
        Ok(self.finish(shared, Op::LuFactor, info))
    }

    pub(super) fn lu_solve<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        lu: &GpuRef<T>,
        pivots: &GpuRef<i32>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let (mut sl, mut sp, mut sb) = (lu.lock(), pivots.lock(), b.lock());
        self.dense
            .getrs(n, nrhs, cuda(&mut sl)?, cuda(&mut sp)?, cuda(&mut sb)?, &mut info)?;
        Ok(self.finish(shared, Op::LuSolve, info))
    }

    pub(super) fn cholesky<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        self.dense.potrf(n, cuda(&mut a.lock())?, &mut info)?;
        Ok(self.finish(shared, Op::Cholesky, info))
    }

    pub(super) fn cholesky_solve<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        l: &GpuRef<T>,
        b: &GpuRef<T>,
        (n, nrhs): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let (mut sl, mut sb) = (l.lock(), b.lock());
        self.dense.potrs(n, nrhs, cuda(&mut sl)?, cuda(&mut sb)?, &mut info)?;
        Ok(self.finish(shared, Op::CholeskySolve, info))
    }

    /// Q into `q` (a copy of `a`, factored in place), R extracted between `geqrf` and
    /// `orgqr`; `a` is left as it was.
    pub(super) fn qr<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (a, q, r): (&GpuRef<T>, &GpuRef<T>, &mut GpuRef<T>),
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let mut tau = self.stream.alloc_zeros::<T>(n)?;
        {
            let (mut sa, mut sq) = (a.lock(), q.lock());
            let qv = cuda(&mut sq)?;
            self.stream
                .memcpy_dtod(&cuda(&mut sa)?.slice(..m * n), &mut qv.slice_mut(..m * n))?;
            self.dense.geqrf(m, n, qv, &mut tau, &mut info)?;
        }
        upper_triangle::launch_on::<T>(&self.stream, LaunchConfig::for_elements(n * n, 256), q, m, r, n)?;
        self.dense.orgqr(m, n, cuda(&mut q.lock())?, &tau, &mut info)?;
        Ok(self.finish(shared, Op::Qr, info))
    }

    /// The SVD of a scratch copy of `a` (gesvd destroys its input).
    pub(super) fn svd<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        (a, u, s, vt): (&GpuRef<T>, &GpuRef<T>, &GpuRef<T>, &GpuRef<T>),
        (m, n): (usize, usize),
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let mut scratch = self.stream.alloc_zeros::<T>(m * n)?;
        self.stream
            .memcpy_dtod(&cuda(&mut a.lock())?.slice(..m * n), &mut scratch)?;
        let (mut su, mut ss, mut sv) = (u.lock(), s.lock(), vt.lock());
        self.dense.gesvd(
            m,
            n,
            &mut scratch,
            cuda(&mut ss)?,
            cuda(&mut su)?,
            cuda(&mut sv)?,
            &mut info,
        )?;
        Ok(self.finish(shared, Op::Svd, info))
    }

    pub(super) fn eigh<T: SolverFloat>(
        &self,
        shared: &Arc<DeviceShared>,
        a: &GpuRef<T>,
        w: &GpuRef<T>,
        n: usize,
    ) -> Result<Deferred<()>, GpuError> {
        let mut info = self.info()?;
        let (mut sa, mut sw) = (a.lock(), w.lock());
        self.dense.syevd(n, cuda(&mut sa)?, cuda(&mut sw)?, &mut info)?;
        Ok(self.finish(shared, Op::Eigh, info))
    }
}
