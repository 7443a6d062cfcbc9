use atomr_accel_cuda::device::DType;
use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(device)]
impl A {
    #[handler(dtypes(f32, f64), device)]
    fn one<T: DType>(&mut self, x: T) -> T {
        x
    }
}

fn main() {}
