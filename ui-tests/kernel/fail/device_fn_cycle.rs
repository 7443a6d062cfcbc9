use atomr_accel_cuda::prelude::*;

// Recursion through another helper: refused by rustc (the helpers' generated constants
// depend on each other), as direct recursion is by #[device].
#[device]
fn ping(n: u32) -> u32 {
    if n == 0 { 0 } else { pong(n - 1) }
}

#[device]
fn pong(n: u32) -> u32 {
    ping(n)
}

fn main() {}
