use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler]
    fn make(x: u32) -> u32 {
        x
    }
}

fn main() {}
