#define K_FP16 1
#include <cuda_fp16.h>
// <prelude>
typedef __half T;
extern "C" __global__ void softmax_rows(k_usize cols, const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len) {
#line 101 "tests/kernels.rs"
  __shared__ float red[128];
#line 102 "tests/kernels.rs"
  const k_usize row = ((k_usize)blockIdx.x);
#line 103 "tests/kernels.rs"
  const k_usize t = ((k_usize)threadIdx.x);
#line 104 "tests/kernels.rs"
  const k_usize base = (row * cols);
#line 105 "tests/kernels.rs"
  float m = ((float)((-k_inf())));
#line 106 "tests/kernels.rs"
  for (k_usize j = t; j < cols; j += ((k_usize)blockDim.x)) {
#line 107 "tests/kernels.rs"
    m = k_max(m, ((float)(k_to_f64(x[(base + j)]))));
  }
#line 109 "tests/kernels.rs"
  red[t] = m;
#line 110 "tests/kernels.rs"
  __syncthreads();
#line 111 "tests/kernels.rs"
  k_usize s = ((k_usize)64);
#line 112 "tests/kernels.rs"
  while ((s > ((k_usize)0))) {
#line 113 "tests/kernels.rs"
    if ((t < s)) {
#line 114 "tests/kernels.rs"
      red[t] = k_max(red[t], red[(t + s)]);
    }
#line 116 "tests/kernels.rs"
    __syncthreads();
#line 117 "tests/kernels.rs"
    s /= ((k_usize)2);
  }
#line 119 "tests/kernels.rs"
  const float mx = red[0];
#line 120 "tests/kernels.rs"
  __syncthreads();
#line 121 "tests/kernels.rs"
  float sum = 0.0f;
#line 122 "tests/kernels.rs"
  for (k_usize j__2 = t; j__2 < cols; j__2 += ((k_usize)blockDim.x)) {
#line 123 "tests/kernels.rs"
    sum += k_exp((((((float)(k_to_f64(x[(base + j__2)])))) - mx)));
  }
#line 125 "tests/kernels.rs"
  red[t] = sum;
#line 126 "tests/kernels.rs"
  __syncthreads();
#line 127 "tests/kernels.rs"
  s = ((k_usize)64);
#line 128 "tests/kernels.rs"
  while ((s > ((k_usize)0))) {
#line 129 "tests/kernels.rs"
    if ((t < s)) {
#line 130 "tests/kernels.rs"
      red[t] += red[(t + s)];
    }
#line 132 "tests/kernels.rs"
    __syncthreads();
#line 133 "tests/kernels.rs"
    s /= ((k_usize)2);
  }
#line 135 "tests/kernels.rs"
  const float total = red[0];
#line 136 "tests/kernels.rs"
  for (k_usize j__3 = t; j__3 < cols; j__3 += ((k_usize)blockDim.x)) {
#line 137 "tests/kernels.rs"
    const float e = (k_exp((((((float)(k_to_f64(x[(base + j__3)])))) - mx))) / total);
#line 138 "tests/kernels.rs"
    y[(base + j__3)] = k_from_f64<T>(((double)(e)));
  }
}
