use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler(dtypes(f32))]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
