#define K_FP16 1
#include <cuda_fp16.h>
// <prelude>
typedef __half T;
extern "C" __global__ void axpy2(T a, const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len) {
#line 1426 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1427 "tests/kernels.rs"
  if ((i < (y_len / ((k_usize)2)))) {
#line 1428 "tests/kernels.rs"
    const k_vec2<T> xv = k_load2(x, i);
#line 1429 "tests/kernels.rs"
    const k_vec2<T> yv = k_load2(y, i);
#line 1430 "tests/kernels.rs"
    const k_vec2<T> r = (((xv * k_vec2_splat<T>(((T)(a)))) + yv) - k_vec2_new<T>(((T)(k_from_f64<T>(0.0))), ((T)(k_from_f64<T>(0.0)))));
#line 1431 "tests/kernels.rs"
    k_store2(y, i, ((-((-r))) / k_vec2_splat<T>(((T)(k_from_f64<T>(1.0))))));
  }
#line 1433 "tests/kernels.rs"
  if (((i == ((k_usize)0)) && ((y_len % ((k_usize)2)) == ((k_usize)1)))) {
#line 1434 "tests/kernels.rs"
    const k_usize last = (y_len - ((k_usize)1));
#line 1435 "tests/kernels.rs"
    y[last] = ((a * x[last]) + y[last]);
  }
}
