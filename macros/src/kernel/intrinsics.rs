//! The tables of what a kernel body may call: intrinsics, math methods and constants,
//! each with its CUDA C++ form. One table per kind, so the translator, its error hints
//! and the docs agree.

/// Index intrinsics, without arguments: `(rust, cuda with {T} for the integer type their
/// use decides — see `flex`)`.
pub(crate) const INDEX_INTRINSICS: &[(&str, &str)] = &[
    ("thread_idx_x", "(({T})threadIdx.x)"),
    ("thread_idx_y", "(({T})threadIdx.y)"),
    ("thread_idx_z", "(({T})threadIdx.z)"),
    ("block_idx_x", "(({T})blockIdx.x)"),
    ("block_idx_y", "(({T})blockIdx.y)"),
    ("block_idx_z", "(({T})blockIdx.z)"),
    ("block_dim_x", "(({T})blockDim.x)"),
    ("block_dim_y", "(({T})blockDim.y)"),
    ("block_dim_z", "(({T})blockDim.z)"),
    ("grid_dim_x", "(({T})gridDim.x)"),
    ("grid_dim_y", "(({T})gridDim.y)"),
    ("grid_dim_z", "(({T})gridDim.z)"),
    ("global_index", "(({T})blockIdx.x * blockDim.x + threadIdx.x)"),
    ("global_index_y", "(({T})blockIdx.y * blockDim.y + threadIdx.y)"),
    ("global_index_z", "(({T})blockIdx.z * blockDim.z + threadIdx.z)"),
    ("grid_stride", "(({T})blockDim.x * gridDim.x)"),
    ("lane_id", "(({T})k_lane_id())"),
    ("warp_size", "(({T})32)"),
];

/// Warp shuffles `(rust, cuda)`: `f(value, u32)`, full-warp mask.
pub(crate) const SHUFFLES: &[(&str, &str)] = &[
    ("shfl_down", "__shfl_down_sync"),
    ("shfl_up", "__shfl_up_sync"),
    ("shfl_xor", "__shfl_xor_sync"),
    ("shfl", "__shfl_sync"),
];

/// Barriers and fences without arguments: `(rust, cuda)`.
pub(crate) const WARP_SYNC: &[(&str, &str)] = &[
    ("sync_threads", "__syncthreads()"),
    ("sync_warp", "__syncwarp()"),
    ("thread_fence", "__threadfence()"),
    ("thread_fence_block", "__threadfence_block()"),
];

/// Warp votes over a `bool`, full-warp mask: `(rust, cuda with {p}, result type)`.
pub(crate) const VOTES: &[(&str, &str, &str)] = &[
    ("ballot", "__ballot_sync(0xffffffffu, {p})", "u32"),
    ("warp_any", "(__any_sync(0xffffffffu, {p}) != 0)", "bool"),
    ("warp_all", "(__all_sync(0xffffffffu, {p}) != 0)", "bool"),
];

/// Names whose use makes the CPU emulation run a block's threads together.
pub(crate) const COOPERATIVE: &[&str] = &[
    "sync_threads",
    "sync_warp",
    "ballot",
    "warp_any",
    "warp_all",
    "shared_array",
    "dyn_shared",
    "shfl_down",
    "shfl_up",
    "shfl_xor",
    "shfl",
];

/// Math methods `x.m()` with the receiver's type.
pub(crate) const UNARY_MATH: &[&str] = &[
    "sqrt", "rsqrt", "exp", "exp2", "ln", "log2", "log10", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos",
    "atan", "abs", "floor", "ceil", "round", "trunc", "recip",
];

/// Math methods `x.m(y)` with both operands of the receiver's type.
pub(crate) const BINARY_MATH: &[&str] = &["min", "max", "powf", "atan2", "hypot", "copysign"];

/// Atomic methods of writable buffers and shared arrays: `(rust, cuda helper, args)`.
/// `atomic_load` reads what another block stored (through an atomic or after a fence)
/// without a read-modify-write: many readers of one element do not queue behind each
/// other, as read-modify-writes of one address do.
pub(crate) const ATOMICS: &[(&str, &str, usize)] = &[
    ("atomic_load", "k_atomic_load", 1),
    ("atomic_add", "k_atomic_add", 2),
    ("atomic_min", "k_atomic_min", 2),
    ("atomic_max", "k_atomic_max", 2),
    ("atomic_exch", "k_atomic_exch", 2),
    ("atomic_cas", "k_atomic_cas", 3),
];

/// Associated functions of a float type `T::f()`: `(rust, cuda taking the type)`.
pub(crate) const TYPE_FUNCTIONS: &[(&str, &str)] = &[
    ("zero", "k_from_f64<{T}>(0.0)"),
    ("one", "k_from_f64<{T}>(1.0)"),
    ("infinity", "k_from_f64<{T}>(k_inf())"),
    ("neg_infinity", "k_from_f64<{T}>(-k_inf())"),
];

/// Constants of the primitive float types (`f32::MAX`, `core::f32::consts::PI`).
pub(crate) const FLOAT_CONSTS: &[(&str, &str, &str)] = &[
    ("INFINITY", "k_inf()", "k_inf()"),
    ("NEG_INFINITY", "(-k_inf())", "(-k_inf())"),
    ("MAX", "3.40282347e+38", "1.7976931348623157e+308"),
    ("MIN", "-3.40282347e+38", "-1.7976931348623157e+308"),
    ("EPSILON", "1.19209290e-07", "2.2204460492503131e-16"),
    ("PI", "3.14159265358979323846", "3.14159265358979323846"),
    ("E", "2.71828182845904523536", "2.71828182845904523536"),
    ("TAU", "6.28318530717958647692", "6.28318530717958647692"),
    ("SQRT_2", "1.41421356237309504880", "1.41421356237309504880"),
    ("LN_2", "0.69314718055994530942", "0.69314718055994530942"),
    ("LN_10", "2.30258509299404568402", "2.30258509299404568402"),
    ("FRAC_1_SQRT_2", "0.70710678118654752440", "0.70710678118654752440"),
];

/// What the body may call, for error hints.
pub(crate) fn call_hint() -> String {
    let names: Vec<&str> = INDEX_INTRINSICS.iter().map(|i| i.0).collect();
    format!(
        "a #[kernel] body can call the intrinsics {}(), sync_threads(), sync_warp(), thread_fence(), \
         thread_fence_block(), nanosleep(ns), shared_array::<T, N>(), dyn_shared::<T>(), shfl_down/shfl_up/shfl_xor/shfl(v, n), \
         ballot/warp_any/warp_all(predicate), `T::zero()`/`one()`/`infinity()`/`from_f64(x)`/`from_f32(x)`, \
         `T::from_i64(x)` for integers, `f32::from_bits(u)`/`f64::from_bits(u)`, \
         math methods and `#[device] fn` helpers; write other logic inline or in a `#[device] fn`",
        names.join("(), ")
    )
}

/// What methods exist, for error hints.
pub(crate) fn method_hint() -> String {
    format!(
        "supported methods: {}, {}, mul_add, powi, to_f64, to_f32 on numbers; to_i64 on integers; wrapping_add on \
         i64; to_bits on f32 and f64; count_ones on integers; len, is_empty, load2/load4(i), rows(ld) on \
         buffers; store2/store4(i, v) on writable buffers; len, stride on 2-D views; {} on writable buffers and shared arrays",
        UNARY_MATH.join(", "),
        BINARY_MATH.join(", "),
        ATOMICS.iter().map(|a| a.0).collect::<Vec<_>>().join(", ")
    )
}

/// CUDA C++ spellings a CUDA user writes first, with the DSL's: `(cuda, dsl)`. A call or
/// name of the left column is an error at its token saying the right one.
pub(crate) const CUDA_SPELLINGS: &[(&str, &str)] = &[
    ("threadIdx", "`thread_idx_x()` / `thread_idx_y()` / `thread_idx_z()`"),
    ("blockIdx", "`block_idx_x()` / `block_idx_y()` / `block_idx_z()`"),
    ("blockDim", "`block_dim_x()` / `block_dim_y()` / `block_dim_z()`"),
    ("gridDim", "`grid_dim_x()` / `grid_dim_y()` / `grid_dim_z()`"),
    ("warpSize", "`warp_size()`"),
    ("__syncthreads", "`sync_threads()`"),
    ("__syncwarp", "`sync_warp()`"),
    ("__threadfence", "`thread_fence()`"),
    ("__threadfence_block", "`thread_fence_block()`"),
    ("__nanosleep", "`nanosleep(ns)`"),
    ("__shfl_down_sync", "`shfl_down(v, delta)` (full-warp mask)"),
    ("__shfl_up_sync", "`shfl_up(v, delta)` (full-warp mask)"),
    ("__shfl_xor_sync", "`shfl_xor(v, mask)` (full-warp mask)"),
    ("__shfl_sync", "`shfl(v, lane)` (full-warp mask)"),
    ("__ballot_sync", "`ballot(predicate)` (full-warp mask)"),
    ("__any_sync", "`warp_any(predicate)`"),
    ("__all_sync", "`warp_all(predicate)`"),
    ("atomicAdd", "`buffer.atomic_add(i, v)`"),
    ("atomicMin", "`buffer.atomic_min(i, v)`"),
    ("atomicMax", "`buffer.atomic_max(i, v)`"),
    ("atomicExch", "`buffer.atomic_exch(i, v)`"),
    ("atomicCAS", "`buffer.atomic_cas(i, current, new)`"),
    ("sqrtf", "`x.sqrt()`"),
    ("rsqrtf", "`x.rsqrt()`"),
    ("expf", "`x.exp()`"),
    ("logf", "`x.ln()`"),
    ("sinf", "`x.sin()`"),
    ("cosf", "`x.cos()`"),
    ("tanhf", "`x.tanh()`"),
    ("fabsf", "`x.abs()`"),
    ("fabs", "`x.abs()`"),
    ("fminf", "`a.min(b)`"),
    ("fmaxf", "`a.max(b)`"),
    ("fmin", "`a.min(b)`"),
    ("fmax", "`a.max(b)`"),
    ("powf", "`x.powf(y)`"),
    ("fmaf", "`x.mul_add(a, b)`"),
    ("floorf", "`x.floor()`"),
    ("ceilf", "`x.ceil()`"),
    ("__float2half", "`f16::from_f32(x)`"),
    ("__half2float", "`x.to_f32()`"),
    ("__float2bfloat16", "`bf16::from_f32(x)`"),
    ("__bfloat162float", "`x.to_f32()`"),
    ("min", "`a.min(b)`"),
    ("max", "`a.max(b)`"),
];

/// The DSL's spelling of a CUDA name, if `name` is one.
pub(crate) fn cuda_spelling(name: &str) -> Option<&'static str> {
    CUDA_SPELLINGS.iter().find(|c| c.0 == name).map(|c| c.1)
}
