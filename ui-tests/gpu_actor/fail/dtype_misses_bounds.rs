use atomr_accel_cuda::device::BlasScalar;
use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler(dtypes(f32, i32))]
    fn one<T: BlasScalar>(&mut self) -> T {
        T::from_f64(1.0)
    }
}

fn main() {}
