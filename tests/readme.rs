//! README's three code snippets ("Plain `Device` calls", "Writing a kernel", "Writing a
//! GPU actor"), compiled and run on the CPU device as shown, each checked against a
//! float64 reference, and a check that README still shows exactly these lines (between
//! the `README(section): begin` / `end` markers below), so the page cannot drift from
//! code that compiles.

mod common;

use atomr_accel_cuda::prelude::*;
use common::{gemm_ref, rand_vec, rel_err};

/// Fresh random `f32`s in [-1, 1): what README's snippet calls `rand_f32`.
fn rand_f32(n: usize) -> Vec<f32> {
    rand_vec(n).into_iter().map(|v| v as f32).collect()
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_device_calls_run_as_shown() -> Result<(), GpuError> {
    // README(device): begin
    let system = ActorSystem::new("app");
    let dev = Device::open(&system, DeviceConfig::auto()).await?; // the GPU, else the CPU device
    let (m, n, k) = (64, 32, 48); // column-major, as in cuBLAS
    let a = dev.upload(rand_f32(m * k)).await?;
    let b = dev.upload(rand_f32(k * n)).await?;
    let c = dev.alloc::<f32>(m * n).await?;
    dev.gemm(Gemm::<f32>::new(m, n, k), &a, &b, &c).await?; // cuBLAS, or the gemm crate
    let total = dev.sum(&c).await?; // reductions, scans and sorts are #[kernel]s of ours
    let biggest = dev.argmax(&c).await?;
    let host: Vec<f32> = dev.download(&c).await?;
    // README(device): end
    let (ha, hb) = (widen(&dev.download(&a).await?), widen(&dev.download(&b).await?));
    let mut want = vec![0.0; m * n];
    gemm_ref(false, false, m, n, k, 1.0, &ha, m, &hb, k, 0.0, &mut want, m);
    assert!(rel_err(&widen(&host), &want) < 1e-5);
    let want_sum: f64 = want.iter().sum();
    let scale: f64 = want.iter().map(|v| v.abs()).sum();
    assert!((total as f64 - want_sum).abs() <= 1e-5 * scale, "{total} vs {want_sum}");
    let first_max = host
        .iter()
        .enumerate()
        .fold(0, |best, (i, &v)| if v > host[best] { i } else { best });
    assert_eq!(biggest, Some(first_max));
    system.shutdown().await;
    Ok(())
}

#[rustfmt::skip]
// README(kernel): begin
#[kernel]
pub fn saxpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}
// README(kernel): end

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_kernel_runs_as_shown() -> Result<(), GpuError> {
    let system = ActorSystem::new("readme-kernel");
    let dev = Device::open(&system, DeviceConfig::cpu()).await?;
    let n = 1000;
    let (hx, hy) = (rand_f32(n), rand_f32(n));
    let x = dev.upload(hx.clone()).await?;
    let mut y = dev.upload(hy.clone()).await?;
    // README(kernel): begin
    // `saxpy` is now a module: a typed launcher (compiled by NVRTC once per device and dtype,
    // disk-cached; emulated on the CPU device), the CUDA source, a registry entry.
    saxpy::launch::<f32>(&dev, LaunchConfig::for_elements(n, 256), 2.0, &x, &mut y).await?;
    println!("{}", saxpy::cuda_source::<f32>());
    // README(kernel): end
    let got = widen(&dev.download(&y).await?);
    let want: Vec<f64> = hx.iter().zip(&hy).map(|(&x, &y)| 2.0 * x as f64 + y as f64).collect();
    assert!(rel_err(&got, &want) < 1e-6);
    assert!(saxpy::cuda_source::<f32>().contains("saxpy"));
    system.shutdown().await;
    Ok(())
}

#[rustfmt::skip]
// README(actor): begin
struct Normalizer { gpu: ActorGpu }

#[gpu_actor(supervision(resume_on = [InvalidArgument]))]
impl Normalizer {
    /// Scales `x` to unit length; returns the old norm.
    #[handler(dtypes(f32, f64))]
    async fn normalize<T: Blas1Scalar>(&mut self, x: GpuRef<T>) -> Result<T, GpuError> {
        let n = self.gpu.nrm2(&x).await?;
        self.gpu.scal(T::from_f64(1.0) / n, &x).await?;
        Ok(n)
    }
}
// README(actor): end

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_actor_runs_as_shown() -> Result<(), GpuError> {
    let system = ActorSystem::new("readme");
    let dev = Device::open(&system, DeviceConfig::cpu()).await?;
    let host = rand_f32(1000);
    let x = dev.upload(host.clone()).await?;
    // README(actor): begin
    // NormalizerMsg, NormalizerRef and Normalizer::gpu_props are generated. `spawn_on` runs
    // the actor on a thread of its own with a GPU of its own; the factory builds each
    // incarnation (again after a restart, with a fresh ActorGpu):
    let n = NormalizerRef::spawn_on(&dev, &system, "normalizer", |gpu| Normalizer { gpu })?;
    let norm = n.normalize::<f32>(x).await?;
    // README(actor): end
    let want = host.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt();
    assert!((norm as f64 - want).abs() <= 1e-5 * want, "norm {norm} vs {want}");
    // `dev` is still usable after the spawn: the factory captured a clone.
    let y = dev.download(&dev.upload(vec![1.0f32; 4]).await?).await?;
    assert_eq!(y, vec![1.0f32; 4]);
    Ok(())
}

/// The lines between each pair of `README(section): begin` / `README(section): end`
/// markers of this file, each region without its common indentation.
fn marked_regions(source: &str, section: &str) -> String {
    let (begin, end) = (
        format!("// README({section}): begin"),
        format!("// README({section}): end"),
    );
    let mut out = vec![];
    let mut block: Option<Vec<&str>> = None;
    for line in source.lines() {
        match (line.trim(), &mut block) {
            (l, None) if l == begin => block = Some(vec![]),
            (l, Some(b)) if l == end => {
                let indent = b
                    .iter()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| l.len() - l.trim_start().len())
                    .min()
                    .unwrap_or(0);
                out.extend(b.iter().map(|l| l.get(indent..).unwrap_or("").to_string()));
                block = None;
            }
            (_, Some(b)) => b.push(line),
            _ => {}
        }
    }
    out.join("\n")
}

/// The first ```rust block after README's heading `heading`.
fn readme_block(heading: &str) -> String {
    let readme = include_str!("../README.md");
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README has the section {heading:?}"));
    let block = &readme[start..];
    let code_start = block.find("```rust\n").expect("a rust block") + "```rust\n".len();
    block[code_start..code_start + block[code_start..].find("```").expect("closed")].to_string()
}

#[test]
fn readme_shows_this_code() {
    let source = include_str!("readme.rs");
    for (heading, section) in [
        ("## Plain `Device` calls", "device"),
        ("## Writing a kernel", "kernel"),
        ("## Writing a GPU actor", "actor"),
    ] {
        let shown = readme_block(heading);
        assert_eq!(
            shown.trim_end(),
            marked_regions(source, section).trim_end(),
            "README's {heading:?}"
        );
    }
}
