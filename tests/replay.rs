//! `replay`: a session recorded by a `Recorder` attached to a device — BLAS, RNG, FFT, a
//! solver, a `#[kernel]` launch, copies, concurrent tasks — replays into a fresh device
//! with every answer bit-identical; a tampered journal is caught at the first answer it
//! changes; what cannot be journalled still runs while recording and stops a replay with
//! `Unsupported`; malformed journals are typed errors. On the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::dtype::c32;
use atomr_accel_cuda::kernel::dsl::prelude::*;
use atomr_accel_cuda::module::LaunchConfig;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::replay::{replay, Recorder, VERSION};
use common::{gemm_ref, rand_vec, rel_err, spd};

on_both! {
    a_recorded_session_replays_bit_for_bit => session;
    what_cannot_be_journalled_still_runs_and_stops_a_replay => unjournalled;
    malformed_journals_are_typed_errors => bad;
    torn_private_and_linked_journals => torn_private_linked;
}

/// `y = a·x + y`.
#[kernel]
pub fn replay_axpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

fn journal(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!("atomr-{name}-{}-{nanos}.jsonl", std::process::id()))
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|x| *x as f32).collect()
}

/// The journal's lines as JSON values.
fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(lines: &[serde_json::Value], op: &str) -> usize {
    lines.iter().filter(|l| l["op"] == op).count()
}

/// Records a session on a fresh device; checks its results against float64 as it goes
/// (recording must not change them).
async fn record(config: DeviceConfig, path: &std::path::Path) {
    let sys = ActorSystem::new("rec");
    let d = Device::open(&sys, config).await.unwrap();
    let r = Recorder::create(&d, path).await.unwrap();
    let second = journal("second");
    assert!(
        matches!(Recorder::create(&d, &second).await, Err(GpuError::InvalidArgument(_))),
        "one recorder per device"
    );
    assert!(!second.exists(), "a refused recorder makes no file");
    let (m, n, k) = (24, 17, 31);
    let (a, b) = (rand_vec(m * k), rand_vec(k * n));
    let ga = d.upload(f32s(&a)).await.unwrap();
    let gb = d.upload(f32s(&b)).await.unwrap();
    let gc = d.alloc::<f32>(m * n).await.unwrap();
    d.gemm(Gemm::<f32>::new(m, n, k), &ga, &gb, &gc).await.unwrap();
    let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|v| *v as f64).collect();
    let mut want = vec![0.0; m * n];
    gemm_ref(false, false, m, n, k, 1.0, &a, m, &b, k, 0.0, &mut want, m);
    assert!(rel_err(&got, &want) < 1e-5);
    // RNG, copies, a write, a second GEMM, a strided-batched f64 GEMM.
    let noise = d.alloc::<f32>(1000).await.unwrap();
    d.seed_rng(42).await.unwrap();
    d.fill_normal(&noise, 0.0, 2.0).await.unwrap();
    let ints = d.upload(vec![u64::MAX, 7, 1 << 60]).await.unwrap();
    let ints2 = d.alloc::<u64>(3).await.unwrap();
    d.copy(&ints, &ints2).await.unwrap();
    d.write(&ga, f32s(&rand_vec(m * k))).await.unwrap();
    d.gemm(Gemm::<f32>::new(m, n, k).scaled(0.5, 1.0), &ga, &gb, &gc)
        .await
        .unwrap();
    let x = d.upload(rand_vec(2 * 8 * 8)).await.unwrap();
    let y = d.alloc::<f64>(2 * 8 * 8).await.unwrap();
    let batch = Batch {
        count: 2,
        stride_a: 64,
        stride_b: 64,
        stride_c: 64,
    };
    d.gemm_strided_batched(Gemm::<f64>::new(8, 8, 8), batch, &x, &x, &y)
        .await
        .unwrap();
    // Level 1 (a scalar answer), an FFT, a Cholesky factorization, a `#[kernel]`.
    let v = rand_vec(100);
    let gv = d.upload(v.clone()).await.unwrap();
    let dot = d.dot(&gv, &gv).await.unwrap();
    assert!((dot - v.iter().map(|e| e * e).sum::<f64>()).abs() < 1e-9);
    let sig: Vec<c32> = rand_vec(64)
        .chunks(2)
        .map(|p| c32::new(p[0] as f32, p[1] as f32))
        .collect();
    let gs = d.upload(sig).await.unwrap();
    let spectrum = d.alloc::<c32>(32).await.unwrap();
    d.fft_c2c(&gs, &spectrum, &FftShape::new(&[32], 1), false)
        .await
        .unwrap();
    let chol = d.upload(spd(12)).await.unwrap();
    d.cholesky(&chol, 12).await.unwrap();
    let (kx, mut ky) = (
        d.upload(f32s(&rand_vec(300))).await.unwrap(),
        d.upload(f32s(&rand_vec(300))).await.unwrap(),
    );
    replay_axpy::launch::<f32>(&d, LaunchConfig::for_elements(300, 128), 1.5, &kx, &mut ky)
        .await
        .unwrap();
    // An answer about the device's state: compared for success only.
    d.memory().await.unwrap();
    // Buffers come and go: the journal notes the ones no handle names any more.
    for i in 0..80 {
        let t = d.alloc::<f32>(16 + i).await.unwrap();
        drop(t);
    }
    // Two tasks at once, each on its own buffers.
    let (d1, d2) = (d.clone(), d.clone());
    let t1 = tokio::spawn(async move {
        let p = d1.upload(f32s(&rand_vec(500))).await.unwrap();
        d1.scal(3.0f32, &p).await.unwrap();
        d1.download(&p).await.unwrap()
    });
    let t2 = tokio::spawn(async move {
        let q = d2.upload(rand_vec(300)).await.unwrap();
        d2.fill_uniform(&q).await.unwrap();
        d2.download(&q).await.unwrap()
    });
    let (_, uniform) = (t1.await.unwrap(), t2.await.unwrap());
    assert!(uniform.iter().all(|u| (0.0..=1.0).contains(u)));
    for buf in [&gc, &ga] {
        d.download(buf).await.unwrap();
    }
    d.download(&noise).await.unwrap();
    d.download(&ints2).await.unwrap();
    d.download(&y).await.unwrap();
    d.download(&spectrum).await.unwrap();
    d.download(&chol).await.unwrap();
    d.download(&ky).await.unwrap();
    r.finish().unwrap();
    sys.shutdown().await;
}

async fn session(config: DeviceConfig) {
    let path = journal("session");
    record(config.clone(), &path).await;
    let ls = lines(&path);
    let requests = count(&ls, "request");
    assert!(requests > 120, "{requests} requests journalled");
    assert_eq!(count(&ls, "unjournalled"), 0);
    assert!(count(&ls, "free") >= 1, "dropped buffers are noted");
    for what in [
        "FftActor::c2c",
        "SolverActor::cholesky",
        "KernelActor::launch",
        "BlasActor::dot",
    ] {
        assert!(
            ls.iter()
                .any(|l| l["what"].as_str().is_some_and(|w| w.starts_with(what))),
            "{what} is journalled"
        );
    }
    // A fresh system and device.
    let sys = ActorSystem::new("replay");
    let d = Device::open(&sys, config.clone()).await.unwrap();
    let report = replay(&path, &d).await.unwrap();
    assert!(report.is_bit_identical(), "{report:?}");
    assert_eq!(report.operations, requests);
    assert_eq!(report.answers_checked, count(&ls, "answer"));
    // Flip one byte of the first upload's data (near the end of its frame): the first
    // answer that depends on it — the download after the GEMM — differs.
    let first = ls
        .iter()
        .position(|l| l["what"] == "ContextActor::upload<f32>")
        .unwrap();
    let mut tampered_lines = ls.clone();
    let frame = tampered_lines[first]["frame"].as_str().unwrap().to_string();
    // Base64 of the last data bytes: change one character before the padding.
    let mut chars: Vec<char> = frame.trim_end_matches('=').chars().collect();
    let at = chars.len() - 2;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    let pad = frame.len() - frame.trim_end_matches('=').len();
    let changed: String = chars.into_iter().chain(std::iter::repeat_n('=', pad)).collect();
    tampered_lines[first]["frame"] = serde_json::Value::String(changed);
    let tampered = journal("tampered");
    let text: Vec<String> = tampered_lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&tampered, text.join("\n")).unwrap();
    let report = replay(&tampered, &d).await.unwrap();
    let div = report.divergence.expect("the tampered upload changes the GEMM");
    assert!(div.request.starts_with("ContextActor::download"), "{div:?}");
    assert!(ls[div.line - 1]["op"] == "answer");
    sys.shutdown().await;
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&tampered);
}

async fn unjournalled(config: DeviceConfig) {
    let sys = ActorSystem::new("replay-unjournalled");
    let d = Device::open(&sys, config.clone()).await.unwrap();
    let before = d.upload(vec![1.0f32, 2.0, 3.0]).await.unwrap();
    let path = journal("unjournalled");
    let r = Recorder::create(&d, &path).await.unwrap();
    // A buffer from before the recording: the request runs, the journal says why it
    // could not name it.
    d.scal(2.0f32, &before).await.unwrap();
    assert_eq!(d.download(&before).await.unwrap(), vec![2.0, 4.0, 6.0]);
    // An event (its actor stays in-process) and a pinned copy run as usual.
    let ev = d.create_event().await.unwrap();
    let after = d.alloc::<f32>(4).await.unwrap();
    d.record_event(&ev, &[&after]).await.unwrap();
    let mut pinned = d.pinned::<f32>(4).await.unwrap();
    pinned.as_mut_slice().unwrap().copy_from_slice(&[5.0, 6.0, 7.0, 8.0]);
    d.write_pinned(&after, pinned).await.unwrap();
    assert_eq!(d.download(&after).await.unwrap(), vec![5.0, 6.0, 7.0, 8.0]);
    r.finish().unwrap();
    let ls = lines(&path);
    assert!(count(&ls, "unjournalled") >= 3, "{ls:?}");
    let why = ls.iter().find(|l| l["op"] == "unjournalled").unwrap();
    assert!(
        why["why"].as_str().unwrap().contains("before the recording began"),
        "{why}"
    );
    // After `finish`, nothing more is journalled, and a new recorder may start.
    d.scal(2.0f32, &after).await.unwrap();
    assert_eq!(lines(&path).len(), ls.len());
    let again = journal("again");
    Recorder::create(&d, &again).await.unwrap().finish().unwrap();
    let _ = std::fs::remove_file(&again);
    let fresh = Device::open(&ActorSystem::new("replay-fresh"), config).await.unwrap();
    match replay(&path, &fresh).await {
        Err(GpuError::Unsupported(m)) => assert!(m.contains("BlasActor::scal"), "{m}"),
        other => panic!("a replay past an unjournalled request: {other:?}"),
    }
    sys.shutdown().await;
    let _ = std::fs::remove_file(&path);
}

/// Records an upload of fresh data and its download at `path`; returns the journal's
/// five lines (begin, two requests, two answers).
async fn small_journal(d: &Device, path: &std::path::Path) -> Vec<String> {
    let r = Recorder::create(d, path).await.unwrap();
    let host = f32s(&rand_vec(16));
    let g = d.upload(host.clone()).await.unwrap();
    assert_eq!(d.download(&g).await.unwrap(), host);
    r.finish().unwrap();
    let lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 5, "begin, two requests, two answers: {lines:?}");
    lines
}

async fn bad(config: DeviceConfig) {
    let sys = ActorSystem::new("replay-bad");
    let d = Device::open(&sys, config).await.unwrap();
    // A small real journal to break.
    let path = journal("small");
    let good = small_journal(&d, &path).await;
    let header = good[0].clone();
    let v1 = header.replace(&format!("\"version\":{VERSION}"), "\"version\":1");
    let no_upload: Vec<String> = good.iter().filter(|l| !l.contains("upload")).cloned().collect();
    let mut bad_frame: serde_json::Value = serde_json::from_str(&good[1]).unwrap();
    bad_frame["frame"] = "@@not base64@@".into();
    let mut short_frame: serde_json::Value = serde_json::from_str(&good[1]).unwrap();
    short_frame["frame"] = "AAAA".into();
    for (what, text) in [
        ("not a journal", "{\"hello\": 1}\n".to_string()),
        ("no header", good[1..].join("\n")),
        ("a version-1 journal", format!("{v1}\n")),
        ("a buffer never made", no_upload.join("\n")),
        ("a frame that is not base64", format!("{header}\n{bad_frame}\n")),
        ("a truncated frame", format!("{header}\n{short_frame}\n")),
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

/// A journal cut short inside its last line (a crash, a full disk) replays up to the cut
/// and says so; a torn line anywhere else is corruption. The journal is private to its
/// user, and a symbolic link where it is to be created is refused, not followed.
async fn torn_private_linked(config: DeviceConfig) {
    let sys = ActorSystem::new("replay-torn");
    let d = Device::open(&sys, config).await.unwrap();
    let path = journal("torn");
    let good = small_journal(&d, &path).await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the journal holds every uploaded byte");
    }
    // Cut inside the last answer: both requests replay, one answer is checked.
    let last = &good[4];
    let torn = format!("{}\n{}", good[..4].join("\n"), &last[..last.len() / 2]);
    let p = journal("torn-end");
    std::fs::write(&p, torn).unwrap();
    let fresh_sys = ActorSystem::new("replay-torn-fresh");
    let fresh = Device::open(&fresh_sys, d.config().clone()).await.unwrap();
    let report = replay(&p, &fresh).await.unwrap();
    assert_eq!((report.operations, report.answers_checked), (2, 1), "{report:?}");
    assert!(report.is_bit_identical());
    assert!(
        report.torn_end.as_deref().is_some_and(|w| w.contains("line 5")),
        "{report:?}"
    );
    // The same cut in a middle line is a corrupt journal.
    let mid = &good[2];
    let corrupt = format!("{}\n{}\n{}\n{}\n", good[0], good[1], &mid[..mid.len() / 2], good[3]);
    std::fs::write(&p, corrupt).unwrap();
    let e = replay(&p, &fresh).await.unwrap_err();
    assert!(
        matches!(e, GpuError::InvalidArgument(ref w) if w.to_string().contains("line 3")),
        "{e}"
    );
    // The whole journal replays with nothing torn.
    let report = replay(&path, &fresh).await.unwrap();
    assert_eq!((report.answers_checked, report.torn_end), (2, None));
    #[cfg(unix)]
    {
        // A link planted where the journal goes: refused, and its target left alone.
        let target = journal("link-target");
        std::fs::write(&target, "not yours").unwrap();
        let link = journal("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        match Recorder::create(&d, &link).await {
            Err(GpuError::Io { what, .. }) => assert!(what.contains("creating journal"), "{what}"),
            Err(e) => panic!("a link is refused as Io, not {e}"),
            Ok(_) => panic!("a link is refused"),
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "not yours");
        for f in [&target, &link] {
            let _ = std::fs::remove_file(f);
        }
    }
    fresh_sys.shutdown().await;
    sys.shutdown().await;
    for f in [&path, &p] {
        let _ = std::fs::remove_file(f);
    }
}
