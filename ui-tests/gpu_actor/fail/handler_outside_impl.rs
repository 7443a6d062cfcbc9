use atomr_accel_cuda::handler;

#[handler]
fn lonely(x: u32) -> u32 {
    x
}

fn main() {}
