use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor]
impl A {
    fn helper(&self) {}
}

fn main() {}
