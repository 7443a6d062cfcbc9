//! A cudarc program calling our GEMM on its own buffers, then handing the result to a
//! DLPack consumer — no copy anywhere, the addresses printed to show it.
//!
//! On a GPU: the program allocates `a`, `b` and `c` with cudarc; `a` and `b` become ours
//! (`Interop::adopt`), `c` stays the program's and is only lent (`from_raw_parts`, the
//! slice kept by the program); after the GEMM, cudarc reads `c` back itself. On the CPU
//! device the same flow runs on host vectors. Either way the result is checked against
//! a float64 GEMM.
//!
//! `cargo run --example cudarc_interop [m n k]`

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::interop::dlpack::ConsumerStream;
use atomr_accel_cuda::interop::Access;
use atomr_accel_cuda::prelude::*;

#[path = "support/random.rs"]
mod random;

/// Column-major float64 GEMM: the reference.
fn gemm_ref(m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for j in 0..n {
        for p in 0..k {
            let bv = b[p + j * k];
            for i in 0..m {
                c[i + j * m] += a[i + p * m] * bv;
            }
        }
    }
    c
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), GpuError> {
    let dims: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (m, n, k) = match dims[..] {
        [m, n, k] => (m, n, k),
        _ => (256, 192, 128),
    };
    let system = ActorSystem::new("cudarc-interop");
    let dev = Device::open(&system, DeviceConfig::auto()).await?;
    let iop = dev.interop().await?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let (a, b) = (random::random(m * k, seed), random::random(k * n, seed ^ 0xABCD));
    let got: Vec<f64> = match iop.stream() {
        Ok(stream) => {
            // The cudarc program's own buffers.
            let a_slice = stream.clone_htod(&a)?;
            let b_slice = stream.clone_htod(&b)?;
            let c_slice = stream.alloc_zeros::<f64>(m * n)?;
            let c_addr = {
                use cudarc::driver::DevicePtr;
                c_slice.device_ptr(stream).0
            };
            // `a` and `b` become ours; `c` is lent, the program keeps its slice.
            let (ga, gb) = (iop.adopt(a_slice)?, iop.adopt(b_slice)?);
            // SAFETY: `c_slice` holds m·n f64 and outlives `gc` (dropped below first).
            let gc = unsafe { iop.from_raw_parts::<f64, _>(c_addr, m * n, ())? };
            dev.gemm(Gemm::<f64>::new(m, n, k), &ga, &gb, &gc).await?;
            let lent = gc.with_device_ptr(&iop, stream, Access::Read, |p| p)?;
            println!("GEMM wrote the program's own buffer at {c_addr:#x} (our handle: {lent:#x})");
            // A DLPack consumer on the same stream sees the same memory again.
            let t = gc.to_dlpack(&iop, &[n, m], None, ConsumerStream::Handle(stream.cu_stream() as usize))?;
            println!("DLPack export of it: data {:#x}, shape {:?}", t.data_ptr(), t.shape());
            drop((t, gc));
            // cudarc reads the result itself, ordered after the GEMM by the lend.
            stream.clone_dtoh(&c_slice)?
        }
        Err(_) => {
            println!("CPU device: the same flow on host vectors");
            let mut c = vec![0.0f64; m * n];
            let c_addr = c.as_mut_ptr() as u64;
            let (ga, gb) = (dev.upload(a.clone()).await?, dev.upload(b.clone()).await?);
            // SAFETY: `c` holds m·n f64 and outlives `gc` (dropped before `c` is read).
            let gc = unsafe { iop.from_raw_parts::<f64, _>(c_addr, m * n, ())? };
            dev.gemm(Gemm::<f64>::new(m, n, k), &ga, &gb, &gc).await?;
            let t = gc.to_dlpack(&iop, &[n, m], None, ConsumerStream::Unordered)?;
            println!(
                "GEMM wrote the program's vector at {c_addr:#x}; DLPack export: data {:#x}",
                t.data_ptr()
            );
            drop((t, gc));
            c
        }
    };
    let want = gemm_ref(m, n, k, &a, &b);
    let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max)
        / want.iter().map(|w| w.abs()).fold(0.0, f64::max);
    println!("{m}×{n}×{k} DGEMM on borrowed memory: max relative error {err:.2e}");
    assert!(err < 1e-12, "the GEMM on borrowed memory is wrong: {err}");
    system.shutdown().await;
    Ok(())
}
