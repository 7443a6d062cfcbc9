//! What every library actor is: the seed it is (re)built from, and the core — a CUDA
//! library handle on the actor's stream, or the CPU device's engine — built from that
//! seed when the actor starts. Written once here so a library actor is its handlers and
//! its core, nothing else.

use super::seed::LibrarySeed;
use crate::error::GpuError;

/// The working state of a library actor, built on the actor's own thread when it
/// starts (and again after every restart, from the same seed).
pub(crate) trait Core: Sized {
    /// How errors name the actor ("BLAS actor").
    const WHAT: &'static str;
    /// Builds the core: the library handle on the actor's stream, or the CPU engine.
    fn build(seed: &LibrarySeed) -> Result<Self, GpuError>;
}

/// A library actor's state: its seed and, once started, its core.
pub(crate) struct Library<C> {
    seed: LibrarySeed,
    core: Option<C>,
    /// Build the core when the actor starts (else on first use).
    eager: bool,
}

impl<C: Core> Library<C> {
    /// Not started yet: the core is built in the actor's `pre_start`
    /// ([`Library::start`]), on the actor's own thread.
    pub(crate) fn new(seed: LibrarySeed) -> Self {
        Library {
            seed,
            core: None,
            eager: true,
        }
    }

    /// Not started: the core is built by the first handler that needs it — a pool member
    /// beyond the first, or a library of an actor's own GPU, costs nothing until used.
    pub(crate) fn lazy(seed: LibrarySeed) -> Self {
        Library {
            seed,
            core: None,
            eager: false,
        }
    }

    /// The actor's `pre_start`: builds the core unless the library is lazy. A failure is
    /// shown to the device first (a sticky one loses it), then fails the start, so
    /// supervision sees it.
    pub(crate) fn start(&mut self) -> Result<(), GpuError> {
        if self.eager {
            self.build()?;
        }
        Ok(())
    }

    fn build(&mut self) -> Result<(), GpuError> {
        self.core = Some(C::build(&self.seed).map_err(|e| self.seed.shared.observe(e))?);
        Ok(())
    }

    /// The core, for a handler (built now if the library is lazy and this is its first
    /// use): `DeviceLost` once the device is lost.
    pub(crate) fn core(&mut self) -> Result<&mut C, GpuError> {
        if self.core.is_none() && self.seed.shared.lost().is_none() {
            self.build()?;
        }
        self.seed.shared.usable(&mut self.core, C::WHAT)
    }
}

impl<C> Drop for Library<C> {
    /// Destroys the core — its library handle, plans and workspaces — while no graph
    /// capture runs anywhere in the process: handle destruction synchronises the context
    /// (`cublasDestroy` calls `cuCtxSynchronize`), which crashed the driver beside a
    /// capture (`sys::graph::apart_from_captures`).
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            crate::sys::graph::apart_from_captures(|| drop(core));
        }
    }
}

/// The core of a library this build was compiled without (its cargo feature off). Never
/// built in practice — the route and an `ActorGpu` answer the library's requests with
/// `Lib::check`'s error, naming the feature, before any actor exists — and failing as
/// `Unsupported` if it were.
// Unused by a build that has every library.
#[allow(dead_code)]
pub(crate) struct Absent;

impl Core for Absent {
    const WHAT: &'static str = "library left out of this build";

    fn build(_seed: &LibrarySeed) -> Result<Self, GpuError> {
        Err(GpuError::Unsupported(
            "this library's cargo feature is off in this build of atomr-accel-cuda".into(),
        ))
    }
}
