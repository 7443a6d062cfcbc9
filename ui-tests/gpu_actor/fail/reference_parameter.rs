use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler]
    fn sum(&mut self, xs: &[f32]) -> f32 {
        xs.iter().sum()
    }
}

fn main() {}
