use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

#[kernel]
fn unbounded<T: Copy>(y: &mut [T]) {}

#[kernel]
fn lifetime<'a>(y: &mut [f32]) {}

#[kernel]
fn const_before_type<const N: usize, T: Float>(y: &mut [T]) {}

#[kernel]
fn float_const<const X: f32>(y: &mut [f32]) {}

#[kernel(consts(M = [1], N = [true], K = [x]))]
fn bad_const_values<const N: usize>(y: &mut [f32]) {}

#[device]
fn device_const<const N: usize>(v: f32) -> f32 {
    v
}

#[device(consts(N = [1]))]
fn device_consts_option(v: f32) -> f32 {
    v
}

#[kernel]
fn both<T: Float + Int>(y: &mut [T]) {}

#[kernel]
fn where_clause<T>(y: &mut [T])
where
    T: Float,
{
}

fn main() {}
