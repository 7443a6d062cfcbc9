// <prelude>
struct Affine { double scale; double shift; int clamp_at; };
extern "C" __global__ void affine_i32(Affine p, const int* __restrict__ x, unsigned long long x_len, int* __restrict__ y, unsigned long long y_len) {
#line 91 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 92 "tests/kernels.rs"
  if ((i < x_len)) {
#line 93 "tests/kernels.rs"
    const int v = ((int)((((p.scale * (((double)(x[i])))) + p.shift))));
#line 94 "tests/kernels.rs"
    y[i] = k_min(v, p.clamp_at);
  }
}
