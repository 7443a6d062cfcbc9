use atomr_accel_cuda::gpu_main;

#[gpu_main]
fn start() {}

fn main() {
    start();
}
