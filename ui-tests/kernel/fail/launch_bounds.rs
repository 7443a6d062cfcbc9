use atomr_accel_cuda::prelude::*;

#[kernel(launch_bounds = 2048)]
fn too_many(y: &mut [f32]) {}

#[kernel(launch_bounds = "256")]
fn not_a_count(y: &mut [f32]) {}

#[kernel(launch_bounds = THREADS)]
fn unknown_const(y: &mut [f32]) {}

#[kernel(consts(WIDE = [true]), launch_bounds = WIDE)]
fn bool_const<const WIDE: bool>(y: &mut [f32]) {}

#[kernel(consts(THREADS = [256, 4096]), launch_bounds = THREADS)]
fn listed_too_many<const THREADS: u32>(y: &mut [f32]) {}

#[kernel(launch_bounds = 64, launch_bounds = 128)]
fn twice(y: &mut [f32]) {}

#[kernel(cuda = "extern \"C\" __global__ void raw(float* y, unsigned long long n) {}", launch_bounds = 64)]
fn raw(y: &mut [f32]) {
    cpu_unsupported();
}

#[device(launch_bounds = 64)]
fn bounded_helper(x: f32) -> f32 {
    x
}

fn main() {}
