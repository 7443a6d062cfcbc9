// <prelude>
typedef float T;
extern "C" __global__ void tiled_matmul(const T* __restrict__ a, unsigned long long a_len, const T* __restrict__ b, unsigned long long b_len, T* __restrict__ c, unsigned long long c_len, unsigned int m, unsigned int n, unsigned int k, unsigned int lda, unsigned int ldb, unsigned int ldc) {
#line 1069 "tests/kernels.rs"
  const unsigned int TILE = ((unsigned int)16);
#line 1070 "tests/kernels.rs"
  __shared__ T ta[256];
#line 1071 "tests/kernels.rs"
  __shared__ T tb[256];
#line 1072 "tests/kernels.rs"
  const T* const a__2 = a;
  const k_usize a__2_len = a_len;
  const k_usize a__2_ld = lda;
#line 1073 "tests/kernels.rs"
  const T* const b__2 = b;
  const k_usize b__2_len = b_len;
  const k_usize b__2_ld = ldb;
#line 1074 "tests/kernels.rs"
  T* const c__2 = c;
  const k_usize c__2_len = c_len;
  const k_usize c__2_ld = ldc;
#line 1075 "tests/kernels.rs"
  const unsigned int tx = ((unsigned int)threadIdx.x);
#line 1076 "tests/kernels.rs"
  const unsigned int ty = ((unsigned int)threadIdx.y);
#line 1077 "tests/kernels.rs"
  const unsigned int row = ((((unsigned int)blockIdx.y) * TILE) + ty);
#line 1078 "tests/kernels.rs"
  const unsigned int col = ((((unsigned int)blockIdx.x) * TILE) + tx);
#line 1079 "tests/kernels.rs"
  T acc = k_from_f64<T>(0.0);
#line 1080 "tests/kernels.rs"
  unsigned int t0 = ((unsigned int)0);
#line 1081 "tests/kernels.rs"
  while ((t0 < k)) {
#line 1082 "tests/kernels.rs"
    ta[((ty * TILE) + tx)] = (((row < m) && ((t0 + tx) < k)) ? a__2[(row) * a__2_ld + ((t0 + tx))] : k_from_f64<T>(0.0));
#line 1087 "tests/kernels.rs"
    tb[((ty * TILE) + tx)] = ((((t0 + ty) < k) && (col < n)) ? b__2[((t0 + ty)) * b__2_ld + (col)] : k_from_f64<T>(0.0));
#line 1092 "tests/kernels.rs"
    __syncthreads();
#line 1093 "tests/kernels.rs"
    for (unsigned int q = ((unsigned int)0); q < TILE; ++q) {
#line 1094 "tests/kernels.rs"
      acc += (ta[((ty * TILE) + q)] * tb[((q * TILE) + tx)]);
    }
#line 1096 "tests/kernels.rs"
    __syncthreads();
#line 1097 "tests/kernels.rs"
    t0 += TILE;
  }
#line 1099 "tests/kernels.rs"
  if (((row < m) && (col < n))) {
#line 1100 "tests/kernels.rs"
    c__2[(row) * c__2_ld + (col)] = acc;
  }
}
