//! Raw CUDA C++ modules: NVRTC compile through the disk cache, load, validated launches.

mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::module::{KernelArgs, KernelSource, LaunchConfig, ModuleImage};
use atomr_accel_cuda::testing::TestHooks;
use atomr_accel_cuda::{Device, DeviceConfig, GpuError, Lib};
use common::{rand_vec, rel_err};

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

fn cache_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("atomr-modules-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn cpu_device_reports_modules_as_unsupported() {
    let sys = ActorSystem::new("cpu-mod");
    let dev = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let e = dev.load_module(KernelSource::new(SAXPY, &["saxpy"])).await.unwrap_err();
    assert!(matches!(e, GpuError::Unsupported(_)), "{e:?}");
}

#[tokio::test]
async fn module_images_are_read_by_content_and_unsupported_on_cpu() {
    let dir = cache_dir("images");
    std::fs::create_dir_all(&dir).unwrap();
    let missing = ModuleImage::read(dir.join("missing.cubin")).unwrap_err();
    assert!(
        matches!(&missing, GpuError::InvalidArgument(m) if m.contains("missing.cubin")),
        "{missing}"
    );
    let junk = dir.join("junk.bin");
    std::fs::write(&junk, b"not a module").unwrap();
    assert!(matches!(ModuleImage::read(&junk), Err(GpuError::InvalidArgument(_))));
    let ptx = dir.join("k.ptx");
    std::fs::write(&ptx, ".version 8.0\n.target sm_90\n.address_size 64\n").unwrap();
    assert!(matches!(ModuleImage::read(&ptx), Ok(ModuleImage::Ptx(_))));
    let elf = dir.join("k.cubin");
    std::fs::write(&elf, b"\x7fELF\x02\x01").unwrap();
    let image = ModuleImage::read(&elf).unwrap();
    assert!(matches!(image, ModuleImage::Cubin(_)));

    let sys = ActorSystem::new("cpu-img");
    let dev = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let e = dev.load_module_image(image, &["k"]).await.unwrap_err();
    assert!(matches!(e, GpuError::Unsupported(_)), "{e:?}");
}

/// Prebuilt images: a CUBIN and a PTX file of the same kernel, loaded from disk and
/// launched; a kernel missing from the image is a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn prebuilt_cubin_and_ptx_load_from_disk_and_launch() {
    let sys = ActorSystem::new("gpu-img");
    let dir = cache_dir("prebuilt");
    let mut cfg = DeviceConfig::cuda(0);
    cfg.kernel_cache_dir = Some(dir.clone());
    let dev = Device::open(&sys, cfg).await.unwrap();
    let arch = dev.ready().await.unwrap().arch().unwrap();
    let (cubin, _) = atomr_accel_cuda::nvrtc_cache::compile_cached(SAXPY, &arch, &[], Some(&dir)).unwrap();
    std::fs::write(dir.join("saxpy.cubin"), &cubin).unwrap();
    // PTX through the cache's own fallback target (what a GPU newer than NVRTC gets).
    let virt = arch.replace("sm_", "compute_");
    let (ptx, _) = atomr_accel_cuda::nvrtc_cache::compile_cached(SAXPY, &virt, &[], Some(&dir)).unwrap();
    assert_eq!(ptx.last(), Some(&0), "PTX images are NUL-terminated for the driver");
    std::fs::write(dir.join("saxpy.ptx"), &ptx[..ptx.len() - 1]).unwrap();
    let n = 10_007usize;
    let x = rand_vec(n);
    for file in ["saxpy.cubin", "saxpy.ptx"] {
        let image = ModuleImage::read(dir.join(file)).unwrap();
        let e = dev.load_module_image(image.clone(), &["absent"]).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
        let m = dev.load_module_image(image, &["saxpy"]).await.unwrap();
        let gx = dev
            .upload(x.iter().map(|v| *v as f32).collect::<Vec<_>>())
            .await
            .unwrap();
        let gy = dev.upload(vec![1.0f32; n]).await.unwrap();
        let args = KernelArgs::new().scalar(2.0f32).buf(&gx).buf_mut(&gy).scalar(n as u32);
        // SAFETY: (float, const float*, float*, unsigned int) matches saxpy's parameters.
        unsafe { dev.launch(&m, "saxpy", LaunchConfig::for_elements(n, 256), args) }
            .await
            .unwrap();
        let got: Vec<f64> = dev.download(&gy).await.unwrap().iter().map(|v| *v as f64).collect();
        let want: Vec<f64> = x.iter().map(|v| 2.0 * (*v as f32) as f64 + 1.0).collect();
        assert!(rel_err(&got, &want) < 1e-6, "{file}: rel err {}", rel_err(&got, &want));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn saxpy_module_compiles_caches_and_launches() {
    let sys = ActorSystem::new("gpu-mod");
    let mut cfg = DeviceConfig::cuda(0);
    cfg.kernel_cache_dir = Some(cache_dir("saxpy"));
    let dev = Device::open(&sys, cfg).await.unwrap();

    let t = std::time::Instant::now();
    let m = dev.load_module(KernelSource::new(SAXPY, &["saxpy"])).await.unwrap();
    let cold = t.elapsed();
    assert!(!m.from_cache, "first load compiles");
    let again = dev.load_module(KernelSource::new(SAXPY, &["saxpy"])).await.unwrap();
    assert_eq!(again.kernels(), m.kernels());

    let n = 1_000_003usize;
    let (x, y) = (rand_vec(n), rand_vec(n));
    let gx = dev
        .upload(x.iter().map(|v| *v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let gy = dev
        .upload(y.iter().map(|v| *v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let args = KernelArgs::new().scalar(1.5f32).buf(&gx).buf_mut(&gy).scalar(n as u32);
    // SAFETY: (float, const float*, float*, unsigned int) matches saxpy's parameters.
    unsafe { dev.launch(&m, "saxpy", LaunchConfig::for_elements(n, 256), args) }
        .await
        .unwrap();
    let got: Vec<f64> = dev.download(&gy).await.unwrap().iter().map(|v| *v as f64).collect();
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| 1.5 * (*a as f32) as f64 + (*b as f32) as f64)
        .collect();
    assert!(rel_err(&got, &want) < 1e-6, "rel err {}", rel_err(&got, &want));

    // A rebuilt context loads the same source from the disk cache, and the old module is
    // stale there.
    dev.rebuild().await.unwrap();
    let t = std::time::Instant::now();
    let warm = dev.load_module(KernelSource::new(SAXPY, &["saxpy"])).await.unwrap();
    let hit = t.elapsed();
    assert!(warm.from_cache, "second context loads from the disk cache");
    println!("saxpy module: cold load {cold:?}, disk-cache hit {hit:?}");
    let gy = dev.upload(vec![0.0f32; 4]).await.unwrap();
    let gx = dev.upload(vec![1.0f32; 4]).await.unwrap();
    let args = || KernelArgs::new().scalar(1.0f32).buf(&gx).buf_mut(&gy).scalar(4u32);
    // SAFETY: as above.
    let e = unsafe { dev.launch(&m, "saxpy", LaunchConfig::for_elements(4, 32), args()) }
        .await
        .unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    // SAFETY: as above.
    unsafe { dev.launch(&warm, "saxpy", LaunchConfig::for_elements(4, 32), args()) }
        .await
        .unwrap();
    assert_eq!(dev.download(&gy).await.unwrap(), vec![1.0; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a CUDA GPU"]
async fn bad_modules_and_launches_are_typed_errors() {
    let sys = ActorSystem::new("gpu-mod-bad");
    let mut cfg = DeviceConfig::cuda(0);
    cfg.kernel_cache_dir = Some(cache_dir("bad"));
    let dev = Device::open(&sys, cfg).await.unwrap();
    let e = dev
        .load_module(KernelSource::new(
            "extern \"C\" __global__ void k() { this is not C++; }",
            &["k"],
        ))
        .await
        .unwrap_err();
    match &e {
        GpuError::Library {
            lib: Lib::Nvrtc, msg, ..
        } => assert!(msg.contains("error"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let e = dev.load_module(KernelSource::new(SAXPY, &["nope"])).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    let m = dev.load_module(KernelSource::new(SAXPY, &["saxpy"])).await.unwrap();
    let g = dev.alloc::<f32>(64).await.unwrap();
    let h = dev.alloc::<f32>(64).await.unwrap();
    let over = LaunchConfig {
        grid: (1, 1, 1),
        block: (2048, 1, 1),
        shared_mem_bytes: 0,
    };
    let args = || KernelArgs::new().scalar(1.0f32).buf(&h).buf_mut(&g).scalar(64u32);
    // SAFETY: the launches below are rejected before reaching the driver.
    let e = unsafe { dev.launch(&m, "saxpy", over, args()) }.await.unwrap_err();
    assert!(
        matches!(e, GpuError::InvalidArgument(ref s) if s.contains("threads per block")),
        "{e:?}"
    );
    let zero = LaunchConfig {
        grid: (0, 1, 1),
        ..over
    };
    // SAFETY: rejected before launch.
    assert!(matches!(
        unsafe { dev.launch(&m, "saxpy", zero, args()) }.await,
        Err(GpuError::InvalidArgument(_))
    ));
    // SAFETY: rejected before launch (the same buffer twice, written once).
    let twice = KernelArgs::new().scalar(1.0f32).buf(&g).buf_mut(&g).scalar(64u32);
    let e = unsafe { dev.launch(&m, "saxpy", LaunchConfig::for_elements(64, 64), twice) }
        .await
        .unwrap_err();
    assert!(
        matches!(e, GpuError::InvalidArgument(ref s) if s.starts_with("argument 2 (elements 0..64) and argument 3 (elements 0..64) are overlapping windows")),
        "{e:?}"
    );
    // SAFETY: rejected before launch (unknown kernel).
    assert!(matches!(
        unsafe { dev.launch(&m, "other", LaunchConfig::for_elements(64, 64), args()) }.await,
        Err(GpuError::InvalidArgument(_))
    ));
    // Still serving.
    assert_eq!(dev.download(&g).await.unwrap(), vec![0.0; 64]);
}
