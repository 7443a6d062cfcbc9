//! A timeline per device (`Device::enable_timeline`, `Device::take_timeline`): only the
//! enabled device's operations are timed, its take returns only its own and leaves other
//! devices' for theirs, and turning it off stops it. On CPU devices; its own binary, as
//! the process-wide switch (`observability::enable_timeline`) would time every device of
//! a test running beside it.

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;

async fn open(sys: &ActorSystem, ordinal: usize) -> Device {
    let mut c = DeviceConfig::cpu();
    c.device_id = ordinal;
    Device::open(sys, c).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_device_times_and_takes_its_own_operations() {
    let sys = ActorSystem::new("device-timeline");
    let (a, b) = (open(&sys, 5).await, open(&sys, 6).await);
    let work = |d: Device| async move {
        let x = d.upload(vec![1.5f32; 4096]).await.unwrap();
        let c = d.alloc::<f32>(64 * 64).await.unwrap();
        d.gemm(Gemm::<f32>::new(64, 64, 64), &x, &x, &c).await.unwrap();
        d.scal(2.0f32, &c).await.unwrap();
        d.download(&c).await.unwrap();
    };
    a.enable_timeline(true).unwrap();
    work(a.clone()).await;
    work(b.clone()).await;
    b.enable_timeline(true).unwrap();
    work(b.clone()).await;
    let mine = a.take_timeline().await.unwrap();
    let names: Vec<&str> = mine.iter().map(|e| e.name.as_str()).collect();
    assert!(mine.iter().all(|e| e.device == 5), "{mine:?}");
    for op in ["htod<f32>", "gemm<f32>", "scal<f32>", "dtoh<f32>"] {
        assert!(names.contains(&op), "{op} missing from {names:?}");
    }
    assert!(
        mine.windows(2).all(|w| w[0].start_us <= w[1].start_us),
        "in start order"
    );
    // Device 6 was timed only after it was enabled: one round of work, kept for its take.
    let theirs = b.take_timeline().await.unwrap();
    assert!(theirs.iter().all(|e| e.device == 6));
    assert_eq!(theirs.iter().filter(|e| e.name == "gemm<f32>").count(), 1, "{theirs:?}");
    // Taken: empty; off: nothing new.
    assert!(a.take_timeline().await.unwrap().is_empty());
    a.enable_timeline(false).unwrap();
    work(a.clone()).await;
    assert!(
        a.take_timeline().await.unwrap().is_empty(),
        "timed after it was turned off"
    );
    let mut far = DeviceConfig::cpu();
    far.device_id = 64;
    let far = Device::open(&sys, far).await.unwrap();
    assert!(matches!(far.enable_timeline(true), Err(GpuError::InvalidArgument(_))));
    sys.shutdown().await;
}
