//! cuFFT: the transform types and entry points of each precision.

use crate::error::GpuError;

fn cufft_error(e: cudarc::cufft::result::CufftError) -> GpuError {
    GpuError::Library {
        lib: crate::error::Lib::Cufft,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    }
}

/// The float types cuFFT transforms (f32, f64), with their entry points.
#[doc(hidden)]
pub trait CufftFloat: cudarc::driver::DeviceRepr + Copy + Sized {
    /// cuFFT's transform types for this precision: (C2C, R2C, C2R).
    const TYPES: (
        cudarc::cufft::sys::cufftType,
        cudarc::cufft::sys::cufftType,
        cudarc::cufft::sys::cufftType,
    );
    /// Runs a planned transform. `kind` 0: C2C forward, 1: C2C inverse, 2: R2C, 3: C2R.
    /// `input` and `output` are device addresses of buffers the plan fits.
    fn exec(plan: &cudarc::cufft::CudaFft, kind: u8, input: u64, output: u64) -> Result<(), GpuError>;
}

macro_rules! cufft_float {
    ($t:ty, $c2c:ident, $r2c:ident, $c2r:ident, $fc2c:ident, $fr2c:ident, $fc2r:ident, $real:ty, $cplx:ty) => {
        impl CufftFloat for $t {
            const TYPES: (
                cudarc::cufft::sys::cufftType,
                cudarc::cufft::sys::cufftType,
                cudarc::cufft::sys::cufftType,
            ) = (
                cudarc::cufft::sys::cufftType::$c2c,
                cudarc::cufft::sys::cufftType::$r2c,
                cudarc::cufft::sys::cufftType::$c2r,
            );
            fn exec(plan: &cudarc::cufft::CudaFft, kind: u8, input: u64, output: u64) -> Result<(), GpuError> {
                use cudarc::cufft::result as fr;
                let h = plan.handle();
                // SAFETY: `FftCore` validated that both buffers hold what the plan reads and
                // writes (shape, batch and element types), took their addresses on the
                // plan's stream with stream-order guards, and keeps them alive until the
                // transform completes.
                unsafe {
                    match kind {
                        0 | 1 => fr::$fc2c(
                            h,
                            input as *mut $cplx,
                            output as *mut $cplx,
                            if kind == 0 { -1 } else { 1 },
                        ),
                        2 => fr::$fr2c(h, input as *mut $real, output as *mut $cplx),
                        _ => fr::$fc2r(h, input as *mut $cplx, output as *mut $real),
                    }
                }
                .map_err(cufft_error)
            }
        }
    };
}

cufft_float!(
    f32,
    CUFFT_C2C,
    CUFFT_R2C,
    CUFFT_C2R,
    exec_c2c,
    exec_r2c,
    exec_c2r,
    cudarc::cufft::sys::cufftReal,
    cudarc::cufft::sys::cufftComplex
);
cufft_float!(
    f64,
    CUFFT_Z2Z,
    CUFFT_D2Z,
    CUFFT_Z2D,
    exec_z2z,
    exec_d2z,
    exec_z2d,
    cudarc::cufft::sys::cufftDoubleReal,
    cudarc::cufft::sys::cufftDoubleComplex
);
