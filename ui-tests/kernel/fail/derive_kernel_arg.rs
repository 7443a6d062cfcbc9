use atomr_accel_cuda::KernelArg;

#[derive(Clone, Copy, KernelArg)]
struct NoRepr {
    a: f32,
}

#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
struct Generic<T> {
    a: T,
}

#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
struct Tuple(f32);

fn main() {}
