//! A TMA tile copy through a raw module (`cuTensorMapEncodeTiled` + `cp.async.bulk.tensor`),
//! checked element by element: what `tests/hopper.rs` runs in process and
//! `tests/isolated.rs` through an isolated device's worker (which encodes the map there).

use atomr_accel_cuda::hopper::TensorMapBuilder;
use atomr_accel_cuda::module::{KernelArgs, KernelSource, LaunchConfig};
use atomr_accel_cuda::Device;

use super::rand_vec;

/// One TMA load of a 32×16 box at (x0, y0) into shared memory, then a plain copy out.
pub const TMA_SRC: &str = r#"
struct __align__(64) TmaDesc { unsigned long long v[16]; };
#define BOX_W 32
#define BOX_H 16
extern "C" __global__ void tma_tile(const __grid_constant__ TmaDesc map, float* out, int x0, int y0, unsigned bytes) {
    __shared__ __align__(128) float tile[BOX_W * BOX_H];
    __shared__ __align__(8) unsigned long long bar;
    unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar_addr), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(tile_addr), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x0), "r"(y0), "r"(bar_addr)
                     : "memory");
    }
    __syncthreads();
    asm volatile("{\n\t.reg .pred p;\n\tWAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t@!p bra WAIT;\n\t}"
                 :: "r"(bar_addr) : "memory");
    for (int i = threadIdx.x; i < BOX_W * BOX_H; i += blockDim.x) out[i] = tile[i];
}
"#;

/// Loads [`TMA_SRC`] on `d` and moves 32×16 boxes of a padded 100×72 f32 matrix with it
/// — one inside, one hanging over the corner (zero-filled there) — checking every element.
pub async fn check_tile(d: &Device) {
    // A 100-row × 72-column row-major f32 matrix stored with a pitch of 80 floats.
    let (rows, cols, pitch) = (100usize, 72usize, 80usize);
    let host: Vec<f32> = rand_vec(rows * pitch).iter().map(|v| *v as f32).collect();
    let src = d.upload(host.clone()).await.unwrap();
    let map = TensorMapBuilder::new(&src, &[cols as u64, rows as u64], &[32, 16])
        .strides(&[(pitch * 4) as u64])
        .build()
        .unwrap();
    let m = d.load_module(KernelSource::new(TMA_SRC, &["tma_tile"])).await.unwrap();
    let out = d.alloc::<f32>(32 * 16).await.unwrap();
    // Inside, and hanging over the bottom-right corner (zero-filled there).
    for (x0, y0) in [(8i32, 20i32), (56, 90)] {
        let args = KernelArgs::new()
            .tensor_map(&map)
            .buf_mut(&out)
            .scalar(x0)
            .scalar(y0)
            .scalar(map.box_bytes() as u32);
        let cfg = LaunchConfig {
            grid: (1, 1, 1),
            block: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `tma_tile(TmaDesc, float*, int, int, unsigned)` matches the arguments.
        unsafe { d.launch(&m, "tma_tile", cfg, args) }.await.unwrap();
        let got = d.download(&out).await.unwrap();
        for r in 0..16usize {
            for c in 0..32usize {
                let (gr, gc) = (y0 as usize + r, x0 as usize + c);
                let want = if gr < rows && gc < cols {
                    host[gr * pitch + gc]
                } else {
                    0.0
                };
                assert_eq!(got[r * 32 + c], want, "box ({x0},{y0}) element ({r},{c})");
            }
        }
    }
}
