// <prelude>
extern "C" __global__ void literal_lets(const float* __restrict__ x, unsigned long long x_len, float* __restrict__ y, unsigned long long y_len, unsigned int n) {
#line 1246 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1247 "tests/kernels.rs"
  float acc = 0.0;
#line 1248 "tests/kernels.rs"
  int hits = 0;
#line 1249 "tests/kernels.rs"
  unsigned int k = 0;
#line 1250 "tests/kernels.rs"
  while ((k < n)) {
#line 1251 "tests/kernels.rs"
    const float v = x[(((i + ((k_usize)(k)))) % x_len)];
#line 1252 "tests/kernels.rs"
    acc += v;
#line 1253 "tests/kernels.rs"
    if ((v > 0.0f)) {
#line 1254 "tests/kernels.rs"
      hits += ((int)1);
    }
#line 1256 "tests/kernels.rs"
    k += ((unsigned int)1);
  }
#line 1258 "tests/kernels.rs"
  if ((i < y_len)) {
#line 1259 "tests/kernels.rs"
    y[i] = (acc + ((float)(hits)));
  }
}
