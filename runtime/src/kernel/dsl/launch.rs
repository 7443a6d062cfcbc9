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
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Where a `#[kernel]` launcher sends its launch: a `Device` (its kernel actors) or an
/// actor's own GPU (`ActorGpu`: the actor's stream, in place). The generated `launch`
/// takes either.
pub trait LaunchTarget: Sync {
    /// Runs the launch; resolves when the kernel has finished.
    fn launch_kernel(&self, call: KernelCall) -> impl std::future::Future<Output = Result<(), GpuError>> + Send;
}
