use atomr_accel_cuda::gpu_main;

#[gpu_main(workers = 2)]
fn main() {}
