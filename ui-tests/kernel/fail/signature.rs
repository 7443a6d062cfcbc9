use atomr_accel_cuda::kernel;

#[kernel]
async fn is_async(y: &mut [f32]) {}

#[kernel]
unsafe fn is_unsafe(y: &mut [f32]) {}

#[kernel]
fn returns(y: &mut [f32]) -> f32 {
    0.0
}

#[kernel]
extern "C" fn has_abi(y: &mut [f32]) {}

#[kernel]
struct NotAFunction;

#[kernel]
fn double(y: &mut [f32]) {}

#[kernel]
fn k_helper(y: &mut [f32]) {}

fn main() {}
