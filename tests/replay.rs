//! `replay`: a session recorded through a `Recorder` replays into a fresh device with
//! bit-identical downloads; a tampered journal is caught at the first download it
//! changes; malformed journals and foreign buffers are typed errors. On the CPU device
//! and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::replay::{replay, Recorder};
use common::rand_vec;

on_both! {
    a_recorded_session_replays_bit_for_bit => session;
    foreign_buffers_and_bad_journals_are_typed_errors => bad;
}

fn journal(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!("atomr-{name}-{}-{nanos}.jsonl", std::process::id()))
}

/// Records: uploads of three dtypes, an f32 GEMM, a seeded normal fill, a write, a copy,
/// a strided-batched f64 GEMM, and five downloads. Returns the downloads.
async fn record(config: DeviceConfig, path: &std::path::Path) -> Vec<Vec<u8>> {
    let sys = ActorSystem::new("rec");
    let d = Device::open(&sys, config).await.unwrap();
    let r = Recorder::create(&d, path).await.unwrap();
    let (m, n, k) = (24, 17, 31);
    let a = r
        .upload(rand_vec(m * k).iter().map(|x| *x as f32).collect())
        .await
        .unwrap();
    let b = r
        .upload(rand_vec(k * n).iter().map(|x| *x as f32).collect())
        .await
        .unwrap();
    let c = r.alloc::<f32>(m * n).await.unwrap();
    r.gemm(Gemm::<f32>::new(m, n, k), &a, &b, &c).await.unwrap();
    let noise = r.alloc::<f32>(1000).await.unwrap();
    r.seed_rng(42).await.unwrap();
    r.fill_normal(&noise, 0.0, 2.0).await.unwrap();
    let ints = r.upload(vec![u64::MAX, 7, 1 << 60]).await.unwrap();
    let ints2 = r.alloc::<u64>(3).await.unwrap();
    r.copy(&ints, &ints2).await.unwrap();
    r.write(&a, rand_vec(m * k).iter().map(|x| *x as f32).collect())
        .await
        .unwrap();
    r.gemm(Gemm::<f32>::new(m, n, k).scaled(0.5, 1.0), &a, &b, &c)
        .await
        .unwrap();
    let x = r.upload(rand_vec(2 * 8 * 8)).await.unwrap();
    let y = r.alloc::<f64>(2 * 8 * 8).await.unwrap();
    let batch = Batch {
        count: 2,
        stride_a: 64,
        stride_b: 64,
        stride_c: 64,
    };
    r.gemm_strided_batched(Gemm::<f64>::new(8, 8, 8), batch, &x, &x, &y)
        .await
        .unwrap();
    let bytes = |v: Vec<u8>| v;
    let f32s = |v: Vec<f32>| bytes(v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let out = vec![
        f32s(r.download(&c).await.unwrap()),
        f32s(r.download(&noise).await.unwrap()),
        r.download(&ints2)
            .await
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        r.download(&y)
            .await
            .unwrap()
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        f32s(r.download(&a).await.unwrap()),
    ];
    sys.shutdown().await;
    out
}

async fn session(config: DeviceConfig) {
    let path = journal("session");
    let downloads = record(config.clone(), &path).await;
    assert!(downloads[1].iter().any(|b| *b != 0), "the normal fill produced numbers");
    // A fresh system and device.
    let sys = ActorSystem::new("replay");
    let d = Device::open(&sys, config.clone()).await.unwrap();
    let report = replay(&path, &d).await.unwrap();
    assert!(report.is_bit_identical(), "{report:?}");
    assert_eq!(report.downloads_checked, 5);
    assert_eq!(report.operations, 20);
    // Tamper with the data of the first upload: the first download (the GEMM) differs.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let upload = lines.iter().position(|l| l.contains("\"op\":\"upload\"")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&lines[upload]).unwrap();
    let data = v["data"].as_str().unwrap().to_string();
    let flipped = if data.starts_with('A') { "B" } else { "A" };
    v["data"] = serde_json::Value::String(format!("{flipped}{}", &data[1..]));
    lines[upload] = v.to_string();
    let tampered = journal("tampered");
    std::fs::write(&tampered, lines.join("\n")).unwrap();
    let report = replay(&tampered, &d).await.unwrap();
    let div = report.divergence.expect("the tampered upload changes the GEMM");
    assert_eq!(report.downloads_checked, 1);
    assert!(lines[div.line - 1].contains("\"op\":\"download\""));
    sys.shutdown().await;
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&tampered);
}

async fn bad(config: DeviceConfig) {
    let sys = ActorSystem::new("replay-bad");
    let d = Device::open(&sys, config).await.unwrap();
    let path = journal("bad");
    let r = Recorder::create(&d, &path).await.unwrap();
    let foreign = d.alloc::<f32>(4).await.unwrap();
    assert!(matches!(r.download(&foreign).await, Err(GpuError::InvalidArgument(_))));
    for (what, text) in [
        ("not a journal", "{\"hello\": 1}\n"),
        ("no header", "{\"op\":\"alloc\",\"id\":1,\"dtype\":\"f32\",\"len\":4}\n"),
        (
            "unknown buffer",
            "{\"op\":\"begin\",\"format\":\"atomr-accel-cuda journal\",\"version\":1,\"backend\":\"Cpu\"}\n{\"op\":\"copy\",\"dtype\":\"f32\",\"src\":1,\"dst\":2}\n",
        ),
        (
            "GEMM of integers",
            "{\"op\":\"begin\",\"format\":\"atomr-accel-cuda journal\",\"version\":1,\"backend\":\"Cpu\"}\n{\"op\":\"gemm\",\"dtype\":\"i32\",\"gemm\":{\"transa\":false,\"transb\":false,\"m\":1,\"n\":1,\"k\":1,\"alpha\":1.0,\"beta\":0.0,\"lda\":1,\"ldb\":1,\"ldc\":1,\"batch\":1,\"stride_a\":0,\"stride_b\":0,\"stride_c\":0},\"a\":1,\"b\":1,\"c\":1}\n",
        ),
    ] {
        let p = journal("bad-case");
        std::fs::write(&p, text).unwrap();
        let e = replay(&p, &d).await.unwrap_err();
        assert!(matches!(e, GpuError::InvalidArgument(_)), "{what}: {e}");
        let _ = std::fs::remove_file(&p);
    }
    sys.shutdown().await;
    let _ = std::fs::remove_file(&path);
}
