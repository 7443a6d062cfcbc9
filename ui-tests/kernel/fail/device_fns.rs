use atomr_accel_cuda::prelude::*;

// A plain function is not a `#[device] fn`: the kernel cannot translate it.
fn plain(v: f32) -> f32 {
    v
}

#[kernel]
fn calls_plain(x: &[f32], y: &mut [f32]) {
    y[0] = plain(x[0]);
}

#[device]
fn recurse(n: u32) -> u32 {
    if n == 0 { 0 } else { recurse(n - 1) }
}

#[device]
fn returns_a_buffer(x: &[f32]) -> &[f32] {
    x
}

#[device]
fn unit_returns_value(x: f32) {
    return x;
}

#[device]
fn value_returns_nothing(x: f32) -> f32 {
    if x > 0.0 {
        return;
    }
    x
}

#[device]
fn takes(v: f32) -> f32 {
    v
}

#[kernel]
fn passes_shared(y: &mut [f32]) {
    let mut tile = shared_array::<f32, 32>();
    y[0] = takes(tile);
    y[1] = f32::sqrt(y[0]);
}

#[device(cuda = "__device__ float f() { return 0; }")]
fn raw_device() -> f32 {
    0.0
}

fn main() {}
