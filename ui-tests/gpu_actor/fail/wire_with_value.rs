use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(wire = true)]
impl A {
    #[handler]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
