use atomr_accel_cuda::kernel;
use atomr_accel_cuda::kernel::dsl::prelude::Vec4;

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

// A refused parameter's uses in the body say nothing more: one error.
#[kernel]
fn vector_param(v: Vec4<f32>, y: &mut [f32]) {
    y[0] = v.x + v.y;
}

#[atomr_accel_cuda::device]
fn vector_helper(v: Vec4<f32>) -> f32 {
    v.x * v.w
}



#[kernel]
const fn is_const(y: &mut [f32]) {}
fn main() {}
