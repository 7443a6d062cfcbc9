//! Thread-block cluster launches through the device (`Device::launch_cluster`, the
//! `ModuleActor`) vs raw cudarc (`cuLaunchKernelEx` with the cluster attribute, on a
//! module cudarc compiled and loaded itself) in the same process, in both orders of
//! `support/alternate.rs`. The kernel sums an f32 array: each block reduces its part in
//! shared memory, and each cluster's first block adds its neighbours' partial sums
//! through distributed shared memory. Two sizes: 2^26 elements (a quarter GB read, ~0.1
//! ms) and 2^16 (the per-call floor). Needs compute capability 9.0+.

use std::ffi::c_void;

use atomr_accel_cuda::hopper::LaunchSpec;
use atomr_accel_cuda::module::{KernelArgs, KernelSource};
use atomr_accel_cuda::prelude::*;
use cudarc::driver::sys as ds;
use cudarc::driver::{DevicePtr, DevicePtrMut};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/random.rs"]
mod random;

use alternate::{measure, Order};
use gpu_bench::run_gpu;
use random::random_f32;

/// Blocks per cluster, threads per block.
const CLUSTER: u32 = 4;
const THREADS: u32 = 256;

const SOURCE: &str = r#"
extern "C" __global__ void cluster_sum(const float* x, float* out, unsigned n) {
    __shared__ float part[256];
    __shared__ float block_total;
    float s = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) block_total = part[0];
    unsigned rank, size;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    if (rank == 0 && threadIdx.x == 0) {
        float t = 0.0f;
        unsigned local = (unsigned)__cvta_generic_to_shared(&block_total);
        for (unsigned r = 0; r < size; r++) {
            unsigned remote;
            float v;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(r));
            asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
            t += v;
        }
        out[blockIdx.x / size] = t;
    }
    // No block leaves while its shared memory may still be read.
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}
"#;

fn main() {
    run_gpu("hopper", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        let info = dev.ready().await.unwrap();
        if info.compute_capability.is_none_or(|(major, _)| major < 9) {
            println!(
                "hopper bench: cluster launches need compute capability 9.0+ ({:?}); nothing measured",
                info.compute_capability
            );
            return;
        }
        let ours_module = dev
            .load_module(KernelSource::new(SOURCE, &["cluster_sum"]))
            .await
            .unwrap();
        let ptx = compile_ptx_with_opts(
            SOURCE,
            CompileOptions {
                arch: Some("sm_90"),
                ..Default::default()
            },
        )
        .unwrap();
        let raw_fn = ctx.load_module(ptx).unwrap().load_function("cluster_sum").unwrap();
        // Four blocks per SM, whole clusters.
        let sms = ctx
            .attribute(ds::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .unwrap() as u32;
        let blocks = sms * 4 / CLUSTER * CLUSTER;
        for n in [1usize << 26, 1 << 16] {
            let host = random_f32(n, n as u64);
            let want: f64 = host.iter().map(|v| *v as f64).sum();
            let clusters = (blocks / CLUSTER) as usize;
            let x_raw = stream.clone_htod(&host).unwrap();
            let mut out_raw = stream.alloc_zeros::<f32>(clusters).unwrap();
            let x = dev.upload(host).await.unwrap();
            let out = dev.alloc::<f32>(clusters).await.unwrap();
            let cfg = LaunchConfig {
                grid: (blocks, 1, 1),
                block: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let spec = LaunchSpec::new(cfg, (CLUSTER, 1, 1));
            let raw_launch = |out_raw: &mut cudarc::driver::CudaSlice<f32>| {
                let (px, _rx) = x_raw.device_ptr(&stream);
                let (po, _ro) = out_raw.device_ptr_mut(&stream);
                let mut n32 = n as u32;
                let (mut px, mut po) = (px, po);
                let mut params = [
                    &mut px as *mut u64 as *mut c_void,
                    &mut po as *mut u64 as *mut c_void,
                    &mut n32 as *mut u32 as *mut c_void,
                ];
                // SAFETY: a zeroed attribute is valid plain data; id and value set below.
                let mut attr: ds::CUlaunchAttribute = unsafe { std::mem::zeroed() };
                attr.id = ds::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attr.value.clusterDim = ds::CUlaunchAttributeValue_union__bindgen_ty_1 { x: CLUSTER, y: 1, z: 1 };
                let lc = ds::CUlaunchConfig {
                    gridDimX: blocks,
                    gridDimY: 1,
                    gridDimZ: 1,
                    blockDimX: THREADS,
                    blockDimY: 1,
                    blockDimZ: 1,
                    sharedMemBytes: 0,
                    hStream: stream.cu_stream(),
                    attrs: &mut attr,
                    numAttrs: 1,
                };
                // SAFETY: `cluster_sum(const float*, float*, unsigned)` gets two device
                // addresses of this context (n inputs, one output per cluster) and n.
                unsafe { ds::cuLaunchKernelEx(&lc, raw_fn.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }
                    .result()
                    .unwrap();
            };
            let ours_launch = || async {
                // SAFETY: the same kernel and arguments as the raw launch.
                unsafe {
                    dev.launch_cluster(
                        &ours_module,
                        "cluster_sum",
                        spec,
                        KernelArgs::new().buf(&x).buf_mut(&out).scalar(n as u32),
                    )
                }
                .await
                .unwrap()
            };
            // Both paths compute the sum (f32 partials: relative 1e-4 of the magnitude).
            raw_launch(&mut out_raw);
            let raw_sum: f64 = stream.clone_dtoh(&out_raw).unwrap().iter().map(|v| *v as f64).sum();
            ours_launch().await;
            let ours_sum: f64 = dev.download(&out).await.unwrap().iter().map(|v| *v as f64).sum();
            let scale = (n as f64).sqrt().max(want.abs());
            assert!((raw_sum - want).abs() < 1e-4 * scale, "raw {raw_sum} vs {want}");
            assert!((ours_sum - want).abs() < 1e-4 * scale, "ours {ours_sum} vs {want}");
            for order in Order::ALL {
                let (r, o) = measure(
                    order,
                    1,
                    30,
                    || {
                        raw_launch(&mut out_raw);
                        stream.synchronize().unwrap();
                    },
                    ours_launch,
                )
                .await;
                println!(
                    "RESULT | hopper.cluster_sum n=2^{} ({blocks} blocks in clusters of {CLUSTER}) ({order:?}) | actor {:.3} ms, raw cudarc {:.3} ms, ratio {:.3}",
                    n.trailing_zeros(),
                    o * 1e3,
                    r * 1e3,
                    r / o
                );
            }
        }
    });
}
