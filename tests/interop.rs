//! Buffers that cross: DLPack export and import (the same memory, not a copy), raw
//! pointers with their owner kept alive, cudarc views and slices — and the bad inputs
//! each turns into a typed error. On the CPU device and on the GPU.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::interop::dlpack::ffi::{self, DLManagedTensor, DLManagedTensorVersioned};
use atomr_accel_cuda::interop::dlpack::{dl_dtype, ConsumerStream, DlpackTensor};
use atomr_accel_cuda::interop::IpcHandle;
use atomr_accel_cuda::interop::{Access, Interop};
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::{gemm_ref, rand_vec, rel_err, seeded_vec};

on_both! {
    a_dlpack_tensor_round_trips_sharing_memory => round_trip;
    the_unversioned_abi_round_trips_too => round_trip_unversioned;
    bad_dlpack_tensors_are_typed_errors => bad_tensors;
    raw_memory_is_borrowed_and_its_owner_released => raw_parts;
    bad_raw_pointers_are_typed_errors => bad_pointers;
    a_buffer_from_before_a_rebuild_is_stale => stale;
    ten_thousand_exchanges_leak_nothing => no_leaks;
    cudarc_views_and_slices => cudarc;
    a_buffer_is_shared_with_another_process => ipc;
    bad_ipc_handles_are_typed_errors => bad_ipc;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device, Interop) {
    let sys = ActorSystem::new("interop");
    let d = Device::open(&sys, config).await.unwrap();
    let iop = d.interop().await.unwrap();
    (sys, d, iop)
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// The address of a buffer's first element as the device sees it (host or device).
fn address_of<T: DType>(iop: &Interop, r: &GpuRef<T>) -> u64 {
    match iop.stream() {
        Ok(s) => r.with_device_ptr(iop, s, Access::Read, |p| p).unwrap(),
        Err(_) => r.with_host(|v| v.as_ptr() as u64).unwrap(),
    }
}

async fn round_trip(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let (rows, cols) = (7, 5);
    let x = rand_vec(rows * cols);
    let buf = d.upload(f32s(&x)).await.unwrap();
    let t = buf
        .to_dlpack(&iop, &[rows, cols], None, ConsumerStream::LegacyDefault)
        .unwrap();
    {
        let dl = t.tensor();
        assert_eq!(dl.dtype, dl_dtype::<f32>());
        assert_eq!(t.shape(), vec![rows as i64, cols as i64]);
        assert_eq!(t.strides(), None);
        let want = if iop.is_cuda() {
            ffi::device_type::CUDA
        } else {
            ffi::device_type::CPU
        };
        assert_eq!(dl.device.device_type, want);
        assert_eq!(t.managed().version.major, 1);
    }
    assert_eq!(t.data_ptr(), address_of(&iop, &buf), "the tensor is our memory");
    // Back in as a buffer of its own: the same memory again.
    let back: GpuRef<f32> = iop.from_dlpack(t).unwrap();
    assert!(back.is_borrowed() && !back.same_buffer(&buf));
    assert_eq!(address_of(&iop, &back), address_of(&iop, &buf));
    assert_eq!(f64s(&d.download(&back).await.unwrap()), f64s(&f32s(&x)));
    // A write through either handle shows in the other: no copy was made.
    d.scal(2.0f32, &back).await.unwrap();
    let got = f64s(&d.download(&buf).await.unwrap());
    let want: Vec<f64> = f32s(&x).iter().map(|&v| 2.0 * v as f64).collect();
    assert!(rel_err(&got, &want) < 1e-7);
    // An operation on the import, against float64: a GEMM of it as a column-major matrix.
    let b = rand_vec(cols * 3);
    let (gb, gc) = (
        d.upload(f32s(&b)).await.unwrap(),
        d.alloc::<f32>(rows * 3).await.unwrap(),
    );
    d.gemm(Gemm::<f32>::new(rows, 3, cols), &back, &gb, &gc).await.unwrap();
    let a2: Vec<f64> = f32s(&x).iter().map(|&v| 2.0 * v as f64).collect();
    let mut want = vec![0.0; rows * 3];
    gemm_ref(
        false,
        false,
        rows,
        3,
        cols,
        1.0,
        &a2,
        rows,
        &f64s(&f32s(&b)),
        cols,
        0.0,
        &mut want,
        rows,
    );
    assert!(rel_err(&f64s(&d.download(&gc).await.unwrap()), &want) < 1e-5);
    // The import outlives the original handle: the tensor keeps the buffer alive.
    drop(buf);
    assert_eq!(d.download(&back).await.unwrap().len(), rows * cols);
    // A view exports its window only.
    let whole = d.upload(f32s(&x)).await.unwrap();
    let tail = whole.view(10..).unwrap();
    let t = tail
        .to_dlpack(&iop, &[tail.len()], None, ConsumerStream::Unordered)
        .unwrap();
    assert_eq!(t.data_ptr(), address_of(&iop, &whole) + 40);
    let tail_back: GpuRef<f32> = iop.from_dlpack(t).unwrap();
    assert_eq!(d.download(&tail_back).await.unwrap(), f32s(&x[10..]));
    sys.shutdown().await;
}

async fn round_trip_unversioned(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let x: Vec<i64> = rand_vec(64).iter().map(|v| (v * 1e6) as i64).collect();
    let buf = d.upload(x.clone()).await.unwrap();
    let t: DlpackTensor<DLManagedTensor> = buf
        .to_dlpack_unversioned(&iop, &[8, 8], Some(&[1, 8]), ConsumerStream::LegacyDefault)
        .unwrap();
    assert_eq!(t.strides(), Some(vec![1, 8]));
    // Column-major strides are not compact row-major: refused on the way in.
    let e = iop.from_dlpack::<i64, _>(t).unwrap_err();
    assert!(
        matches!(&e, GpuError::InvalidArgument(i) if i.to_string().contains("not compact row-major")),
        "{e}"
    );
    let t = buf
        .to_dlpack_unversioned(&iop, &[64], None, ConsumerStream::LegacyDefault)
        .unwrap();
    let back: GpuRef<i64> = iop.from_dlpack(t).unwrap();
    assert_eq!(d.download(&back).await.unwrap(), x);
    sys.shutdown().await;
}

/// A versioned tensor built by hand, as a foreign producer would: `data` of `device`,
/// `dtype`, `shape`, `flags`; the deleter counts its calls.
struct Handmade {
    shape: Vec<i64>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn handmade_deleter(p: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `handmade` below with `Box::into_raw`, deleted once.
    let m = unsafe { Box::from_raw(p) };
    let ctx = unsafe { Box::from_raw(m.manager_ctx as *mut Handmade) };
    ctx.deleted.fetch_add(1, Ordering::SeqCst);
}

fn handmade(
    data: u64,
    device: ffi::DLDevice,
    dtype: ffi::DLDataType,
    shape: &[i64],
    flags: u64,
    deleted: &Arc<AtomicUsize>,
) -> DlpackTensor {
    let mut ctx = Box::new(Handmade {
        shape: shape.to_vec(),
        deleted: deleted.clone(),
    });
    let tensor = ffi::DLTensor {
        data: data as usize as *mut std::ffi::c_void,
        device,
        ndim: shape.len() as i32,
        dtype,
        shape: ctx.shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let m = Box::new(DLManagedTensorVersioned {
        version: ffi::DLPackVersion { major: 1, minor: 0 },
        manager_ctx: Box::into_raw(ctx).cast(),
        deleter: Some(handmade_deleter),
        flags,
        dl_tensor: tensor,
    });
    // SAFETY: just built; the memory at `data` is the test's, alive past the tensor.
    unsafe { DlpackTensor::from_raw(std::ptr::NonNull::new(Box::into_raw(m)).unwrap()) }
}

async fn bad_tensors(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let buf = d.upload(f32s(&rand_vec(16))).await.unwrap();
    let deleted = Arc::new(AtomicUsize::new(0));
    let here = address_of(&iop, &buf);
    let own = if iop.is_cuda() {
        ffi::DLDevice {
            device_type: ffi::device_type::CUDA,
            device_id: 0,
        }
    } else {
        ffi::DLDevice {
            device_type: ffi::device_type::CPU,
            device_id: 0,
        }
    };
    let f32_t = dl_dtype::<f32>();
    let invalid = |e: GpuError, says: &str| match &e {
        GpuError::InvalidArgument(i) if i.to_string().contains(says) => {}
        _ => panic!("expected an InvalidArgument saying {says:?}, got {e}"),
    };
    // The wrong element type.
    let t = buf.to_dlpack(&iop, &[16], None, ConsumerStream::Unordered).unwrap();
    invalid(iop.from_dlpack::<f64, _>(t).unwrap_err(), "not f64");
    // A tensor of another device: a GPU's on the CPU device, GPU 7's on GPU 0.
    let other = if iop.is_cuda() {
        ffi::DLDevice {
            device_type: ffi::device_type::CUDA,
            device_id: 7,
        }
    } else {
        ffi::DLDevice {
            device_type: ffi::device_type::CUDA,
            device_id: 0,
        }
    };
    let t = handmade(here, other, f32_t, &[16], 0, &deleted);
    invalid(iop.from_dlpack::<f32, _>(t).unwrap_err(), "not of this device");
    // Read-only, and a newer major version.
    let t = handmade(here, own, f32_t, &[16], ffi::FLAG_READ_ONLY, &deleted);
    invalid(iop.from_dlpack::<f32, _>(t).unwrap_err(), "read-only");
    let t = handmade(here, own, f32_t, &[16], 0, &deleted);
    let newer = t.into_raw();
    // SAFETY: ours, live, not shared: a producer of a future major version.
    unsafe { (*newer.as_ptr()).version.major = 2 };
    // SAFETY: handed back whole.
    let t = unsafe { DlpackTensor::from_raw(newer) };
    invalid(iop.from_dlpack::<f32, _>(t).unwrap_err(), "DLPack 2.x");
    // No elements; a negative extent.
    invalid(
        iop.from_dlpack::<f32, _>(handmade(here, own, f32_t, &[0, 4], 0, &deleted))
            .unwrap_err(),
        "no elements",
    );
    invalid(
        iop.from_dlpack::<f32, _>(handmade(here, own, f32_t, &[-3], 0, &deleted))
            .unwrap_err(),
        "negative",
    );
    // A null or misaligned address.
    invalid(
        iop.from_dlpack::<f32, _>(handmade(0, own, f32_t, &[4], 0, &deleted))
            .unwrap_err(),
        "null or not aligned",
    );
    invalid(
        iop.from_dlpack::<f32, _>(handmade(here + 2, own, f32_t, &[4], 0, &deleted))
            .unwrap_err(),
        "null or not aligned",
    );
    if iop.is_cuda() {
        // More elements than the allocation holds, and an address the driver never gave.
        let t = handmade(here, own, f32_t, &[1 << 30], 0, &deleted);
        invalid(iop.from_dlpack::<f32, _>(t).unwrap_err(), "past the end");
        let t = handmade(0x10, own, f32_t, &[4], 0, &deleted);
        invalid(iop.from_dlpack::<f32, _>(t).unwrap_err(), "not device memory");
    }
    // Every refused tensor was handed back to its producer: deleted once each.
    let made = if iop.is_cuda() { 9 } else { 7 };
    assert_eq!(deleted.load(Ordering::SeqCst), made);
    // Export layouts that do not fit the window.
    for (shape, strides) in [
        (&[4usize, 5][..], None),
        (&[4, 4][..], Some(&[5usize, 1][..])),
        (&[][..], None),
    ] {
        let e = buf
            .to_dlpack(&iop, shape, strides, ConsumerStream::Unordered)
            .unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{shape:?} {strides:?}: {e}");
    }
    sys.shutdown().await;
}

/// Counts its drops: an owner the buffer must release exactly once.
struct Owner<V>(#[allow(dead_code)] V, Arc<AtomicUsize>);

impl<V> Drop for Owner<V> {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

async fn raw_parts(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let x = rand_vec(300);
    let released = Arc::new(AtomicUsize::new(0));
    let buf: GpuRef<f64> = match iop.stream() {
        // Memory cudarc allocated, the slice itself the owner (dropping it frees it).
        Ok(stream) => {
            let slice = stream.clone_htod(&x).unwrap();
            let ptr = {
                use cudarc::driver::DevicePtr;
                let (p, _g) = slice.device_ptr(stream);
                p
            };
            // SAFETY: 300 f64 of a live allocation, alive until the owner (the slice) goes.
            unsafe { iop.from_raw_parts::<f64, _>(ptr, 300, Owner(slice, released.clone())) }.unwrap()
        }
        // A host Vec, kept by its owner.
        Err(_) => {
            let mut v = x.clone();
            let ptr = v.as_mut_ptr() as u64;
            // SAFETY: the Vec's 300 elements, alive until the owner (the Vec) goes.
            unsafe { iop.from_raw_parts::<f64, _>(ptr, 300, Owner(v, released.clone())) }.unwrap()
        }
    };
    assert!(buf.is_borrowed());
    assert_eq!(d.download(&buf).await.unwrap(), x);
    // Work on it, against float64: y = 3·x into a buffer of ours, and x scaled in place.
    let y = d.alloc::<f64>(300).await.unwrap();
    d.copy(&buf, &y).await.unwrap();
    d.scal(3.0f64, &buf).await.unwrap();
    let want: Vec<f64> = x.iter().map(|v| 3.0 * v).collect();
    assert!(rel_err(&d.download(&buf).await.unwrap(), &want) < 1e-15);
    assert_eq!(d.download(&y).await.unwrap(), x);
    let clone = buf.clone();
    drop(buf);
    assert_eq!(released.load(Ordering::SeqCst), 0, "a clone still holds it");
    drop(clone);
    assert_eq!(
        released.load(Ordering::SeqCst),
        1,
        "the owner is released with the last handle"
    );
    sys.shutdown().await;
}

async fn bad_pointers(config: DeviceConfig) {
    let (sys, _d, iop) = open(config).await;
    let mut v = vec![0u32; 8];
    let p = v.as_mut_ptr() as u64;
    // SAFETY: every call is refused before the memory is touched.
    unsafe {
        for (ptr, len) in [(0u64, 4usize), (p + 1, 4), (p, 0), (p, usize::MAX)] {
            let e = iop.from_raw_parts::<u32, _>(ptr, len, ()).unwrap_err();
            assert!(matches!(e, GpuError::InvalidArgument(_)), "{ptr:#x} {len}: {e}");
        }
        if iop.is_cuda() {
            // Host memory is not device memory the driver knows.
            let e = iop.from_raw_parts::<u32, _>(p, 8, ()).unwrap_err();
            assert!(
                matches!(&e, GpuError::InvalidArgument(i) if i.to_string().contains("not device memory")),
                "{e}"
            );
        }
    }
    drop(v);
    sys.shutdown().await;
}

async fn stale(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let buf = d.upload(vec![1.0f32, 2.0, 3.0]).await.unwrap();
    let t = buf.to_dlpack(&iop, &[3], None, ConsumerStream::Unordered).unwrap();
    let imported: GpuRef<f32> = iop.from_dlpack(t).unwrap();
    assert_eq!(imported.generation(), iop.generation());
    d.rebuild().await.unwrap();
    let e = d.download(&imported).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e}");
    // The old handle lends nothing of the new generation either, and makes stale buffers.
    let fresh = d.upload(vec![4.0f32]).await.unwrap();
    let e = fresh
        .to_dlpack(&iop, &[1], None, ConsumerStream::Unordered)
        .unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e}");
    let iop2 = d.interop().await.unwrap();
    assert!(iop2.generation() > iop.generation());
    let t = fresh.to_dlpack(&iop2, &[1], None, ConsumerStream::Unordered).unwrap();
    assert_eq!(
        d.download(&iop2.from_dlpack::<f32, _>(t).unwrap()).await.unwrap(),
        vec![4.0]
    );
    sys.shutdown().await;
}

async fn no_leaks(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let before = d.memory().await.unwrap().0;
    let n = 1 << 16;
    for i in 0..10_000 {
        let buf = d.alloc::<f32>(n).await.unwrap();
        let t = buf.to_dlpack(&iop, &[n], None, ConsumerStream::Unordered).unwrap();
        let back: GpuRef<f32> = iop.from_dlpack(t).unwrap();
        if i % 1000 == 0 {
            d.scal(1.0f32, &back).await.unwrap();
        }
    }
    let after = d.memory().await.unwrap().0;
    // 10 000 × 256 KiB went through; CUDA's pool may keep a few freed blocks.
    assert!(
        before.saturating_sub(after) < (64 << 20),
        "free memory fell by {} bytes",
        before - after
    );
    sys.shutdown().await;
}

async fn cudarc(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let x = rand_vec(1000);
    let buf = d.upload(x.clone()).await.unwrap();
    let Ok(stream) = iop.stream() else {
        // The CPU device has no CUDA context to lend.
        assert!(matches!(iop.context().unwrap_err(), GpuError::Unsupported(_)));
        assert!(matches!(
            buf.with_cuda_view(&iop, |_| ()).unwrap_err(),
            GpuError::Unsupported(_)
        ));
        sys.shutdown().await;
        return;
    };
    // Read through a cudarc view on our stream.
    let got = buf.with_cuda_view(&iop, |v| stream.clone_dtoh(v).unwrap()).unwrap();
    assert_eq!(got, x);
    // Written through a cudarc view: the device's next read waits for it.
    let y = rand_vec(1000);
    buf.with_cuda_view_mut(&iop, |v| stream.memcpy_htod(&y, v).unwrap())
        .unwrap();
    assert_eq!(d.download(&buf).await.unwrap(), y);
    // A cudarc slice adopted: ours to use and to free.
    let z = rand_vec(500);
    let adopted = iop.adopt(stream.clone_htod(&z).unwrap()).unwrap();
    d.scal(-1.0f64, &adopted).await.unwrap();
    let want: Vec<f64> = z.iter().map(|v| -v).collect();
    assert_eq!(d.download(&adopted).await.unwrap(), want);
    // A raw memset on our stream through the address; the device sees zeros after it.
    buf.with_device_ptr(&iop, stream, Access::Write, |p| {
        // SAFETY: the buffer's 8000 bytes, on `stream`, ordered by with_device_ptr.
        unsafe { cudarc::driver::result::memset_d8_async(p, 0, 8000, stream.cu_stream()) }.unwrap()
    })
    .unwrap();
    assert_eq!(d.download(&buf).await.unwrap(), vec![0.0; 1000]);
    // A stream of another context, and a slice of another context, are refused.
    let other = cudarc::driver::CudaContext::new(0).unwrap();
    if other.cu_ctx() != iop.context().unwrap().cu_ctx() {
        let s = other.default_stream();
        assert!(buf.with_device_ptr(&iop, &s, Access::Read, |_| ()).is_err());
    }
    sys.shutdown().await;
}

/// Starts this test binary again as the peer process of an IPC test (`ipc_peer`), with
/// the handle, the backend and what to expect; returns what it printed, or panics with
/// it if the peer failed.
fn run_peer(handle: &IpcHandle, cuda: bool, expect: &str) -> String {
    let hex: String = handle.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ipc_peer", "--nocapture", "--test-threads=1"])
        .env("ATOMR_TEST_IPC_HANDLE", hex)
        .env("ATOMR_TEST_IPC_BACKEND", if cuda { "cuda" } else { "cpu" })
        .env("ATOMR_TEST_IPC_EXPECT", expect)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("ipc peer: done"),
        "the peer process failed:\n{text}"
    );
    text
}

/// The other process of the IPC tests, started by `run_peer` with its instructions in the
/// environment: `ATOMR_TEST_IPC_EXPECT` is either `seed:N` (open the handle, check its
/// elements against `seeded_vec(len, N)` in float64, double them in place) or `stale`
/// (opening must fail as stale). Run directly, without them, it is not a test and
/// returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipc_peer() {
    let (Ok(hex), Ok(backend), Ok(expect)) = (
        std::env::var("ATOMR_TEST_IPC_HANDLE"),
        std::env::var("ATOMR_TEST_IPC_BACKEND"),
        std::env::var("ATOMR_TEST_IPC_EXPECT"),
    ) else {
        return;
    };
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let handle = IpcHandle::from_bytes(&bytes).unwrap();
    let config = if backend == "cuda" {
        DeviceConfig::cuda(0)
    } else {
        DeviceConfig::cpu()
    };
    let (sys, d, iop) = open(config).await;
    if expect == "stale" {
        let e = iop.open_ipc::<f64>(&handle).unwrap_err();
        assert!(
            matches!(&e, GpuError::InvalidArgument(i) if i.to_string().contains("stale")),
            "{e}"
        );
    } else {
        let seed: u64 = expect.strip_prefix("seed:").unwrap().parse().unwrap();
        let shared = iop.open_ipc::<f64>(&handle).unwrap();
        assert!(shared.is_borrowed());
        let want = seeded_vec(handle.len(), seed);
        assert_eq!(
            d.download(&shared).await.unwrap(),
            want,
            "the peer sees the exporter's elements"
        );
        d.scal(2.0f64, &shared).await.unwrap();
        // Finished (a download waits for it) before the exporter is told.
        let doubled = d.download(&shared).await.unwrap();
        assert!(rel_err(&doubled, &want.iter().map(|v| 2.0 * v).collect::<Vec<_>>()) < 1e-15);
    }
    println!("ipc peer: done");
    sys.shutdown().await;
}

async fn ipc(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let n = 3001;
    let seed = rand_vec(1)[0].to_bits();
    let x = seeded_vec(n, seed);
    let shared = iop.alloc_shareable::<f64>(n + 16).unwrap();
    assert_eq!(d.download(&shared).await.unwrap(), vec![0.0; n + 16], "zeroed");
    // A view of it crosses (its window only), written by the device just before.
    let window = shared.view(16..).unwrap();
    d.write(&window, x.clone()).await.unwrap();
    let handle = window.export_ipc(&iop).unwrap();
    assert_eq!((handle.len(), handle.dtype()), (n, "f64"));
    run_peer(&handle, iop.is_cuda(), &format!("seed:{seed}"));
    // The peer doubled the elements in place: our memory, not a copy.
    let want: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
    assert!(rel_err(&d.download(&window).await.unwrap(), &want) < 1e-15);
    assert_eq!(
        d.download(&shared.view(..16).unwrap()).await.unwrap(),
        vec![0.0; 16],
        "outside the window, untouched"
    );
    // Once the exporter drops the buffer, the handle is stale.
    drop((window, shared));
    run_peer(&handle, iop.is_cuda(), "stale");
    sys.shutdown().await;
}

async fn bad_ipc(config: DeviceConfig) {
    let (sys, d, iop) = open(config).await;
    let invalid = |e: GpuError, says: &str| match &e {
        GpuError::InvalidArgument(i) if i.to_string().contains(says) => {}
        _ => panic!("expected an InvalidArgument saying {says:?}, got {e}"),
    };
    // An ordinary buffer is not shareable memory.
    let plain = d.upload(vec![1.0f32; 8]).await.unwrap();
    invalid(plain.export_ipc(&iop).unwrap_err(), "alloc_shareable");
    let shared = iop.alloc_shareable::<f32>(8).unwrap();
    let handle = shared.export_ipc(&iop).unwrap();
    // Another element type; this very process.
    invalid(iop.open_ipc::<u32>(&handle).unwrap_err(), "opened as u32");
    invalid(iop.open_ipc::<f32>(&handle).unwrap_err(), "this process exported");
    // As if from another process: the pid rewritten (bytes 10..14 of the encoding).
    let mut bytes = handle.to_bytes();
    bytes[10..14].copy_from_slice(&(std::process::id() ^ 1).to_le_bytes());
    if iop.is_cuda() {
        // Another GPU: the UUID after the header, magic 8 + 2 + pid 4 + dtype 1+3 + 16.
        let at = 8 + 2 + 4 + 1 + 3 + 16;
        bytes[at] ^= 0xff;
        invalid(
            iop.open_ipc::<f32>(&IpcHandle::from_bytes(&bytes).unwrap())
                .unwrap_err(),
            "another GPU",
        );
    } else {
        // A descriptor that process does not have: stale.
        invalid(
            iop.open_ipc::<f32>(&IpcHandle::from_bytes(&bytes).unwrap())
                .unwrap_err(),
            "stale",
        );
    }
    invalid(IpcHandle::from_bytes(&bytes[..20]).unwrap_err(), "cut short");
    invalid(IpcHandle::from_bytes(b"not a handle at all").unwrap_err(), "ATOMRIPC");
    sys.shutdown().await;
}
