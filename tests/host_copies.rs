//! Copies between a device and the caller's own memory (`write_slice`, `upload_slice`,
//! `download_into`): staged in chunks through pinned buffers, exact for every length
//! (a partial last chunk, exactly one chunk, below one), several dtypes, overlapping
//! copies from concurrent tasks; wrong lengths and stale buffers are typed errors. Owned
//! `Vec`s (`upload`, `write`, `download`), which a GPU stages from two chunks up, round
//! trip exactly too. On the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::rand_vec;

on_both! {
    slices_round_trip_exactly_at_every_length => round_trips;
    concurrent_staged_copies_do_not_mix => concurrent;
    bad_lengths_and_stale_buffers_are_typed_errors => bad_input;
    owned_vecs_round_trip_exactly_staged_or_not => owned;
    a_pinned_cap_under_a_chunk_copies_unstaged => small_pinned_cap;
    initial_staging_buffers_serve_copies_of_every_dtype => initial_buffers;
}

/// Elements of `T` in one staging chunk (8 MiB).
fn chunk<T>() -> usize {
    (8 << 20) / std::mem::size_of::<T>()
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("host-copies");
    let d = Device::open(&sys, config).await.unwrap();
    (sys, d)
}

async fn round_trip<T: DType + PartialEq + std::fmt::Debug>(d: &Device, data: Vec<T>) {
    let n = data.len();
    let up = d.upload_slice(&data).await.unwrap();
    assert!(d.download(&up).await.unwrap() == data, "upload_slice of {n}");
    let buf = d.alloc::<T>(n).await.unwrap();
    d.write_slice(&buf, &data).await.unwrap();
    let mut out = vec![T::default(); n];
    d.download_into(&buf, &mut out).await.unwrap();
    assert!(out == data, "write_slice + download_into of {n}");
}

async fn round_trips(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let c = chunk::<f32>();
    for n in [3 * c + 17, c, c - 1, 2 * c, 1] {
        round_trip(&d, rand_vec(n).iter().map(|&v| v as f32).collect()).await;
    }
    round_trip(&d, rand_vec(chunk::<f64>() + 5)).await;
    round_trip(
        &d,
        rand_vec(chunk::<i16>() * 2 + 3)
            .iter()
            .map(|&v| (v * 3e4) as i16)
            .collect(),
    )
    .await;
}

/// Four tasks, each with its own buffer and data, staging at once through one pool.
async fn concurrent(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let n = 2 * chunk::<f32>() + 999;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move {
                let data: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
                let buf = d.alloc::<f32>(n).await.unwrap();
                d.write_slice(&buf, &data).await.unwrap();
                let mut out = vec![0.0f32; n];
                d.download_into(&buf, &mut out).await.unwrap();
                out == data
            })
        })
        .collect();
    for t in tasks {
        assert!(t.await.unwrap(), "a task got another's data");
    }
}

async fn bad_input(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let n = chunk::<f32>() + 1;
    let buf = d.alloc::<f32>(n).await.unwrap();
    let short = vec![1.0f32; n - 1];
    let e = d.write_slice(&buf, &short).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    let mut long = vec![0.0f32; n + 1];
    let e = d.download_into(&buf, &mut long).await.unwrap_err();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
    d.rebuild().await.unwrap();
    let e = d.write_slice(&buf, &vec![1.0f32; n]).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    let mut out = vec![0.0f32; n];
    let e = d.download_into(&buf, &mut out).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
}

/// `upload` / `write` / `download` of owned vectors around the staging threshold (two
/// chunks) and well past it, with a partial last chunk.
async fn owned(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let c = chunk::<f32>();
    for n in [2 * c - 1, 2 * c, 5 * c + 333] {
        let data: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
        let g = d.upload(data.clone()).await.unwrap();
        assert!(d.download(&g).await.unwrap() == data, "upload + download of {n}");
        let again: Vec<f32> = rand_vec(n).iter().map(|&v| v as f32).collect();
        d.write(&g, again.clone()).await.unwrap();
        assert!(d.download(&g).await.unwrap() == again, "write + download of {n}");
    }
    let wide = rand_vec(3 * chunk::<f64>() + 7);
    let g = d.upload(wide.clone()).await.unwrap();
    assert!(d.download(&g).await.unwrap() == wide, "f64");
}

/// A device whose pinned buffers may not hold a staging chunk copies without staging.
async fn small_pinned_cap(mut config: DeviceConfig) {
    config.pinned_buffer_max_bytes = 1 << 20;
    let (_s, d) = open(config).await;
    let data: Vec<f32> = rand_vec(2 * chunk::<f32>() + 5).iter().map(|&v| v as f32).collect();
    let g = d.upload(data.clone()).await.unwrap();
    assert!(d.download(&g).await.unwrap() == data, "upload + download");
    let up = d.upload_slice(&data).await.unwrap();
    let mut out = vec![0.0f32; data.len()];
    d.download_into(&up, &mut out).await.unwrap();
    assert!(out == data, "upload_slice + download_into");
}

/// `DeviceConfig::pinned_initial_buffers`: the staging buffers are in the pool when the
/// device opens, and copies of several element types stage through them (the pool keeps
/// built-in types' buffers by size): after an f32 and an f64 copy of several chunks and
/// a download into a caller's slice, the pool holds the same bytes — nothing more was
/// pinned. A count the pool's budget cannot hold is refused when the device starts.
async fn initial_buffers(mut config: DeviceConfig) {
    config.pinned_initial_buffers = 3;
    let (sys, d) = open(config.clone()).await;
    let staged = 3 * (8u64 << 20);
    assert_eq!(d.pinned_pool_bytes(), staged, "three staging buffers at open");
    let f: Vec<f32> = rand_vec(4 * chunk::<f32>() + 9).iter().map(|&v| v as f32).collect();
    let g = d.upload_slice(&f).await.unwrap();
    let wide = rand_vec(2 * chunk::<f64>() + 3);
    let gw = d.upload_slice(&wide).await.unwrap();
    let mut back = vec![0.0f64; wide.len()];
    d.download_into(&gw, &mut back).await.unwrap();
    assert!(back == wide, "f64 through the initial buffers");
    assert!(d.download(&g).await.unwrap() == f, "f32 through the initial buffers");
    assert_eq!(d.pinned_pool_bytes(), staged, "the same buffers, back in the pool");
    d.stop().await;
    drop(sys);

    config.pinned_pool_bytes = 2 * (8 << 20);
    let sys = ActorSystem::new("host-copies-refused");
    match Device::start(&sys, config) {
        Err(GpuError::InvalidArgument(e)) => assert!(e.to_string().contains("pinned_initial_buffers"), "{e}"),
        other => panic!("three staging buffers in a pool of two: {:?}", other.map(|_| ())),
    }
}
