//! Two processes sharing one buffer: this program allocates shareable memory, fills it,
//! and starts itself again as a second process that opens the buffer from its IPC
//! handle, checks it, and scales it in place; the first then sees the change — no copy.
//! CUDA IPC on a GPU, a shared memory file on the CPU device.
//!
//! `cargo run --example ipc_share [elements]`

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::interop::IpcHandle;
use atomr_accel_cuda::prelude::*;

#[path = "support/random.rs"]
mod random;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), GpuError> {
    let args: Vec<String> = std::env::args().collect();
    let system = ActorSystem::new("ipc-share");
    let dev = Device::open(&system, DeviceConfig::auto()).await?;
    let iop = dev.interop().await?;
    if let [_, role, handle, seed] = &args[..] {
        if role == "peer" {
            // The second process: open, check, scale by 3 in place.
            let handle = IpcHandle::from_bytes(&unhex(handle))?;
            let shared = iop.open_ipc::<f64>(&handle)?;
            let want = random::random(handle.len(), seed.parse().unwrap_or(1));
            assert_eq!(
                dev.download(&shared).await?,
                want,
                "the peer sees the first process's data"
            );
            dev.scal(3.0f64, &shared).await?;
            dev.download(&shared).await?; // finished before the first process looks
            println!(
                "peer (pid {}): opened {handle:?}, checked it, scaled it by 3",
                std::process::id()
            );
            system.shutdown().await;
            return Ok(());
        }
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let x = random::random(n, seed);
    let shared = iop.alloc_shareable::<f64>(n)?;
    dev.write(&shared, x.clone()).await?;
    let handle = shared.export_ipc(&iop)?;
    println!("first (pid {}): exported {handle:?}", std::process::id());
    let status = std::process::Command::new(std::env::current_exe().map_err(|e| GpuError::Other(e.to_string()))?)
        .args(["peer", &hex(&handle.to_bytes()), &seed.to_string()])
        .status()
        .map_err(|e| GpuError::Other(e.to_string()))?;
    assert!(status.success(), "the peer process failed");
    let got = dev.download(&shared).await?;
    let err = got.iter().zip(&x).map(|(g, v)| (g - 3.0 * v).abs()).fold(0.0, f64::max);
    println!("first: the peer's writes are in our buffer ({n} elements, max error {err:.1e})");
    assert!(err < 1e-15);
    system.shutdown().await;
    Ok(())
}
