use atomr_accel_cuda::gpu_main;

#[gpu_main]
struct Main;

fn main() {}
