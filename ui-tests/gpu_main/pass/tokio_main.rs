//! `#[gpu_main]` above `#[tokio::main]`: the worker check runs first thing in `main`.
use atomr_accel_cuda::gpu_main;

#[gpu_main]
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let answer = async { 42 }.await;
    assert_eq!(answer, 42);
}
