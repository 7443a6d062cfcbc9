//! Thin FFI wrappers for what cudarc's safe layer lacks. Every `unsafe` block of the
//! runtime that talks to CUDA lives here, each with its `// SAFETY:` reasoning.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result as dresult, CudaStream};

use crate::error::GpuError;

pub mod cusolver;
pub(crate) mod graph;
pub(crate) mod hopper;
pub(crate) mod managed;
pub(crate) mod mapped;
pub(crate) mod pinned;

/// The callback `cuLaunchHostFunc` runs: takes back the boxed closure and calls it.
unsafe extern "C" fn host_fn_trampoline(user_data: *mut c_void) {
    // SAFETY: `user_data` is the pointer produced by `Box::into_raw` in `launch_host_fn`,
    // and CUDA calls this function at most once per launch, so the box is reclaimed
    // exactly once.
    let f = unsafe { Box::from_raw(user_data as *mut Box<dyn FnOnce() + Send>) };
    f();
}

/// Enqueues `f` to run on a CUDA driver thread once all work before it on `stream` is
/// done. After a device fault CUDA never runs it (DESIGN.md): callers must pair it with
/// a fault check and a deadline. The closure is leaked in that case — a bounded cost paid
/// only on a dead context.
pub(crate) fn launch_host_fn(stream: &Arc<CudaStream>, f: Box<dyn FnOnce() + Send>) -> Result<(), GpuError> {
    stream.context().bind_to_thread()?;
    let user_data = Box::into_raw(Box::new(f)) as *mut c_void;
    // SAFETY: the stream handle is valid for the lifetime of `stream`; the trampoline
    // matches `CUhostFn`'s signature and consumes `user_data` exactly once. On an error
    // return CUDA will not call it, so the box is reclaimed here.
    let r = unsafe { dresult::stream::launch_host_function(stream.cu_stream(), host_fn_trampoline, user_data) };
    if let Err(e) = r {
        // SAFETY: the launch failed, so CUDA holds no reference to `user_data`.
        drop(unsafe { Box::from_raw(user_data as *mut Box<dyn FnOnce() + Send>) });
        return Err(e.into());
    }
    Ok(())
}

/// True if the CUDA driver library can be loaded. cudarc's dynamic loading panics on
/// first use when it cannot, so the runtime asks first.
pub(crate) fn cuda_driver_present() -> bool {
    // SAFETY: only tries to open the shared library; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// True if CUDA device `id` exists and can be initialised.
pub(crate) fn cuda_device_usable(id: usize) -> bool {
    cuda_driver_present()
        && cudarc::driver::CudaContext::device_count()
            .map(|n| (id as i32) < n)
            .unwrap_or(false)
}

/// cuBLAS level-1 entry points (64-bit sizes, unit strides) of one dtype, as safe calls on
/// whole slices. Implemented for f32 and f64 by [`cublas_level1!`]; the lengths are
/// checked by the caller (`BlasCore`) and again here.
#[doc(hidden)]
pub trait CublasLevel1: cudarc::driver::DeviceRepr + Sized {
    /// `y += alpha · x` over `x.len()` elements.
    fn axpy(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        alpha: Self,
        x: &cudarc::driver::CudaSlice<Self>,
        y: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<(), GpuError>;
    /// `x *= alpha`.
    fn scal(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        alpha: Self,
        x: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0] = x · y`, written on the device (device pointer mode).
    fn dot(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        x: &cudarc::driver::CudaSlice<Self>,
        y: &cudarc::driver::CudaSlice<Self>,
        out: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<(), GpuError>;
    /// `out[0] = ‖x‖₂`, written on the device (device pointer mode).
    fn nrm2(
        blas: &cudarc::cublas::CudaBlas,
        stream: &CudaStream,
        x: &cudarc::driver::CudaSlice<Self>,
        out: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<(), GpuError>;
    /// `y = alpha·op(A)·x + beta·y` (cudarc's `Gemv`); shapes checked by the caller.
    fn gemv(
        blas: &cudarc::cublas::CudaBlas,
        cfg: cudarc::cublas::GemvConfig<Self>,
        a: &cudarc::driver::CudaSlice<Self>,
        x: &cudarc::driver::CudaSlice<Self>,
        y: &mut cudarc::driver::CudaSlice<Self>,
    ) -> Result<(), GpuError>;
}

/// Runs `f` with the handle in device pointer mode (scalar results stay on the GPU, so
/// the call does not block the host), restoring host mode afterwards.
fn with_device_pointers(
    blas: &cudarc::cublas::CudaBlas,
    f: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    use cudarc::cublas::sys::cublasPointerMode_t as Mode;
    blas.set_pointer_mode(Mode::CUBLAS_POINTER_MODE_DEVICE)?;
    let r = f();
    blas.set_pointer_mode(Mode::CUBLAS_POINTER_MODE_HOST)?;
    r
}

macro_rules! cublas_level1 {
    ($t:ty, $axpy:ident, $scal:ident, $dot:ident, $nrm2:ident) => {
        impl CublasLevel1 for $t {
            fn axpy(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                alpha: $t,
                x: &cudarc::driver::CudaSlice<$t>,
                y: &mut cudarc::driver::CudaSlice<$t>,
            ) -> Result<(), GpuError> {
                use cudarc::driver::{DevicePtr, DevicePtrMut};
                assert_eq!(x.len(), y.len(), "axpy lengths are checked by the caller");
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (yp, _ry) = y.device_ptr_mut(stream);
                // SAFETY: `blas` enqueues on `stream`, for which both pointers were
                // obtained (and their events recorded by the guards); both slices hold
                // `n` elements; alpha is a host scalar in the handle's host pointer mode.
                unsafe { cudarc::cublas::sys::$axpy(*blas.handle(), n, &alpha, xp as *const $t, 1, yp as *mut $t, 1) }
                    .result()?;
                Ok(())
            }

            fn scal(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                alpha: $t,
                x: &mut cudarc::driver::CudaSlice<$t>,
            ) -> Result<(), GpuError> {
                use cudarc::driver::DevicePtrMut;
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr_mut(stream);
                // SAFETY: as for axpy: a valid `n`-element slice on the handle's stream.
                unsafe { cudarc::cublas::sys::$scal(*blas.handle(), n, &alpha, xp as *mut $t, 1) }.result()?;
                Ok(())
            }

            fn dot(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                x: &cudarc::driver::CudaSlice<$t>,
                y: &cudarc::driver::CudaSlice<$t>,
                out: &mut cudarc::driver::CudaSlice<$t>,
            ) -> Result<(), GpuError> {
                use cudarc::driver::{DevicePtr, DevicePtrMut};
                assert_eq!(x.len(), y.len(), "dot lengths are checked by the caller");
                assert!(!out.is_empty());
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (yp, _ry) = y.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: `n`-element inputs and a 1-element device result on the
                    // handle's stream, in device pointer mode.
                    unsafe {
                        cudarc::cublas::sys::$dot(
                            *blas.handle(),
                            n,
                            xp as *const $t,
                            1,
                            yp as *const $t,
                            1,
                            op as *mut $t,
                        )
                    }
                    .result()?;
                    Ok(())
                })
            }

            fn nrm2(
                blas: &cudarc::cublas::CudaBlas,
                stream: &CudaStream,
                x: &cudarc::driver::CudaSlice<$t>,
                out: &mut cudarc::driver::CudaSlice<$t>,
            ) -> Result<(), GpuError> {
                use cudarc::driver::{DevicePtr, DevicePtrMut};
                assert!(!out.is_empty());
                let n = x.len() as i64;
                let (xp, _rx) = x.device_ptr(stream);
                let (op, _ro) = out.device_ptr_mut(stream);
                with_device_pointers(blas, || {
                    // SAFETY: an `n`-element input and a 1-element device result on the
                    // handle's stream, in device pointer mode.
                    unsafe { cudarc::cublas::sys::$nrm2(*blas.handle(), n, xp as *const $t, 1, op as *mut $t) }
                        .result()?;
                    Ok(())
                })
            }

            fn gemv(
                blas: &cudarc::cublas::CudaBlas,
                cfg: cudarc::cublas::GemvConfig<$t>,
                a: &cudarc::driver::CudaSlice<$t>,
                x: &cudarc::driver::CudaSlice<$t>,
                y: &mut cudarc::driver::CudaSlice<$t>,
            ) -> Result<(), GpuError> {
                // SAFETY: `BlasCore::gemv` checked m, n, lda and the lengths of A, x and y
                // against `cfg`, so cuBLAS stays inside the three slices.
                unsafe { cudarc::cublas::Gemv::gemv(blas, cfg, a, x, y) }?;
                Ok(())
            }
        }
    };
}

cublas_level1!(
    f32,
    cublasSaxpy_v2_64,
    cublasSscal_v2_64,
    cublasSdot_v2_64,
    cublasSnrm2_v2_64
);
cublas_level1!(
    f64,
    cublasDaxpy_v2_64,
    cublasDscal_v2_64,
    cublasDdot_v2_64,
    cublasDnrm2_v2_64
);

/// NVRTC's (major, minor) version.
pub(crate) fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    // Asked once per process: it is part of every kernel cache key, looked up per load.
    static VERSION: std::sync::OnceLock<(i32, i32)> = std::sync::OnceLock::new();
    if let Some(v) = VERSION.get() {
        return Ok(*v);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers to c_int.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(nvrtc_error)?;
    Ok(*VERSION.get_or_init(|| (major, minor)))
}

fn nvrtc_error(e: cudarc::nvrtc::result::NvrtcError) -> GpuError {
    GpuError::Library {
        lib: crate::error::Lib::Nvrtc,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    }
}

/// Environment variable naming the directory that holds `cuda_fp16.h` / `cuda_bf16.h`,
/// for machines where the CUDA toolkit is not in a usual place.
pub const CUDA_INCLUDE_ENV: &str = "ATOMR_ACCEL_CUDA_INCLUDE";

/// Where the CUDA toolkit's headers are (generated half-precision kernels include
/// `cuda_fp16.h`/`cuda_bf16.h`; NVRTC needs their directory unless it bundles them).
fn cuda_include_dir() -> Option<std::path::PathBuf> {
    let mut candidates: Vec<std::path::PathBuf> = vec![];
    if let Some(d) = std::env::var_os(CUDA_INCLUDE_ENV) {
        candidates.push(d.into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(d) = std::env::var_os(var) {
            candidates.push(std::path::PathBuf::from(d).join("include"));
        }
    }
    candidates.push("/usr/local/cuda/include".into());
    candidates.push("/usr/include".into());
    candidates.into_iter().find(|d| d.join("cuda_fp16.h").is_file())
}

/// What NVRTC is asked for: a CUBIN for a real architecture (`sm_90`), or PTX for a
/// virtual one (`compute_90`) that the driver compiles when the module is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Cubin(u32),
    Ptx(u32),
}

/// The target for a device of architecture `sm` given the architectures this NVRTC
/// supports: a CUBIN when it knows the device, else PTX for the newest architecture it
/// knows that is not newer than the device (a GPU newer than the NVRTC library).
pub(crate) fn target_for(sm: u32, supported: &[u32]) -> Option<Target> {
    if supported.contains(&sm) {
        return Some(Target::Cubin(sm));
    }
    supported.iter().copied().filter(|&a| a <= sm).max().map(Target::Ptx)
}

/// The architectures this NVRTC can compile for (`[75, 80, 86, 89, 90, …]`).
fn nvrtc_supported_archs() -> Result<Vec<u32>, GpuError> {
    let mut n: std::ffi::c_int = 0;
    // SAFETY: a valid out-pointer.
    unsafe { cudarc::nvrtc::sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(nvrtc_error)?;
    let mut archs = vec![0 as std::ffi::c_int; n.max(0) as usize];
    // SAFETY: `archs` holds the `n` entries NVRTC reported.
    unsafe { cudarc::nvrtc::sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(nvrtc_error)?;
    Ok(archs.into_iter().map(|a| a as u32).collect())
}

/// Compiles CUDA C++ for `arch` with NVRTC. `sm_XY`: a CUBIN, or PTX (NUL-terminated, as
/// the driver loads it) if this NVRTC does not know `sm_XY`; `compute_XY`: PTX. On failure
/// the error carries NVRTC's log (which points at the source's `#line` locations).
pub(crate) fn compile_image(source: &str, arch: &str, options: &[String]) -> Result<Vec<u8>, GpuError> {
    let bad = || GpuError::InvalidArgument(format!("`{arch}` is not an architecture like sm_90 or compute_90"));
    let target = if let Some(n) = arch.strip_prefix("compute_") {
        Target::Ptx(n.parse().map_err(|_| bad())?)
    } else {
        let sm = arch.strip_prefix("sm_").and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let supported = nvrtc_supported_archs()?;
        target_for(sm, &supported).ok_or_else(|| {
            GpuError::Unsupported(format!(
                "this NVRTC supports {supported:?}, nothing at or below the device's sm_{sm}"
            ))
        })?
    };
    nvrtc_compile(source, &target, options)
}

fn nvrtc_compile(source: &str, target: &Target, options: &[String]) -> Result<Vec<u8>, GpuError> {
    use cudarc::nvrtc::result as nr;
    use cudarc::nvrtc::sys as ns;
    let csrc = std::ffi::CString::new(source)
        .map_err(|_| GpuError::InvalidArgument("kernel source contains a NUL byte".into()))?;
    let prog = nr::create_program(&csrc, None).map_err(nvrtc_error)?;
    let arch = match target {
        Target::Cubin(n) => format!("sm_{n}"),
        Target::Ptx(n) => format!("compute_{n}"),
    };
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    if source.contains("#include <cuda_") {
        if let Some(dir) = cuda_include_dir() {
            opts.push(format!("--include-path={}", dir.display()));
        }
    }
    opts.extend(options.iter().cloned());
    // SAFETY: `prog` is a live program created above; it is destroyed on every path below.
    let compiled = unsafe { nr::compile_program(prog, &opts) };
    let result = match compiled {
        Err(e) => {
            // SAFETY: as above.
            let log = unsafe { nr::get_program_log(prog) }.unwrap_or_default();
            let log: String = log.iter().map(|&c| c as u8 as char).collect();
            Err(GpuError::Library {
                lib: crate::error::Lib::Nvrtc,
                code: e.0 as i32,
                msg: format!("compilation failed:\n{}", log.trim_end_matches('\0').trim()),
            })
        }
        Ok(()) => {
            let mut size = 0usize;
            let cubin = matches!(target, Target::Cubin(_));
            // SAFETY: valid program and out-pointer.
            let sized = unsafe {
                if cubin {
                    ns::nvrtcGetCUBINSize(prog, &mut size)
                } else {
                    ns::nvrtcGetPTXSize(prog, &mut size)
                }
            };
            sized.result().map_err(nvrtc_error).and_then(|()| {
                let mut buf = vec![0u8; size];
                let out = buf.as_mut_ptr() as *mut std::ffi::c_char;
                // SAFETY: `buf` holds exactly the `size` bytes NVRTC reported (for PTX
                // including its terminating NUL, which the driver's loader needs).
                unsafe {
                    if cubin {
                        ns::nvrtcGetCUBIN(prog, out)
                    } else {
                        ns::nvrtcGetPTX(prog, out)
                    }
                }
                .result()
                .map_err(nvrtc_error)?;
                Ok(buf)
            })
        }
    };
    // SAFETY: `prog` is live and not used afterwards.
    let _ = unsafe { nr::destroy_program(prog) };
    result
}

#[cfg(test)]
mod target_tests {
    use super::{target_for, Target};

    #[test]
    fn known_arch_gets_a_cubin_newer_gets_ptx_for_the_newest_older() {
        let supported = [75, 80, 86, 89, 90];
        assert_eq!(target_for(90, &supported), Some(Target::Cubin(90)));
        assert_eq!(target_for(100, &supported), Some(Target::Ptx(90)));
        assert_eq!(target_for(87, &supported), Some(Target::Ptx(86)));
        assert_eq!(target_for(70, &supported), None);
    }
}

/// A cuRAND generator bound to one stream (cudarc's `CudaRng` keeps its handle private,
/// and Poisson sampling needs it).
#[doc(hidden)]
pub struct CurandGen {
    gen: cudarc::curand::sys::curandGenerator_t,
    stream: Arc<CudaStream>,
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
        dst: &mut cudarc::driver::CudaSlice<Self>,
        draw: Draw<Self>,
    ) -> Result<(), GpuError>;
}

macro_rules! curand_float {
    ($($t:ty),*) => {$(
        impl CurandFloat for $t {
            fn curand_fill(gen: &CurandGen, dst: &mut cudarc::driver::CudaSlice<$t>, draw: Draw<$t>) -> Result<(), GpuError> {
                gen.fill(dst, draw)
            }
        }
    )*};
}
curand_float!(f32, f64);

impl CurandGen {
    /// A default pseudo-random generator (XORWOW) on `stream`, seeded.
    pub(crate) fn new(stream: Arc<CudaStream>, seed: u64) -> Result<Self, GpuError> {
        use cudarc::curand::result as cr;
        stream.context().bind_to_thread()?;
        let gen = cr::create_generator().map_err(curand_error)?;
        let g = CurandGen { gen, stream };
        // SAFETY: `gen` is live and the stream handle outlives it (held in `g`).
        unsafe { cr::set_stream(g.gen, g.stream.cu_stream() as _) }.map_err(curand_error)?;
        g.reseed(seed)?;
        Ok(g)
    }

    /// Restarts the sequence of `seed` (offset 0): the same seed gives the same numbers.
    pub(crate) fn reseed(&self, seed: u64) -> Result<(), GpuError> {
        use cudarc::curand::result as cr;
        // SAFETY: live generator.
        unsafe { cr::set_seed(self.gen, seed) }.map_err(curand_error)?;
        // SAFETY: live generator.
        unsafe { cr::set_offset(self.gen, 0) }.map_err(curand_error)
    }

    /// Fills `dst` (f32 or f64; an even number of elements for Normal/LogNormal).
    pub(crate) fn fill<T>(&self, dst: &mut cudarc::driver::CudaSlice<T>, draw: Draw<T>) -> Result<(), GpuError>
    where
        cudarc::curand::sys::curandGenerator_t: cudarc::curand::result::UniformFill<T>
            + cudarc::curand::result::NormalFill<T>
            + cudarc::curand::result::LogNormalFill<T>,
    {
        use cudarc::curand::result::{LogNormalFill, NormalFill, UniformFill};
        use cudarc::driver::DevicePtrMut;
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
    pub(crate) fn poisson(&self, dst: &mut cudarc::driver::CudaSlice<u32>, lambda: f64) -> Result<(), GpuError> {
        use cudarc::driver::DevicePtrMut;
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

// SAFETY: `Complex<T>` is `#[repr(C)]` with two fields of one plain float type (f32 or
// f64, the only `ComplexPart`s), so it has the layout of `cufftComplex` /
// `cufftDoubleComplex` and may be copied to the device bit for bit.
unsafe impl<T: crate::dtype::ComplexPart> cudarc::driver::DeviceRepr for crate::dtype::Complex<T> {}
// SAFETY: all-zero bits are 0 + 0i for both float types.
unsafe impl<T: crate::dtype::ComplexPart> cudarc::driver::ValidAsZeroBits for crate::dtype::Complex<T> {}

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
