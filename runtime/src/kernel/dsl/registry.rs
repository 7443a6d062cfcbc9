//! Every `#[kernel]` in the program, registered through `inventory` (what
//! `Device`'s `precompile_all` compiles before the first launch needs them, and what an
//! isolated device's worker finds a launch by).

use std::any::TypeId;

use crate::error::GpuError;

/// One instantiation of a kernel (one dtype binding of its generic parameters).
#[derive(Debug)]
pub struct KernelInstance {
    /// The dtypes bound to the generic parameters (`"f32"`), empty if none.
    pub dtypes: &'static str,
    /// The `extern "C"` entry point in its source.
    pub entry: &'static str,
    /// Names the instantiation (what a launch of it carries).
    pub id: fn() -> TypeId,
    /// Its CUDA C++ source.
    pub source: fn() -> String,
    /// Rebuilds a launch of it from the wire (in an isolated device's worker).
    pub from_wire:
        fn(crate::launch::LaunchConfig, &mut crate::wire::WireArgs<'_>) -> Result<super::KernelCall, GpuError>,
}

/// A kernel: registered by `#[kernel]` for every kernel in the program.
#[derive(Debug)]
pub struct KernelRegistration {
    /// The function's name.
    pub name: &'static str,
    /// The module it was declared in.
    pub module: &'static str,
    /// The instantiations `precompile_all` builds: every dtype its bounds admit.
    pub instances: &'static [KernelInstance],
}

inventory::collect!(KernelRegistration);

/// `TypeId::of::<K>` as a function pointer, for registrations.
#[doc(hidden)]
pub fn type_id_of<K: 'static>() -> TypeId {
    TypeId::of::<K>()
}

/// Every kernel registered in this program.
pub fn registered() -> impl Iterator<Item = &'static KernelRegistration> {
    inventory::iter::<KernelRegistration>.into_iter()
}
