//! Prefix sums as library calls: `Device::inclusive_scan` and `Device::exclusive_scan` of a
//! buffer (or view) of f16, bf16, f32 or f64 into another (or into itself), and of
//! integers into 64-bit outputs. Their kernels and launch plans, and how they keep the
//! same bits on every run, are in `library/kernels/scan.rs`; here the buffers are found
//! (the look-back states from the device's scratch pool) and the launches sent.

use std::future::Future;

use crate::device::Device;
use crate::device::{DType, Reduce};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, Int};
use crate::library::kernels::scan::{float_scan_call, float_scan_tiles, int_scan_calls, same_len, scan_tiles};

/// The element types of the prefix sums, and how each scans (its output: [`Reduce::Sum`]).
pub trait Scan: Reduce<Sum: DType> {
    /// `out` = the scan of `x` on `dev`.
    #[doc(hidden)]
    fn scan_on<'a>(
        dev: &'a Device,
        x: &'a GpuRef<Self>,
        out: &'a GpuRef<Self::Sum>,
        exclusive: bool,
    ) -> impl Future<Output = Result<(), GpuError>> + Send + 'a;
}

macro_rules! scan_float {
    ($($t:ty),*) => {$(impl Scan for $t {
        fn scan_on<'a>(dev: &'a Device, x: &'a GpuRef<Self>, out: &'a GpuRef<Self>, exclusive: bool)
            -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
            dev.scan(x, out, exclusive)
        }
    })*};
}

scan_float!(half::f16, half::bf16, f32, f64);

macro_rules! scan_int {
    ($($t:ty => $o:ty),*) => {$(impl Scan for $t {
        fn scan_on<'a>(dev: &'a Device, x: &'a GpuRef<Self>, out: &'a GpuRef<$o>, exclusive: bool)
            -> impl Future<Output = Result<(), GpuError>> + Send + 'a {
            dev.scan_int::<$t, $o>(x, out, exclusive)
        }
    })*};
}

scan_int!(i8 => i64, i16 => i64, i32 => i64, i64 => i64, u8 => u64, u16 => u64, u32 => u64, u64 => u64);

impl Device {
    /// `out[i] = x[0] + … + x[i]` (a buffer or view of as many elements as `x`; `x`
    /// itself for an in-place scan where the types allow). Floats: carried in f64 and
    /// rounded once per element, into the same type; integers: into 64-bit outputs
    /// (`i64`, `u64` for unsigned), exact while they fit. The same bits on every run.
    pub async fn inclusive_scan<T: Scan>(&self, x: &GpuRef<T>, out: &GpuRef<T::Sum>) -> Result<(), GpuError> {
        T::scan_on(self, x, out, false).await
    }

    /// `out[i] = x[0] + … + x[i−1]` (`out[0] = 0`), as [`Device::inclusive_scan`].
    pub async fn exclusive_scan<T: Scan>(&self, x: &GpuRef<T>, out: &GpuRef<T::Sum>) -> Result<(), GpuError> {
        T::scan_on(self, x, out, true).await
    }

    async fn scan_int<T: Int + DType, O: Int + DType>(
        &self,
        x: &GpuRef<T>,
        out: &GpuRef<O>,
        exclusive: bool,
    ) -> Result<(), GpuError> {
        let n = x.len();
        same_len(n, out.len())?;
        let x = &self.scan_input(x, out.id()).await?;
        let mut totals = self.scratch::<i64>(scan_tiles(n)).await?;
        // Totals, their offsets, the tiles scanned: one sequence, waited for once.
        self.launch_all(int_scan_calls(x, out, exclusive, &mut totals)).await
    }

    /// `x` itself, or — an in-place scan, `x` in `out`'s buffer — a copy of it: the second
    /// pass reads the input while writing the output, and one launch takes a buffer once.
    async fn scan_input<T: DType>(&self, x: &GpuRef<T>, out: u64) -> Result<GpuRef<T>, GpuError> {
        if x.id() != out {
            return Ok(x.clone());
        }
        let copied = self.alloc::<T>(x.len()).await?;
        self.copy(x, &copied).await?;
        Ok(copied)
    }

    async fn scan<T: Float + DType>(&self, x: &GpuRef<T>, out: &GpuRef<T>, exclusive: bool) -> Result<(), GpuError> {
        let n = x.len();
        same_len(n, out.len())?;
        let x = &self.scan_input(x, out.id()).await?;
        if n == 0 {
            return Ok(());
        }
        let mut status = self
            .owned_scratch::<u64>("float scan", float_scan_tiles::<T>(n) + 1)
            .await?;
        self.launch_all([float_scan_call(x, out, &mut status, exclusive)]).await
    }
}
