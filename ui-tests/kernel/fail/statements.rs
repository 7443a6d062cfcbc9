use atomr_accel_cuda::kernel;

#[kernel]
fn items_and_macros(y: &mut [f32]) {
    fn helper() {}
    println!("hello");
    const NAME: &str = "tile";
    const OK: usize = 4;
    y[OK] = 1.0;
}

#[kernel]
fn lets(y: &mut [f32]) {
    let (a, b) = (1.0f32, 2.0f32);
    y[0] = a + b;
    let untyped = 0.5;
    let no_init;
    let alias = y;
    let Some(v) = Some(1.0f32) else { return };
    let (c, d) = y[0];
    let (e, f) = (1.0f32,);
    let (g, (h, i)) = (1.0f32, (2.0f32, 3.0f32));
    let (j, k): f32 = (1.0f32, 2.0f32);
    let (l, m) = (y, 1.0f32);
}

#[derive(Clone, Copy, atomr_accel_cuda::KernelArg)]
#[repr(C)]
pub struct Pair {
    pub a: f32,
    pub b: f32,
}

#[kernel]
fn struct_literals(p: Pair, y: &mut [f32]) {
    let q = Pair { a: 1.0, ..p };
    let r = <Pair>::default();
}

#[kernel]
fn shared_inside_loop(y: &mut [f32]) {
    for i in 0..4 {
        let mut s = shared_array::<f32, 32>();
    }
    let bad = shared_array::<f32>();
    shared_array::<f32, 8>();
}

#[kernel]
fn loops(y: &mut [f32]) {
    'outer: loop {
        break 'outer;
    }
    while let Some(v) = Some(1) {}
    for i in y.iter() {}
    for i in 0.. {}
    for f in 0.0f32..1.0 {}
    let v: usize = loop {
        break 5;
    };
}

#[kernel]
fn returns_value(y: &mut [f32]) {
    return 1.0;
}

#[kernel]
fn writes_read_only(x: &[f32]) {
    x[0] = 1.0;
}

fn main() {}
