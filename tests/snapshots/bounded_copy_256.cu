// <prelude>
static const unsigned int THREADS = 256u;
extern "C" __global__ void __launch_bounds__(THREADS) bounded_copy(const float* __restrict__ x, unsigned long long x_len, float* __restrict__ y, unsigned long long y_len) {
#line 1242 "tests/kernels.rs"
  const k_usize i = ((((k_usize)blockIdx.x) * ((k_usize)(THREADS))) + ((k_usize)threadIdx.x));
#line 1243 "tests/kernels.rs"
  if ((i < x_len)) {
#line 1244 "tests/kernels.rs"
    y[i] = x[i];
  }
}
