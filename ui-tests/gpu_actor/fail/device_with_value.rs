use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(device(blas1 = Blas1Scalar))]
impl A {
    #[handler]
    fn ping(&mut self) -> u32 {
        1
    }
}

fn main() {}
