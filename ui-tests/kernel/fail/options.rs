use atomr_accel_cuda::kernel;

#[kernel(block = 256)]
fn unknown_option(y: &mut [f32]) {}

#[kernel(cuda = "a", cuda = "b")]
fn twice(y: &mut [f32]) {}

fn main() {}
