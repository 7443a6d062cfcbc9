// atomr-accel-cuda: helpers every #[kernel] translation may call.
typedef unsigned long long k_usize;
typedef long long k_isize;

// The value type of an expression (for literals next to a value of unknown type).
template <class T> struct k_rr { typedef T type; };
template <class T> struct k_rr<T&> : k_rr<T> {};
template <class T> struct k_rr<const T> : k_rr<T> {};

// Conversions (`T::from_f64`, `x.to_f64()`), through f32 for the half types.
template <class T> __device__ __forceinline__ T k_wide(T v) { return v; }
template <class T> __device__ __forceinline__ T k_from_f64(double v) { return (T)v; }
template <class T> __device__ __forceinline__ double k_to_f64(T v) { return (double)k_wide(v); }
// `T::from_f32`, `x.to_f32()`: no trip through f64 (the half types convert in one step).
template <class T> __device__ __forceinline__ T k_from_f32(float v) { return (T)v; }
template <class T> __device__ __forceinline__ float k_to_f32(T v) { return (float)k_wide(v); }
__device__ __forceinline__ double k_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

// Float math, f32 and f64.
#define K_F1(name, f, d) \
  __device__ __forceinline__ float k_##name(float x) { return f(x); } \
  __device__ __forceinline__ double k_##name(double x) { return d(x); }
#define K_F2(name, f, d) \
  __device__ __forceinline__ float k_##name(float x, float y) { return f(x, y); } \
  __device__ __forceinline__ double k_##name(double x, double y) { return d(x, y); }
K_F1(sqrt, sqrtf, sqrt) K_F1(rsqrt, rsqrtf, rsqrt) K_F1(exp, expf, exp) K_F1(exp2, exp2f, exp2)
K_F1(ln, logf, log) K_F1(log2, log2f, log2) K_F1(log10, log10f, log10) K_F1(sin, sinf, sin)
K_F1(cos, cosf, cos) K_F1(tan, tanf, tan) K_F1(tanh, tanhf, tanh) K_F1(sinh, sinhf, sinh)
K_F1(cosh, coshf, cosh) K_F1(asin, asinf, asin) K_F1(acos, acosf, acos) K_F1(atan, atanf, atan)
K_F1(abs, fabsf, fabs) K_F1(floor, floorf, floor) K_F1(ceil, ceilf, ceil) K_F1(round, roundf, round)
K_F1(trunc, truncf, trunc)
K_F2(min, fminf, fmin) K_F2(max, fmaxf, fmax) K_F2(powf, powf, pow) K_F2(atan2, atan2f, atan2)
K_F2(hypot, hypotf, hypot) K_F2(copysign, copysignf, copysign) K_F2(rem, fmodf, fmod)
__device__ __forceinline__ float k_recip(float x) { return 1.0f / x; }
__device__ __forceinline__ double k_recip(double x) { return 1.0 / x; }
__device__ __forceinline__ float k_powi(float x, int n) { return powf(x, (float)n); }
__device__ __forceinline__ double k_powi(double x, int n) { return pow(x, (double)n); }
__device__ __forceinline__ float k_mul_add(float x, float a, float b) { return fmaf(x, a, b); }
__device__ __forceinline__ double k_mul_add(double x, double a, double b) { return fma(x, a, b); }

// Integer versions where Rust has the method too.
template <class T> __device__ __forceinline__ T k_min(T a, T b) { return b < a ? b : a; }
// Two's-complement addition without signed overflow (which C++ leaves undefined).
__device__ __forceinline__ long long k_wrapping_add(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}
template <class T> __device__ __forceinline__ T k_max(T a, T b) { return a < b ? b : a; }
// Rust's `count_ones`: the set bits of the integer's own width (a narrow signed value's
// sign extension not counted).
template <class T> __device__ __forceinline__ unsigned int k_count_ones(T x) {
  if (sizeof(T) == 8) return (unsigned int)__popcll((unsigned long long)x);
  if (sizeof(T) == 4) return (unsigned int)__popc((unsigned int)x);
  return (unsigned int)__popc((unsigned int)x & ((1u << (8 * sizeof(T) % 32)) - 1u));
}
// Rust's `to_bits` of an `f32` or an `f64`.
__device__ __forceinline__ unsigned int k_to_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ unsigned long long k_to_bits(double x) {
  return (unsigned long long)__double_as_longlong(x);
}
template <class T> __device__ __forceinline__ T k_abs(T x) { return x < 0 ? -x : x; }
template <class T> __device__ __forceinline__ T k_rem(T a, T b) { return a % b; }

// Half types compute through f32, as their Rust implementations do.
#define K_HALF(H, up, down) \
  __device__ __forceinline__ float k_wide(H v) { return up(v); } \
  template <> __device__ __forceinline__ H k_from_f64<H>(double v) { return down((float)v); } \
  template <> __device__ __forceinline__ H k_from_f32<H>(float v) { return down(v); } \
  K_H1(H, up, down, sqrt) K_H1(H, up, down, rsqrt) K_H1(H, up, down, exp) K_H1(H, up, down, exp2) \
  K_H1(H, up, down, ln) K_H1(H, up, down, log2) K_H1(H, up, down, log10) K_H1(H, up, down, sin) \
  K_H1(H, up, down, cos) K_H1(H, up, down, tan) K_H1(H, up, down, tanh) K_H1(H, up, down, sinh) \
  K_H1(H, up, down, cosh) K_H1(H, up, down, asin) K_H1(H, up, down, acos) K_H1(H, up, down, atan) \
  K_H1(H, up, down, abs) K_H1(H, up, down, floor) K_H1(H, up, down, ceil) K_H1(H, up, down, round) \
  K_H1(H, up, down, trunc) K_H1(H, up, down, recip) \
  K_H2(H, up, down, min) K_H2(H, up, down, max) K_H2(H, up, down, powf) K_H2(H, up, down, atan2) \
  K_H2(H, up, down, hypot) K_H2(H, up, down, copysign) K_H2(H, up, down, rem) \
  __device__ __forceinline__ H k_powi(H x, int n) { return down(k_powi(up(x), n)); } \
  __device__ __forceinline__ H k_mul_add(H x, H a, H b) { return down(fmaf(up(x), up(a), up(b))); }
#define K_H1(H, up, down, name) __device__ __forceinline__ H k_##name(H x) { return down(k_##name(up(x))); }
#define K_H2(H, up, down, name) \
  __device__ __forceinline__ H k_##name(H x, H y) { return down(k_##name(up(x), up(y))); }
#ifdef K_FP16
K_HALF(__half, __half2float, __float2half_rn)
#endif
#ifdef K_BF16
K_HALF(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn)
#endif

// Atomics with the type support of the Rust side (AtomicAdd, AtomicOrd, AtomicSwap).
template <class T> __device__ __forceinline__ T k_atomic_add(T* p, T v) { return atomicAdd(p, v); }
__device__ __forceinline__ long long k_atomic_add(long long* p, long long v) {
  return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
template <class T> __device__ __forceinline__ T k_atomic_min(T* p, T v) { return atomicMin(p, v); }
template <class T> __device__ __forceinline__ T k_atomic_max(T* p, T v) { return atomicMax(p, v); }
template <class T> __device__ __forceinline__ T k_atomic_exch(T* p, T v) { return atomicExch(p, v); }
__device__ __forceinline__ long long k_atomic_exch(long long* p, long long v) {
  return (long long)atomicExch((unsigned long long*)p, (unsigned long long)v);
}
__device__ __forceinline__ double k_atomic_exch(double* p, double v) {
  return __longlong_as_double((long long)atomicExch((unsigned long long*)p, (unsigned long long)__double_as_longlong(v)));
}
// A relaxed load at GPU scope (`ld.relaxed.gpu`): what another block stored, read
// coherently (not from this SM's L1), without the read-modify-write of an atomicAdd of 0.
#define K_ATOMIC_LOAD(T, PTX, C) \
  __device__ __forceinline__ T k_atomic_load(T* p) { \
    T v; asm volatile("ld.relaxed.gpu." PTX " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; }
K_ATOMIC_LOAD(int, "s32", "r")
K_ATOMIC_LOAD(unsigned int, "u32", "r")
K_ATOMIC_LOAD(long long, "s64", "l")
K_ATOMIC_LOAD(unsigned long long, "u64", "l")
K_ATOMIC_LOAD(float, "f32", "f")
K_ATOMIC_LOAD(double, "f64", "d")
#undef K_ATOMIC_LOAD
template <class T> __device__ __forceinline__ T k_atomic_cas(T* p, T c, T v) { return atomicCAS(p, c, v); }
__device__ __forceinline__ long long k_atomic_cas(long long* p, long long c, long long v) {
  return (long long)atomicCAS((unsigned long long*)p, (unsigned long long)c, (unsigned long long)v);
}
__device__ __forceinline__ float k_atomic_cas(float* p, float c, float v) {
  return __int_as_float(atomicCAS((int*)p, __float_as_int(c), __float_as_int(v)));
}
__device__ __forceinline__ double k_atomic_cas(double* p, double c, double v) {
  return __longlong_as_double((long long)atomicCAS((unsigned long long*)p,
      (unsigned long long)__double_as_longlong(c), (unsigned long long)__double_as_longlong(v)));
}

// `nanosleep(ns)`: the warp waits about `ns` nanoseconds (0 to 2·ns), off the issue slots
// a busy-wait loop would take from other warps; nothing before Volta, which has no timer.
__device__ __forceinline__ void k_nanosleep(unsigned int ns) {
#if __CUDA_ARCH__ >= 700
  __nanosleep(ns);
#endif
}

__device__ __forceinline__ k_usize k_lane_id() {
  return ((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) & 31u;
}

// `Vec2<T>` / `Vec4<T>`: lanes as one access, aligned to their size so a load or store
// is one vector instruction. Elementwise operators with a vector or a scalar on the right.
template <class T> struct alignas(2 * sizeof(T)) k_vec2 { T x, y; };
template <class T> struct alignas(4 * sizeof(T)) k_vec4 { T x, y, z, w; };
template <class T> __device__ __forceinline__ k_vec2<T> k_vec2_new(T x, T y) {
  k_vec2<T> v; v.x = x; v.y = y; return v;
}
template <class T> __device__ __forceinline__ k_vec4<T> k_vec4_new(T x, T y, T z, T w) {
  k_vec4<T> v; v.x = x; v.y = y; v.z = z; v.w = w; return v;
}
template <class T> __device__ __forceinline__ k_vec2<T> k_vec2_splat(T v) { return k_vec2_new<T>(v, v); }
template <class T> __device__ __forceinline__ k_vec4<T> k_vec4_splat(T v) { return k_vec4_new<T>(v, v, v, v); }
#define K_VEC_ACCESS(N) \
  template <class T> __device__ __forceinline__ k_vec##N<T> k_load##N(const T* p, k_usize i) { \
    return reinterpret_cast<const k_vec##N<T>*>(p)[i]; } \
  template <class T> __device__ __forceinline__ void k_store##N(T* p, k_usize i, k_vec##N<T> v) { \
    reinterpret_cast<k_vec##N<T>*>(p)[i] = v; }
K_VEC_ACCESS(2) K_VEC_ACCESS(4)
#define K_VEC_OP(op) \
  template <class T> __device__ __forceinline__ k_vec2<T> operator op(k_vec2<T> a, k_vec2<T> b) { \
    return k_vec2_new<T>(a.x op b.x, a.y op b.y); } \
  template <class T, class U> __device__ __forceinline__ k_vec2<T> operator op(k_vec2<T> a, U s) { \
    const T b = (T)s; return k_vec2_new<T>(a.x op b, a.y op b); } \
  template <class T, class U> __device__ __forceinline__ k_vec2<T>& operator op##=(k_vec2<T>& a, U b) { \
    a = a op b; return a; } \
  template <class T> __device__ __forceinline__ k_vec4<T> operator op(k_vec4<T> a, k_vec4<T> b) { \
    return k_vec4_new<T>(a.x op b.x, a.y op b.y, a.z op b.z, a.w op b.w); } \
  template <class T, class U> __device__ __forceinline__ k_vec4<T> operator op(k_vec4<T> a, U s) { \
    const T b = (T)s; return k_vec4_new<T>(a.x op b, a.y op b, a.z op b, a.w op b); } \
  template <class T, class U> __device__ __forceinline__ k_vec4<T>& operator op##=(k_vec4<T>& a, U b) { \
    a = a op b; return a; }
K_VEC_OP(+) K_VEC_OP(-) K_VEC_OP(*) K_VEC_OP(/)
template <class T> __device__ __forceinline__ k_vec2<T> operator-(k_vec2<T> a) { return k_vec2_new<T>(-a.x, -a.y); }
template <class T> __device__ __forceinline__ k_vec4<T> operator-(k_vec4<T> a) {
  return k_vec4_new<T>(-a.x, -a.y, -a.z, -a.w);
}
// A Vec2 of half types: CUDA's packed instructions, two lanes at once (preferred over the
// templates above as exact non-template matches).
#define K_PACKED2(H, H2, pack, lo, hi) \
  K_PACKED2_OP(H, H2, pack, lo, hi, +, __hadd2) K_PACKED2_OP(H, H2, pack, lo, hi, -, __hsub2) \
  K_PACKED2_OP(H, H2, pack, lo, hi, *, __hmul2) K_PACKED2_OP(H, H2, pack, lo, hi, /, __h2div) \
  __device__ __forceinline__ k_vec2<H> operator-(k_vec2<H> a) { \
    const H2 r = __hneg2(pack(a.x, a.y)); return k_vec2_new<H>(lo(r), hi(r)); }
#define K_PACKED2_OP(H, H2, pack, lo, hi, op, f) \
  __device__ __forceinline__ k_vec2<H> operator op(k_vec2<H> a, k_vec2<H> b) { \
    const H2 r = f(pack(a.x, a.y), pack(b.x, b.y)); return k_vec2_new<H>(lo(r), hi(r)); }
#if defined(K_FP16)
K_PACKED2(__half, __half2, __halves2half2, __low2half, __high2half)
#endif
#if defined(K_BF16)
K_PACKED2(__nv_bfloat16, __nv_bfloat162, __halves2bfloat162, __low2bfloat16, __high2bfloat16)
#endif

// The bytes of dynamic shared memory this launch has (`dyn_shared`).
__device__ __forceinline__ k_usize k_dyn_smem_size() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return (k_usize)r;
}
