#define K_BF16 1
#include <cuda_bf16.h>
// <prelude>
typedef __nv_bfloat16 T;
extern "C" __global__ void saxpy(T a, const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len) {
#line 16 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 17 "tests/kernels.rs"
  if ((i < y_len)) {
#line 18 "tests/kernels.rs"
    y[i] = ((a * x[i]) + y[i]);
  }
}
