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

/// A launch of the registered kernel `name` (its instantiation for `dtypes`, e.g.
/// `"f32"`; empty for a kernel of one instantiation) with arguments assembled at run time:
/// how a binding that knows kernels only by name (Python's `Device.launch`) builds one.
/// Launch it with `Device::launch_kernel`. An unknown name or dtype binding, or
/// arguments that do not fit the kernel's parameters, is an `InvalidArgument` saying
/// which (and what there is).
pub fn launch_by_name(
    name: &str,
    dtypes: &str,
    cfg: crate::launch::LaunchConfig,
    args: crate::wire::DynArgs,
) -> Result<super::KernelCall, GpuError> {
    let found: Vec<&KernelRegistration> = registered().filter(|k| k.name == name).collect();
    let k = match found[..] {
        [k] => k,
        [] => {
            let mut known: Vec<&str> = registered().map(|k| k.name).collect();
            known.sort_unstable();
            known.dedup();
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "no #[kernel] named {name:?} in this program (it has: {})",
                    known.join(", ")
                ))
                .arg("name"),
            ));
        }
        _ => {
            let modules: Vec<&str> = found.iter().map(|k| k.module).collect();
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "{name:?} names a #[kernel] in each of {}: rename one",
                    modules.join(", ")
                ))
                .arg("name"),
            ));
        }
    };
    let instance = match (dtypes, k.instances) {
        ("", [only]) => only,
        _ => k.instances.iter().find(|i| i.dtypes == dtypes).ok_or_else(|| {
            let have: Vec<&str> = k.instances.iter().map(|i| i.dtypes).collect();
            GpuError::InvalidArgument(
                crate::error::Invalid::new(format!(
                    "kernel {name:?} has no instantiation for dtypes {dtypes:?} (it has: {})",
                    have.join(" | ")
                ))
                .arg("dtypes"),
            )
        })?,
    };
    let mut wire = args.into_wire();
    let call = (instance.from_wire)(cfg, &mut wire).map_err(|e| match e {
        GpuError::InvalidArgument(mut i) => {
            i.message = format!("kernel {name:?} ({}): {}", instance.dtypes, i.message);
            GpuError::InvalidArgument(i)
        }
        other => other,
    })?;
    if wire.remaining() > 0 {
        return Err(GpuError::invalid(format!(
            "kernel {name:?}: more arguments than it takes"
        )));
    }
    Ok(call)
}
