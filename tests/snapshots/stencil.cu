// <prelude>
extern "C" __global__ void stencil(k_usize n, k_usize m, const float* __restrict__ src, unsigned long long src_len, float* __restrict__ dst, unsigned long long dst_len) {
#line 66 "tests/kernels.rs"
  const k_usize c = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 67 "tests/kernels.rs"
  const k_usize r = ((k_usize)blockIdx.y * blockDim.y + threadIdx.y);
#line 68 "tests/kernels.rs"
  if (((r >= n) || (c >= m))) {
#line 69 "tests/kernels.rs"
    return;
  }
#line 71 "tests/kernels.rs"
  const k_usize k = ((r * m) + c);
#line 72 "tests/kernels.rs"
  if (((((r == ((k_usize)0)) || (c == ((k_usize)0))) || (r == (n - ((k_usize)1)))) || (c == (m - ((k_usize)1))))) {
#line 73 "tests/kernels.rs"
    dst[k] = src[k];
  } else {
#line 75 "tests/kernels.rs"
    dst[k] = ((0.5f * src[k]) + (0.125f * ((((src[(k - ((k_usize)1))] + src[(k + ((k_usize)1))]) + src[(k - m)]) + src[(k + m)]))));
  }
}
