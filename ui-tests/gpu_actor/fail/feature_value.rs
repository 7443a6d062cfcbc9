use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(feature = fft)]
impl A {
    #[handler]
    fn one(&mut self) -> u32 {
        1
    }
}

struct B;

#[gpu_actor(feature = "")]
impl B {
    #[handler]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
