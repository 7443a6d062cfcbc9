// <prelude>
typedef double T;
extern "C" __global__ void block_sum(const T* __restrict__ x, unsigned long long x_len, T* __restrict__ out, unsigned long long out_len) {
#line 25 "tests/kernels.rs"
  __shared__ T tile[256];
#line 26 "tests/kernels.rs"
  const k_usize t = ((k_usize)threadIdx.x);
#line 27 "tests/kernels.rs"
  T acc = k_from_f64<T>(0.0);
#line 28 "tests/kernels.rs"
  k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 29 "tests/kernels.rs"
  while ((i < x_len)) {
#line 30 "tests/kernels.rs"
    acc += x[i];
#line 31 "tests/kernels.rs"
    i += ((k_usize)blockDim.x * gridDim.x);
  }
#line 33 "tests/kernels.rs"
  tile[t] = acc;
#line 34 "tests/kernels.rs"
  __syncthreads();
#line 35 "tests/kernels.rs"
  k_usize s = ((k_usize)128);
#line 36 "tests/kernels.rs"
  while ((s > ((k_usize)0))) {
#line 37 "tests/kernels.rs"
    if ((t < s)) {
#line 38 "tests/kernels.rs"
      tile[t] = (tile[t] + tile[(t + s)]);
    }
#line 40 "tests/kernels.rs"
    __syncthreads();
#line 41 "tests/kernels.rs"
    s /= ((k_usize)2);
  }
#line 43 "tests/kernels.rs"
  if ((t == ((k_usize)0))) {
#line 44 "tests/kernels.rs"
    k_atomic_add(&out[0], tile[0]);
  }
}
