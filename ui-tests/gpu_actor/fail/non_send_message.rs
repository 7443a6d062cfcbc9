use std::rc::Rc;

use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler]
    fn take(&mut self, shared: Rc<u32>) -> u32 {
        *shared
    }

    #[handler]
    fn give(&mut self) -> Rc<u32> {
        Rc::new(1)
    }
}

fn main() {}
