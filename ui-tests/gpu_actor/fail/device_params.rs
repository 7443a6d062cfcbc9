use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(device)]
impl A {
    #[handler(device(borrow(shape, x), into(data, x)))]
    fn ping(&mut self, x: u32) -> u32 {
        x
    }
}

fn main() {}
