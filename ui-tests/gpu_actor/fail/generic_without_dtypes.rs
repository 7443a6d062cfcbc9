use atomr_accel_cuda::device::DType;
use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    #[handler]
    fn zero<T: DType>(&mut self) -> T {
        T::default()
    }
}

fn main() {}
