//! Worlds of devices (`multi_device`): every collective on CPU-device worlds against a
//! float64 reference on fresh random data of odd lengths, for each reduction and the
//! four element types; send/receive around a ring; ranks that disagree (lengths, element
//! types, the collective itself), a bad root or length, a stale buffer, a member lost
//! mid-collective and a rank that never comes all end in typed errors on every rank,
//! never a hang. On the GPU: a world of every GPU runs the same collectives on NCCL, in
//! order with the buffers' other work, and re-forms after a member's rebuild.

mod common;

use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::multi_device::{CollectiveScalar, Rank, ReduceOp, World};
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::slow::slow_copy;
use common::{rand_vec, reduce_ref};
use half::{bf16, f16};

/// `n` CPU devices (ordinals 10, 11, …), each under a system of its own.
async fn cpu_devices(n: usize, timeout: Duration) -> (Vec<ActorSystem>, Vec<Device>) {
    let mut systems = vec![];
    let mut devices = vec![];
    for i in 0..n {
        let sys = ActorSystem::new(&format!("world-{i}"));
        let mut config = DeviceConfig::cpu();
        config.device_id = 10 + i;
        config.request_timeout = timeout;
        devices.push(Device::open(&sys, config).await.unwrap());
        systems.push(sys);
    }
    (systems, devices)
}

fn data<T: CollectiveScalar>(n: usize) -> Vec<T> {
    rand_vec(n).into_iter().map(|v| T::from_f64(v * 4.0)).collect()
}

/// Runs `f` on every rank at once; the results in rank order.
async fn on_every_rank<R: Send + 'static, F>(world: &World, f: impl Fn(Rank) -> F) -> Vec<R>
where
    F: std::future::Future<Output = R> + Send + 'static,
{
    let tasks: Vec<_> = world.ranks().into_iter().map(|r| tokio::spawn(f(r))).collect();
    let mut out = vec![];
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn close<T: CollectiveScalar>(got: &[T], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// Every collective of `T` on a world over `devices`.
async fn collectives_of<T: CollectiveScalar>(devices: &[Device], tol: f64) {
    let world = World::new(devices).await.unwrap();
    let size = world.size();
    let last = size - 1;
    let n = 1001;
    let inputs: Vec<Vec<T>> = (0..size).map(|_| data::<T>(n)).collect();
    let wide = |i: usize| inputs.iter().map(move |v| v[i].to_f64());
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg] {
        let want: Vec<f64> = (0..n).map(|i| reduce_ref(op, wide(i))).collect();
        let inputs = inputs.clone();
        let got = on_every_rank(&world, move |r| {
            let input = inputs[r.index()].clone();
            async move {
                let send = r.device().upload(input).await.unwrap();
                let recv = r.device().alloc::<T>(n).await.unwrap();
                r.all_reduce(&send, &recv, op).await.unwrap();
                r.device().download(&recv).await.unwrap()
            }
        })
        .await;
        for (rank, g) in got.iter().enumerate() {
            close(
                g,
                &want,
                tol,
                &format!("all_reduce {op:?} of {} on rank {rank}", T::NAME),
            );
        }
    }

    // Broadcast from the last rank, all-gather, reduce-scatter (sum), in one sequence per rank.
    let block = 333;
    let scatter_in: Vec<Vec<T>> = (0..size).map(|_| data::<T>(block * size)).collect();
    let (inputs2, scatter2) = (inputs.clone(), scatter_in.clone());
    let got = on_every_rank(&world, move |r| {
        let (input, scatter) = (inputs2[r.index()].clone(), scatter2[r.index()].clone());
        async move {
            let d = r.device();
            let send = d.upload(input).await.unwrap();
            let b = d.alloc::<T>(n).await.unwrap();
            r.broadcast(&send, &b, last).await.unwrap();
            let g = d.alloc::<T>(n * r.size()).await.unwrap();
            r.all_gather(&send, &g).await.unwrap();
            let s = d.upload(scatter).await.unwrap();
            let rs = d.alloc::<T>(block).await.unwrap();
            r.reduce_scatter(&s, &rs, ReduceOp::Sum).await.unwrap();
            (
                d.download(&b).await.unwrap(),
                d.download(&g).await.unwrap(),
                d.download(&rs).await.unwrap(),
            )
        }
    })
    .await;
    let gathered: Vec<f64> = inputs.iter().flatten().map(|v| v.to_f64()).collect();
    let root: Vec<f64> = inputs[last].iter().map(|v| v.to_f64()).collect();
    for (rank, (b, g, rs)) in got.iter().enumerate() {
        close(b, &root, 0.0, &format!("broadcast on rank {rank}"));
        close(g, &gathered, 0.0, &format!("all_gather on rank {rank}"));
        let want: Vec<f64> = (0..block)
            .map(|i| scatter_in.iter().map(|v| v[rank * block + i].to_f64()).sum())
            .collect();
        close(rs, &want, tol, &format!("reduce_scatter on rank {rank}"));
    }

    // Around a ring: each rank sends to the next and receives from the previous.
    if size == 1 {
        return;
    }
    let inputs3 = inputs.clone();
    let got = on_every_rank(&world, move |r| {
        let input = inputs3[r.index()].clone();
        async move {
            let (i, size) = (r.index(), r.size());
            let d = r.device();
            let send = d.upload(input).await.unwrap();
            let recv = d.alloc::<T>(n).await.unwrap();
            let (s, v) = tokio::join!(r.send(&send, (i + 1) % size), r.recv(&recv, (i + size - 1) % size));
            s.unwrap();
            v.unwrap();
            d.download(&recv).await.unwrap()
        }
    })
    .await;
    for (rank, g) in got.iter().enumerate() {
        let from: Vec<f64> = inputs[(rank + size - 1) % size].iter().map(|v| v.to_f64()).collect();
        close(g, &from, 0.0, &format!("ring receive on rank {rank}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_collective_matches_a_float64_reference_for_each_element_type() {
    let (_s, devices) = cpu_devices(3, Duration::from_secs(60)).await;
    collectives_of::<f32>(&devices, 1e-6).await;
    collectives_of::<f64>(&devices, 1e-12).await;
    collectives_of::<f16>(&devices, 2e-3).await;
    collectives_of::<bf16>(&devices, 1e-2).await;
}

/// Views as a collective's buffers: send and recv disjoint views of one buffer (the
/// rest of it untouched), in place on one view, NCCL's in-place all-gather and
/// reduce-scatter (the shard a block of the whole); partly overlapping views otherwise
/// are an `InvalidArgument` on every rank.
async fn views_as_send_and_recv(devices: &[Device]) {
    let world = World::new(devices).await.unwrap();
    let n = 301;
    let inputs: Vec<Vec<f64>> = (0..devices.len()).map(|_| rand_vec(3 * n)).collect();
    let results = on_every_rank(&world, {
        let inputs = inputs.clone();
        move |r: Rank| {
            let input = inputs[r.index()].clone();
            async move {
                let d = r.device();
                let buf = d.upload(input).await.unwrap();
                let (send, recv) = (buf.view(..n).unwrap(), buf.view(2 * n..).unwrap());
                r.all_reduce(&send, &recv, ReduceOp::Sum).await.unwrap();
                let mid = buf.view(n..2 * n).unwrap();
                r.all_reduce(&mid, &mid, ReduceOp::Max).await.unwrap();
                let (a, b) = (buf.view(..n).unwrap(), buf.view(10..n + 10).unwrap());
                let e = r.all_reduce(&a, &b, ReduceOp::Sum).await.unwrap_err();
                assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
                let before = d.download(&buf).await.unwrap();
                // NCCL's in-place layouts: the shard is this rank's block of the whole.
                let size = r.size();
                let k = 7;
                let whole = d.upload(vec![0.0f64; k * size]).await.unwrap();
                let shard = whole.view(r.index() * k..(r.index() + 1) * k).unwrap();
                d.write(&shard, (0..k).map(|i| (100 * r.index() + i) as f64).collect::<Vec<_>>())
                    .await
                    .unwrap();
                r.all_gather(&shard, &whole).await.unwrap();
                let gathered = d.download(&whole).await.unwrap();
                r.reduce_scatter(&whole, &shard, ReduceOp::Sum).await.unwrap();
                let scattered = d.download(&shard).await.unwrap();
                // Another rank's block is refused on every rank (a world of one has none:
                // there, a block one element off its place).
                let e = if size > 1 {
                    let wrong = whole.view(((r.index() + 1) % size) * k..).unwrap();
                    r.all_gather(&wrong.view(..k).unwrap(), &whole).await.unwrap_err()
                } else {
                    let two = d.upload(vec![0.0f64; 2 * k]).await.unwrap();
                    r.all_gather(&two.view(1..k + 1).unwrap(), &two.view(..k).unwrap())
                        .await
                        .unwrap_err()
                };
                assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
                (before, gathered, scattered)
            }
        }
    })
    .await;
    let size = devices.len();
    let k = 7;
    let gathered: Vec<f64> = (0..size)
        .flat_map(|q| (0..k).map(move |i| (100 * q + i) as f64))
        .collect();
    for (rank, (_, got, scattered)) in results.iter().enumerate() {
        assert_eq!(got, &gathered, "all-gather in place on rank {rank}");
        let want: Vec<f64> = (0..k).map(|i| size as f64 * gathered[rank * k + i]).collect();
        assert_eq!(scattered, &want, "reduce-scatter in place on rank {rank}");
    }
    let results: Vec<Vec<f64>> = results.into_iter().map(|(b, _, _)| b).collect();
    for (rank, got) in results.iter().enumerate() {
        assert_eq!(got[..n], inputs[rank][..n], "send untouched on rank {rank}");
        let sum: Vec<f64> = (0..n).map(|i| inputs.iter().map(|v| v[i]).sum()).collect();
        close(&got[2 * n..], &sum, 1e-12, &format!("sum into a view on rank {rank}"));
        let max: Vec<f64> = (0..n)
            .map(|i| inputs.iter().map(|v| v[n + i]).fold(f64::MIN, f64::max))
            .collect();
        close(
            &got[n..2 * n],
            &max,
            0.0,
            &format!("max in place on a view on rank {rank}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_of_one_buffer_serve_as_send_and_recv() {
    let (_s, devices) = cpu_devices(3, Duration::from_secs(60)).await;
    views_as_send_and_recv(&devices).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranks_that_disagree_or_pass_bad_input_fail_on_every_rank() {
    let (_s, devices) = cpu_devices(2, Duration::from_secs(60)).await;
    let world = World::new(&devices).await.unwrap();
    let inv = |e: &GpuError| matches!(e, GpuError::InvalidArgument(_));
    // Lengths that differ between ranks.
    let errs = on_every_rank(&world, |r| async move {
        let n = 16 + r.index();
        let send = r.device().upload(vec![1.0f32; n]).await.unwrap();
        let recv = r.device().alloc::<f32>(n).await.unwrap();
        r.all_reduce(&send, &recv, ReduceOp::Sum).await.unwrap_err()
    })
    .await;
    assert!(errs.iter().all(inv), "{errs:?}");
    // Element types that differ.
    let errs = on_every_rank(&world, |r| async move {
        let d = r.device();
        if r.index() == 0 {
            let (s, v) = (
                d.upload(vec![1.0f32; 8]).await.unwrap(),
                d.alloc::<f32>(8).await.unwrap(),
            );
            r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap_err()
        } else {
            let (s, v) = (
                d.upload(vec![1.0f64; 8]).await.unwrap(),
                d.alloc::<f64>(8).await.unwrap(),
            );
            r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap_err()
        }
    })
    .await;
    assert!(errs.iter().all(inv), "{errs:?}");
    assert!(
        errs[1].to_string().contains("f64") && errs[1].to_string().contains("f32"),
        "{}",
        errs[1]
    );
    // Different collectives, and a bad length or root on one rank only.
    let errs = on_every_rank(&world, |r| async move {
        let d = r.device();
        let s = d.upload(vec![1.0f32; 8]).await.unwrap();
        let v = d.alloc::<f32>(8).await.unwrap();
        let short = d.alloc::<f32>(7).await.unwrap();
        let a = if r.index() == 0 {
            r.all_reduce(&s, &v, ReduceOp::Max).await.unwrap_err()
        } else {
            r.broadcast(&s, &v, 0).await.unwrap_err()
        };
        let b = if r.index() == 0 {
            r.all_reduce(&s, &short, ReduceOp::Sum).await.unwrap_err()
        } else {
            r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap_err()
        };
        let c = r
            .broadcast(&s, &v, if r.index() == 0 { 5 } else { 0 })
            .await
            .unwrap_err();
        vec![a, b, c]
    })
    .await;
    for (rank, e) in errs.iter().enumerate() {
        assert!(e.iter().all(inv), "rank {rank}: {e:?}");
    }
    // Still in step: a good collective after the failed ones.
    let got = on_every_rank(&world, |r| async move {
        let s = r.device().upload(vec![r.index() as f32 + 1.0; 4]).await.unwrap();
        let v = r.device().alloc::<f32>(4).await.unwrap();
        r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap();
        r.device().download(&v).await.unwrap()
    })
    .await;
    assert!(got.iter().all(|v| v == &vec![3.0f32; 4]), "{got:?}");
    // Sends to no rank or to itself.
    let r0 = world.rank(0);
    let s = r0.device().upload(vec![1.0f32; 4]).await.unwrap();
    assert!(inv(&r0.send(&s, 2).await.unwrap_err()));
    assert!(inv(&r0.send(&s, 0).await.unwrap_err()));
    assert!(inv(&r0.recv(&s, 7).await.unwrap_err()));
    // And a good message after them.
    let r1 = world.rank(1);
    let v = r1.device().alloc::<f32>(4).await.unwrap();
    let (a, b) = tokio::join!(r0.send(&s, 1), r1.recv(&v, 0));
    a.unwrap();
    b.unwrap();
    assert_eq!(r1.device().download(&v).await.unwrap(), vec![1.0f32; 4]);
}

/// An all-reduce on `r` that must fail: its error.
async fn failed_sum(r: &Rank) -> GpuError {
    let s = r.device().upload(vec![1.0f32; 8]).await.unwrap();
    let v = r.device().alloc::<f32>(8).await.unwrap();
    r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_buffer_a_lost_member_or_an_absent_rank_fail_the_others_in_time() {
    let (_s, devices) = cpu_devices(3, Duration::from_millis(400)).await;
    let world = World::new(&devices).await.unwrap();
    // A stale buffer on rank 1: every rank gets `Stale`.
    let stale = devices[1].upload(vec![1.0f32; 8]).await.unwrap();
    devices[1].rebuild().await.unwrap();
    let errs = on_every_rank(&world, move |r| {
        let stale = stale.clone();
        async move {
            let d = r.device();
            let s = if r.index() == 1 {
                stale
            } else {
                d.upload(vec![1.0f32; 8]).await.unwrap()
            };
            let v = d.alloc::<f32>(8).await.unwrap();
            r.all_reduce(&s, &v, ReduceOp::Sum).await.unwrap_err()
        }
    })
    .await;
    assert!(errs.iter().all(|e| matches!(e, GpuError::Stale { .. })), "{errs:?}");

    // Rank 2 never comes: the others time out at the deadline, not later.
    let t = Instant::now();
    let errs = on_every_rank(&world, |r| async move {
        if r.index() == 2 {
            return None;
        }
        Some(failed_sum(&r).await)
    })
    .await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        errs.iter().flatten().all(|e| matches!(e, GpuError::Timeout(_))),
        "{errs:?}"
    );

    // A world of fresh devices with a long deadline; rank 2's device is lost while the
    // others wait: they fail with `DeviceLost` at once.
    let (_s2, devices) = cpu_devices(3, Duration::from_secs(120)).await;
    let world = World::new(&devices).await.unwrap();
    let t = Instant::now();
    let victim = devices[2].clone();
    let errs = on_every_rank(&world, move |r| {
        let victim = victim.clone();
        async move {
            if r.index() == 2 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                victim.stop().await;
                return None;
            }
            Some(failed_sum(&r).await)
        }
    })
    .await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    for e in errs.iter().flatten() {
        assert!(matches!(e, GpuError::DeviceLost(_)), "{e:?}");
        assert!(e.to_string().contains("rank 2"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_needs_devices_of_its_own() {
    let (_s, devices) = cpu_devices(2, Duration::from_secs(60)).await;
    assert!(World::new(&[]).await.is_err());
    let same = vec![devices[0].clone(), devices[0].clone()];
    assert!(matches!(World::new(&same).await, Err(GpuError::InvalidArgument(_))));
    let one = World::new(&devices[..1]).await.unwrap();
    let r = one.rank(0);
    let s = r.device().upload(vec![2.0f64; 5]).await.unwrap();
    let v = r.device().alloc::<f64>(5).await.unwrap();
    r.all_reduce(&s, &v, ReduceOp::Avg).await.unwrap();
    assert_eq!(r.device().download(&v).await.unwrap(), vec![2.0; 5], "a world of one");
}

/// Every GPU of the machine, each under a system of its own.
async fn gpus() -> (Vec<ActorSystem>, Vec<Device>) {
    let n = atomr_accel_cuda::p2p::Topology::probe().unwrap().gpus();
    let mut systems = vec![];
    let mut devices = vec![];
    for i in 0..n {
        let sys = ActorSystem::new(&format!("nccl-{i}"));
        devices.push(Device::open(&sys, DeviceConfig::cuda(i)).await.unwrap());
        systems.push(sys);
    }
    (systems, devices)
}

/// A world of every GPU (one rank on a machine of one GPU) runs each collective on NCCL,
/// for each element type, against the same float64 references as the CPU world.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn a_world_of_gpus_runs_every_collective_on_nccl() {
    let (_s, devices) = gpus().await;
    assert!(World::new(&devices).await.unwrap().rank(0).on_nccl());
    collectives_of::<f32>(&devices, 1e-6).await;
    collectives_of::<f64>(&devices, 1e-12).await;
    collectives_of::<f16>(&devices, 2e-3).await;
    collectives_of::<bf16>(&devices, 1e-2).await;
    views_as_send_and_recv(&devices).await;
}

/// On NCCL: a collective is ordered after the work still writing its input and before
/// what reads its output; in place works; a rebuilt member fails the old buffers and the
/// world re-forms; two ranks on one GPU are refused with a reason; a GPU mixed with a CPU device runs through the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a CUDA GPU"]
async fn a_world_of_gpus_orders_its_work_and_re_forms_after_a_rebuild() {
    let (_s, devices) = gpus().await;
    let world = World::new(&devices[..1]).await.unwrap();
    let r = world.rank(0);
    let d = r.device();
    let x: Vec<f32> = rand_vec(4096).iter().map(|&v| v as f32).collect();
    let gx = d.upload(x.clone()).await.unwrap();
    let mut w = d.alloc::<f32>(x.len()).await.unwrap();
    slow_copy::enqueue(
        &d.actor_gpu(),
        LaunchConfig::for_elements(x.len(), 256),
        20_000,
        &gx,
        &mut w,
    )
    .await
    .unwrap();
    // In place, right behind the slow kernel: one rank's sum is its own input.
    r.all_reduce(&w, &w, ReduceOp::Sum).await.unwrap();
    let got = d.download(&w).await.unwrap();
    for (i, (g, v)) in got.iter().zip(&x).enumerate() {
        assert!(
            (g - (v + 1.0)).abs() <= 1e-4,
            "element {i}: {g} after the slow kernel, want {}",
            v + 1.0
        );
    }

    d.rebuild().await.unwrap();
    let e = r.all_reduce(&w, &w, ReduceOp::Sum).await.unwrap_err();
    assert!(matches!(e, GpuError::Stale { .. }), "{e:?}");
    let fresh = d.upload(x.clone()).await.unwrap();
    let out = d.alloc::<f32>(x.len()).await.unwrap();
    r.all_reduce(&fresh, &out, ReduceOp::Max).await.unwrap();
    assert_eq!(d.download(&out).await.unwrap(), x, "re-formed after the rebuild");

    let sys = ActorSystem::new("nccl-twin");
    let twin = Device::open(&sys, DeviceConfig::cuda(0)).await.unwrap();
    let e = World::new(&[devices[0].clone(), twin]).await.err().unwrap();
    assert!(matches!(e, GpuError::InvalidArgument(_)), "two ranks on one GPU: {e:?}");
    // A GPU and a CPU device: NCCL cannot hold the CPU device, so the world's
    // collectives run through the host.
    let (_c, cpu) = cpu_devices(1, Duration::from_secs(60)).await;
    let mixed = World::new(&[devices[0].clone(), cpu[0].clone()]).await.unwrap();
    assert!(!mixed.rank(0).on_nccl(), "a mixed world runs through the host");
    let (gx, cx) = (
        devices[0].upload(vec![1.0f32, 2.0]).await.unwrap(),
        cpu[0].upload(vec![10.0f32, 20.0]).await.unwrap(),
    );
    let (r0, r1) = (mixed.rank(0), mixed.rank(1));
    let (g2, c2) = (gx.clone(), cx.clone());
    let t0 = tokio::spawn(async move { r0.all_reduce(&g2, &g2, ReduceOp::Sum).await });
    let t1 = tokio::spawn(async move { r1.all_reduce(&c2, &c2, ReduceOp::Sum).await });
    t0.await.unwrap().unwrap();
    t1.await.unwrap().unwrap();
    assert_eq!(devices[0].download(&gx).await.unwrap(), vec![11.0, 22.0]);
    assert_eq!(cpu[0].download(&cx).await.unwrap(), vec![11.0, 22.0]);
}
