//! What a `#[kernel]` launcher sends to a device's `KernelActor`, and what the CPU
//! device hands the emulated body.

use std::any::TypeId;

use crate::error::GpuError;
pub use crate::launch::{HostBufs, KernelArg};
use crate::launch::{KernelArgs, LaunchConfig};

/// The emulated form of a launch: runs the body over host buffers on the CPU device — as
/// often as asked (a graph replays it).
pub type Emulation = Box<dyn Fn(&HostBufs) -> Result<(), GpuError> + Send + Sync>;

/// One launch of one instantiation of a `#[kernel]`: built by the generated launcher,
/// which has checked argument count and types at compile time.
pub struct KernelCall {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    pub(crate) source: fn() -> String,
    pub(crate) cfg: LaunchConfig,
    pub(crate) args: KernelArgs,
    pub(crate) emulate: Emulation,
    /// The kernel's `launch_bounds`: the most threads its blocks may have (the CUDA
    /// compiler budgets registers for it, so a larger block could not launch).
    pub(crate) max_threads: Option<u32>,
}

impl std::fmt::Debug for KernelCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelCall({}, {:?}, {:?})", self.name, self.cfg, self.args)
    }
}

impl KernelCall {
    /// Used by generated code. `K` names the instantiation (one type per kernel and
    /// dtype), so a device compiles and loads each once; `source` is called only then.
    #[doc(hidden)]
    pub fn new<K: 'static>(
        name: &'static str,
        source: fn() -> String,
        cfg: LaunchConfig,
        args: KernelArgs,
        emulate: Emulation,
    ) -> Self {
        KernelCall {
            id: TypeId::of::<K>(),
            name,
            source,
            cfg,
            args,
            emulate,
            max_threads: None,
        }
    }

    /// Used by generated code: the kernel's `launch_bounds = N`.
    #[doc(hidden)]
    pub fn with_launch_bounds(mut self, threads: u32) -> Self {
        self.max_threads = Some(threads);
        self
    }

    /// The launch dimensions checked against the device's `limits` and the kernel's
    /// `launch_bounds`, before anything is enqueued or emulated: a block larger than the
    /// bound is refused here with the kernel named, as the GPU would refuse it with a
    /// bare "too many resources requested for launch".
    pub(crate) fn check_launch(&self, limits: &crate::launch::LaunchLimits) -> Result<(), GpuError> {
        self.cfg.validate(limits)?;
        let Some(bound) = self.max_threads else {
            return Ok(());
        };
        let (x, y, z) = self.cfg.block;
        let threads = x as u64 * y as u64 * z as u64;
        if threads > bound as u64 {
            return Err(GpuError::invalid(format!(
                "kernel `{}` is declared with `launch_bounds = {bound}`: a block of {threads} threads exceeds it",
                self.name
            )));
        }
        Ok(())
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Launches to run one after another on one stream, waited for once
/// (`Device::launch_all`): a chain of kernels where each reads what the one before
/// wrote costs one round trip to the device instead of one per launch. Made from a
/// `Vec` or an array of calls (each kernel's generated `call`), or collected.
#[derive(Debug, Default)]
pub struct KernelSequence(pub(crate) Vec<KernelCall>);

impl KernelSequence {
    /// No launches yet.
    pub fn new() -> Self {
        KernelSequence(Vec::new())
    }

    /// `call` added last.
    pub fn then(mut self, call: KernelCall) -> Self {
        self.0.push(call);
        self
    }

    /// The number of launches.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are no launches.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<KernelCall>> for KernelSequence {
    fn from(calls: Vec<KernelCall>) -> Self {
        KernelSequence(calls)
    }
}

impl<const N: usize> From<[KernelCall; N]> for KernelSequence {
    fn from(calls: [KernelCall; N]) -> Self {
        KernelSequence(calls.into())
    }
}

impl FromIterator<KernelCall> for KernelSequence {
    fn from_iter<I: IntoIterator<Item = KernelCall>>(calls: I) -> Self {
        KernelSequence(calls.into_iter().collect())
    }
}

/// Where a `#[kernel]` launcher sends its launch: a `Device` (its kernel actors) or an
/// actor's own GPU (`ActorGpu`: the actor's stream, in place). The generated `launch`
/// takes either.
pub trait LaunchTarget: Sync {
    /// Runs the launch; resolves when the kernel has finished.
    fn launch_kernel(&self, call: KernelCall) -> impl std::future::Future<Output = Result<(), GpuError>> + Send;
}
