// <prelude>
typedef float T;
extern "C" __global__ void tiled_matmul(const T* __restrict__ a, unsigned long long a_len, const T* __restrict__ b, unsigned long long b_len, T* __restrict__ c, unsigned long long c_len, unsigned int m, unsigned int n, unsigned int k, unsigned int lda, unsigned int ldb, unsigned int ldc) {
#line 13 "tests/shared/tiled_matmul.rs"
  const unsigned int TILE = ((unsigned int)16);
#line 14 "tests/shared/tiled_matmul.rs"
  __shared__ T ta[256];
#line 15 "tests/shared/tiled_matmul.rs"
  __shared__ T tb[256];
#line 16 "tests/shared/tiled_matmul.rs"
  const T* const a__2 = a;
  const k_usize a__2_len = a_len;
  const k_usize a__2_ld = lda;
#line 17 "tests/shared/tiled_matmul.rs"
  const T* const b__2 = b;
  const k_usize b__2_len = b_len;
  const k_usize b__2_ld = ldb;
#line 18 "tests/shared/tiled_matmul.rs"
  T* const c__2 = c;
  const k_usize c__2_len = c_len;
  const k_usize c__2_ld = ldc;
#line 19 "tests/shared/tiled_matmul.rs"
  const unsigned int tx = ((unsigned int)threadIdx.x);
#line 20 "tests/shared/tiled_matmul.rs"
  const unsigned int ty = ((unsigned int)threadIdx.y);
#line 21 "tests/shared/tiled_matmul.rs"
  const unsigned int row = ((((unsigned int)blockIdx.y) * TILE) + ty);
#line 22 "tests/shared/tiled_matmul.rs"
  const unsigned int col = ((((unsigned int)blockIdx.x) * TILE) + tx);
#line 23 "tests/shared/tiled_matmul.rs"
  T acc = k_from_f64<T>(0.0);
#line 24 "tests/shared/tiled_matmul.rs"
  unsigned int t0 = ((unsigned int)0);
#line 25 "tests/shared/tiled_matmul.rs"
  while ((t0 < k)) {
#line 26 "tests/shared/tiled_matmul.rs"
    ta[((ty * TILE) + tx)] = (((row < m) && ((t0 + tx) < k)) ? a__2[(row) * a__2_ld + ((t0 + tx))] : k_from_f64<T>(0.0));
#line 31 "tests/shared/tiled_matmul.rs"
    tb[((ty * TILE) + tx)] = ((((t0 + ty) < k) && (col < n)) ? b__2[((t0 + ty)) * b__2_ld + (col)] : k_from_f64<T>(0.0));
#line 36 "tests/shared/tiled_matmul.rs"
    __syncthreads();
#line 37 "tests/shared/tiled_matmul.rs"
    for (unsigned int q = ((unsigned int)0); q < TILE; ++q) {
#line 38 "tests/shared/tiled_matmul.rs"
      acc += (ta[((ty * TILE) + q)] * tb[((q * TILE) + tx)]);
    }
#line 40 "tests/shared/tiled_matmul.rs"
    __syncthreads();
#line 41 "tests/shared/tiled_matmul.rs"
    t0 += TILE;
  }
#line 43 "tests/shared/tiled_matmul.rs"
  if (((row < m) && (col < n))) {
#line 44 "tests/shared/tiled_matmul.rs"
    c__2[(row) * c__2_ld + (col)] = acc;
  }
}
