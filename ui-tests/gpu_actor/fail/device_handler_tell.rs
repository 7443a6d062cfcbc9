use atomr_accel_cuda::gpu_actor;

struct A;

// (That `device` is used outside the runtime is reported as well.)
#[gpu_actor(device)]
impl A {
    #[handler(tell, device(name = poke))]
    fn ping(&mut self) {}
}

fn main() {}
