use atomr_accel_cuda::kernel;
use atomr_accel_cuda::kernel::dsl::prelude::*;

#[kernel(cuda = r#"extern "C" __global__ void other(float* y, unsigned long long n) {}"#)]
fn missing(y: &mut [f32]) {
    cpu_unsupported();
}

#[kernel(cuda = r#"__global__ void not_extern(float* y, unsigned long long n) {}"#)]
fn not_extern(y: &mut [f32]) {
    cpu_unsupported();
}

#[kernel(cuda = r#"extern "C" __global__ void wrong_type(double* y, unsigned long long n) {}"#)]
fn wrong_type(y: &mut [f32]) {
    cpu_unsupported();
}

#[kernel(cuda = r#"extern "C" __global__ void no_length(const float* x) {}"#)]
fn no_length(x: &[f32]) {
    cpu_unsupported();
}

#[kernel(cuda = r#"extern "C" __global__ void empty_body(float a) {}"#)]
fn empty_body(a: f32) {}

fn main() {}
