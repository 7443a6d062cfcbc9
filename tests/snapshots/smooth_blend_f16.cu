#define K_FP16 1
#include <cuda_fp16.h>
// <prelude>
typedef __half T;
template <typename T>
__device__ __forceinline__ T window_mean(const T* x, unsigned long long x_len, k_usize i, k_usize half) {
#line 871 "tests/kernels.rs"
  const k_usize lo = ((i > half) ? (i - half) : ((k_usize)0));
#line 872 "tests/kernels.rs"
  const k_usize hi = k_min((((i + half) + ((k_usize)1))), x_len);
#line 873 "tests/kernels.rs"
  T acc = k_from_f64<T>(0.0);
#line 874 "tests/kernels.rs"
  for (k_usize k = lo; k < hi; ++k) {
#line 875 "tests/kernels.rs"
    acc += x[k];
  }
#line 877 "tests/kernels.rs"
  return (acc / k_from_f64<T>(((double)(((hi - lo))))));
}
template <typename T>
__device__ __forceinline__ void put(T* y, unsigned long long y_len, k_usize i, T v) {
#line 902 "tests/kernels.rs"
  if ((i >= y_len)) {
#line 903 "tests/kernels.rs"
    return;
  }
#line 905 "tests/kernels.rs"
  y[i] = v;
}
template <typename T>
__device__ __forceinline__ T lerp(T a, T b, T t) {
#line 865 "tests/kernels.rs"
  return (a + (((b - a)) * t));
}
__device__ __forceinline__ unsigned int twice(unsigned int k) {
#line 911 "tests/kernels.rs"
  return (k * ((unsigned int)2));
}
template <typename T>
__device__ __forceinline__ T add_f(T a, T b) {
#line 896 "tests/kernels.rs"
  return (a + b);
}
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#line 884 "tests/kernels.rs"
  T s = v;
#line 885 "tests/kernels.rs"
  unsigned int off = ((unsigned int)16);
#line 886 "tests/kernels.rs"
  while ((off > ((unsigned int)0))) {
#line 887 "tests/kernels.rs"
    s = add_f(s, __shfl_down_sync(0xffffffffu, s, off));
#line 888 "tests/kernels.rs"
    off /= ((unsigned int)2);
  }
#line 890 "tests/kernels.rs"
  return s;
}
extern "C" __global__ void smooth_blend(const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len, T* __restrict__ sums, unsigned long long sums_len, unsigned int* __restrict__ tags, unsigned long long tags_len, T t) {
#line 916 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 917 "tests/kernels.rs"
  const T v = ((i < x_len) ? x[i] : k_from_f64<T>(0.0));
#line 918 "tests/kernels.rs"
  if ((i < x_len)) {
#line 919 "tests/kernels.rs"
    const auto m = window_mean(x, x_len, i, 2);
#line 920 "tests/kernels.rs"
    put(y, y_len, i, lerp(v, m, t));
#line 921 "tests/kernels.rs"
    tags[i] = twice(((k_usize)k_lane_id()));
  }
#line 923 "tests/kernels.rs"
  const auto s = warp_sum(v);
#line 924 "tests/kernels.rs"
  if ((((k_usize)k_lane_id()) == ((k_usize)0))) {
#line 925 "tests/kernels.rs"
    k_atomic_add(&sums[0], s);
  }
}
