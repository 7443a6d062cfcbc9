//! A `#[kernel]` launch on the wire: the kernel's registered name and dtypes plus its
//! arguments. The worker is the same executable, so it finds the same kernel in its own
//! registry (the emulated body included).

use std::any::TypeId;

use super::registry::{registered, KernelInstance};
use super::{KernelCall, KernelSequence};
use crate::error::GpuError;
use crate::launch::LaunchConfig;
use crate::wire::{take_launch_args, Reader, Wire, Writer};

/// The registered kernel instance a launch or preload names: (kernel name, dtypes).
fn instance_of(id: TypeId) -> Result<(&'static str, &'static KernelInstance), GpuError> {
    registered()
        .flat_map(|reg| reg.instances.iter().map(move |i| (reg.name, i)))
        .find(|(_, i)| (i.id)() == id)
        .ok_or_else(|| {
            GpuError::Unsupported(
                "a kernel instantiation that is not registered (a dtype outside its bounds' list) on an isolated device"
                    .into(),
            )
        })
}

fn put_instance(id: TypeId, w: &mut Writer<'_>) -> Result<&'static KernelInstance, GpuError> {
    let (name, inst) = instance_of(id)?;
    name.to_string().put(w)?;
    inst.dtypes.to_string().put(w)?;
    Ok(inst)
}

fn take_instance(r: &mut Reader<'_>) -> Result<&'static KernelInstance, GpuError> {
    let name = String::take(r)?;
    let dtypes = String::take(r)?;
    registered()
        .filter(|reg| reg.name == name)
        .flat_map(|reg| reg.instances.iter())
        .find(|i| i.dtypes == dtypes)
        .ok_or_else(|| {
            GpuError::invalid(format!(
                "the worker has no kernel `{name}` for dtypes `{dtypes}` (is it the same executable?)"
            ))
        })
}

impl Wire for TypeId {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        put_instance(*self, w).map(|_| ())
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok((take_instance(r)?.id)())
    }
}

impl Wire for KernelCall {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        put_instance(self.id, w)?;
        self.cfg.put(w)?;
        self.args.put_wire(w)
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let inst = take_instance(r)?;
        let cfg = LaunchConfig::take(r)?;
        let mut args = take_launch_args(r)?;
        (inst.from_wire)(cfg, &mut args)
    }
}

impl Wire for KernelSequence {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u64(self.0.len() as u64);
        self.0.iter().try_for_each(|c| c.put(w))
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let n = r.take_u64()?;
        (0..n)
            .map(|_| KernelCall::take(r))
            .collect::<Result<Vec<_>, _>>()
            .map(KernelSequence)
    }
}
