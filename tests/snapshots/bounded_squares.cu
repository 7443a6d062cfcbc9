// <prelude>
extern "C" __global__ void __launch_bounds__(128) bounded_squares(const float* __restrict__ x, unsigned long long x_len, float* __restrict__ y, unsigned long long y_len) {
#line 1225 "tests/kernels.rs"
  __shared__ float part[128];
#line 1226 "tests/kernels.rs"
  const k_usize t = ((k_usize)threadIdx.x);
#line 1227 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1228 "tests/kernels.rs"
  part[t] = ((i < x_len) ? (x[i] * x[i]) : 0.0f);
#line 1229 "tests/kernels.rs"
  __syncthreads();
#line 1230 "tests/kernels.rs"
  if ((t == ((k_usize)0))) {
#line 1231 "tests/kernels.rs"
    float acc = 0.0f;
#line 1232 "tests/kernels.rs"
    for (k_usize k = ((k_usize)0); k < ((k_usize)blockDim.x); ++k) {
#line 1233 "tests/kernels.rs"
      acc += part[k];
    }
#line 1235 "tests/kernels.rs"
    y[((k_usize)blockIdx.x)] = acc;
  }
}
