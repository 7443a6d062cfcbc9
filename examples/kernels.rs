//! `#[kernel]` examples: saxpy, a block reduction with shared memory, a 2D stencil and a
//! row-wise softmax — each checked against a CPU reference. Runs on GPU 0 when there is
//! one, else on the CPU device's emulated grid.
//!
//! `cargo run --release --example kernels`

use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::{kernel, kernel::dsl::prelude::AtomicAdd};

/// Fresh random inputs (shared with the benches).
#[path = "../benches/support/random.rs"]
mod random;

use random::random_f32;

/// y = a·x + y.
#[kernel]
pub fn saxpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// Sum of `x` into `out[0]`: a grid-stride loop, a shared-memory tree per block, one
/// atomic per block.
#[kernel]
pub fn sum<T: Float + AtomicAdd>(x: &[T], out: &mut [T]) {
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

/// One Jacobi step of the 2D heat equation on an `n × m` grid (row-major).
#[kernel]
pub fn heat_step(n: usize, m: usize, src: &[f32], dst: &mut [f32]) {
    let c = global_index();
    let r = global_index_y();
    if r < n && c < m {
        let k = r * m + c;
        if r == 0 || c == 0 || r == n - 1 || c == m - 1 {
            dst[k] = src[k];
        } else {
            dst[k] = 0.25 * (src[k - 1] + src[k + 1] + src[k - m] + src[k + m]);
        }
    }
}

/// Softmax of each row of a `rows × cols` matrix; one block of 128 threads per row.
#[kernel]
pub fn softmax(cols: usize, x: &[f32], y: &mut [f32]) {
    let mut red = shared_array::<f32, 128>();
    let t = thread_idx_x();
    let base = block_idx_x() * cols;
    let mut m = f32::NEG_INFINITY;
    for j in (t..cols).step_by(block_dim_x()) {
        m = m.max(x[base + j]);
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
    let mut acc: f32 = 0.0;
    for j in (t..cols).step_by(block_dim_x()) {
        acc += (x[base + j] - mx).exp();
    }
    red[t] = acc;
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
        y[base + j] = (x[base + j] - mx).exp() / total;
    }
}

fn max_rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .fold(0.0, |m, (g, w)| m.max((*g as f64 - w).abs() / scale))
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let system = ActorSystem::new("kernels");
    let d = Device::open(&system, DeviceConfig::auto()).await?;
    let info = d.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);
    let summary = precompile_all(&d).await?;
    println!("precompile: {summary}");

    let n = 1 << 20;
    let (x, y) = (random_f32(n, 1), random_f32(n, 2));
    let xd = d.upload(x.clone()).await?;
    let mut yd = d.upload(y.clone()).await?;
    let t = std::time::Instant::now();
    saxpy::launch::<f32>(&d, LaunchConfig::for_elements(n, 256), 2.0, &xd, &mut yd).await?;
    let dt = t.elapsed();
    let want: Vec<f64> = x.iter().zip(&y).map(|(&a, &b)| 2.0 * a as f64 + b as f64).collect();
    let e = max_rel_err(&d.download(&yd).await?, &want);
    println!("saxpy    n={n}: max rel err {e:.1e} in {dt:.2?}");
    assert!(e < 1e-6);

    let mut out = d.upload(vec![0.0f32]).await?;
    let cfg = LaunchConfig {
        grid: (64, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let t = std::time::Instant::now();
    sum::launch::<f32>(&d, cfg, &xd, &mut out).await?;
    let dt = t.elapsed();
    let got = d.download(&out).await?[0] as f64;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    println!("sum      n={n}: {got:.4} vs {want:.4} in {dt:.2?}");
    assert!((got - want).abs() < 1e-3 * (n as f64).sqrt());

    let (rows, cols) = (512, 384);
    let grid0 = random_f32(rows * cols, 3);
    let src = d.upload(grid0.clone()).await?;
    let mut dst = d.alloc::<f32>(rows * cols).await?;
    let cfg = LaunchConfig {
        grid: ((cols as u32).div_ceil(16), (rows as u32).div_ceil(16), 1),
        block: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let t = std::time::Instant::now();
    heat_step::launch(&d, cfg, rows, cols, &src, &mut dst).await?;
    let dt = t.elapsed();
    let g = |k: usize| grid0[k] as f64;
    let want: Vec<f64> = (0..rows * cols)
        .map(|k| {
            let (r, c) = (k / cols, k % cols);
            if r == 0 || c == 0 || r == rows - 1 || c == cols - 1 {
                g(k)
            } else {
                0.25 * (g(k - 1) + g(k + 1) + g(k - cols) + g(k + cols))
            }
        })
        .collect();
    let e = max_rel_err(&d.download(&dst).await?, &want);
    println!("stencil  {rows}x{cols}: max rel err {e:.1e} in {dt:.2?}");
    assert!(e < 1e-6);

    // Eight steps as one sequence, ping-ponging between two buffers: the launches go to
    // the device in one request and are waited for once.
    let steps = 8;
    let (mut a, mut b) = (d.upload(grid0.clone()).await?, d.alloc::<f32>(rows * cols).await?);
    let mut sequence = KernelSequence::new();
    for _ in 0..steps {
        sequence = sequence.then(heat_step::call(cfg, rows, cols, &a, &mut b));
        std::mem::swap(&mut a, &mut b);
    }
    let t = std::time::Instant::now();
    d.launch_all(sequence).await?;
    let dt = t.elapsed();
    let mut want: Vec<f64> = grid0.iter().map(|&v| v as f64).collect();
    for _ in 0..steps {
        let g = want.clone();
        for r in 1..rows - 1 {
            for c in 1..cols - 1 {
                let k = r * cols + c;
                want[k] = 0.25 * (g[k - 1] + g[k + 1] + g[k - cols] + g[k + cols]);
            }
        }
    }
    let e = max_rel_err(&d.download(&a).await?, &want);
    println!("stencil  {steps} steps in one launch_all: max rel err {e:.1e} in {dt:.2?}");
    assert!(e < 1e-5);

    let logits: Vec<f32> = random_f32(rows * cols, 4).iter().map(|v| v * 6.0).collect();
    let xd = d.upload(logits.clone()).await?;
    let mut yd = d.alloc::<f32>(rows * cols).await?;
    let cfg = LaunchConfig {
        grid: (rows as u32, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let t = std::time::Instant::now();
    softmax::launch(&d, cfg, cols, &xd, &mut yd).await?;
    let dt = t.elapsed();
    let mut want = vec![0.0f64; rows * cols];
    for r in 0..rows {
        let row = &logits[r * cols..(r + 1) * cols];
        let mx = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let total: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for (j, &v) in row.iter().enumerate() {
            want[r * cols + j] = (v as f64 - mx).exp() / total;
        }
    }
    let e = max_rel_err(&d.download(&yd).await?, &want);
    println!("softmax  {rows}x{cols}: max rel err {e:.1e} in {dt:.2?}");
    assert!(e < 1e-5);

    println!("all four kernels match their CPU references");
    system.shutdown().await;
    Ok(())
}
