// <prelude>
extern "C" __global__ void literal_lets(const float* __restrict__ x, unsigned long long x_len, float* __restrict__ y, unsigned long long y_len, unsigned int n) {
#line 1297 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1298 "tests/kernels.rs"
  float acc = 0.0;
#line 1299 "tests/kernels.rs"
  int hits = 0;
#line 1300 "tests/kernels.rs"
  unsigned int k = 0;
#line 1301 "tests/kernels.rs"
  while ((k < n)) {
#line 1302 "tests/kernels.rs"
    const float v = x[(((i + ((k_usize)(k)))) % x_len)];
#line 1303 "tests/kernels.rs"
    acc += v;
#line 1304 "tests/kernels.rs"
    if ((v > 0.0f)) {
#line 1305 "tests/kernels.rs"
      hits += ((int)1);
    }
#line 1307 "tests/kernels.rs"
    k += ((unsigned int)1);
  }
#line 1309 "tests/kernels.rs"
  if ((i < y_len)) {
#line 1310 "tests/kernels.rs"
    y[i] = (acc + ((float)(hits)));
  }
}
