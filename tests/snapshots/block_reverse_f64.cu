// <prelude>
typedef double T;
extern "C" __global__ void block_reverse(const T* __restrict__ x, unsigned long long x_len, T* __restrict__ y, unsigned long long y_len, unsigned int* __restrict__ lens, unsigned long long lens_len) {
#line 1039 "tests/kernels.rs"
  extern __shared__ __align__(16) unsigned char k_dyn_smem[];
  T* const buf = reinterpret_cast<T*>(k_dyn_smem);
  const k_usize buf_len = k_dyn_smem_size() / sizeof(T);
#line 1040 "tests/kernels.rs"
  const k_usize t = ((k_usize)threadIdx.x);
#line 1041 "tests/kernels.rs"
  const k_usize b = ((k_usize)blockDim.x);
#line 1042 "tests/kernels.rs"
  const k_usize i = ((((k_usize)blockIdx.x) * b) + t);
#line 1043 "tests/kernels.rs"
  buf[t] = ((i < x_len) ? x[i] : k_from_f64<T>(0.0));
#line 1044 "tests/kernels.rs"
  __syncthreads();
#line 1045 "tests/kernels.rs"
  const k_usize j = ((((k_usize)blockIdx.x) * b) + (((b - ((k_usize)1)) - t)));
#line 1046 "tests/kernels.rs"
  if ((j < y_len)) {
#line 1047 "tests/kernels.rs"
    y[j] = buf[t];
  }
#line 1049 "tests/kernels.rs"
  if ((i == ((k_usize)0))) {
#line 1050 "tests/kernels.rs"
    lens[0] = ((unsigned int)(buf_len));
  }
}
