// <prelude>
typedef float T;
extern "C" __global__ void warp_sums(const T* __restrict__ x, unsigned long long x_len, T* __restrict__ out, unsigned long long out_len) {
#line 51 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 52 "tests/kernels.rs"
  T v = ((i < x_len) ? x[i] : k_from_f64<T>(0.0));
#line 53 "tests/kernels.rs"
  unsigned int offset = ((unsigned int)16);
#line 54 "tests/kernels.rs"
  while ((offset > ((unsigned int)0))) {
#line 55 "tests/kernels.rs"
    v += __shfl_down_sync(0xffffffffu, v, offset);
#line 56 "tests/kernels.rs"
    offset /= ((unsigned int)2);
  }
#line 58 "tests/kernels.rs"
  if ((((k_usize)k_lane_id()) == ((k_usize)0))) {
#line 59 "tests/kernels.rs"
    out[(i / ((k_usize)32))] = v;
  }
}
