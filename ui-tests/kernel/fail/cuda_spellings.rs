use atomr_accel_cuda::prelude::*;

// What a CUDA user writes first: each is an error at its token with the DSL's spelling.
#[kernel]
fn cuda_style(x: &[f32], y: &mut [f32]) {
    let i = blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();
    let s = __shfl_down_sync(0xffffffff, x[0], 16);
    atomicAdd(y, 1.0);
    y[0] = sqrtf(x[0]) + fmaxf(x[1], x[2]) + expf(x[3]);
}

fn main() {}
