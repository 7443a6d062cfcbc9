// Three mistakes, three errors in one build.
use atomr_accel_cuda::device::DType;
use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(mailboxes = 1)]
impl A {
    #[handler]
    fn consume(self) -> u32 {
        1
    }

    #[handler]
    fn zero<T: DType>(&mut self) -> T {
        T::default()
    }
}

fn main() {}
