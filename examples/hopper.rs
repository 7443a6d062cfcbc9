//! Hopper primitives: a thread-block cluster launch whose blocks read each other's shared
//! memory, and a TMA tensor-map copy of a tile. Needs a GPU of compute capability 9.0+;
//! elsewhere (the CPU device, older GPUs) it prints why and exits cleanly.
//!
//! `cargo run --release --example hopper`

use atomr_accel_cuda::hopper::{LaunchSpec, TensorMapBuilder};
use atomr_accel_cuda::module::{KernelArgs, KernelSource};
use atomr_accel_cuda::prelude::*;

/// Each block stores its id in shared memory; after a cluster barrier it reads its
/// right-hand neighbour's through distributed shared memory.
const CLUSTER: &str = r#"
extern "C" __global__ void neighbours(unsigned* out) {
    __shared__ unsigned mine;
    unsigned rank, size, remote, v;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    if (threadIdx.x == 0) mine = blockIdx.x;
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
    if (threadIdx.x == 0) {
        unsigned local = (unsigned)__cvta_generic_to_shared(&mine);
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"((rank + 1) % size));
        asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
        out[blockIdx.x] = v;
    }
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}
"#;

/// One TMA load of a 32×8 f32 box into shared memory, then a plain copy out.
const TMA: &str = r#"
struct __align__(64) TmaDesc { unsigned long long v[16]; };
extern "C" __global__ void tile(const __grid_constant__ TmaDesc map, float* out, int x0, int y0, unsigned bytes) {
    __shared__ __align__(128) float t[32 * 8];
    __shared__ __align__(8) unsigned long long bar;
    unsigned b = (unsigned)__cvta_generic_to_shared(&bar), s = (unsigned)__cvta_generic_to_shared(t);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(s), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x0), "r"(y0), "r"(b) : "memory");
    }
    __syncthreads();
    asm volatile("{\n\t.reg .pred p;\n\tW:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t@!p bra W;\n\t}" :: "r"(b) : "memory");
    for (int i = threadIdx.x; i < 32 * 8; i += blockDim.x) out[i] = t[i];
}
"#;

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let system = ActorSystem::new("hopper");
    let device = Device::open(&system, DeviceConfig::auto()).await?;
    let info = device.ready().await?;
    println!("device: {} ({:?})", info.name, info.backend);
    match info.compute_capability {
        Some((major, _)) if major >= 9 => {}
        other => {
            println!("cluster launches and TMA need compute capability 9.0+ ({other:?}): nothing to show here");
            system.shutdown().await;
            return Ok(());
        }
    }

    let m = device.load_module(KernelSource::new(CLUSTER, &["neighbours"])).await?;
    let blocks = 16u32;
    let out = device.alloc::<u32>(blocks as usize).await?;
    let cfg = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `neighbours(unsigned*)` takes one written u32 buffer.
    unsafe {
        device.launch_cluster(
            &m,
            "neighbours",
            LaunchSpec::new(cfg, (4, 1, 1)),
            KernelArgs::new().buf_mut(&out),
        )
    }
    .await?;
    let got = device.download(&out).await?;
    for (b, v) in got.iter().enumerate() {
        let b = b as u32;
        assert_eq!(*v, b - b % 4 + (b % 4 + 1) % 4, "block {b}");
    }
    println!("cluster launch, 16 blocks in clusters of 4: each read its neighbour's shared memory {got:?}");

    let (rows, cols) = (64usize, 96usize);
    let host: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let src = device.upload(host.clone()).await?;
    let map = TensorMapBuilder::new(&src, &[cols as u64, rows as u64], &[32, 8]).build()?;
    let tm = device.load_module(KernelSource::new(TMA, &["tile"])).await?;
    let dst = device.alloc::<f32>(32 * 8).await?;
    let (x0, y0) = (40i32, 12i32);
    let args = KernelArgs::new()
        .tensor_map(&map)
        .buf_mut(&dst)
        .scalar(x0)
        .scalar(y0)
        .scalar(map.box_bytes() as u32);
    let one = LaunchConfig {
        grid: (1, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `tile(TmaDesc, float*, int, int, unsigned)` matches the arguments.
    unsafe { device.launch(&tm, "tile", one, args) }.await?;
    let t = device.download(&dst).await?;
    for r in 0..8 {
        for c in 0..32 {
            assert_eq!(t[r * 32 + c], host[(y0 as usize + r) * cols + x0 as usize + c]);
        }
    }
    println!("TMA: a 32x8 tile at ({x0}, {y0}) of a {rows}x{cols} matrix copied exactly");
    system.shutdown().await;
    Ok(())
}
