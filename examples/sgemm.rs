//! SGEMM of a given size through the `BlasActor` and through raw cudarc, side by side.
//!
//! `cargo run --release --example sgemm -- 4096` (GPU only: the raw path is cuBLAS).

#[path = "../benches/support/alternate.rs"]
mod alternate;

#[path = "../benches/support/random.rs"]
mod random;
#[path = "../benches/support/sgemm_compare.rs"]
mod sgemm_compare;

use alternate::Order;
use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::{Device, DeviceConfig, GpuError};
use sgemm_compare::{compare_sgemm, iters_for, SgemmTimes};

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(4096);
    let system = ActorSystem::new("sgemm");
    let dev = match Device::open(&system, DeviceConfig::cuda(0)).await {
        Ok(d) => d,
        Err(e) => {
            println!("this example compares against raw cuBLAS and needs a GPU: {e}");
            return Ok(());
        }
    };
    let ctx = cudarc::driver::CudaContext::new(0)?;
    for order in Order::ALL {
        let t = compare_sgemm(&dev, &ctx, n, iters_for(n), order).await?;
        println!(
            "SGEMM {n}^3 ({order:?}): actor {:.2} TFLOP/s ({:.3} ms), raw cudarc {:.2} TFLOP/s ({:.3} ms), ratio {:.3}",
            SgemmTimes::tflops(n, t.actor),
            t.actor * 1e3,
            SgemmTimes::tflops(n, t.raw),
            t.raw * 1e3,
            t.raw / t.actor
        );
    }
    system.shutdown().await;
    Ok(())
}
