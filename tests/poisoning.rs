//! In-process poisoning: a sticky CUDA fault (here a device-side trap, code 719) marks the
//! device lost; the faulting request and every pending and later request get a typed
//! error within a deadline — never a hang. Its own test binary: the fault kills every CUDA
//! context of the process (DESIGN.md), so no other GPU test may share the process.

use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::Status;
use atomr_accel_cuda::module::{KernelArgs, KernelSource, LaunchConfig};
use atomr_accel_cuda::{Device, DeviceConfig, Gemm, GpuError};

const TRAP: &str = r#"
extern "C" __global__ void trap_k(float* x) {
    if (threadIdx.x == 0) { x[0] = 1.0f; __trap(); }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn a_trap_poisons_the_device_and_every_request_gets_a_typed_error() {
    let sys = ActorSystem::new("poison");
    let dev = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let m = dev.load_module(KernelSource::new(TRAP, &["trap_k"])).await.unwrap();
    let buf = dev.alloc::<f32>(1024).await.unwrap();
    let a = dev.upload(vec![1.0f32; 256 * 256]).await.unwrap();
    let c = dev.alloc::<f32>(256 * 256).await.unwrap();

    // Pending work on both actors alongside the fault.
    let mut pending = vec![];
    for _ in 0..8 {
        let (d, a, c) = (dev.clone(), a.clone(), c.clone());
        pending.push(tokio::spawn(async move {
            d.gemm(Gemm::<f32>::new(256, 256, 256), &a, &a, &c).await
        }));
    }
    let t0 = Instant::now();
    // SAFETY: trap_k takes one float*.
    let fault = unsafe {
        dev.launch(
            &m,
            "trap_k",
            LaunchConfig::for_elements(32, 32),
            KernelArgs::new().buf_mut(&buf),
        )
    }
    .await;
    println!("fault reported as {fault:?} after {:?}", t0.elapsed());
    assert!(
        matches!(
            fault,
            Err(GpuError::ContextPoisoned { code: 719, .. }) | Err(GpuError::DeviceLost(_))
        ),
        "{fault:?}"
    );
    for p in pending {
        // Each either finished before the fault or gets a typed error; none hangs.
        let r = tokio::time::timeout(Duration::from_secs(30), p)
            .await
            .expect("no hang")
            .unwrap();
        if let Err(e) = r {
            assert!(
                e.is_sticky() || matches!(e, GpuError::NoReply(_) | GpuError::Stopped(_)),
                "{e:?}"
            );
        }
    }
    // Later requests fail at once with DeviceLost.
    let t1 = Instant::now();
    for _ in 0..5 {
        let e = dev.download(&buf).await.unwrap_err();
        assert!(matches!(e, GpuError::DeviceLost(_)), "{e:?}");
        let e = dev.alloc::<f32>(4).await.unwrap_err();
        assert!(matches!(e, GpuError::DeviceLost(_)), "{e:?}");
    }
    assert!(t1.elapsed() < Duration::from_secs(5));
    assert!(matches!(dev.state().status, Status::Lost(_)));
    println!("every later request answered DeviceLost in {:?}", t1.elapsed());
}
