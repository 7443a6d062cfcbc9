//! Host↔device copies of 256 MiB through the device's actors vs raw cudarc in the same
//! process: pinned (`write_pinned` / `download_pinned` vs `memcpy_htod`/`memcpy_dtoh` from
//! page-locked memory + sync) and pageable (`write` / `download`, and the staged
//! `write_slice` / `download_into` of the caller's own Vec, vs the same with a Vec).
//! Target: pinned ≥ 0.95× raw. Skips with a message without a GPU.

use std::time::Instant;

use atomr_accel_cuda::DeviceConfig;

const N: usize = 64 << 20; // f32 elements: 256 MiB
const ITERS: usize = 10;

fn gbps(secs: &mut [f64]) -> f64 {
    secs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (N * 4) as f64 / secs[secs.len() / 2] / 1e9
}

fn report(what: &str, actor: f64, raw: f64) {
    println!(
        "RESULT | {what} | actor {actor:.2} GB/s, raw cudarc {raw:.2} GB/s, ratio {:.3}",
        actor / raw
    );
}
#[path = "support/gpu_bench.rs"]
mod gpu_bench;

use gpu_bench::run_gpu;

fn main() {
    run_gpu("copies", DeviceConfig::cuda(0), |dev, ctx, stream| async move {
        // SAFETY: zero-filled right below before any read.
        let mut host = unsafe { ctx.alloc_pinned_with_flags::<f32>(N, 0) }.unwrap();
        host.as_mut_slice().unwrap().fill(1.0);
        let mut dbuf = stream.alloc_zeros::<f32>(N).unwrap();
        let dst = dev.alloc::<f32>(N).await.unwrap();
        let mut pinned = dev.pinned::<f32>(N).await.unwrap();
        pinned.as_mut_slice().unwrap().fill(1.0);
        let pageable = vec![1.0f32; N];
        let mut pageable_out = vec![0.0f32; N];

        let (mut a_h2d, mut r_h2d, mut a_d2h, mut r_d2h) = (vec![], vec![], vec![], vec![]);
        let (mut a_ph2d, mut r_ph2d, mut a_pd2h, mut r_pd2h) = (vec![], vec![], vec![], vec![]);
        let (mut a_sh2d, mut a_sd2h) = (vec![], vec![]);
        for i in 0..ITERS + 2 {
            let keep = i >= 2;
            let t = Instant::now();
            stream.memcpy_htod(&host, &mut dbuf).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            pinned = dev.write_pinned(&dst, pinned).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            if keep {
                r_h2d.push(r);
                a_h2d.push(a);
            }
            let t = Instant::now();
            stream.memcpy_dtoh(&dbuf, &mut host).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            pinned = dev.download_pinned(&dst, pinned).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            if keep {
                r_d2h.push(r);
                a_d2h.push(a);
            }
            let t = Instant::now();
            stream.memcpy_htod(&pageable, &mut dbuf).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            dev.write(&dst, pageable.clone()).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            if keep {
                r_ph2d.push(r);
                a_ph2d.push(a);
            }
            let t = Instant::now();
            stream.memcpy_dtoh(&dbuf, &mut pageable_out).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let out = dev.download(&dst).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            assert_eq!(out.len(), N);
            if keep {
                r_pd2h.push(r);
                a_pd2h.push(a);
            }
            // The caller's own memory, staged through pinned chunks.
            let t = Instant::now();
            dev.write_slice(&dst, &pageable).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            let t2 = Instant::now();
            dev.download_into(&dst, &mut pageable_out).await.unwrap();
            let b = t2.elapsed().as_secs_f64();
            if keep {
                a_sh2d.push(a);
                a_sd2h.push(b);
            }
        }
        report("copy.H2D 256MiB pinned", gbps(&mut a_h2d), gbps(&mut r_h2d));
        report("copy.D2H 256MiB pinned", gbps(&mut a_d2h), gbps(&mut r_d2h));
        report(
            "copy.H2D 256MiB pageable (actor time includes the Vec clone)",
            gbps(&mut a_ph2d),
            gbps(&mut r_ph2d),
        );
        report("copy.D2H 256MiB pageable", gbps(&mut a_pd2h), gbps(&mut r_pd2h));
        report(
            "copy.H2D 256MiB pageable, write_slice (vs raw memcpy_htod from the same Vec)",
            gbps(&mut a_sh2d),
            gbps(&mut r_ph2d),
        );
        report(
            "copy.D2H 256MiB pageable, download_into (vs raw memcpy_dtoh into the same Vec)",
            gbps(&mut a_sd2h),
            gbps(&mut r_pd2h),
        );
        assert!(pageable_out.iter().all(|v| *v == 1.0), "download_into");
        assert!(pinned.as_slice().unwrap().iter().all(|v| *v == 1.0));
        // Between devices: a second `Device` on this GPU, and the CPU device.
        let sys2 = atomr_accel_cuda::actor::ActorSystem::new("copies-peer");
        let dev2 = atomr_accel_cuda::Device::open(&sys2, DeviceConfig::cuda(0))
            .await
            .unwrap();
        let mut cpu_cfg = DeviceConfig::cpu();
        cpu_cfg.device_id = 1;
        let cpu = atomr_accel_cuda::Device::open(&sys2, cpu_cfg).await.unwrap();
        let peer_dst = dev2.alloc::<f32>(N).await.unwrap();
        let cpu_dst = cpu.alloc::<f32>(N).await.unwrap();
        let mut dbuf2 = stream.alloc_zeros::<f32>(N).unwrap();
        let (mut a_p, mut r_p, mut a_c, mut r_c) = (vec![], vec![], vec![], vec![]);
        for i in 0..ITERS + 2 {
            let keep = i >= 2;
            let t = Instant::now();
            stream.memcpy_dtod(&dbuf, &mut dbuf2).unwrap();
            stream.synchronize().unwrap();
            let r = t.elapsed().as_secs_f64();
            let t = Instant::now();
            dev.copy_to(&dst, &dev2, &peer_dst).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            if keep {
                r_p.push(r);
                a_p.push(a);
            }
            let t = Instant::now();
            let v = stream.clone_dtoh(&dbuf).unwrap();
            let r = t.elapsed().as_secs_f64();
            drop(v);
            let t = Instant::now();
            dev.copy_to(&dst, &cpu, &cpu_dst).await.unwrap();
            let a = t.elapsed().as_secs_f64();
            if keep {
                r_c.push(r);
                a_c.push(a);
            }
        }
        report(
            "copy_to 256MiB, two Devices on one GPU (vs raw memcpy_dtod + sync)",
            gbps(&mut a_p),
            gbps(&mut r_p),
        );
        report(
            "copy_to 256MiB, GPU -> CPU device (vs raw clone_dtoh into a new Vec)",
            gbps(&mut a_c),
            gbps(&mut r_c),
        );
        // Back to back (each copy right after the last: the device's threads still hot),
        // against raw copies back to back.
        let (mut a_b, mut r_b) = (vec![], vec![]);
        for _ in 0..ITERS {
            let t = Instant::now();
            stream.memcpy_dtod(&dbuf, &mut dbuf2).unwrap();
            stream.synchronize().unwrap();
            r_b.push(t.elapsed().as_secs_f64());
        }
        for _ in 0..ITERS {
            let t = Instant::now();
            dev.copy_to(&dst, &dev2, &peer_dst).await.unwrap();
            a_b.push(t.elapsed().as_secs_f64());
        }
        report(
            "copy_to 256MiB, two Devices on one GPU, back to back (vs raw the same)",
            gbps(&mut a_b),
            gbps(&mut r_b),
        );
        sys2.shutdown().await;
    });
}
