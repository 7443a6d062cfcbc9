// <prelude>
typedef float T;
extern "C" __global__ void transpose_u32(const T* __restrict__ src, unsigned long long src_len, T* __restrict__ dst, unsigned long long dst_len, unsigned int* __restrict__ hist, unsigned long long hist_len, unsigned int w, unsigned int h) {
#line 820 "tests/kernels.rs"
  const unsigned int x = ((((unsigned int)blockIdx.x) * ((unsigned int)blockDim.x)) + ((unsigned int)threadIdx.x));
#line 821 "tests/kernels.rs"
  const unsigned int y = ((((unsigned int)blockIdx.y) * ((unsigned int)blockDim.y)) + ((unsigned int)threadIdx.y));
#line 822 "tests/kernels.rs"
  if (((x < w) && (y < h))) {
#line 823 "tests/kernels.rs"
    dst[((x * h) + y)] = src[((y * w) + x)];
#line 824 "tests/kernels.rs"
    const float v = k_abs(k_to_f32(src[((y * w) + x)]));
#line 825 "tests/kernels.rs"
    const unsigned int bin = ((unsigned int)(((v * 8.0f))));
#line 826 "tests/kernels.rs"
    k_atomic_add(&hist[k_min(bin, ((unsigned int)7))], ((unsigned int)1));
  }
#line 828 "tests/kernels.rs"
  const unsigned int lane = ((unsigned int)k_lane_id());
#line 829 "tests/kernels.rs"
  const k_usize i = ((k_usize)blockIdx.x * blockDim.x + threadIdx.x);
#line 830 "tests/kernels.rs"
  if (((i < dst_len) && (lane > ((unsigned int)40)))) {
#line 831 "tests/kernels.rs"
    dst[i] = k_from_f64<T>(0.0);
  }
}
