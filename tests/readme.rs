//! README's "Writing a GPU actor" snippet, compiled and run on the CPU device as shown,
//! and a check that README still shows exactly these lines (between the `README:`
//! markers below), so the page cannot drift from code that compiles.

mod common;

use atomr_accel_cuda::prelude::*;
use common::rand_vec;

#[rustfmt::skip]
// README: begin
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
// README: end

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_actor_runs_as_shown() -> Result<(), GpuError> {
    let system = ActorSystem::new("readme");
    let dev = Device::open(&system, DeviceConfig::cpu()).await?;
    let host: Vec<f32> = rand_vec(1000).into_iter().map(|v| v as f32).collect();
    let x = dev.upload(host.clone()).await?;
    // README: begin
    // NormalizerMsg, NormalizerRef and Normalizer::gpu_props are generated. `spawn_on` runs
    // the actor on a thread of its own with a GPU of its own; the factory builds each
    // incarnation (again after a restart, with a fresh ActorGpu):
    let n = NormalizerRef::spawn_on(&dev, &system, "normalizer", |gpu| Normalizer { gpu })?;
    let norm = n.normalize::<f32>(x).await?;
    // README: end
    let want = host.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt();
    assert!((norm as f64 - want).abs() <= 1e-5 * want, "norm {norm} vs {want}");
    // `dev` is still usable after the spawn: the factory captured a clone.
    let y = dev.download(&dev.upload(vec![1.0f32; 4]).await?).await?;
    assert_eq!(y, vec![1.0f32; 4]);
    Ok(())
}

/// The lines between each pair of `README: begin` / `README: end` markers of this
/// file, without their common indentation.
fn marked_regions(source: &str) -> String {
    let mut out = vec![];
    let mut block: Option<Vec<&str>> = None;
    for line in source.lines() {
        match (line.trim(), &mut block) {
            ("// README: begin", None) => block = Some(vec![]),
            ("// README: end", Some(b)) => {
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

#[test]
fn readme_shows_this_code() {
    let readme = include_str!("../README.md");
    let start = readme.find("## Writing a GPU actor").expect("README has the section");
    let block = &readme[start..];
    let code_start = block.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let code = &block[code_start..code_start + block[code_start..].find("```").expect("closed")];
    assert_eq!(code.trim_end(), marked_regions(include_str!("readme.rs")).trim_end());
}
