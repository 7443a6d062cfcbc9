use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler(device)]
    fn ping(&mut self) -> u32 {
        1
    }
}

fn main() {}
