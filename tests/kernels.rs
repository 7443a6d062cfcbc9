//! `#[kernel]`: generated kernels run on the CPU device's emulated grid and on the GPU,
//! checked against float64 references on fresh random data.

#[macro_use]
mod common;

use atomr_accel_cuda::kernel::dsl::prelude::{AtomicAdd, ShuffleBits};
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{kernel, KernelArg};
use common::{rand_vec, rel_err};

/// y = a·x + y.
#[kernel]
pub fn saxpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// Sum of `x` into `out[0]`: a shared-memory tree per block, one atomic per block.
#[kernel]
pub fn block_sum<T: Float + AtomicAdd>(x: &[T], out: &mut [T]) {
    let mut tile = shared_array::<T, 256>();
    let t = thread_idx_x();
    let mut acc = T::zero();
    let mut i = global_index();
    while i < x.len() {
        acc += x[i];
        i += grid_stride();
    }
    tile[t] = acc;
    sync_threads();
    let mut s: usize = 128;
    while s > 0 {
        if t < s {
            tile[t] = tile[t] + tile[t + s];
        }
        sync_threads();
        s /= 2;
    }
    if t == 0 {
        out.atomic_add(0, tile[0]);
    }
}

/// Warp-shuffle reduction: one partial sum per warp.
#[kernel]
pub fn warp_sums<T: Float + ShuffleBits>(x: &[T], out: &mut [T]) {
    let i = global_index();
    let mut v = if i < x.len() { x[i] } else { T::zero() };
    let mut offset: u32 = 16;
    while offset > 0 {
        v += shfl_down(v, offset);
        offset /= 2;
    }
    if lane_id() == 0 {
        out[i / 32] = v;
    }
}

/// A 5-point stencil on an `n × m` grid (row-major), borders copied.
#[kernel]
pub fn stencil(n: usize, m: usize, src: &[f32], dst: &mut [f32]) {
    let c = global_index();
    let r = global_index_y();
    if r >= n || c >= m {
        return;
    }
    let k = r * m + c;
    if r == 0 || c == 0 || r == n - 1 || c == m - 1 {
        dst[k] = src[k];
    } else {
        dst[k] = 0.5 * src[k] + 0.125 * (src[k - 1] + src[k + 1] + src[k - m] + src[k + m]);
    }
}

/// Parameters passed by value.
#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
pub struct Affine {
    pub scale: f64,
    pub shift: f64,
    pub clamp_at: i32,
}

/// `y = clamp(scale·x + shift)` over i32 data, parameters in a struct.
#[kernel]
pub fn affine_i32(p: Affine, x: &[i32], y: &mut [i32]) {
    let i = global_index();
    if i < x.len() {
        let v = (p.scale * (x[i] as f64) + p.shift) as i32;
        y[i] = v.min(p.clamp_at);
    }
}

/// Per-row softmax of an `rows × cols` matrix; one block of 128 threads per row.
#[kernel]
pub fn softmax_rows<T: Float>(cols: usize, x: &[T], y: &mut [T]) {
    let mut red = shared_array::<f32, 128>();
    let row = block_idx_x();
    let t = thread_idx_x();
    let base = row * cols;
    let mut m = f32::NEG_INFINITY;
    for j in (t..cols).step_by(block_dim_x()) {
        m = m.max(x[base + j].to_f64() as f32);
    }
    red[t] = m;
    sync_threads();
    let mut s: usize = 64;
    while s > 0 {
        if t < s {
            red[t] = red[t].max(red[t + s]);
        }
        sync_threads();
        s /= 2;
    }
    let mx = red[0];
    sync_threads();
    let mut sum: f32 = 0.0;
    for j in (t..cols).step_by(block_dim_x()) {
        sum += ((x[base + j].to_f64() as f32) - mx).exp();
    }
    red[t] = sum;
    sync_threads();
    s = 64;
    while s > 0 {
        if t < s {
            red[t] += red[t + s];
        }
        sync_threads();
        s /= 2;
    }
    let total = red[0];
    for j in (t..cols).step_by(block_dim_x()) {
        let e = ((x[base + j].to_f64() as f32) - mx).exp() / total;
        y[base + j] = T::from_f64(e as f64);
    }
}

/// A raw CUDA C++ kernel; its Rust body is the CPU emulation.
#[kernel(cuda = r#"
extern "C" __global__ void scale_raw(float a, float* y, unsigned long long y_len) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < y_len) y[i] *= a;
}
"#)]
pub fn scale_raw(a: f32, y: &mut [f32]) {
    let i = global_index();
    if i < y.len() {
        y[i] *= a;
    }
}

/// Reads past the end of `x` on purpose.
#[kernel]
pub fn out_of_bounds(x: &[f32], y: &mut [f32]) {
    let i = global_index();
    y[i] = x[i + 1];
}

/// Thread 0 faults while the rest of its block waits at `sync_threads()`.
#[kernel]
pub fn fault_before_sync(y: &mut [f32]) {
    let t = thread_idx_x();
    if t == 0 {
        let n = y.len();
        y[n] = 1.0;
    }
    sync_threads();
    y[t] = 1.0;
}

/// Lane 0 waits at a shuffle while the rest of the warp waits at `sync_threads()`: a
/// deadlock on the GPU, a typed error on the CPU device.
#[kernel]
pub fn deadlock(y: &mut [f32]) {
    let t = thread_idx_x();
    if t == 0 {
        y[0] = shfl_down(y[0], 1);
    } else {
        sync_threads();
    }
}

/// A raw CUDA kernel without a CPU emulation.
#[kernel(cuda = r#"
extern "C" __global__ void gpu_only(float* y, unsigned long long y_len) { y[0] = 1.0f; }
"#)]
pub fn gpu_only(y: &mut [f32]) {
    cpu_unsupported();
}

fn to<T: DType>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

fn back<T: DType>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

async fn saxpy_of<T: Float + DType>(d: &Device, n: usize, tol: f64) {
    let (x, y0) = (rand_vec(n), rand_vec(n));
    let a = 0.75;
    let xd = d.upload(to::<T>(&x)).await.unwrap();
    let mut yd = d.upload(to::<T>(&y0)).await.unwrap();
    saxpy::launch::<T>(d, LaunchConfig::for_elements(n, 256), T::from_f64(a), &xd, &mut yd)
        .await
        .unwrap();
    let got = back(&d.download(&yd).await.unwrap());
    // Against the inputs as the device saw them; each element within `tol` of the
    // magnitudes it was computed from (an FMA may round once where Rust rounds twice).
    for (i, ((&x, &y), g)) in x.iter().zip(&y0).zip(&got).enumerate() {
        let (x, y) = (T::from_f64(x).to_f64(), T::from_f64(y).to_f64());
        let want = a * x + y;
        let bound = tol * ((a * x).abs() + y.abs());
        assert!((g - want).abs() <= bound, "saxpy<{}>[{i}]: {g} vs {want}", T::NAME);
    }
}

async fn saxpy_all_float_types(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    for n in [1, 1000, 65_537] {
        saxpy_of::<f32>(&d, n, 2.0 * f32::EPSILON as f64).await;
        saxpy_of::<f64>(&d, n, 2.0 * f64::EPSILON).await;
        saxpy_of::<f16>(&d, n, 2.0 * f16::EPSILON.to_f64()).await;
        saxpy_of::<bf16>(&d, n, 2.0 * bf16::EPSILON.to_f64()).await;
    }
    system.shutdown().await;
}

async fn reductions(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let n = 100_003;
    let x = rand_vec(n);
    let want: f64 = x.iter().sum();
    let xd = d.upload(to::<f64>(&x)).await.unwrap();
    let mut out = d.upload(vec![0.0f64]).await.unwrap();
    let cfg = LaunchConfig {
        grid: (24, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    block_sum::launch::<f64>(&d, cfg, &xd, &mut out).await.unwrap();
    let got = d.download(&out).await.unwrap()[0];
    assert!((got - want).abs() < 1e-9 * n as f64, "block_sum {got} vs {want}");

    let n = 4096;
    let x = rand_vec(n);
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    let mut out = d.alloc::<f32>(n / 32).await.unwrap();
    warp_sums::launch::<f32>(&d, LaunchConfig::for_elements(n, 128), &xd, &mut out)
        .await
        .unwrap();
    let got = back(&d.download(&out).await.unwrap());
    let want: Vec<f64> = x.chunks(32).map(|c| c.iter().map(|&v| v as f32 as f64).sum()).collect();
    assert!(rel_err(&got, &want) < 1e-6, "warp sums");
    system.shutdown().await;
}

async fn stencil_and_structs(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let (n, m) = (67, 130);
    let src = rand_vec(n * m);
    let srcd = d.upload(to::<f32>(&src)).await.unwrap();
    let mut dst = d.alloc::<f32>(n * m).await.unwrap();
    let cfg = LaunchConfig {
        grid: ((m as u32).div_ceil(16), (n as u32).div_ceil(16), 1),
        block: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    stencil::launch(&d, cfg, n, m, &srcd, &mut dst).await.unwrap();
    let got = back(&d.download(&dst).await.unwrap());
    let s = |k: usize| src[k] as f32 as f64;
    let want: Vec<f64> = (0..n * m)
        .map(|k| {
            let (r, c) = (k / m, k % m);
            if r == 0 || c == 0 || r == n - 1 || c == m - 1 {
                s(k)
            } else {
                0.5 * s(k) + 0.125 * (s(k - 1) + s(k + 1) + s(k - m) + s(k + m))
            }
        })
        .collect();
    assert!(rel_err(&got, &want) < 1e-6, "stencil");

    let x: Vec<i32> = rand_vec(5000).iter().map(|v| (v * 1000.0) as i32).collect();
    let p = Affine {
        scale: 1.5,
        shift: -7.0,
        clamp_at: 900,
    };
    let xd = d.upload(x.clone()).await.unwrap();
    let mut yd = d.alloc::<i32>(x.len()).await.unwrap();
    affine_i32::launch(&d, LaunchConfig::for_elements(x.len(), 128), p, &xd, &mut yd)
        .await
        .unwrap();
    let want: Vec<i32> = x.iter().map(|&v| ((1.5 * v as f64 - 7.0) as i32).min(900)).collect();
    assert_eq!(d.download(&yd).await.unwrap(), want);

    let mut yd = d.upload(to::<f32>(&src)).await.unwrap();
    scale_raw::launch(&d, LaunchConfig::for_elements(n * m, 256), 3.0, &mut yd)
        .await
        .unwrap();
    let want: Vec<f64> = src.iter().map(|&v| (v as f32 * 3.0) as f64).collect();
    assert!(
        rel_err(&back(&d.download(&yd).await.unwrap()), &want) < 1e-7,
        "raw kernel"
    );
    system.shutdown().await;
}

async fn softmax(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let (rows, cols) = (37, 300);
    let x: Vec<f64> = rand_vec(rows * cols).iter().map(|v| v * 8.0).collect();
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    let mut yd = d.alloc::<f32>(rows * cols).await.unwrap();
    let cfg = LaunchConfig {
        grid: (rows as u32, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    softmax_rows::launch::<f32>(&d, cfg, cols, &xd, &mut yd).await.unwrap();
    let got = back(&d.download(&yd).await.unwrap());
    let mut want = vec![0.0; rows * cols];
    for r in 0..rows {
        let row: Vec<f64> = x[r * cols..(r + 1) * cols].iter().map(|&v| v as f32 as f64).collect();
        let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|v| (v - mx).exp()).sum();
        for (j, v) in row.iter().enumerate() {
            want[r * cols + j] = (v - mx).exp() / sum;
        }
    }
    assert!(rel_err(&got, &want) < 1e-5, "softmax rel err {}", rel_err(&got, &want));
    system.shutdown().await;
}

async fn bad_launches(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let x = d.upload(vec![1.0f32; 64]).await.unwrap();
    let mut y = d.alloc::<f32>(64).await.unwrap();
    // Launch dimensions beyond the device's limits.
    let too_big = LaunchConfig {
        grid: (1, 1, 1),
        block: (2048, 1, 1),
        shared_mem_bytes: 0,
    };
    let e = saxpy::launch::<f32>(&d, too_big, 1.0, &x, &mut y).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e}");
    let zero = LaunchConfig {
        grid: (0, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let e = saxpy::launch::<f32>(&d, zero, 1.0, &x, &mut y).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e}");
    // One buffer as both parameters, read and written (a clone of the handle is the same
    // buffer): the error names the kernel's parameters.
    let mut alias = x.clone();
    let e = saxpy::launch::<f32>(&d, LaunchConfig::for_elements(64, 64), 1.0, &x, &mut alias)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(s) if s.starts_with("`x` (elements 0..64) and `y` (elements 0..64) are overlapping windows of the same buffer, and the kernel writes `y`")),
        "{e}"
    );
    // A buffer of a rebuilt generation.
    let old = d.upload(vec![1.0f32; 8]).await.unwrap();
    d.rebuild().await.unwrap();
    let mut fresh = d.alloc::<f32>(8).await.unwrap();
    let e = saxpy::launch::<f32>(&d, LaunchConfig::for_elements(8, 32), 1.0, &old, &mut fresh)
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e}");
    // Still serving.
    let x = d.upload(vec![2.0f32; 8]).await.unwrap();
    saxpy::launch::<f32>(&d, LaunchConfig::for_elements(8, 32), 2.0, &x, &mut fresh)
        .await
        .unwrap();
    assert_eq!(d.download(&fresh).await.unwrap(), vec![4.0f32; 8]);
    system.shutdown().await;
}

on_both! {
    saxpy_matches_reference_for_every_float_type => saxpy_all_float_types;
    shared_memory_and_shuffle_reductions => reductions;
    stencil_struct_arguments_and_raw_cuda => stencil_and_structs;
    row_softmax_matches_reference => softmax;
    bad_launches_are_typed_errors => bad_launches;
    warp_votes_fences_and_f32_conversions_match_reference => warp_votes_all;
    const_items_size_shared_arrays_and_scale => const_items;
    integer_match_as_value_and_statement => matches;
    cuda_style_u32_indices_and_histogram => u32_indices;
    device_fns_called_from_kernels_and_each_other => device_fns;
    vec4_loads_and_stores => vector_access;
    dynamic_shared_memory_sized_at_launch => dynamic_shared;
    two_d_views_with_row_strides => two_d_views;
    match_on_const_items_and_paths => const_patterns;
    const_generics_size_tiles_and_switch_code => const_generics;
    launch_bounds_budget_registers_and_refuse_larger_blocks => launch_bounds;
    untyped_literal_lets_typed_by_use => literal_typed_lets;
    tuple_lets_bind_after_computing => tuples;
    struct_values_built_in_kernels => struct_values;
    vec2_packed_half_arithmetic => packed_pairs;
    atomic_loads_read_what_other_blocks_published => chained_blocks;
    bit_counts_and_float_bits_as_in_rust => bit_counts;
}

/// CPU-device faults of the emulation: typed errors, no hang, the device keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_emulation_faults_are_typed_errors() {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let x = d.upload(vec![1.0f32; 64]).await.unwrap();
    let mut y = d.alloc::<f32>(64).await.unwrap();
    let e = out_of_bounds::launch(&d, LaunchConfig::for_elements(64, 32), &x, &mut y)
        .await
        .unwrap_err();
    match &e {
        GpuError::KernelFault(m) => assert!(m.contains("out of bounds") && m.contains("out_of_bounds"), "{m}"),
        other => panic!("expected KernelFault, got {other}"),
    }
    let started = std::time::Instant::now();
    // The other threads of the block are released from the barrier, not left waiting.
    let e = fault_before_sync::launch(&d, LaunchConfig::for_elements(32, 32), &mut y)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::KernelFault(m) if m.contains("thread [0, 0, 0]")),
        "{e}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // A raw CUDA kernel whose Rust body says it has no emulation.
    let e = gpu_only::launch(&d, LaunchConfig::for_elements(1, 1), &mut y)
        .await
        .unwrap_err();
    assert!(matches!(&e, GpuError::Unsupported(m) if m.contains("gpu_only")), "{e}");
    let mut fresh = d.alloc::<f32>(64).await.unwrap();
    saxpy::launch::<f32>(&d, LaunchConfig::for_elements(64, 32), 1.0, &x, &mut fresh)
        .await
        .unwrap();
    assert_eq!(d.download(&fresh).await.unwrap(), vec![1.0f32; 64]);
    system.shutdown().await;
}

/// Threads of a block waiting at different barriers: the launch fails at once with a
/// deadlock error instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_emulation_reports_a_deadlock() {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let mut y = d.alloc::<f32>(32).await.unwrap();
    let started = std::time::Instant::now();
    let e = deadlock::launch(&d, LaunchConfig::for_elements(32, 32), &mut y)
        .await
        .unwrap_err();
    assert!(matches!(&e, GpuError::KernelFault(m) if m.contains("deadlock")), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    system.shutdown().await;
}

/// Every kernel of this binary is registered, with one instance per dtype its bound admits.
#[test]
fn kernels_are_registered() {
    let all: Vec<_> = atomr_accel_cuda::kernel::dsl::registered().collect();
    let saxpy = all.iter().find(|r| r.name == "saxpy").expect("saxpy registered");
    let dtypes: Vec<&str> = saxpy.instances.iter().map(|i| i.dtypes).collect();
    assert_eq!(dtypes, ["f32", "f64", "f16", "bf16"]);
    assert!(all.iter().any(|r| r.name == "stencil" && r.instances.len() == 1));
}

/// `precompile_all` on the CPU device: nothing to compile, everything emulated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompile_on_cpu_counts_emulated() {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let s = precompile_all(&d).await.unwrap();
    let total: usize = atomr_accel_cuda::kernel::dsl::registered()
        .map(|r| r.instances.len())
        .sum();
    assert_eq!((s.emulated, s.compiled, s.failed.len()), (total, 0, 0));
    system.shutdown().await;
}

/// On the GPU: every instance compiles (cold into a fresh cache dir, then all hits).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn precompile_all_compiles_every_instance_on_gpu() {
    let dir = std::env::temp_dir().join(format!("atomr-precompile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let system = ActorSystem::new("k");
    let mut config = DeviceConfig::cuda(0);
    config.kernel_cache_dir = Some(dir.clone());
    let d = Device::open(&system, config.clone()).await.unwrap();
    // Progress reaches the caller once per instantiation, counted up to the total.
    let steps = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let seen = steps.clone();
    let cold = atomr_accel_cuda::precompile_all_with(&d, move |s| seen.lock().unwrap().push(s.clone()))
        .await
        .unwrap();
    println!("cold: {cold}");
    assert!(cold.failed.is_empty(), "{cold}");
    assert!(cold.compiled > 0);
    let steps = steps.lock().unwrap().clone();
    assert_eq!(steps.len(), cold.compiled + cold.cached);
    let mut done: Vec<usize> = steps.iter().map(|s| s.done).collect();
    done.sort();
    assert_eq!(done, (1..=steps.len()).collect::<Vec<_>>());
    assert!(steps.iter().all(|s| s.total == steps.len() && !s.failed));
    assert_eq!(steps.iter().filter(|s| s.cached).count(), cold.cached);
    let warm = precompile_all(&d).await.unwrap();
    println!("warm: {warm}");
    assert_eq!((warm.compiled, warm.failed.len()), (0, 0), "{warm}");
    system.shutdown().await;
}

/// The generated CUDA C++ of a set of kernels, compared with the files in
/// `tests/snapshots/` (`UPDATE_SNAPSHOTS=1` rewrites them after a deliberate change).
#[test]
fn generated_sources_match_snapshots() {
    let cases = [
        ("saxpy_f32", saxpy::cuda_source::<f32>()),
        ("saxpy_bf16", saxpy::cuda_source::<bf16>()),
        ("block_sum_f64", block_sum::cuda_source::<f64>()),
        ("warp_sums_f32", warp_sums::cuda_source::<f32>()),
        ("stencil", stencil::cuda_source()),
        ("affine_i32", affine_i32::cuda_source()),
        ("softmax_rows_f16", softmax_rows::cuda_source::<f16>()),
        ("transpose_u32_f32", transpose_u32::cuda_source::<f32>()),
        ("smooth_blend_f16", smooth_blend::cuda_source::<f16>()),
        ("axpby4_f32", axpby4::cuda_source::<f32>()),
        ("block_reverse_f64", block_reverse::cuda_source::<f64>()),
        ("tiled_matmul_f32", tiled_matmul::cuda_source::<f32>()),
        ("tile_sums_f32_64_true", tile_sums::cuda_source::<f32, 64, true>()),
        ("bounded_squares", bounded_squares::cuda_source()),
        ("bounded_copy_256", bounded_copy::cuda_source::<256>()),
        ("literal_lets", literal_lets::cuda_source()),
        ("complex_pow4", complex_pow4::cuda_source()),
        ("axpy2_f16", axpy2::cuda_source::<f16>()),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for (name, src) in cases {
        // The prelude is the same for every kernel: snapshot only what follows it.
        let kernel = &src[src.find(atomr_accel_cuda::kernel::dsl::source::PRELUDE).unwrap()
            + atomr_accel_cuda::kernel::dsl::source::PRELUDE.len()..];
        let head = &src[..src.find(atomr_accel_cuda::kernel::dsl::source::PRELUDE).unwrap()];
        let snap = format!("{head}// <prelude>\n{kernel}");
        let path = dir.join(format!("{name}.cu"));
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&path, &snap).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing snapshot {}", path.display()));
        assert_eq!(
            snap, want,
            "generated source of {name} changed (UPDATE_SNAPSHOTS=1 to accept)"
        );
    }
}

/// The lower-level launch: on a cudarc stream of the caller's, no kernel actor.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn launch_on_a_callers_stream() {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cuda(0)).await.unwrap();
    let n = 100_003;
    let (x, y) = (rand_vec(n), rand_vec(n));
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    let mut yd = d.upload(to::<f32>(&y)).await.unwrap();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    saxpy::launch_on::<f32>(&stream, LaunchConfig::for_elements(n, 256), 0.5, &xd, &mut yd).unwrap();
    stream.synchronize().unwrap();
    let got = back(&d.download(&yd).await.unwrap());
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| 0.5 * a as f32 as f64 + b as f32 as f64)
        .collect();
    assert!(rel_err(&got, &want) < 1e-6);
    let too_big = LaunchConfig {
        grid: (1, 1, 1),
        block: (4096, 1, 1),
        shared_mem_bytes: 0,
    };
    let e = saxpy::launch_on::<f32>(&stream, too_big, 0.5, &xd, &mut yd).unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e}");
    system.shutdown().await;
}

/// Every registered `#[kernel]` instantiation of this program — this file's kernels and
/// the runtime's own — compiles with real NVRTC for sm_90 (the H200) and sm_80, so a
/// generated source NVRTC rejects fails here, on a machine without a GPU. NVRTC's library
/// installs from PyPI (`nvidia-cuda-nvrtc`); `.ci/run` installs it and sets
/// `ATOMR_REQUIRE_NVRTC`, which makes a missing library a failure. Elsewhere the test
/// says that it skipped.
#[test]
fn every_registered_instantiation_compiles_with_nvrtc() {
    use atomr_accel_cuda::kernel::dsl::registry::registered;
    use atomr_accel_cuda::nvrtc_cache::compile_cached;
    let required = std::env::var_os("ATOMR_REQUIRE_NVRTC").is_some();
    // A fresh cache directory: every instantiation really goes through NVRTC.
    let dir = std::env::temp_dir().join(format!("atomr-nvrtc-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    match compile_cached("extern \"C\" __global__ void probe() {}", "sm_90", &[], Some(&dir)) {
        Err(GpuError::Unsupported(why)) if !required => {
            eprintln!("skipped: {why} (ATOMR_REQUIRE_NVRTC makes this a failure)");
            return;
        }
        Err(e) => panic!("NVRTC: {e}"),
        Ok(_) => {}
    }
    // The check can fail: NVRTC refuses a source that does not compile.
    let bad = compile_cached(
        "extern \"C\" __global__ void bad() { undeclared(); }",
        "sm_90",
        &[],
        Some(&dir),
    );
    assert!(matches!(bad, Err(GpuError::Library { .. })), "{bad:?}");
    let mut compiled = 0;
    let mut failures = vec![];
    for reg in registered() {
        for inst in reg.instances {
            for arch in ["sm_90", "sm_80"] {
                match compile_cached(&(inst.source)(), arch, &[], Some(&dir)) {
                    Ok((image, _)) => {
                        assert!(!image.is_empty());
                        compiled += 1;
                    }
                    Err(e) => failures.push(format!("{}::{}<{}> for {arch}: {e}", reg.module, reg.name, inst.dtypes)),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "NVRTC rejected {} of {}:\n{}",
        failures.len(),
        compiled + failures.len(),
        failures.join("\n\n")
    );
    assert!(compiled >= 40, "only {compiled} instantiations found");
    eprintln!("NVRTC compiled {compiled} instantiations");
}

/// Warp votes, a warp barrier, fences, a brief sleep and the f32 conversions: per element, the ballot
/// of `x > 0` over its warp, whether any lane has `x > 0.5` (1) and whether every lane
/// has `x > -0.9` (2), and `T::from_f32(x.to_f32() * 2.0)`.
#[kernel]
pub fn warp_votes<T: Float>(x: &[T], mask: &mut [u32], flags: &mut [u32], y: &mut [T]) {
    let i = global_index();
    let v = if i < x.len() { x[i].to_f32() } else { 0.0 };
    // Every lane votes (outside any branch), as the full-warp mask requires.
    let m = ballot(v > 0.0);
    let a: u32 = if warp_any(v > 0.5) { 1 } else { 0 };
    let b: u32 = if warp_all(v > -0.9) { 2 } else { 0 };
    sync_warp();
    thread_fence();
    thread_fence_block();
    nanosleep(20);
    if i < y.len() {
        mask[i] = m;
        flags[i] = a + b;
        y[i] = T::from_f32(v * 2.0);
    }
}

async fn votes_of<T: Float + DType>(d: &Device, n: usize) {
    // Every third warp all positive-ish (so `warp_all` is true there), the rest random.
    let x: Vec<T> = rand_vec(n)
        .iter()
        .enumerate()
        .map(|(i, v)| T::from_f64(if (i / 32) % 3 == 0 { v.abs() } else { *v }))
        .collect();
    let xd = d.upload(x.clone()).await.unwrap();
    let (mut md, mut fd, mut yd) = (
        d.alloc::<u32>(n).await.unwrap(),
        d.alloc::<u32>(n).await.unwrap(),
        d.alloc::<T>(n).await.unwrap(),
    );
    warp_votes::launch::<T>(d, LaunchConfig::for_elements(n, 128), &xd, &mut md, &mut fd, &mut yd)
        .await
        .unwrap();
    let (mask, flags, y) = (
        d.download(&md).await.unwrap(),
        d.download(&fd).await.unwrap(),
        d.download(&yd).await.unwrap(),
    );
    // Lanes past `n` vote with 0.0 (the block of 128 is whole).
    let v = |i: usize| if i < n { x[i].to_f32() } else { 0.0 };
    for i in 0..n {
        let w = (i / 32) * 32;
        let want_mask = (0..32).filter(|&l| v(w + l) > 0.0).fold(0u32, |m, l| m | (1 << l));
        let any = (0..32).any(|l| v(w + l) > 0.5) as u32;
        let all = (0..32).all(|l| v(w + l) > -0.9) as u32 * 2;
        assert_eq!(mask[i], want_mask, "ballot<{}>[{i}]", T::NAME);
        assert_eq!(flags[i], any + all, "votes<{}>[{i}]", T::NAME);
        assert_eq!(y[i], T::from_f32(x[i].to_f32() * 2.0), "from_f32<{}>[{i}]", T::NAME);
    }
    assert!(
        flags.iter().any(|f| f & 2 != 0) && flags.iter().any(|f| f & 2 == 0),
        "both vote outcomes occur"
    );
}

async fn warp_votes_all(config: DeviceConfig) {
    let system = ActorSystem::new("votes");
    let d = Device::open(&system, config).await.unwrap();
    votes_of::<f32>(&d, 1000).await;
    votes_of::<f64>(&d, 1000).await;
    votes_of::<f16>(&d, 300).await;
    votes_of::<bf16>(&d, 300).await;
    system.shutdown().await;
}

/// `const` items of the body: a shared tile sized by one, a scale from another. Each
/// block of `TILE` threads rotates its tile by one and scales it.
#[kernel]
pub fn rotate_tiles<T: Float>(x: &[T], y: &mut [T]) {
    const TILE: usize = 64;
    const SCALE: f32 = 0.5;
    let mut tile = shared_array::<T, TILE>();
    let i = global_index();
    let t = thread_idx_x();
    tile[t] = if i < x.len() { x[i] } else { T::zero() };
    sync_threads();
    if i < y.len() {
        y[i] = tile[(t + 1) % TILE] * T::from_f32(SCALE);
    }
}

async fn const_items(config: DeviceConfig) {
    let system = ActorSystem::new("consts");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let x = to::<f32>(&rand_vec(n));
    let xd = d.upload(x.clone()).await.unwrap();
    let mut yd = d.alloc::<f32>(n).await.unwrap();
    rotate_tiles::launch::<f32>(&d, LaunchConfig::for_elements(n, 64), &xd, &mut yd)
        .await
        .unwrap();
    let y = d.download(&yd).await.unwrap();
    for (i, got) in y.iter().enumerate() {
        let (base, t) = ((i / 64) * 64, i % 64);
        let src = base + (t + 1) % 64;
        let want = if src < n { x[src] * 0.5 } else { 0.0 };
        assert_eq!(*got, want, "rotate_tiles[{i}]");
    }
    system.shutdown().await;
}

/// `match` on integers, as a value (literals, `|`, a range with a guard, `_`) and as a
/// statement (arms of expressions and blocks).
#[kernel]
pub fn classify<T: Float>(x: &[T], y: &mut [T], class: &mut [u32]) {
    let i = global_index();
    let k: u32 = match i % 7 {
        0 => 1,
        1 | 2 => 2,
        3..=4 if i > 100 => 7,
        _ => 3,
    };
    if i < y.len() {
        class[i] = k;
        match k {
            1 => y[i] = x[i],
            2 => {
                y[i] = x[i] * T::from_f64(2.0);
            }
            7 => y[i] = -x[i],
            _ => y[i] = T::zero(),
        }
    }
}

async fn matches(config: DeviceConfig) {
    let system = ActorSystem::new("matches");
    let d = Device::open(&system, config).await.unwrap();
    let n = 500;
    let x = to::<f64>(&rand_vec(n));
    let xd = d.upload(x.clone()).await.unwrap();
    let (mut yd, mut cd) = (d.alloc::<f64>(n).await.unwrap(), d.alloc::<u32>(n).await.unwrap());
    classify::launch::<f64>(&d, LaunchConfig::for_elements(n, 128), &xd, &mut yd, &mut cd)
        .await
        .unwrap();
    let (y, class) = (d.download(&yd).await.unwrap(), d.download(&cd).await.unwrap());
    for i in 0..n {
        let k = match i % 7 {
            0 => 1,
            1 | 2 => 2,
            3..=4 if i > 100 => 7,
            _ => 3,
        };
        let want = match k {
            1 => x[i],
            2 => x[i] * 2.0,
            7 => -x[i],
            _ => 0.0,
        };
        assert_eq!((class[i], y[i]), (k, want), "classify[{i}]");
    }
    system.shutdown().await;
}

/// CUDA's spelling of indices: the intrinsics' values meet `u32` sizes (as `threadIdx.x`
/// is `unsigned`) and index buffers as `u32`; another value in the same kernel meets a
/// `usize` length and stays `usize`; a histogram indexes an atomic with a computed `u32`.
#[kernel]
pub fn transpose_u32<T: Float>(src: &[T], dst: &mut [T], hist: &mut [u32], w: u32, h: u32) {
    let x = block_idx_x() * block_dim_x() + thread_idx_x();
    let y = block_idx_y() * block_dim_y() + thread_idx_y();
    if x < w && y < h {
        dst[x * h + y] = src[y * w + x];
        let v = src[y * w + x].to_f32().abs();
        let bin = (v * 8.0) as u32;
        hist.atomic_add(bin.min(7), 1);
    }
    let lane: u32 = lane_id();
    let i = global_index();
    if i < dst.len() && lane > 40 {
        dst[i] = T::zero();
    }
}

async fn u32_indices(config: DeviceConfig) {
    let system = ActorSystem::new("u32");
    let d = Device::open(&system, config).await.unwrap();
    let (w, h) = (37usize, 21usize);
    let src = to::<f32>(&rand_vec(w * h));
    let sd = d.upload(src.clone()).await.unwrap();
    let (mut dd, mut hd) = (d.alloc::<f32>(w * h).await.unwrap(), d.alloc::<u32>(8).await.unwrap());
    let cfg = LaunchConfig {
        grid: (w.div_ceil(8) as u32, h.div_ceil(8) as u32, 1),
        block: (8, 8, 1),
        shared_mem_bytes: 0,
    };
    transpose_u32::launch::<f32>(&d, cfg, &sd, &mut dd, &mut hd, w as u32, h as u32)
        .await
        .unwrap();
    let (dst, hist) = (d.download(&dd).await.unwrap(), d.download(&hd).await.unwrap());
    let mut want_hist = [0u32; 8];
    for y in 0..h {
        for x in 0..w {
            assert_eq!(dst[x * h + y], src[y * w + x], "transpose[{x}, {y}]");
            want_hist[((src[y * w + x].abs() * 8.0) as u32).min(7) as usize] += 1;
        }
    }
    assert_eq!(hist, want_hist);
    system.shutdown().await;
}

/// A generic `#[device] fn` returning a value.
#[device]
pub fn lerp<T: Float>(a: T, b: T, t: T) -> T {
    a + (b - a) * t
}

/// A helper reading a buffer, with a loop, a value `if` and a trailing value.
#[device]
pub fn window_mean<T: Float>(x: &[T], i: usize, half: usize) -> T {
    let lo = if i > half { i - half } else { 0 };
    let hi = (i + half + 1).min(x.len());
    let mut acc = T::zero();
    for k in lo..hi {
        acc += x[k];
    }
    acc / T::from_f64((hi - lo) as f64)
}

/// A helper with warp shuffles (the kernel calling it is emulated cooperatively) that
/// calls another helper.
#[device]
pub fn warp_sum<T: Float>(v: T) -> T {
    let mut s = v;
    let mut off: u32 = 16;
    while off > 0 {
        s = add_f(s, shfl_down(s, off));
        off /= 2;
    }
    s
}

/// A helper called by a helper.
#[device]
fn add_f<T: Float>(a: T, b: T) -> T {
    a + b
}

/// A helper that writes a buffer, returns nothing, and returns early.
#[device]
fn put<T: Float>(y: &mut [T], i: usize, v: T) {
    if i >= y.len() {
        return;
    }
    y[i] = v;
}

/// A concrete-typed helper called with a turbofish-free integer argument.
#[device]
fn twice(k: u32) -> u32 {
    k * 2
}

#[kernel]
pub fn smooth_blend<T: Float>(x: &[T], y: &mut [T], sums: &mut [T], tags: &mut [u32], t: T) {
    let i = global_index();
    let v = if i < x.len() { x[i] } else { T::zero() };
    if i < x.len() {
        let m = window_mean(x, i, 2);
        put(y, i, lerp(v, m, t));
        tags[i] = twice(lane_id());
    }
    let s = warp_sum(v);
    if lane_id() == 0 {
        sums.atomic_add(0, s);
    }
}

async fn device_fns(config: DeviceConfig) {
    let system = ActorSystem::new("device-fns");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let x = rand_vec(n);
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    let (mut yd, mut sd, mut td) = (
        d.alloc::<f32>(n).await.unwrap(),
        d.upload(vec![0.0f32]).await.unwrap(),
        d.alloc::<u32>(n).await.unwrap(),
    );
    smooth_blend::launch::<f32>(
        &d,
        LaunchConfig::for_elements(n, 128),
        &xd,
        &mut yd,
        &mut sd,
        &mut td,
        0.25,
    )
    .await
    .unwrap();
    let (y, s, tags) = (
        d.download(&yd).await.unwrap(),
        d.download(&sd).await.unwrap(),
        d.download(&td).await.unwrap(),
    );
    let xf: Vec<f64> = to::<f32>(&x).iter().map(|&v| v as f64).collect();
    for i in 0..n {
        let (lo, hi) = (i.saturating_sub(2), (i + 3).min(n));
        let m = xf[lo..hi].iter().sum::<f64>() / (hi - lo) as f64;
        let want = xf[i] + (m - xf[i]) * 0.25;
        assert!(
            (y[i] as f64 - want).abs() < 1e-5,
            "smooth_blend[{i}]: {} vs {want}",
            y[i]
        );
        assert_eq!(tags[i], 2 * (i as u32 % 32), "tags[{i}]");
    }
    let total: f64 = xf.iter().sum();
    assert!((s[0] as f64 - total).abs() < 1e-3, "warp sums {} vs {total}", s[0]);
    system.shutdown().await;
}

/// Vector access: four elements per load and store (`Vec4` arithmetic with vectors and
/// scalars, an element written by name), and a scalar tail for a length not divisible by 4.
#[kernel]
pub fn axpby4<T: Float>(a: T, b: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    let n4 = y.len() / 4;
    if i < n4 {
        let xv = x.load4(i);
        let mut yv: Vec4<T> = y.load4(i);
        yv = xv * a + yv * b;
        yv.w = yv.w * T::one();
        let mut acc = Vec4::splat(T::zero());
        acc += yv;
        y.store4(i, -(-acc));
    }
    let t = n4 * 4 + i;
    if t < y.len() {
        y[t] = a * x[t] + b * y[t];
    }
}

async fn vector_access(config: DeviceConfig) {
    let system = ActorSystem::new("vec4");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1003;
    let (x, y) = (rand_vec(n), rand_vec(n));
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    let mut yd = d.upload(to::<f32>(&y)).await.unwrap();
    axpby4::launch::<f32>(&d, LaunchConfig::for_elements(n / 4 + 1, 64), 1.5, -0.5, &xd, &mut yd)
        .await
        .unwrap();
    let got = d.download(&yd).await.unwrap();
    let (xf, yf) = (to::<f32>(&x), to::<f32>(&y));
    for i in 0..n {
        let want = 1.5 * xf[i] as f64 - 0.5 * yf[i] as f64;
        assert!((got[i] as f64 - want).abs() < 1e-6, "axpby4[{i}]: {} vs {want}", got[i]);
    }
    // f16 too (8-byte vectors).
    let xh = d.upload(to::<f16>(&x)).await.unwrap();
    let mut yh = d.upload(to::<f16>(&y)).await.unwrap();
    axpby4::launch::<f16>(
        &d,
        LaunchConfig::for_elements(n / 4 + 1, 64),
        f16::from_f64(1.5),
        f16::from_f64(-0.5),
        &xh,
        &mut yh,
    )
    .await
    .unwrap();
    let got = d.download(&yh).await.unwrap();
    for i in 0..n {
        let want = 1.5 * x[i] - 0.5 * y[i];
        assert!(
            (got[i].to_f64() - want).abs() < 4e-3,
            "axpby4 f16[{i}]: {} vs {want}",
            got[i]
        );
    }
    system.shutdown().await;
}

/// Dynamic shared memory sized at launch: each block reverses its part of `x` through a
/// buffer of the launch's size, and reports the buffer's length.
#[kernel]
pub fn block_reverse<T: Float>(x: &[T], y: &mut [T], lens: &mut [u32]) {
    let mut buf = dyn_shared::<T>();
    let t = thread_idx_x();
    let b = block_dim_x();
    let i = block_idx_x() * b + t;
    buf[t] = if i < x.len() { x[i] } else { T::zero() };
    sync_threads();
    let j = block_idx_x() * b + (b - 1 - t);
    if j < y.len() {
        y[j] = buf[t];
    }
    if i == 0 {
        lens[0] = buf.len() as u32;
    }
}

async fn dynamic_shared(config: DeviceConfig) {
    let system = ActorSystem::new("dyn-shared");
    let d = Device::open(&system, config).await.unwrap();
    let (n, b) = (1000usize, 128usize);
    let x = to::<f32>(&rand_vec(n));
    let xd = d.upload(x.clone()).await.unwrap();
    // Exactly a block's worth, then 100 KiB (above the 48 KiB a kernel gets by default).
    for bytes in [b * 4, 100 * 1024] {
        let (mut yd, mut ld) = (d.alloc::<f32>(n).await.unwrap(), d.alloc::<u32>(1).await.unwrap());
        let mut cfg = LaunchConfig::for_elements(n, b as u32);
        cfg.shared_mem_bytes = bytes as u32;
        block_reverse::launch::<f32>(&d, cfg, &xd, &mut yd, &mut ld)
            .await
            .unwrap();
        let (y, lens) = (d.download(&yd).await.unwrap(), d.download(&ld).await.unwrap());
        assert_eq!(lens[0] as usize, bytes / 4, "dyn_shared length");
        for s in (0..n).step_by(b) {
            for t in 0..b {
                let j = s + b - 1 - t;
                if j < n {
                    let want = if s + t < n { x[s + t] } else { 0.0 };
                    assert_eq!(y[j], want, "block_reverse[{j}] with {bytes} bytes");
                }
            }
        }
    }
    system.shutdown().await;
}

async fn two_d_views(config: DeviceConfig) {
    let system = ActorSystem::new("rows");
    let d = Device::open(&system, config).await.unwrap();
    let (m, n, k) = (37usize, 29usize, 45usize);
    let (lda, ldb, ldc) = (k + 3, n + 1, n + 2);
    let (a, b) = (rand_vec(m * lda), rand_vec(k * ldb));
    let ad = d.upload(to::<f64>(&a)).await.unwrap();
    let bd = d.upload(to::<f64>(&b)).await.unwrap();
    let sentinel = vec![7.0f64; m * ldc];
    let mut cd = d.upload(sentinel).await.unwrap();
    let cfg = LaunchConfig {
        grid: (n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1),
        block: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let dims = [m, n, k, lda, ldb, ldc].map(|v| v as u32);
    tiled_matmul::launch::<f64>(
        &d, cfg, &ad, &bd, &mut cd, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
    )
    .await
    .unwrap();
    let c = d.download(&cd).await.unwrap();
    for r in 0..m {
        for col in 0..ldc {
            let got = c[r * ldc + col];
            if col >= n {
                assert_eq!(got, 7.0, "padding of C[{r}, {col}] untouched");
                continue;
            }
            let want: f64 = (0..k).map(|q| a[r * lda + q] * b[q * ldb + col]).sum();
            assert!((got - want).abs() < 1e-12 * k as f64, "C[{r}, {col}]: {got} vs {want}");
        }
    }
    system.shutdown().await;
}

/// `match` on an operation code against `const`s of the body (enums as integers) and a
/// path constant.
#[kernel]
pub fn apply_op(ops: &[u32], x: &[f32], y: &mut [f32]) {
    const ADD: u32 = 0;
    const MUL: u32 = 1;
    const NEG: u32 = 2;
    let i = global_index();
    if i < y.len() {
        y[i] = match ops[i] {
            ADD => x[i] + 1.0,
            MUL => x[i] * 2.0,
            NEG | u32::MAX => -x[i],
            _ => 0.0,
        };
    }
}

async fn const_patterns(config: DeviceConfig) {
    let system = ActorSystem::new("const-match");
    let d = Device::open(&system, config).await.unwrap();
    let n = 300;
    let x = to::<f32>(&rand_vec(n));
    let ops: Vec<u32> = (0..n as u32)
        .map(|i| if i % 5 == 4 { u32::MAX } else { i % 5 })
        .collect();
    let (od, xd) = (d.upload(ops.clone()).await.unwrap(), d.upload(x.clone()).await.unwrap());
    let mut yd = d.alloc::<f32>(n).await.unwrap();
    apply_op::launch(&d, LaunchConfig::for_elements(n, 64), &od, &xd, &mut yd)
        .await
        .unwrap();
    let y = d.download(&yd).await.unwrap();
    for i in 0..n {
        let want = match ops[i] {
            0 => x[i] + 1.0,
            1 => x[i] * 2.0,
            2 | u32::MAX => -x[i],
            _ => 0.0,
        };
        assert_eq!(y[i], want, "apply_op[{i}] (op {})", ops[i]);
    }
    system.shutdown().await;
}

/// Const generics: a tile size and an unroll switch fixed per instantiation, sizing a
/// shared array and bounding loops; `consts(…)` registers two tile sizes (CI compiles
/// them with NVRTC; `precompile_all` and isolated devices find them).
#[kernel(consts(TILE = [32, 64], UNROLLED = [true, false]))]
pub fn tile_sums<T: Float, const TILE: usize, const UNROLLED: bool>(x: &[T], y: &mut [T]) {
    let mut tile = shared_array::<T, TILE>();
    let t = thread_idx_x();
    let i = global_index();
    tile[t] = if i < x.len() { x[i] } else { T::zero() };
    sync_threads();
    if t == 0 {
        let mut acc = T::zero();
        if UNROLLED {
            let mut k = 0;
            while k < TILE {
                acc += tile[k] + tile[k + 1];
                k += 2;
            }
        } else {
            for k in 0..TILE {
                acc += tile[k];
            }
        }
        y[block_idx_x()] = acc;
    }
}

async fn const_generics(config: DeviceConfig) {
    let system = ActorSystem::new("const-generics");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let x = rand_vec(n);
    let xd = d.upload(to::<f64>(&x)).await.unwrap();
    let check = |y: &[f64], tile: usize| {
        for (b, got) in y.iter().enumerate() {
            let want: f64 = x[(b * tile).min(n)..((b + 1) * tile).min(n)].iter().sum();
            assert!((got - want).abs() < 1e-12, "tile_sums<{tile}>[{b}]: {got} vs {want}");
        }
    };
    let mut yd = d.alloc::<f64>(n.div_ceil(32)).await.unwrap();
    tile_sums::launch::<f64, 32, true>(&d, LaunchConfig::for_elements(n, 32), &xd, &mut yd)
        .await
        .unwrap();
    check(&d.download(&yd).await.unwrap(), 32);
    let mut yd = d.alloc::<f64>(n.div_ceil(64)).await.unwrap();
    tile_sums::launch::<f64, 64, false>(&d, LaunchConfig::for_elements(n, 64), &xd, &mut yd)
        .await
        .unwrap();
    check(&d.download(&yd).await.unwrap(), 64);
    // A value not in `consts(…)`: compiled at its first launch all the same.
    let mut yd = d.alloc::<f64>(n.div_ceil(16)).await.unwrap();
    tile_sums::launch::<f64, 16, false>(&d, LaunchConfig::for_elements(n, 16), &xd, &mut yd)
        .await
        .unwrap();
    check(&d.download(&yd).await.unwrap(), 16);
    system.shutdown().await;
}

/// Each block's sum of squares, for blocks of at most 128 threads: `launch_bounds` lets
/// the CUDA compiler budget registers for that, and launches of larger blocks are refused.
#[kernel(launch_bounds = 128)]
pub fn bounded_squares(x: &[f32], y: &mut [f32]) {
    let mut part = shared_array::<f32, 128>();
    let t = thread_idx_x();
    let i = global_index();
    part[t] = if i < x.len() { x[i] * x[i] } else { 0.0 };
    sync_threads();
    if t == 0 {
        let mut acc = 0.0f32;
        for k in 0..block_dim_x() {
            acc += part[k];
        }
        y[block_idx_x()] = acc;
    }
}

/// The bound as a const generic: each instantiation bounded by its own block size.
#[kernel(consts(THREADS = [64, 256]), launch_bounds = THREADS)]
pub fn bounded_copy<const THREADS: u32>(x: &[f32], y: &mut [f32]) {
    let i = block_idx_x() * THREADS as usize + thread_idx_x();
    if i < x.len() {
        y[i] = x[i];
    }
}

async fn launch_bounds(config: DeviceConfig) {
    let system = ActorSystem::new("launch-bounds");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let x = rand_vec(n);
    let xd = d.upload(to::<f32>(&x)).await.unwrap();
    for threads in [64u32, 128] {
        let blocks = n.div_ceil(threads as usize);
        let mut yd = d.alloc::<f32>(blocks).await.unwrap();
        bounded_squares::launch(&d, LaunchConfig::for_elements(n, threads), &xd, &mut yd)
            .await
            .unwrap();
        let got = back(&d.download(&yd).await.unwrap());
        let want: Vec<f64> = x
            .chunks(threads as usize)
            .map(|c| c.iter().map(|v| (*v as f32 as f64).powi(2)).sum())
            .collect();
        assert!(rel_err(&got, &want) < 1e-6, "blocks of {threads}");
    }
    // A block above the bound: refused before the launch, the kernel and bound named.
    let mut yd = d.alloc::<f32>(4).await.unwrap();
    let err = bounded_squares::launch(&d, LaunchConfig::for_elements(n, 256), &xd, &mut yd)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument(_))
            && err.to_string().contains("bounded_squares")
            && err.to_string().contains("launch_bounds = 128"),
        "{err}"
    );
    let mut yd = d.alloc::<f32>(n).await.unwrap();
    bounded_copy::launch::<64>(&d, LaunchConfig::for_elements(n, 64), &xd, &mut yd)
        .await
        .unwrap();
    assert_eq!(back(&d.download(&yd).await.unwrap()), back(&to::<f32>(&x)));
    let err = bounded_copy::launch::<64>(&d, LaunchConfig::for_elements(n, 128), &xd, &mut yd)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("launch_bounds = 64"), "{err}");
    bounded_copy::launch::<256>(&d, LaunchConfig::for_elements(n, 256), &xd, &mut yd)
        .await
        .unwrap();
    system.shutdown().await;
}

/// `let`s of untyped literals, typed by their uses as rustc types them: `acc` meets f32
/// elements, `k` a u32 bound, `hits` nothing (i32, rustc's fallback).
#[kernel]
pub fn literal_lets(x: &[f32], y: &mut [f32], n: u32) {
    let i = global_index();
    let mut acc = 0.0;
    let mut hits = 0;
    let mut k = 0;
    while k < n {
        let v = x[(i + k as usize) % x.len()];
        acc += v;
        if v > 0.0 {
            hits += 1;
        }
        k += 1;
    }
    if i < y.len() {
        y[i] = acc + hits as f32;
    }
}

async fn literal_typed_lets(config: DeviceConfig) {
    let system = ActorSystem::new("literal-lets");
    let d = Device::open(&system, config).await.unwrap();
    let n = 200;
    let x = to::<f32>(&rand_vec(n));
    let xd = d.upload(x.clone()).await.unwrap();
    let mut yd = d.alloc::<f32>(n).await.unwrap();
    literal_lets::launch(&d, LaunchConfig::for_elements(n, 64), &xd, &mut yd, 5)
        .await
        .unwrap();
    let y = d.download(&yd).await.unwrap();
    for i in 0..n {
        let vals: Vec<f32> = (0..5).map(|k| x[(i + k) % n]).collect();
        let want = vals.iter().sum::<f32>() + vals.iter().filter(|v| **v > 0.0).count() as f32;
        assert!((y[i] - want).abs() < 1e-5, "literal_lets[{i}]: {} vs {want}", y[i]);
    }
    system.shutdown().await;
}

/// Tuple `let`s: every value computed before any name is bound (a swap), annotated or
/// typed by use.
#[kernel]
pub fn tuple_lets(x: &[f32], y: &mut [f32]) {
    let i = global_index();
    if i + 1 < x.len() {
        let (a, b) = (x[i], x[i + 1]);
        let (a, b) = (b, a);
        let (mut lo, hi): (f32, f32) = (a.min(b), a.max(b));
        lo *= 2.0;
        y[i] = lo + hi * 10.0 + a - b;
    }
}

async fn tuples(config: DeviceConfig) {
    let system = ActorSystem::new("tuples");
    let d = Device::open(&system, config).await.unwrap();
    let n = 300;
    let x = to::<f32>(&rand_vec(n));
    let xd = d.upload(x.clone()).await.unwrap();
    let mut yd = d.upload(vec![0.0f32; n]).await.unwrap();
    tuple_lets::launch(&d, LaunchConfig::for_elements(n, 64), &xd, &mut yd)
        .await
        .unwrap();
    let y = d.download(&yd).await.unwrap();
    for i in 0..n - 1 {
        let (a, b) = (x[i + 1], x[i]);
        let want = a.min(b) * 2.0 + a.max(b) * 10.0 + a - b;
        assert!((y[i] - want).abs() < 1e-5, "tuple_lets[{i}]: {} vs {want}", y[i]);
    }
    system.shutdown().await;
}

/// A pair of scalars built as a value inside kernels and passed to helpers.
#[derive(Clone, Copy, KernelArg)]
#[repr(C)]
pub struct Cplx {
    pub re: f32,
    pub im: f32,
}

/// A helper taking a struct (its declaration travels with the helper).
#[device]
fn norm2(z: Cplx) -> f32 {
    z.re * z.re + z.im * z.im
}

/// Struct values: literals (fields in any order), an annotated `let`, field writes and
/// whole-value assignment; `out = |z⁴|²`.
#[kernel]
pub fn complex_pow4(re: &[f32], im: &[f32], out: &mut [f32]) {
    let i = global_index();
    if i < out.len() {
        let mut z: Cplx = Cplx { im: im[i], re: re[i] };
        for _k in 0..2 {
            let sq = Cplx {
                re: z.re * z.re - z.im * z.im,
                im: 2.0 * z.re * z.im,
            };
            z = sq;
        }
        z.im = -z.im;
        out[i] = norm2(z);
    }
}

async fn struct_values(config: DeviceConfig) {
    let system = ActorSystem::new("structs");
    let d = Device::open(&system, config).await.unwrap();
    let n = 500;
    let (re, im) = (to::<f32>(&rand_vec(n)), to::<f32>(&rand_vec(n)));
    let (rd, id) = (d.upload(re.clone()).await.unwrap(), d.upload(im.clone()).await.unwrap());
    let mut od = d.alloc::<f32>(n).await.unwrap();
    complex_pow4::launch(&d, LaunchConfig::for_elements(n, 128), &rd, &id, &mut od)
        .await
        .unwrap();
    let out = d.download(&od).await.unwrap();
    for i in 0..n {
        let m2 = (re[i] as f64).powi(2) + (im[i] as f64).powi(2);
        let want = m2.powi(4);
        assert!(
            (out[i] as f64 - want).abs() <= 1e-5 * want.max(1e-6),
            "complex_pow4[{i}]: {} vs {want}",
            out[i]
        );
    }
    system.shutdown().await;
}

/// `Vec2` access and arithmetic: for f16/bf16 the generated source computes with CUDA's
/// packed `__half2` / `__nv_bfloat162` instructions, two lanes per instruction.
#[kernel]
pub fn axpy2<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() / 2 {
        let xv = x.load2(i);
        let yv: Vec2<T> = y.load2(i);
        let r = xv * Vec2::splat(a) + yv - Vec2::new(T::zero(), T::zero());
        y.store2(i, -(-r) / Vec2::splat(T::one()));
    }
    if i == 0 && y.len() % 2 == 1 {
        let last = y.len() - 1;
        y[last] = a * x[last] + y[last];
    }
}

async fn packed_pairs(config: DeviceConfig) {
    let system = ActorSystem::new("vec2");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1001;
    let (x, y) = (rand_vec(n), rand_vec(n));
    macro_rules! check {
        ($t:ty, $tol:expr) => {{
            let (xt, yt) = (to::<$t>(&x), to::<$t>(&y));
            let xd = d.upload(xt.clone()).await.unwrap();
            let mut yd = d.upload(yt.clone()).await.unwrap();
            let a = to::<$t>(&[0.75])[0];
            let (xb, yb) = (back(&xt), back(&yt));
            axpy2::launch::<$t>(&d, LaunchConfig::for_elements(n / 2 + 1, 64), a, &xd, &mut yd)
                .await
                .unwrap();
            let got = back(&d.download(&yd).await.unwrap());
            for i in 0..n {
                let want = 0.75 * xb[i] + yb[i];
                assert!(
                    (got[i] - want).abs() <= $tol,
                    "axpy2<{}>[{i}]: {} vs {want}",
                    stringify!($t),
                    got[i]
                );
            }
        }};
    }
    check!(f32, 1e-6);
    check!(f16, 4e-3);
    check!(bf16, 3e-2);
    system.shutdown().await;
}

/// The tiled GEMM of `two_d_views`, shared with `benches/kernels.rs`.
#[path = "shared/tiled_matmul.rs"]
mod tiled;
use tiled::tiled_matmul;

/// Two launches over the same two buffers in opposite parameter orders, concurrently and
/// many times (`saxpy(x → y)` and `saxpy(y → x)` through the device's pool of kernel
/// actors): each locks its buffers in one order — buffer id — so neither waits on the
/// other forever. With argument-order locking this deadlocks on the CPU device, whose
/// emulated launch holds the locks while the body runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn launches_over_the_same_buffers_in_opposite_orders_do_not_deadlock() {
    let system = ActorSystem::new("k-order");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let n = 1 << 14;
    let a = d.upload(vec![1.0f32; n]).await.unwrap();
    let b = d.upload(vec![1.0f32; n]).await.unwrap();
    let cfg = LaunchConfig::for_elements(n, 256);
    let mut tasks = vec![];
    for t in 0..4 {
        let (d, a, b) = (d.clone(), a.clone(), b.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let (x, mut y) = if t % 2 == 0 {
                    (a.clone(), b.clone())
                } else {
                    (b.clone(), a.clone())
                };
                saxpy::launch::<f32>(&d, cfg, 0.0, &x, &mut y).await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(std::time::Duration::from_secs(120), t)
            .await
            .expect("no deadlock between launches locking the same buffers")
            .unwrap();
    }
}

/// `Device::launch_all`: a chain of launches — each reading what the one before wrote,
/// f64 instantiations launched here for the first time (compiled while the sequence
/// waits) — runs in order, waited for once; a bad call anywhere refuses the whole
/// sequence before anything runs; an empty sequence is nothing to do.
async fn sequences(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let n = 5000;
    let (x, y0) = (rand_vec(n), rand_vec(n));
    let gx = d.upload(x.clone()).await.unwrap();
    let gy = d.upload(y0.clone()).await.unwrap();
    let gz = d.upload(vec![0.0f64; n]).await.unwrap();
    let cfg = LaunchConfig::for_elements(n, 128);
    // y = 2x + y; z = 3y + z; y = -z + y; z = 0.5y + z — each reads the last write.
    let (mut y, mut z) = (gy.clone(), gz.clone());
    d.launch_all(vec![
        saxpy::call::<f64>(cfg, 2.0, &gx, &mut y),
        saxpy::call::<f64>(cfg, 3.0, &gy, &mut z),
        saxpy::call::<f64>(cfg, -1.0, &gz, &mut y),
        saxpy::call::<f64>(cfg, 0.5, &gy, &mut z),
    ])
    .await
    .unwrap();
    let (mut wy, mut wz) = (y0.clone(), vec![0.0; n]);
    for i in 0..n {
        wy[i] += 2.0 * x[i];
        wz[i] += 3.0 * wy[i];
        wy[i] += -wz[i];
        wz[i] += 0.5 * wy[i];
    }
    let (gy_now, gz_now) = (d.download(&gy).await.unwrap(), d.download(&gz).await.unwrap());
    assert!(rel_err(&gy_now, &wy) < 1e-14, "y after the sequence");
    assert!(rel_err(&gz_now, &wz) < 1e-14, "z after the sequence");
    // A bad launch last (x written while read): nothing of the sequence runs.
    let mut alias = gx.clone();
    let e = d
        .launch_all([
            saxpy::call::<f64>(cfg, 1.0, &gx, &mut y),
            saxpy::call::<f64>(cfg, 1.0, &gx, &mut alias),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(m) if m.contains("overlapping")),
        "{e}"
    );
    assert!(d.download(&gy).await.unwrap() == gy_now, "nothing ran");
    // Launch dimensions beyond the device's: refused too, nothing run.
    let too_big = LaunchConfig {
        grid: (1, 1, 1),
        block: (4096, 1, 1),
        shared_mem_bytes: 0,
    };
    let e = d
        .launch_all(
            KernelSequence::new()
                .then(saxpy::call::<f64>(cfg, 1.0, &gx, &mut y))
                .then(saxpy::call::<f64>(too_big, 1.0, &gx, &mut y)),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e}");
    assert!(d.download(&gy).await.unwrap() == gy_now, "nothing ran");
    d.launch_all(KernelSequence::new()).await.unwrap();
    // Launches, then a read back of what they wrote, as one request: a view reads its
    // window only.
    let mut y = gy.clone();
    let window = d
        .launch_then_read([saxpy::call::<f64>(cfg, 2.0, &gx, &mut y)], &gy.view(10..20).unwrap())
        .await
        .unwrap();
    for (k, got) in window.iter().enumerate() {
        let want = gy_now[10 + k] + 2.0 * x[10 + k];
        assert!((got - want).abs() < 1e-12 * (1.0 + want.abs()), "read back at {k}");
    }
    assert_eq!(window.len(), 10);
    // A buffer of another generation to read: refused.
    let old = d.upload(vec![0.0f64; 4]).await.unwrap();
    d.rebuild().await.unwrap();
    let e = d.launch_then_read(KernelSequence::new(), &old).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e}");
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_a_sequence_runs_in_order_and_waits_once() {
    sequences(DeviceConfig::cpu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn gpu_a_sequence_runs_in_order_and_waits_once() {
    sequences(DeviceConfig::cuda(0)).await;
}

/// Every thread of many blocks writes one element, and adds to another without an
/// atomic: a race, as it would be on the GPU.
#[kernel]
pub fn racy_writes(x: &[f64], y: &mut [f64]) {
    let i = global_index();
    if i < x.len() {
        y[0] = x[i];
        y[1] += 1.0;
    }
}

/// A kernel whose threads race gets a wrong value on the CPU device, not undefined
/// behaviour: the emulation's element accesses are relaxed atomics (blocks run on
/// several OS threads at once), so the raced element holds one of the values written,
/// whole, and the racy count is at most the number of threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_racing_threads_get_a_written_value_not_undefined_behaviour() {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let n = 64 * 1024;
    let x = rand_vec(n);
    let gx = d.upload(x.clone()).await.unwrap();
    let mut gy = d.upload(vec![0.0f64; 2]).await.unwrap();
    racy_writes::launch(&d, LaunchConfig::for_elements(n, 64), &gx, &mut gy)
        .await
        .unwrap();
    let y = d.download(&gy).await.unwrap();
    assert!(x.contains(&y[0]), "{} is a value some thread wrote", y[0]);
    assert!(y[1] >= 1.0 && y[1] <= n as f64 && y[1].fract() == 0.0, "count {}", y[1]);
    system.shutdown().await;
}

/// A histogram in CUDA's spelling of an atomic: `atomic_add(&mut hist[b], 1)` is
/// `hist.atomic_add(b, 1)`.
#[kernel]
pub fn histogram_cuda_spelling(x: &[f32], hist: &mut [u32]) {
    let i = global_index();
    if i < x.len() {
        let b = (x[i].abs() * 8.0) as u32;
        atomic_add(&mut hist[b.min(7)], 1u32);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_cuda_spelled_atomics_are_the_methods() {
    let src = histogram_cuda_spelling::cuda_source();
    assert!(src.contains("k_atomic_add(&hist["), "{src}");
    let system = ActorSystem::new("k");
    let d = Device::open(&system, DeviceConfig::cpu()).await.unwrap();
    let x: Vec<f32> = rand_vec(10_000).iter().map(|&v| v as f32).collect();
    let gx = d.upload(x.clone()).await.unwrap();
    let mut hist = d.upload(vec![0u32; 8]).await.unwrap();
    histogram_cuda_spelling::launch(&d, LaunchConfig::for_elements(x.len(), 128), &gx, &mut hist)
        .await
        .unwrap();
    let mut want = [0u32; 8];
    for v in &x {
        want[((v.abs() * 8.0) as usize).min(7)] += 1;
    }
    assert_eq!(d.download(&hist).await.unwrap(), want);
    system.shutdown().await;
}

/// A kernel launched by name with arguments assembled at run time (what the Python
/// package's `Device.launch` does): `saxpy`'s f64 instance against float64, and each
/// wrong call a typed error.
async fn by_name(config: DeviceConfig) {
    use atomr_accel_cuda::kernel::dsl::registry::launch_by_name;
    use atomr_accel_cuda::wire::DynArgs;
    let system = ActorSystem::new("by-name");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let (x, y) = (rand_vec(n), rand_vec(n));
    let (gx, gy) = (d.upload(x.clone()).await.unwrap(), d.upload(y.clone()).await.unwrap());
    let cfg = LaunchConfig::for_elements(n, 128);
    let mut args = DynArgs::new();
    args.scalar(&2.5f64.to_le_bytes()).buffer(&gx).buffer(&gy);
    let call = launch_by_name("saxpy", "f64", cfg, args).unwrap();
    d.launch_kernel(call).await.unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(x, y)| 2.5 * x + y).collect();
    assert!(rel_err(&d.download(&gy).await.unwrap(), &want) < 1e-15);
    let wrong = |name: &str, dtypes: &str, build: &dyn Fn(&mut DynArgs)| {
        let mut a = DynArgs::new();
        build(&mut a);
        match launch_by_name(name, dtypes, cfg, a) {
            Err(GpuError::InvalidArgument(i)) => i.to_string(),
            other => panic!("{name} {dtypes}: expected InvalidArgument, got {other:?}"),
        }
    };
    assert!(
        wrong("no_such_kernel", "f32", &|_| {}).contains("saxpy"),
        "lists what there is"
    );
    assert!(wrong("saxpy", "i8", &|_| {}).contains("no instantiation"));
    // A 4-byte scalar where the f64 instance takes 8; an f64 buffer where it takes f32.
    assert!(wrong("saxpy", "f64", &|a| {
        a.scalar(&1.0f32.to_le_bytes()).buffer(&gx).buffer(&gy);
    })
    .contains("4 bytes of scalar"));
    assert!(wrong("saxpy", "f32", &|a| {
        a.scalar(&1.0f32.to_le_bytes()).buffer(&gx).buffer(&gy);
    })
    .contains("element type"));
    assert!(wrong("saxpy", "f64", &|a| {
        a.scalar(&1.0f64.to_le_bytes()).buffer(&gx);
    })
    .contains("too few"));
    assert!(wrong("saxpy", "f64", &|a| {
        a.scalar(&1.0f64.to_le_bytes()).buffer(&gx).buffer(&gy).scalar(&[0]);
    })
    .contains("more arguments"));
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_launches_by_name_on_the_cpu_device() {
    by_name(DeviceConfig::cpu()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn a_kernel_launches_by_name_on_the_gpu() {
    by_name(DeviceConfig::cuda(0)).await;
}

/// A chain across blocks: each block takes a ticket, waits (`atomic_load`) until the
/// block before it has published, reads its running total and publishes its own — what
/// a single-pass scan's look-back does. `state[0]` hands out tickets, `state[1 + k]` is
/// ticket `k`'s flag.
#[kernel]
pub fn chained_totals(state: &mut [u32], totals: &mut [f64]) {
    if thread_idx_x() == 0 {
        let me = state.atomic_add(0, 1u32) as usize;
        let mut before: f64 = 0.0;
        if me > 0 {
            while state.atomic_load(me) == 0 {
                thread_fence();
            }
            thread_fence();
            before = totals.atomic_load(me - 1);
        }
        totals[me] = before + (me + 1) as f64;
        thread_fence();
        state.atomic_exch(me + 1, 1u32);
    }
}

async fn chained_blocks(config: DeviceConfig) {
    let system = ActorSystem::new("k");
    let d = Device::open(&system, config).await.unwrap();
    let blocks = 300;
    let mut state = d.alloc::<u32>(blocks + 1).await.unwrap();
    let mut totals = d.alloc::<f64>(blocks).await.unwrap();
    let cfg = LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    chained_totals::launch(&d, cfg, &mut state, &mut totals).await.unwrap();
    let got = d.download(&totals).await.unwrap();
    let want: Vec<f64> = (0..blocks).map(|k| ((k + 1) * (k + 2) / 2) as f64).collect();
    assert_eq!(got, want);
    system.shutdown().await;
}

/// The lanes below `lane` (a `#[device] fn`: its result's type is Rust's to check, the
/// kernel's C++ takes it from the call).
#[device]
fn lanes_below(lane: u32) -> u32 {
    (1u32 << lane) - 1
}

/// `x` widened (the same, for an f64).
#[device]
fn widened(x: f32) -> f64 {
    x as f64
}

/// `count_ones` over integers of each width (a narrow signed one's sign extension not
/// counted) and on a `#[device] fn`'s result; `to_bits` of f32 and f64, the latter a
/// `#[device] fn`'s result; `from_bits` back (each sign bit flipped on the way).
#[kernel]
pub fn bit_counts_kernel(x: &[f32], w: &[u64], b: &[i8], out: &mut [u64]) {
    let i = global_index();
    if i < x.len() {
        let lane = (i % 32) as u32;
        out[6 * i] = x[i].to_bits() as u64;
        out[6 * i + 1] = widened(x[i]).to_bits();
        out[6 * i + 2] = w[i].count_ones() as u64;
        out[6 * i + 3] = b[i].count_ones() as u64;
        out[6 * i + 4] = lanes_below(lane).count_ones() as u64 + ((x[i].to_bits().count_ones() as u64) << 8);
        let minus = f32::from_bits(x[i].to_bits() ^ 0x8000_0000u32);
        let wide_minus = f64::from_bits(widened(x[i]).to_bits() ^ (1u64 << 63));
        out[6 * i + 5] = (minus.to_f64() + wide_minus).to_bits();
    }
}

async fn bit_counts(config: DeviceConfig) {
    let system = ActorSystem::new("bit-counts");
    let d = Device::open(&system, config).await.unwrap();
    let n = 1000;
    let x: Vec<f32> = rand_vec(n).iter().map(|&v| (v * 1e3 - 500.0) as f32).collect();
    let w: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
    let b: Vec<i8> = (0..n).map(|i| (i as i64 * 37 - 300) as i8).collect();
    let (gx, gw, gb) = (
        d.upload(x.clone()).await.unwrap(),
        d.upload(w.clone()).await.unwrap(),
        d.upload(b.clone()).await.unwrap(),
    );
    let mut out = d.alloc::<u64>(6 * n).await.unwrap();
    bit_counts_kernel::launch(&d, LaunchConfig::for_elements(n, 128), &gx, &gw, &gb, &mut out)
        .await
        .unwrap();
    let got = d.download(&out).await.unwrap();
    for i in 0..n {
        let lane = (i % 32) as u32;
        let want = [
            x[i].to_bits() as u64,
            (x[i] as f64).to_bits(),
            w[i].count_ones() as u64,
            b[i].count_ones() as u64,
            ((1u32 << lane) - 1).count_ones() as u64 + ((x[i].to_bits().count_ones() as u64) << 8),
            (-2.0 * x[i] as f64).to_bits(),
        ];
        assert_eq!(&got[6 * i..6 * i + 6], &want, "element {i}");
    }
    system.shutdown().await;
}
