// <prelude>
struct Cplx { float re; float im; };
__device__ __forceinline__ float norm2(Cplx z) {
#line 1377 "tests/kernels.rs"
  return ((z.re * z.re) + (z.im * z.im));
}
extern "C" __global__ void complex_pow4(const float* __restrict__ re, unsigned long long re_len, const float* __restrict__ im, unsigned long long im_len, float* __restrict__ out, unsigned long long out_len) {
#line 1384 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 1385 "tests/kernels.rs"
  if ((i < out_len)) {
#line 1386 "tests/kernels.rs"
    Cplx z = ([&]() { Cplx k_s; k_s.im = im[i]; k_s.re = re[i]; return k_s; }());
#line 1387 "tests/kernels.rs"
    for (int _k = 0; _k < 2; ++_k) {
#line 1388 "tests/kernels.rs"
      const Cplx sq = ([&]() { Cplx k_s; k_s.re = ((z.re * z.re) - (z.im * z.im)); k_s.im = ((k_from_f64<k_rr<decltype((z.re))>::type>(2.0) * z.re) * z.im); return k_s; }());
#line 1392 "tests/kernels.rs"
      z = sq;
    }
#line 1394 "tests/kernels.rs"
    z.im = (-z.im);
#line 1395 "tests/kernels.rs"
    out[i] = norm2(z);
  }
}
