use atomr_accel_cuda::kernel;

#[kernel]
fn vec_param(v: Vec<f32>) {}

#[kernel]
fn tuple_param(p: (f32, f32)) {}

#[kernel]
fn slice_of_strings(s: &[String]) {}

#[kernel]
fn slice_of_bools(s: &[bool]) {}

#[kernel]
fn pattern_param((a, b): (f32, f32)) {}

#[kernel]
fn buffer_lifetime(s: &'static [f32]) {}



#[kernel]
const fn is_const(y: &mut [f32]) {}
fn main() {}
