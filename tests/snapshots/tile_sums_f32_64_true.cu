// <prelude>
typedef float T;
static const k_usize TILE = 64ull;
static const bool UNROLLED = true;
extern "C" __global__ void tile_sums(const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len) {
#line 1168 "tests/kernels.rs"
  __shared__ T tile[TILE];
#line 1169 "tests/kernels.rs"
  const k_usize t = ((k_usize)threadIdx.x);
#line 1170 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1171 "tests/kernels.rs"
  tile[t] = ((i < x_len) ? x[i] : k_from_f64<T>(0.0));
#line 1172 "tests/kernels.rs"
  __syncthreads();
#line 1173 "tests/kernels.rs"
  if ((t == ((k_usize)0))) {
#line 1174 "tests/kernels.rs"
    T acc = k_from_f64<T>(0.0);
#line 1175 "tests/kernels.rs"
    if (UNROLLED) {
#line 1176 "tests/kernels.rs"
      k_usize k = 0;
#line 1177 "tests/kernels.rs"
      while ((k < TILE)) {
#line 1178 "tests/kernels.rs"
        acc += (tile[k] + tile[(k + ((k_usize)1))]);
#line 1179 "tests/kernels.rs"
        k += ((k_usize)2);
      }
    } else {
#line 1182 "tests/kernels.rs"
      for (k_usize k__2 = ((k_usize)0); k__2 < TILE; ++k__2) {
#line 1183 "tests/kernels.rs"
        acc += tile[k__2];
      }
    }
#line 1186 "tests/kernels.rs"
    y[((k_usize)blockIdx.x)] = acc;
  }
}
