//! Warming a device's libraries when it opens.
//!
//! Why: the first call of each CUDA library in a process pays its one-time
//! initialisation — kernels loaded on first use, workspaces, generator states: 84–119 ms
//! for the first GEMM, RNG fill and solver call after `Device::open` on the H200
//! (BENCHMARKS.md). Paid here, once, with the libraries warmed at the same time, a user's
//! first call costs what every later one does. The CPU device has nothing to warm.

use super::bounds::BlasScalar;
use super::Device;
use crate::dtype::c32;
use crate::error::GpuError;
use crate::library::blas::Gemm;
use crate::library::catalog::Lib;
use crate::library::fft::FftShape;

impl Device {
    /// Runs a tiny call of every enabled library (a GEMM of each float width, an RNG
    /// fill, a C2C FFT, a Cholesky), all at once, on a GPU; nothing on the CPU device.
    /// `Device::open` calls it when `DeviceConfig::warm_up` is on; a failure here is the
    /// device's to report at the first real call, so it is only traced.
    pub async fn warm_up(&self) {
        if !self.on_gpu() {
            return;
        }
        let libs = self.config().libraries;
        let (blas, rng, fft, solver) = futures::join!(
            when(Lib::Blas.on(&libs), async {
                self.warm_gemm::<f32>().await.and(self.warm_gemm::<f64>().await)
            }),
            when(Lib::Rng.on(&libs), self.warm_rng()),
            when(Lib::Fft.on(&libs), self.warm_fft()),
            when(Lib::Solver.on(&libs), self.warm_solver()),
        );
        for (what, r) in [("BLAS", blas), ("RNG", rng), ("FFT", fft), ("solver", solver)] {
            if let Err(e) = r {
                tracing::warn!(device = self.id(), library = what, error = %e, "warming the library failed");
            }
        }
    }

    async fn warm_gemm<T: BlasScalar>(&self) -> Result<(), GpuError> {
        let n = 64;
        let (a, c) = (self.alloc::<T>(n * n).await?, self.alloc::<T>(n * n).await?);
        self.gemm(Gemm::<T>::new(n, n, n), &a, &a, &c).await
    }

    async fn warm_rng(&self) -> Result<(), GpuError> {
        let x = self.alloc::<f32>(1024).await?;
        self.fill_uniform(&x).await?;
        self.fill_normal(&x, 0.0, 1.0).await
    }

    async fn warm_fft(&self) -> Result<(), GpuError> {
        let (x, y) = (self.alloc::<c32>(256).await?, self.alloc::<c32>(256).await?);
        self.fft_c2c(&x, &y, &FftShape::new(&[256], 1), false).await
    }

    async fn warm_solver(&self) -> Result<(), GpuError> {
        let n = 8;
        let eye: Vec<f32> = (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect();
        let a = self.upload(eye).await?;
        self.cholesky(&a, n).await
    }
}

/// `warm`, unless its library is left out of the config (then nothing: the future is
/// never polled).
async fn when(on: bool, warm: impl std::future::Future<Output = Result<(), GpuError>>) -> Result<(), GpuError> {
    if on {
        warm.await
    } else {
        Ok(())
    }
}
