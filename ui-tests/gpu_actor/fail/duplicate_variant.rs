use atomr_accel_cuda::device::DType;
use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler(dtypes(f32, f64))]
    fn norm<T: DType>(&mut self) -> T {
        T::default()
    }

    #[handler]
    fn norm_f32(&mut self) -> f32 {
        0.0
    }
}

fn main() {}
