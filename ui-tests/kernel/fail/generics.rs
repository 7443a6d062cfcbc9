use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

#[kernel]
fn unbounded<T: Copy>(y: &mut [T]) {}

#[kernel]
fn lifetime<'a>(y: &mut [f32]) {}

#[kernel]
fn const_generic<const N: usize>(y: &mut [f32]) {}

#[kernel]
fn both<T: Float + Int>(y: &mut [T]) {}

#[kernel]
fn where_clause<T>(y: &mut [T])
where
    T: Float,
{
}

fn main() {}
