// <prelude>
typedef float T;
extern "C" __global__ void axpby4(T a, T b, const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len) {
#line 977 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 978 "tests/kernels.rs"
  const k_usize n4 = (y_len / ((k_usize)4));
#line 979 "tests/kernels.rs"
  if ((i < n4)) {
#line 980 "tests/kernels.rs"
    const k_vec4<T> xv = k_load4(x, i);
#line 981 "tests/kernels.rs"
    k_vec4<T> yv = k_load4(y, i);
#line 982 "tests/kernels.rs"
    yv = ((xv * a) + (yv * b));
#line 983 "tests/kernels.rs"
    yv.w = (yv.w * k_from_f64<T>(1.0));
#line 984 "tests/kernels.rs"
    k_vec4<T> acc = k_vec4_splat<T>(((T)(k_from_f64<T>(0.0))));
#line 985 "tests/kernels.rs"
    acc += yv;
#line 986 "tests/kernels.rs"
    k_store4(y, i, (-((-acc))));
  }
#line 988 "tests/kernels.rs"
  const k_usize t = ((n4 * ((k_usize)4)) + i);
#line 989 "tests/kernels.rs"
  if ((t < y_len)) {
#line 990 "tests/kernels.rs"
    y[t] = ((a * x[t]) + (b * y[t]));
  }
}
