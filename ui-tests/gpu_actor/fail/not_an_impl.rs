use atomr_accel_cuda::gpu_actor;

#[gpu_actor]
struct A;

fn main() {}
