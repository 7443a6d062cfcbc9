// Every GpuError variant is a tag supervision can name, Numerical and KernelFault
// included (the macro's list is checked against the enum when the runtime builds).
use atomr_accel_cuda::{gpu_actor, GpuError};

struct Solver;

#[gpu_actor(supervision(resume_on = [Numerical, KernelFault, InvalidArgument], restart_on = [Other]))]
impl Solver {
    #[handler]
    fn fail(&mut self) -> Result<(), GpuError> {
        Err(GpuError::Other("on purpose".into()))
    }
}

fn main() {}
