//! Hopper primitives: cluster launches (`cuLaunchKernelEx`) and TMA tensor maps
//! (`cuTensorMapEncodeTiled`). The validation runs everywhere (CPU device in CI); the
//! launches and the TMA copy run on the H200.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::hopper::{LaunchSpec, Swizzle, TensorMapBuilder};
use atomr_accel_cuda::module::{KernelArgs, KernelSource, LaunchConfig};
use atomr_accel_cuda::{Device, DeviceConfig, GpuError};

/// Each block records its cluster id, its rank in the cluster, the cluster's size, and
/// the value its right-hand neighbour put in *its own* shared memory (read through
/// distributed shared memory — which only works if the cluster really is co-scheduled).
const CLUSTER_SRC: &str = r#"
__device__ unsigned cluster_rank() { unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ unsigned cluster_size() { unsigned r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
__device__ unsigned cluster_id_x() { unsigned r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r; }
__device__ void cluster_sync() { asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory"); }

extern "C" __global__ void cluster_ids(unsigned* out) {
    __shared__ unsigned mine;
    unsigned rank = cluster_rank(), size = cluster_size();
    if (threadIdx.x == 0) mine = blockIdx.x * 1000u + rank;
    cluster_sync();
    if (threadIdx.x == 0) {
        unsigned local = (unsigned)__cvta_generic_to_shared(&mine), remote, v;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"((rank + 1) % size));
        asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
        out[blockIdx.x * 4 + 0] = cluster_id_x();
        out[blockIdx.x * 4 + 1] = rank;
        out[blockIdx.x * 4 + 2] = size;
        out[blockIdx.x * 4 + 3] = v;
    }
    cluster_sync(); // keep this block's shared memory alive until its neighbour has read
}
"#;

on_both! {
    tensor_map_rules_are_checked => tensor_map_rules;
}

/// Every documented rule of `cuTensorMapEncodeTiled` is an `InvalidArgument` naming it,
/// before any device work; a valid map on the CPU device is `Unsupported`.
async fn tensor_map_rules(config: DeviceConfig) {
    let sys = ActorSystem::new("tma-rules");
    let d = Device::open(&sys, config).await.unwrap();
    let is_gpu = d.state().info.and_then(|i| i.compute_capability).is_some();
    let buf = d.alloc::<f32>(64 * 64).await.unwrap();
    let bad: Vec<(&str, TensorMapBuilder<f32>)> = vec![
        ("rank 0", TensorMapBuilder::new(&buf, &[], &[])),
        ("rank 6", TensorMapBuilder::new(&buf, &[2; 6], &[4; 6])),
        ("box rank", TensorMapBuilder::new(&buf, &[64, 64], &[32])),
        ("zero dim", TensorMapBuilder::new(&buf, &[0, 64], &[32, 8])),
        ("box > 256", TensorMapBuilder::new(&buf, &[64, 64], &[32, 300])),
        ("inner box 20 bytes", TensorMapBuilder::new(&buf, &[64, 64], &[5, 8])),
        (
            "stride not 16-aligned",
            TensorMapBuilder::new(&buf, &[60, 64], &[32, 8]).strides(&[244]),
        ),
        (
            "overlapping stride",
            TensorMapBuilder::new(&buf, &[64, 64], &[32, 8]).strides(&[128]),
        ),
        (
            "stride count",
            TensorMapBuilder::new(&buf, &[64, 64], &[32, 8]).strides(&[256, 256]),
        ),
        ("beyond the buffer", TensorMapBuilder::new(&buf, &[64, 65], &[32, 8])),
        (
            "swizzle span",
            TensorMapBuilder::new(&buf, &[64, 64], &[64, 8]).swizzle(Swizzle::B128),
        ),
        (
            "element stride 9",
            TensorMapBuilder::new(&buf, &[64, 64], &[32, 8]).element_strides(&[1, 9]),
        ),
    ];
    for (what, b) in bad {
        match b.build() {
            Err(GpuError::InvalidArgument(m)) => assert!(m.starts_with("tensor map:"), "{what}: {m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let ints = d.alloc::<i32>(64).await.unwrap();
    assert!(matches!(
        TensorMapBuilder::new(&ints, &[64], &[16]).oob_nan(true).build(),
        Err(GpuError::InvalidArgument(_))
    ));
    let good = TensorMapBuilder::new(&buf, &[64, 64], &[32, 16])
        .swizzle(Swizzle::B128)
        .build();
    if is_gpu {
        assert_eq!(good.unwrap().box_bytes(), 32 * 16 * 4);
    } else {
        assert!(matches!(good, Err(GpuError::Unsupported(_))), "{good:?}");
    }
    sys.shutdown().await;
}

/// A cluster launch on the CPU device is `Unsupported` (modules need a GPU).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_launch_is_unsupported_on_the_cpu_device() {
    let sys = ActorSystem::new("cluster-cpu");
    let d = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let e = d
        .load_module(KernelSource::new(CLUSTER_SRC, &["cluster_ids"]))
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::Unsupported(_)), "{e}");
    sys.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn cluster_launch_groups_blocks_and_shares_memory() {
    let sys = ActorSystem::new("cluster");
    let d = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let m = d
        .load_module(KernelSource::new(CLUSTER_SRC, &["cluster_ids"]))
        .await
        .unwrap();
    for (blocks, cluster) in [(16u32, 4u32), (24, 2), (8, 8), (5, 1)] {
        let out = d.alloc::<u32>(blocks as usize * 4).await.unwrap();
        let cfg = LaunchConfig {
            grid: (blocks, 1, 1),
            block: (64, 1, 1),
            shared_mem_bytes: 0,
        };
        let spec = LaunchSpec::new(cfg, (cluster, 1, 1));
        // SAFETY: `cluster_ids(unsigned* out)` takes one written u32 buffer.
        unsafe { d.launch_cluster(&m, "cluster_ids", spec, KernelArgs::new().buf_mut(&out)) }
            .await
            .unwrap();
        let got = d.download(&out).await.unwrap();
        for b in 0..blocks {
            let rank = b % cluster;
            let next = (rank + 1) % cluster;
            let want = [b / cluster, rank, cluster, (b - rank + next) * 1000 + next];
            assert_eq!(
                &got[b as usize * 4..b as usize * 4 + 4],
                &want,
                "block {b}, cluster {cluster}"
            );
        }
    }
    // Shapes the device refuses are typed errors, and the device keeps serving.
    let out = d.alloc::<u32>(64).await.unwrap();
    let cfg = LaunchConfig {
        grid: (6, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let in_16 = LaunchConfig {
        grid: (16, 1, 1),
        ..cfg
    };
    let refused = [
        (LaunchSpec::new(cfg, (4, 1, 1)), "a grid of 6 in clusters of 4"),
        (LaunchSpec::new(in_16, (16, 1, 1)), "16 blocks per cluster"),
        (LaunchSpec::new(in_16, (0, 1, 1)), "a zero cluster"),
    ];
    for (spec, what) in refused {
        // SAFETY: as above.
        let e = unsafe { d.launch_cluster(&m, "cluster_ids", spec, KernelArgs::new().buf_mut(&out)) }
            .await
            .unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{what}: {e}");
    }
    let spec = LaunchSpec::new(
        LaunchConfig {
            grid: (16, 1, 1),
            ..cfg
        },
        (2, 1, 1),
    );
    // SAFETY: as above.
    unsafe { d.launch_cluster(&m, "cluster_ids", spec, KernelArgs::new().buf_mut(&out)) }
        .await
        .unwrap();
    sys.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn tma_moves_a_tile_with_padding_and_out_of_bounds_fill() {
    let sys = ActorSystem::new("tma");
    let d = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    common::tma::check_tile(&d).await;
    sys.shutdown().await;
}
