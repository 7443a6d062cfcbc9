use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;

#[kernel]
fn calls(x: &[f32], y: &mut [f32]) {
    let i = global_index(3);
    y[1] = f32::unknown();
    y[2] = x[0].frobnicate();
    y[3] = shfl_down(x[0]);
    cpu_unsupported();
    x.atomic_add(0, 1.0);
    y.atomic_add(0);
    y.push(1.0);
    let j: i32 = 3;
    let k = j.sqrt();
    atomic_add(&mut y[i], 1.0);
    atomic_max(y, 2.0);
    let m = ballot(1.0);
    sync_warp(1);
    nanosleep();
    let c: u32 = match i {
        0 => 1,
        n => 2,
    };
    let d: u32 = match i {
        0 => 1,
    };
    let e: u32 = match shfl_down(3u32, 1) {
        _ => 1,
    };
    let f = x[0].to_i64();
    let g = j.wrapping_add(1);
    let h = f32::from_i64(3);
    let b = j.to_bits();
    let o = x[0].count_ones();
    let r = u32::from_bits(7u32);
}

fn main() {}
