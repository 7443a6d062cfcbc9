use atomr_accel_cuda::prelude::*;

#[kernel]
fn vectors(x: &[f32], y: &mut [f32]) {
    let a = Vec4::zeros();
    let b = Vec4::new(1.0f32, 2.0, 3.0);
    let c = Vec4::splat(0.0);
    let d = x.load4(0).q;
    let e = x.load4(0, 1);
    x.store4(0, x.load4(0));
    y.store4(0, 1.0f32);
    y.store4(0);
}

#[kernel]
fn dynamic(y: &mut [f32]) {
    let mut a = dyn_shared::<bool>();
    let mut b = dyn_shared();
    if y.len() > 0 {
        let mut c = dyn_shared::<f32>();
    }
    y[0] = dyn_shared::<f32>()[0];
}

#[kernel]
fn views(x: &[f32], y: &mut [f32], s: f32) {
    let m = x.rows();
    let v = s.rows(4);
    let w = x.rows(4);
    y[(1, 2)] = w[3];
    y[0] = w[(1, 2, 3)];
    let n = x.rows(4).len();
    w[(0, 0)] = 1.0;
}

#[device]
fn helper_with_shared(v: f32) -> f32 {
    let mut tile = shared_array::<f32, 32>();
    let mut buf = dyn_shared::<f32>();
    v
}

fn main() {}
