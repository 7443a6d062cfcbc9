use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[pre_start]
    fn setup(&mut self) {}

    #[handler]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
