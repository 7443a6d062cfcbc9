//! cuRAND: a generator bound to one stream, and the fills of each float type.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::error::GpuError;

/// A cuRAND generator bound to one stream (cudarc's `CudaRng` keeps its handle private,
/// and Poisson sampling needs it).
#[doc(hidden)]
pub struct CurandGen {
    gen: cudarc::curand::sys::curandGenerator_t,
    stream: Arc<CudaStream>,
    /// A quasi-random generator: no seed to set.
    quasi: bool,
}

// SAFETY: a cuRAND generator may be used from any thread as long as calls on it are not
// concurrent; `CurandGen` is owned by one actor and used through `&mut self`.
unsafe impl Send for CurandGen {}

fn curand_error(e: cudarc::curand::result::CurandError) -> GpuError {
    GpuError::Library {
        lib: crate::error::Lib::Curand,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    }
}

/// Which distribution to draw.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Draw<T> {
    /// Uniform in (0, 1].
    Uniform,
    /// Normal(mean, std).
    Normal {
        /// Mean.
        mean: T,
        /// Standard deviation.
        std: T,
    },
    /// exp(Normal(mean, std)).
    LogNormal {
        /// Mean of the underlying normal.
        mean: T,
        /// Standard deviation of the underlying normal.
        std: T,
    },
}

/// The float types cuRAND fills (f32, f64).
#[doc(hidden)]
pub trait CurandFloat: cudarc::driver::DeviceRepr + Copy + Sized {
    /// Fills `dst` with `draw` from `gen`.
    fn curand_fill(
        gen: &CurandGen,
        dst: &mut impl cudarc::driver::DevicePtrMut<Self>,
        draw: Draw<Self>,
    ) -> Result<(), GpuError>;
}

macro_rules! curand_float {
    ($($t:ty),*) => {$(
        impl CurandFloat for $t {
            fn curand_fill(gen: &CurandGen, dst: &mut impl cudarc::driver::DevicePtrMut<$t>, draw: Draw<$t>) -> Result<(), GpuError> {
                gen.fill(dst, draw)
            }
        }
    )*};
}
curand_float!(f32, f64);

impl CurandGen {
    /// A generator of cuRAND's type `kind` on `stream`, seeded (a quasi-random one,
    /// `quasi`, has no seed: it starts its sequence).
    pub(crate) fn new(
        stream: Arc<CudaStream>,
        kind: cudarc::curand::sys::curandRngType_t,
        quasi: bool,
        seed: u64,
    ) -> Result<Self, GpuError> {
        use cudarc::curand::result as cr;
        stream.context().bind_to_thread()?;
        let gen = cr::create_generator_kind(kind).map_err(curand_error)?;
        let g = CurandGen { gen, stream, quasi };
        // SAFETY: `gen` is live and the stream handle outlives it (held in `g`).
        unsafe { cr::set_stream(g.gen, g.stream.cu_stream() as _) }.map_err(curand_error)?;
        g.reseed(seed)?;
        Ok(g)
    }

    /// Restarts the sequence of `seed` (offset 0): the same seed gives the same numbers.
    /// A quasi-random sequence has no seed: it restarts from its first point.
    pub(crate) fn reseed(&self, seed: u64) -> Result<(), GpuError> {
        use cudarc::curand::result as cr;
        if !self.quasi {
            // SAFETY: live generator.
            unsafe { cr::set_seed(self.gen, seed) }.map_err(curand_error)?;
        }
        // SAFETY: live generator.
        unsafe { cr::set_offset(self.gen, 0) }.map_err(curand_error)
    }

    /// Makes a quasi-random generator one of `dims` dimensions (its output then ordered
    /// by dimension, cuRAND's default quasi-random ordering).
    pub(crate) fn set_dimensions(&self, dims: u32) -> Result<(), GpuError> {
        // SAFETY: FFI edge: the generator is live and owned by `self`; cuRAND checks
        // the generator's kind and `dims` itself (an error status, never UB).
        let status = unsafe { cudarc::curand::sys::curandSetQuasiRandomGeneratorDimensions(self.gen, dims) };
        match status {
            cudarc::curand::sys::curandStatus_t::CURAND_STATUS_SUCCESS => Ok(()),
            e => Err(curand_error(cudarc::curand::result::CurandError(e))),
        }
    }

    /// Fills `dst` (f32 or f64; an even number of elements for Normal/LogNormal).
    pub(crate) fn fill<T>(&self, dst: &mut impl cudarc::driver::DevicePtrMut<T>, draw: Draw<T>) -> Result<(), GpuError>
    where
        cudarc::curand::sys::curandGenerator_t: cudarc::curand::result::UniformFill<T>
            + cudarc::curand::result::NormalFill<T>
            + cudarc::curand::result::LogNormalFill<T>,
    {
        use cudarc::curand::result::{LogNormalFill, NormalFill, UniformFill};
        let n = dst.len();
        let (ptr, _record) = dst.device_ptr_mut(&self.stream);
        let ptr = ptr as *mut T;
        // SAFETY: `ptr` addresses `n` elements of `T` on the generator's stream, ordered
        // by the record guard; the generator is live.
        unsafe {
            match draw {
                Draw::Uniform => UniformFill::fill(self.gen, ptr, n),
                Draw::Normal { mean, std } => NormalFill::fill(self.gen, ptr, n, mean, std),
                Draw::LogNormal { mean, std } => LogNormalFill::fill(self.gen, ptr, n, mean, std),
            }
        }
        .map_err(curand_error)
    }

    /// Fills `dst` with Poisson(lambda) draws.
    pub(crate) fn poisson(
        &self,
        dst: &mut impl cudarc::driver::DevicePtrMut<u32>,
        lambda: f64,
    ) -> Result<(), GpuError> {
        let n = dst.len();
        let (ptr, _record) = dst.device_ptr_mut(&self.stream);
        // SAFETY: as for `fill`.
        unsafe { cudarc::curand::result::generate::poisson_u32(self.gen, ptr as *mut u32, n, lambda) }
            .map_err(curand_error)
    }
}

impl Drop for CurandGen {
    fn drop(&mut self) {
        // SAFETY: the generator is live and dropped once.
        let _ = unsafe { cudarc::curand::result::destroy_generator(self.gen) };
    }
}
