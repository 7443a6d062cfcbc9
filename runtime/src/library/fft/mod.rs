//! `FftActor`: batched 1-, 2- and 3-D FFTs (C2C, R2C, C2R; f32 and f64) — cuFFT on the
//! GPU with a plan cache, transforms repeated on the same buffers replayed as CUDA graphs
//! (`replay`), `rustfft` on the CPU device.
//!
//! Conventions follow cuFFT (and FFTW): dimensions are row-major (the last varies
//! fastest), transforms are unnormalised (an inverse after a forward transform multiplies
//! by the number of points), an R2C output keeps `last/2 + 1` points of the last
//! dimension, and a C2R reads that half spectrum. Unlike cuFFT, C2R leaves its input
//! intact (it transforms a scratch copy).

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;
#[cfg(feature = "fft")]
use cudarc::cufft::CudaFft;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
#[cfg(feature = "fft")]
use rustfft::num_complex::Complex64;
#[cfg(feature = "fft")]
use rustfft::FftPlanner;

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::dtype::{Complex, DTypeBase, FftFloat};
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::{lock2, GpuRef, Region, RegionMut};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};
use crate::stream::StreamStrategy;

#[cfg(feature = "fft")]
mod replay;

#[cfg(feature = "fft")]
use replay::Replays;

/// The shape of a batch of transforms.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let shape = FftShape::new(&[8], 1); // one 8-point transform
/// let x = dev.upload(vec![c32 { re: 1.0, im: 0.0 }; 8]).await?;
/// let y = dev.alloc::<c32>(8).await?;
/// dev.fft_c2c(&x, &y, &shape, false).await?;
/// let out = dev.download(&y).await?;
/// assert!((out[0].re - 8.0).abs() < 1e-5); // a constant has only the zero frequency
/// assert!(out[1..].iter().all(|v| v.re.abs() < 1e-5 && v.im.abs() < 1e-5));
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FftShape {
    /// 1 to 3 dimensions, row-major (the last varies fastest).
    pub dims: Vec<usize>,
    /// Number of transforms, stored one after another.
    pub batch: usize,
}

crate::wire::wire_struct!(FftShape { dims, batch });

impl FftShape {
    /// A batch of `batch` transforms of shape `dims`.
    pub fn new(dims: &[usize], batch: usize) -> Self {
        FftShape {
            dims: dims.to_vec(),
            batch,
        }
    }

    /// Points of one transform.
    pub fn points(&self) -> usize {
        self.dims.iter().product()
    }

    /// Complex points of one R2C output / C2R input (`last/2 + 1` in the last dimension).
    pub fn half_points(&self) -> usize {
        let (last, rest) = self.dims.split_last().expect("validated non-empty");
        rest.iter().product::<usize>() * (last / 2 + 1)
    }

    fn validate(&self) -> Result<(), GpuError> {
        if self.dims.is_empty() || self.dims.len() > 3 || self.dims.contains(&0) || self.batch == 0 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "an FFT takes 1 to 3 positive dimensions and a positive batch, got {:?} x {}",
                    self.dims, self.batch
                ))
                .arg("shape")
                .mismatch(
                    "1 to 3 positive dimensions, batch ≥ 1",
                    format_args!("{:?} x {}", self.dims, self.batch),
                ),
            ));
        }
        let total = self
            .dims
            .iter()
            .try_fold(self.batch, |acc, d| acc.checked_mul(*d))
            .filter(|t| *t <= i32::MAX as usize)
            .ok_or_else(|| {
                GpuError::InvalidArgument(
                    Invalid::new(format!(
                        "an FFT of {:?} x {} exceeds cuFFT's 32-bit limit on its total points",
                        self.dims, self.batch
                    ))
                    .arg("shape")
                    .mismatch(
                        format_args!("≤ {} points", i32::MAX),
                        format_args!("{:?} x {}", self.dims, self.batch),
                    ),
                )
            })?;
        let _ = total;
        Ok(())
    }
}

/// Which transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    C2c { inverse: bool },
    R2c,
    C2r,
}

impl Kind {
    /// (input elements, output elements) of one transform.
    fn lengths(self, s: &FftShape) -> (usize, usize) {
        match self {
            Kind::C2c { .. } => (s.points(), s.points()),
            Kind::R2c => (s.points(), s.half_points()),
            Kind::C2r => (s.half_points(), s.points()),
        }
    }

    /// The operation's name on the timeline.
    fn name(self) -> &'static str {
        match self {
            Kind::C2c { inverse: false } => "fft_c2c",
            Kind::C2c { inverse: true } => "ifft_c2c",
            Kind::R2c => "fft_r2c",
            Kind::C2r => "fft_c2r",
        }
    }

    fn plan_type(self) -> u8 {
        match self {
            Kind::C2c { .. } => 0,
            Kind::R2c => 2,
            Kind::C2r => 3,
        }
    }
}

#[cfg(feature = "fft")]
type PlanKey = (u8, TypeId, FftShape);

#[cfg(feature = "fft")]
/// A cuFFT plan and its transforms captured as graphs (dropped first: a graph uses the
/// plan's work area).
struct Planned {
    replays: Replays,
    plan: CudaFft,
}

#[cfg(feature = "fft")]
enum FftEngine {
    Cpu(Box<FftPlanner<f64>>),
    Cuda {
        stream: Arc<CudaStream>,
        completer: Completer,
        plans: HashMap<PlanKey, Planned>,
        /// New plans replay repeated transforms as graphs: `DeviceConfig::fft_graphs`,
        /// and the stream is this actor's alone (a capture would take in other actors'
        /// work enqueued on a shared stream meanwhile).
        replay: bool,
    },
}

#[cfg(feature = "fft")]
/// The FFT state of one generation.
pub(crate) struct FftCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    engine: FftEngine,
}

#[cfg(feature = "fft")]
impl Core for FftCore {
    const WHAT: &'static str = "FFT actor";

    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let engine = match seed.cuda_stream()? {
            None => FftEngine::Cpu(Box::new(FftPlanner::new())),
            Some((stream, completer)) => FftEngine::Cuda {
                stream,
                completer,
                plans: HashMap::new(),
                replay: seed.shared.config.fft_graphs && seed.shared.config.streams == StreamStrategy::PerActor,
            },
        };
        Ok(FftCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            engine,
        })
    }
}

#[cfg(feature = "fft")]
/// One C2C transform of every axis of `data` (row-major `dims`), in place.
fn cpu_fft_nd(planner: &mut FftPlanner<f64>, data: &mut [Complex64], dims: &[usize], inverse: bool) {
    let mut line = Vec::new();
    for axis in 0..dims.len() {
        let len = dims[axis];
        let stride: usize = dims[axis + 1..].iter().product();
        let fft = if inverse {
            planner.plan_fft_inverse(len)
        } else {
            planner.plan_fft_forward(len)
        };
        let block = len * stride;
        for start in (0..data.len()).step_by(block) {
            for offset in 0..stride {
                line.clear();
                line.extend((0..len).map(|k| data[start + offset + k * stride]));
                fft.process(&mut line);
                for (k, v) in line.iter().enumerate() {
                    data[start + offset + k * stride] = *v;
                }
            }
        }
    }
}

/// Row-major multi-index of `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = flat % dims[a];
        flat /= dims[a];
    }
    idx
}

fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i)
}

#[cfg(feature = "fft")]
/// The CPU device's transform of one batch of `shape`.
fn cpu_transform(planner: &mut FftPlanner<f64>, kind: Kind, shape: &FftShape, input: &[Complex64]) -> Vec<Complex64> {
    let dims = &shape.dims;
    let (n, half) = (shape.points(), shape.half_points());
    let last = *dims.last().expect("validated");
    let half_dims: Vec<usize> = dims[..dims.len() - 1].iter().copied().chain([last / 2 + 1]).collect();
    let mut out = Vec::new();
    match kind {
        Kind::C2c { inverse } => {
            for b in input.chunks(n) {
                let mut v = b.to_vec();
                cpu_fft_nd(planner, &mut v, dims, inverse);
                out.extend(v);
            }
        }
        Kind::R2c => {
            for b in input.chunks(n) {
                let mut v = b.to_vec();
                cpu_fft_nd(planner, &mut v, dims, false);
                out.extend((0..half).map(|h| v[ravel(&unravel(h, &half_dims), dims)]));
            }
        }
        Kind::C2r => {
            for b in input.chunks(half) {
                // Rebuild the full spectrum from its Hermitian half: X[k] = conj(X[-k]).
                let mut full = vec![Complex64::new(0.0, 0.0); n];
                for (f, slot) in full.iter_mut().enumerate() {
                    let idx = unravel(f, dims);
                    *slot = if idx[dims.len() - 1] <= last / 2 {
                        b[ravel(&idx, &half_dims)]
                    } else {
                        let mirror: Vec<usize> = idx.iter().zip(dims).map(|(i, d)| (d - i) % d).collect();
                        b[ravel(&mirror, &half_dims)].conj()
                    };
                }
                cpu_fft_nd(planner, &mut full, dims, true);
                out.extend(full.into_iter().map(|c| Complex64::new(c.re, 0.0)));
            }
        }
    }
    out
}

#[cfg(feature = "fft")]
impl FftCore {
    fn transform<I: DTypeBase, O: DTypeBase, T: FftFloat>(
        &mut self,
        kind: Kind,
        shape: &FftShape,
        input: &GpuRef<I>,
        output: &GpuRef<O>,
        to_c: impl Fn(I) -> Complex64,
        from_c: impl Fn(Complex64) -> O,
    ) -> Result<Deferred<()>, GpuError> {
        input.validate(self.shared.config.device_id, self.generation)?;
        output.validate(self.shared.config.device_id, self.generation)?;
        shape.validate()?;
        let (li, lo) = kind.lengths(shape);
        let (need_in, need_out) = (li * shape.batch, lo * shape.batch);
        for (arg, need, have) in [("input", need_in, input.len()), ("output", need_out, output.len())] {
            if need != have {
                return Err(GpuError::InvalidArgument(Invalid::length(
                    format!(
                        "FFT {kind:?} of {:?} x {}: {arg} must hold {need} elements (has {have})",
                        shape.dims, shape.batch
                    ),
                    arg,
                    need,
                    have,
                )));
            }
        }
        // One buffer has one element type: two handles of it compare by their windows.
        let one_buffer = input.id() == output.id();
        let in_place = one_buffer && input.window() == output.window();
        // Two views of one buffer: apart, an out-of-place transform between them (one
        // buffer locked once, two addresses); overlapping, refused — cuFFT reads and
        // writes through both pointers.
        let between_views = one_buffer && !in_place;
        if between_views && input.overlaps(output) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "an FFT between overlapping views of one buffer (#{}, elements {:?} and {:?}): \
                     run it in place on one view, or between disjoint views",
                    input.id(),
                    input.window(),
                    output.window()
                ))
                .arg("output")
                .mismatch("a view apart from the input's", "an overlapping view"),
            ));
        }
        if in_place && !matches!(kind, Kind::C2c { .. }) {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "only a C2C transform may run in place; give {kind:?} an output buffer of its own"
                ))
                .arg("output")
                .mismatch("a buffer other than the input", "the input buffer"),
            ));
        }
        match &mut self.engine {
            FftEngine::Cpu(planner) => {
                let _timed = cpu_op(self.shared.config.device_id, "fft", kind.name());
                let data: Vec<Complex64> = match input.lock().region() {
                    Region::Cpu(v) => v.iter().map(|x| to_c(*x)).collect(),
                    Region::Cuda(_) => return Err(GpuError::invalid("a CUDA buffer on the CPU device")),
                };
                let result = cpu_transform(planner, kind, shape, &data);
                match output.lock().region_mut() {
                    RegionMut::Cpu(v) => v.iter_mut().zip(result).for_each(|(o, r)| *o = from_c(r)),
                    RegionMut::Cuda(_) => return Err(GpuError::invalid("a CUDA buffer on the CPU device")),
                }
                Ok(Deferred::Now(()))
            }
            FftEngine::Cuda {
                stream,
                completer,
                plans,
                replay,
            } => {
                let key: PlanKey = (kind.plan_type(), TypeId::of::<T>(), shape.clone());
                if !plans.contains_key(&key) {
                    let n: Vec<i32> = shape.dims.iter().map(|d| *d as i32).collect();
                    let ty = match kind {
                        Kind::C2c { .. } => T::TYPES.0,
                        Kind::R2c => T::TYPES.1,
                        Kind::C2r => T::TYPES.2,
                    };
                    let plan = CudaFft::plan_many(
                        &n,
                        None,
                        1,
                        li as i32,
                        None,
                        1,
                        lo as i32,
                        ty,
                        shape.batch as i32,
                        stream.clone(),
                    )
                    .map_err(|e| self.shared.observe(fft_error(e)))?;
                    plans.insert(
                        key.clone(),
                        Planned {
                            replays: Replays::new(*replay),
                            plan,
                        },
                    );
                }
                let Planned { replays, plan } = plans.get_mut(&key).expect("inserted above");
                let code = match kind {
                    Kind::C2c { inverse } => inverse as u8,
                    Kind::R2c => 2,
                    Kind::C2r => 3,
                };
                // The transform of `ip` into `op`: its graph when one was captured.
                let mut enqueue =
                    |ip: u64, op: u64| replays.run(stream, (code, ip, op), || T::exec(plan, code, ip, op));
                let device = self.shared.config.device_id;
                let r = gpu_timed(stream, device, "fft", kind.name(), || {
                    if in_place {
                        let mut g = output.lock();
                        let (p, _rec) = g.address(stream, true)?;
                        enqueue(p, p)
                    } else if between_views {
                        // (C2C: one buffer is one element type.)
                        let mut g = output.lock();
                        let (base, _rec) = g.buffer_address(stream, true)?;
                        let at = |offset: usize, size: usize| base + (offset * size) as u64;
                        enqueue(
                            at(input.offset(), std::mem::size_of::<I>()),
                            at(output.offset(), std::mem::size_of::<O>()),
                        )
                    } else {
                        let (gi, mut go) = lock2(input, output);
                        match (gi.region(), go.region_mut()) {
                            (Region::Cuda(i), RegionMut::Cuda(mut o)) => {
                                if kind == Kind::C2r {
                                    // cuFFT's C2R overwrites its input: transform a copy
                                    // (a fresh address each call: never replayed).
                                    let mut scratch = stream.clone_dtod(&i).map_err(GpuError::from)?;
                                    let (ip, _ri) = scratch.device_ptr_mut(stream);
                                    let (op, _ro) = o.device_ptr_mut(stream);
                                    let r = T::exec(plan, code, ip, op);
                                    drop(_ri);
                                    // Free the scratch stream-ordered, after the transform.
                                    drop(scratch);
                                    r
                                } else {
                                    let (ip, _ri) = i.device_ptr(stream);
                                    let (op, _ro) = o.device_ptr_mut(stream);
                                    enqueue(ip, op)
                                }
                            }
                            _ => Err(GpuError::invalid("a CPU buffer on a GPU")),
                        }
                    }
                });
                r.map_err(|e| self.shared.observe(e))?;
                Ok(self.shared.deferred(completer.done(stream)))
            }
        }
    }
}

#[cfg(feature = "fft")]
fn fft_error(e: cudarc::cufft::result::CufftError) -> GpuError {
    GpuError::Library {
        lib: crate::error::Lib::Cufft,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    }
}

#[cfg(feature = "fft")]
fn c<T: FftFloat>(z: Complex<T>) -> Complex64 {
    Complex64::new(z.re.to_f64(), z.im.to_f64())
}

#[cfg(feature = "fft")]
fn z<T: FftFloat>(c: Complex64) -> Complex<T> {
    Complex::new(T::from_f64(c.re), T::from_f64(c.im))
}

/// The FFT actor of a device. Written with `#[gpu_actor]`.
pub struct FftActor(pub(crate) Library<FftCore>);

#[cfg(not(feature = "fft"))]
use crate::library::shell::Absent as FftCore;

#[gpu_actor(crate = crate, wire, device, feature = "fft")]
impl FftActor {
    /// Prepares the plan cache on the actor's own stream.
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// Complex-to-complex FFT of `shape`: forward (`inverse = false`, e^{-2πi…}), or
    /// inverse and unnormalised; in place when `input` and `output` are the same buffer.
    #[handler(dtypes(blas1), device(name = fft_c2c, borrow(shape)))]
    fn c2c<T: FftFloat>(
        &mut self,
        input: GpuRef<Complex<T>>,
        output: GpuRef<Complex<T>>,
        shape: FftShape,
        inverse: bool,
    ) -> Result<Deferred<()>, GpuError> {
        self.0
            .core()?
            .transform::<_, _, T>(Kind::C2c { inverse }, &shape, &input, &output, c::<T>, z::<T>)
    }

    /// Real-to-complex FFT of `shape` (forward): `output` holds the half spectrum,
    /// `last/2 + 1` points of the last dimension.
    #[handler(dtypes(blas1), device(name = fft_r2c, borrow(shape)))]
    fn r2c<T: FftFloat>(
        &mut self,
        input: GpuRef<T>,
        output: GpuRef<Complex<T>>,
        shape: FftShape,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.transform::<_, _, T>(
            Kind::R2c,
            &shape,
            &input,
            &output,
            |x: T| Complex64::new(x.to_f64(), 0.0),
            z::<T>,
        )
    }

    /// Complex-to-real (inverse, unnormalised) FFT of `shape` from a half spectrum; the
    /// input is left intact.
    #[handler(dtypes(blas1), device(name = fft_c2r, borrow(shape)))]
    fn c2r<T: FftFloat>(
        &mut self,
        input: GpuRef<Complex<T>>,
        output: GpuRef<T>,
        shape: FftShape,
    ) -> Result<Deferred<()>, GpuError> {
        self.0
            .core()?
            .transform::<_, _, T>(Kind::C2r, &shape, &input, &output, c::<T>, |v: Complex64| {
                T::from_f64(v.re)
            })
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::FftShape;
}
