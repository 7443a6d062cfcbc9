//! `RngActor`: random numbers into device buffers — cuRAND on the GPU, a seeded ChaCha12
//! generator on the CPU device.
//!
//! Seeded and reproducible on each backend: the same seed gives the same numbers again
//! (after `seed`, or on a fresh device). The CPU and GPU sequences differ (different
//! generators); their distributions agree, which is what the tests check.

use std::sync::Arc;

use atomr_accel_cuda_macros::gpu_actor;
#[cfg(feature = "rand")]
use cudarc::driver::CudaStream;
#[cfg(feature = "rand")]
use rand::SeedableRng;
#[cfg(feature = "rand")]
use rand_chacha::ChaCha12Rng;
#[cfg(feature = "rand")]
use rand_distr::{Distribution, LogNormal, Normal, Poisson, StandardUniform};

use crate::actor::{Context, Deferred};
use crate::backend::state::DeviceShared;
use crate::completion::Completer;
use crate::dtype::RngFloat;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, RegionMut};
use crate::library::seed::LibrarySeed;
use crate::library::shell::{Core, Library};
use crate::observability::{cpu_op, gpu_timed};
#[cfg(feature = "rand")]
use crate::sys::{CurandGen, Draw};

pub mod sobol;

#[cfg(feature = "rand")]
use sobol::SobolSeq;
use sobol::{check_dimensions, check_length};

/// The seed a device's generator starts from.
pub const DEFAULT_SEED: u64 = 0x5EED_A70A;

/// Which generator a device's random numbers come from ([`Device::rng_generator`]).
///
/// The pseudo-random kinds are cuRAND's on a GPU; the CPU device draws every one of them
/// from ChaCha12, seeded with the seed and the kind (the same seed and kind give the same
/// numbers again on each backend; the backends' sequences differ, their distributions
/// agree). The Sobol kinds are quasi-random sequences (Joe–Kuo direction numbers, as
/// cuRAND's `CURAND_RNG_QUASI_SOBOL32`/`64` and their scrambled forms), in one
/// dimension or as many as [`Device::rng_dimensions`] sets: the plain ones give the same
/// points on both backends, the scrambled ones a scramble of each backend's own
/// ([`sobol`]); uniform fills only.
///
/// [`Device::rng_generator`]: crate::Device::rng_generator
/// [`Device::rng_dimensions`]: crate::Device::rng_dimensions
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// dev.rng_generator(RngKind::Philox, 42).await?; // the kind and its seed
/// let x = dev.alloc::<f64>(10_000).await?;
/// dev.fill_normal(&x, 0.0, 1.0).await?;
/// let mean = dev.sum(&x).await? / 10_000.0;
/// assert!(mean.abs() < 0.05, "mean {mean}");
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RngKind {
    /// cuRAND's default XORWOW.
    #[default]
    Xorwow,
    /// Philox4x32-10, counter-based.
    Philox,
    /// MRG32k3a, combined multiple recursive.
    Mrg32k3a,
    /// The Sobol quasi-random sequence in one dimension: point `i` of the sequence in
    /// Gray-code order, as `(x_i + 1) / 2³²` — low discrepancy: any first 2^k points
    /// fall one into each interval `(j / 2^k, (j + 1) / 2^k]`. No seed (a reseed
    /// restarts it).
    Sobol32,
    /// The Sobol sequence with 64-bit coordinates (`CURAND_RNG_QUASI_SOBOL64`): points as
    /// `(x >> 11) / 2⁵³ + 2⁻⁵⁴`, and 2⁶⁴ of them before it ends (`Sobol32`'s end after
    /// 2³² per dimension).
    Sobol64,
    /// `Sobol32` scrambled (`CURAND_RNG_QUASI_SCRAMBLED_SOBOL32` on a GPU, the CPU
    /// device's own affine scramble): no point at 0, still one of the first 2^k points
    /// in each interval of width 2^-k. A fixed scramble: the seed is ignored.
    ScrambledSobol32,
    /// `Sobol64` scrambled, as `ScrambledSobol32`.
    ScrambledSobol64,
}

crate::wire::wire_enum!(RngKind {
    RngKind::Xorwow,
    RngKind::Philox,
    RngKind::Mrg32k3a,
    RngKind::Sobol32,
    RngKind::Sobol64,
    RngKind::ScrambledSobol32,
    RngKind::ScrambledSobol64
});

impl RngKind {
    /// A quasi-random sequence (no seed, uniform fills only).
    pub fn is_quasi(self) -> bool {
        self.sobol().is_some()
    }

    /// A Sobol kind's width (32 or 64) and whether it is scrambled.
    fn sobol(self) -> Option<(u32, bool)> {
        match self {
            RngKind::Xorwow | RngKind::Philox | RngKind::Mrg32k3a => None,
            RngKind::Sobol32 => Some((32, false)),
            RngKind::Sobol64 => Some((64, false)),
            RngKind::ScrambledSobol32 => Some((32, true)),
            RngKind::ScrambledSobol64 => Some((64, true)),
        }
    }

    #[cfg(feature = "rand")]
    /// cuRAND's generator type.
    fn curand(self) -> cudarc::curand::sys::curandRngType_t {
        use cudarc::curand::sys::curandRngType_t as T;
        match self {
            RngKind::Xorwow => T::CURAND_RNG_PSEUDO_XORWOW,
            RngKind::Philox => T::CURAND_RNG_PSEUDO_PHILOX4_32_10,
            RngKind::Mrg32k3a => T::CURAND_RNG_PSEUDO_MRG32K3A,
            RngKind::Sobol32 => T::CURAND_RNG_QUASI_SOBOL32,
            RngKind::Sobol64 => T::CURAND_RNG_QUASI_SOBOL64,
            RngKind::ScrambledSobol32 => T::CURAND_RNG_QUASI_SCRAMBLED_SOBOL32,
            RngKind::ScrambledSobol64 => T::CURAND_RNG_QUASI_SCRAMBLED_SOBOL64,
        }
    }
}

#[cfg(feature = "rand")]
enum RngEngine {
    Cpu {
        rng: Box<ChaCha12Rng>,
        sobol: Option<SobolSeq>,
    },
    Cuda {
        gen: CurandGen,
        stream: Arc<CudaStream>,
        completer: Completer,
    },
}

#[cfg(feature = "rand")]
/// The generator of one generation of a device.
pub(crate) struct RngCore {
    shared: Arc<DeviceShared>,
    generation: u64,
    kind: RngKind,
    /// The dimensions of a quasi-random kind (1 for the others).
    dims: u32,
    engine: RngEngine,
}

#[cfg(feature = "rand")]
/// The CPU device's generator of `kind` from `seed` (a Sobol kind in `dims` dimensions).
fn cpu_engine(kind: RngKind, seed: u64, dims: u32) -> Result<RngEngine, GpuError> {
    // The kind mixed into the seed: two kinds of one seed are two sequences, as on a GPU.
    let mixed = seed ^ (kind as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Ok(RngEngine::Cpu {
        rng: Box::new(ChaCha12Rng::seed_from_u64(mixed)),
        sobol: match kind.sobol() {
            Some((bits, scrambled)) => Some(SobolSeq::new(dims, bits, scrambled)?),
            None => None,
        },
    })
}

#[cfg(feature = "rand")]
/// cuRAND's generator of `kind` on `stream` from `seed` (a Sobol kind in `dims`
/// dimensions).
fn cuda_gen(stream: &Arc<CudaStream>, kind: RngKind, seed: u64, dims: u32) -> Result<CurandGen, GpuError> {
    let gen = CurandGen::new(stream.clone(), kind.curand(), kind.is_quasi(), seed)?;
    if dims > 1 {
        gen.set_dimensions(dims)?;
    }
    Ok(gen)
}

#[cfg(feature = "rand")]
impl Core for RngCore {
    const WHAT: &'static str = "RNG actor";

    /// Builds the generator of a generation.
    fn build(seed: &LibrarySeed) -> Result<Self, GpuError> {
        let first = seed.rng_seed.unwrap_or(DEFAULT_SEED);
        let kind = RngKind::default();
        let engine = match seed.cuda_stream()? {
            None => cpu_engine(kind, first, 1)?,
            Some((stream, completer)) => RngEngine::Cuda {
                gen: cuda_gen(&stream, kind, first, 1)?,
                stream,
                completer,
            },
        };
        Ok(RngCore {
            shared: seed.shared.clone(),
            generation: seed.generation,
            kind,
            dims: 1,
            engine,
        })
    }
}

fn invalid(m: String) -> GpuError {
    GpuError::invalid(m)
}

fn check_params(mean: f64, std: f64) -> Result<(), GpuError> {
    if !mean.is_finite() || !std.is_finite() || std <= 0.0 {
        let (arg, expected, got) = if mean.is_finite() {
            ("std", "a positive finite number", std)
        } else {
            ("mean", "a finite number", mean)
        };
        return Err(GpuError::InvalidArgument(
            crate::error::Invalid::new(format!(
                "need a finite mean and a positive finite std, got mean {mean}, std {std}"
            ))
            .arg(arg)
            .mismatch(expected, got),
        ));
    }
    Ok(())
}

/// `lo < hi`, both finite, and `hi - lo` finite (the width the mapping scales by).
fn check_range(lo: f64, hi: f64) -> Result<(), GpuError> {
    if !(lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite()) {
        return Err(GpuError::InvalidArgument(
            crate::error::Invalid::new(format!(
                "a uniform range needs finite lo < hi with a finite width, got [{lo}, {hi})"
            ))
            .arg("hi")
            .mismatch(format_args!("a finite number above {lo}"), hi),
        ));
    }
    Ok(())
}

/// `u` in (0, 1] to [lo, hi): `lo + (hi − lo)·(1 − u)`; a result rounded up to `hi`
/// (possible where `hi − lo` is far below `hi`'s magnitude) wraps to `lo`, so the
/// bound holds exactly. The CPU device's copy of [`uniform_to_range`].
fn to_range<T: crate::kernel::dsl::Float>(u: T, lo: T, hi: T) -> T {
    let y = lo + (hi - lo) * (T::one() - u);
    if y >= hi {
        lo
    } else {
        y
    }
}

/// The GPU's mapping of a uniform fill in (0, 1] to [lo, hi), as [`to_range`].
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn uniform_to_range<T: Float>(x: &mut [T], lo: T, hi: T) {
    let i = global_index();
    if i < x.len() {
        let y = lo + (hi - lo) * (T::one() - x[i]);
        if y >= hi {
            x[i] = lo;
        } else {
            x[i] = y;
        }
    }
}

#[cfg(feature = "rand")]
impl RngCore {
    fn check<T: crate::dtype::DTypeBase>(&self, r: &GpuRef<T>) -> Result<(), GpuError> {
        r.validate(self.shared.config.device_id, self.generation)
    }

    fn reseed(&mut self, seed: u64) -> Result<(), GpuError> {
        match &mut self.engine {
            RngEngine::Cpu { sobol: Some(s), .. } => s.restart(),
            RngEngine::Cpu { .. } => self.engine = cpu_engine(self.kind, seed, self.dims)?,
            RngEngine::Cuda { gen, .. } => gen.reseed(seed).map_err(|e| self.shared.observe(e))?,
        }
        Ok(())
    }

    /// Replaces the generator by one of `kind`, seeded, in `dims` dimensions (a quasi-
    /// random kind; 1 for the others).
    fn switch(&mut self, kind: RngKind, seed: u64, dims: u32) -> Result<(), GpuError> {
        match &mut self.engine {
            RngEngine::Cpu { .. } => self.engine = cpu_engine(kind, seed, dims)?,
            RngEngine::Cuda { gen, stream, .. } => {
                *gen = cuda_gen(stream, kind, seed, dims).map_err(|e| self.shared.observe(e))?;
            }
        }
        self.kind = kind;
        self.dims = dims;
        Ok(())
    }

    /// A new generator of the current quasi-random kind in `dims` dimensions, at its
    /// first point.
    fn dimensions(&mut self, dims: u32) -> Result<(), GpuError> {
        if !self.kind.is_quasi() {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "the {:?} generator is pseudo-random: only a quasi-random (Sobol) kind has dimensions — \
                     pick one with rng_generator first",
                    self.kind
                ))
                .arg("dims"),
            ));
        }
        check_dimensions(dims)?;
        self.switch(self.kind, 0, dims)
    }

    /// `Unsupported` for a draw other than uniform from a quasi-random sequence.
    fn uniform_only(&self, what: &str) -> Result<(), GpuError> {
        if self.kind.is_quasi() {
            return Err(GpuError::Unsupported(format!(
                "{what} from the {:?} quasi-random sequence: it fills uniform numbers only (transform them, or switch to a pseudo-random kind)",
                self.kind
            )));
        }
        Ok(())
    }

    fn fill<T: RngFloat>(&mut self, dst: &GpuRef<T>, draw: Draw<T>) -> Result<Deferred<()>, GpuError> {
        self.enqueue_fill(dst, draw)?;
        Ok(self.finished())
    }

    /// Resolves once the work enqueued so far on the generator's stream is done (at once
    /// on the CPU device, which fills in place).
    fn finished(&self) -> Deferred<()> {
        match &self.engine {
            RngEngine::Cpu { .. } => Deferred::Now(()),
            RngEngine::Cuda { stream, completer, .. } => self.shared.deferred(completer.done(stream)),
        }
    }

    /// Fills `dst` with `draw` — on the CPU device now, on a GPU enqueued.
    fn enqueue_fill<T: RngFloat>(&mut self, dst: &GpuRef<T>, draw: Draw<T>) -> Result<(), GpuError> {
        self.check(dst)?;
        if self.kind.is_quasi() {
            check_length(dst.len(), self.dims)?;
        }
        if let Draw::Normal { mean, std } | Draw::LogNormal { mean, std } = draw {
            check_params(mean.to_f64(), std.to_f64())?;
        }
        let name = match draw {
            Draw::Uniform => "uniform",
            Draw::Normal { .. } => "normal",
            Draw::LogNormal { .. } => "log_normal",
        };
        if !matches!(draw, Draw::Uniform) {
            self.uniform_only(name)?;
        }
        let mut d = dst.lock();
        match (&mut self.engine, d.region_mut()) {
            (RngEngine::Cpu { rng, sobol }, RegionMut::Cpu(v)) => {
                let _timed = cpu_op(self.shared.config.device_id, "rng", name);
                let to = |x: f64| T::from_f64(x);
                match draw {
                    Draw::Uniform if sobol.is_some() => {
                        let s = sobol.as_mut().expect("a Sobol sequence");
                        s.fill(v.len(), |i, x| v[i] = to(x))?;
                    }
                    // (0, 1], like cuRAND.
                    Draw::Uniform => v.iter_mut().for_each(|x| {
                        let u: f64 = StandardUniform.sample(&mut **rng);
                        *x = to(1.0 - u)
                    }),
                    Draw::Normal { mean, std } => {
                        let n = Normal::new(mean.to_f64(), std.to_f64()).map_err(|e| invalid(e.to_string()))?;
                        v.iter_mut().for_each(|x| *x = to(n.sample(&mut **rng)));
                    }
                    Draw::LogNormal { mean, std } => {
                        let n = LogNormal::new(mean.to_f64(), std.to_f64()).map_err(|e| invalid(e.to_string()))?;
                        v.iter_mut().for_each(|x| *x = to(n.sample(&mut **rng)));
                    }
                }
                Ok(())
            }
            (RngEngine::Cuda { gen, stream, .. }, RegionMut::Cuda(mut s)) => {
                let needs_even = !matches!(draw, Draw::Uniform);
                let r = gpu_timed(stream, self.shared.config.device_id, "rng", name, || {
                    if needs_even && s.len() % 2 == 1 {
                        // cuRAND's pseudo-random normal generators fill even counts only:
                        // draw one more into scratch and copy.
                        stream
                            .alloc_zeros::<T>(s.len() + 1)
                            .map_err(GpuError::from)
                            .and_then(|mut scratch| {
                                T::curand_fill(gen, &mut scratch, draw)?;
                                let n = s.len();
                                stream.memcpy_dtod(&scratch.slice(..n), &mut s).map_err(GpuError::from)
                            })
                    } else {
                        T::curand_fill(gen, &mut s, draw)
                    }
                });
                r.map_err(|e| self.shared.observe(e))
            }
            _ => Err(invalid("a buffer of another backend".into())),
        }
    }

    /// Uniform numbers in [lo, hi): the generator's uniform fill in (0, 1], each `u`
    /// mapped by [`uniform_to_range`] — on the GPU by that `#[kernel]` on the
    /// generator's stream right behind the fill, on the CPU device in place.
    fn fill_range<T: RngFloat + crate::kernel::dsl::Float>(
        &mut self,
        dst: &GpuRef<T>,
        lo: T,
        hi: T,
    ) -> Result<Deferred<()>, GpuError> {
        check_range(lo.to_f64(), hi.to_f64())?;
        self.enqueue_fill(dst, Draw::Uniform)?;
        match &self.engine {
            RngEngine::Cpu { .. } => {
                if let RegionMut::Cpu(v) = dst.lock().region_mut() {
                    v.iter_mut().for_each(|x| *x = to_range(*x, lo, hi));
                }
            }
            RngEngine::Cuda { stream, .. } => {
                let mut out = dst.clone();
                let cfg = crate::launch::LaunchConfig::for_elements(dst.len(), 256);
                uniform_to_range::launch_on::<T>(stream, cfg, &mut out, lo, hi).map_err(|e| self.shared.observe(e))?;
            }
        }
        Ok(self.finished())
    }

    fn poisson(&mut self, dst: &GpuRef<u32>, lambda: f64) -> Result<Deferred<()>, GpuError> {
        self.check(dst)?;
        self.uniform_only("Poisson counts")?;
        if !lambda.is_finite() || lambda <= 0.0 {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!("Poisson needs a positive finite lambda, got {lambda}"))
                    .arg("lambda")
                    .mismatch("a positive finite number", lambda),
            ));
        }
        let mut d = dst.lock();
        match (&mut self.engine, d.region_mut()) {
            (RngEngine::Cpu { rng, .. }, RegionMut::Cpu(v)) => {
                let _timed = cpu_op(self.shared.config.device_id, "rng", "poisson");
                let p = Poisson::new(lambda).map_err(|e| invalid(e.to_string()))?;
                v.iter_mut().for_each(|x| *x = p.sample(&mut **rng) as u32);
            }
            (RngEngine::Cuda { gen, stream, .. }, RegionMut::Cuda(mut s)) => {
                let device = self.shared.config.device_id;
                let r = gpu_timed(stream, device, "rng", "poisson", || gen.poisson(&mut s, lambda));
                r.map_err(|e| self.shared.observe(e))?;
            }
            _ => return Err(invalid("a buffer of another backend".into())),
        }
        drop(d);
        Ok(self.finished())
    }
}

/// The RNG actor of a device. Written with `#[gpu_actor]`.
pub struct RngActor(pub(crate) Library<RngCore>);

#[cfg(not(feature = "rand"))]
use crate::library::shell::Absent as RngCore;

#[gpu_actor(crate = crate, wire, device, feature = "rand")]
impl RngActor {
    /// Creates the generator on the actor's own stream, seeded with [`DEFAULT_SEED`].
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.0.start()
    }

    /// Restarts the device's random sequence from `seed`: the same seed gives the same
    /// numbers again (per backend: cuRAND on a GPU, ChaCha12 on the CPU device).
    #[handler(device(name = seed_rng))]
    fn reseed(&mut self, seed: u64) -> Result<(), GpuError> {
        self.0.core()?.reseed(seed)
    }

    /// Replaces the device's generator by one of `kind`, seeded with `seed` (ignored by
    /// a quasi-random kind); later fills draw from it. A rebuilt device starts again from
    /// the default kind and its configured seed, as after `seed_rng`.
    #[handler(device(name = rng_generator))]
    fn generator(&mut self, kind: RngKind, seed: u64) -> Result<(), GpuError> {
        self.0.core()?.switch(kind, seed, 1)
    }

    /// Makes the device's quasi-random generator one of `dims` dimensions (1 to
    /// 20 000), restarted at its first point: a fill then takes whole points (a length
    /// that is a multiple of `dims`), ordered by dimension — the fill's first
    /// `len / dims` numbers are dimension 1's coordinates of those points, the next
    /// dimension 2's, and so on (cuRAND's order). `InvalidArgument` on a pseudo-random
    /// kind; `rng_generator` goes back to one dimension.
    #[handler(device(name = rng_dimensions))]
    fn dimensions(&mut self, dims: u32) -> Result<(), GpuError> {
        self.0.core()?.dimensions(dims)
    }

    /// Fills `dst` with uniform numbers in (0, 1] (cuRAND's convention; `fill_uniform_range`
    /// for [lo, hi)).
    #[handler(dtypes(blas1), device(name = fill_uniform))]
    fn uniform<T: RngFloat>(&mut self, dst: GpuRef<T>) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.fill(&dst, Draw::Uniform)
    }

    /// Fills `dst` with uniform numbers in [lo, hi) (from any generator kind, Sobol
    /// included: its uniform points, mapped).
    #[handler(dtypes(blas1), device(name = fill_uniform_range))]
    fn uniform_range<T: RngFloat + crate::kernel::dsl::Float>(
        &mut self,
        dst: GpuRef<T>,
        lo: T,
        hi: T,
    ) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.fill_range(&dst, lo, hi)
    }

    /// Fills `dst` with Normal(mean, std) numbers.
    #[handler(dtypes(blas1), device(name = fill_normal))]
    fn normal<T: RngFloat>(&mut self, dst: GpuRef<T>, mean: T, std: T) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.fill(&dst, Draw::Normal { mean, std })
    }

    /// Fills `dst` with exp(Normal(mean, std)) numbers.
    #[handler(dtypes(blas1), device(name = fill_log_normal))]
    fn log_normal<T: RngFloat>(&mut self, dst: GpuRef<T>, mean: T, std: T) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.fill(&dst, Draw::LogNormal { mean, std })
    }

    /// Fills `dst` with Poisson(lambda) counts.
    #[handler(device(name = fill_poisson))]
    fn poisson(&mut self, dst: GpuRef<u32>, lambda: f64) -> Result<Deferred<()>, GpuError> {
        self.0.core()?.poisson(&dst, lambda)
    }
}

/// What `atomr_accel_cuda::prelude` takes from this library.
pub mod prelude {
    pub use super::RngKind;
}
