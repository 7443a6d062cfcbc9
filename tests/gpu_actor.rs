//! `#[gpu_actor]`: generated messages, dispatch, typed client, dtype expansion,
//! supervision wiring — exercised on the CPU device.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use atomr_accel_cuda::actor::{ActorSystem, Context};
use atomr_accel_cuda::device::Blas1Scalar;
use atomr_accel_cuda::{gpu_actor, Device, DeviceConfig, GpuError, GpuRef};
use common::rand_vec;

/// Scales vectors to unit length on a device.
struct Normalizer {
    device: Device,
    calls: u64,
    events: Arc<AtomicUsize>,
}

#[gpu_actor(supervision(restart_on = [Other], resume_on = [InvalidArgument], max_restarts = 3, within = "10s"), mailbox = 64, ask_timeout = "20s")]
impl Normalizer {
    #[pre_start]
    async fn started(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.events.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    #[post_stop]
    async fn stopped(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.events.fetch_add(100, Ordering::SeqCst);
        Ok(())
    }

    /// Divides `x` by its norm in place and returns the old norm.
    #[handler(dtypes(f32, f64))]
    async fn normalize<T: Blas1Scalar>(&mut self, x: GpuRef<T>) -> Result<T, GpuError> {
        self.calls += 1;
        let n = self.device.nrm2(&x).await?;
        if n == T::from_f64(0.0) {
            return Err(GpuError::InvalidArgument("cannot normalize a zero vector".into()));
        }
        self.device.scal(T::from_f64(1.0) / n, &x).await?;
        Ok(n)
    }

    /// How many normalizations this instance did (a plain return value).
    #[handler]
    fn calls(&self) -> u64 {
        self.calls
    }

    /// Adds to the counter without a reply.
    #[handler(tell)]
    fn bump(&mut self, by: u64) {
        self.calls += by;
    }

    /// Fails with a kind listed in `restart_on`.
    #[handler]
    async fn fail(&mut self, ctx: &mut Context<Self>, why: String) -> Result<(), GpuError> {
        let _ = ctx.path();
        Err(GpuError::Other(why))
    }
}

fn spawn(sys: &ActorSystem, dev: &Device, events: &Arc<AtomicUsize>) -> NormalizerRef {
    let (dev, events) = (dev.clone(), events.clone());
    NormalizerRef::spawn(sys, "normalizer", move || Normalizer {
        device: dev.clone(),
        calls: 0,
        events: events.clone(),
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_client_dispatches_every_handler_and_dtype() {
    let sys = ActorSystem::new("gpu-actor");
    let dev = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let events = Arc::new(AtomicUsize::new(0));
    let n = spawn(&sys, &dev, &events);

    let x = rand_vec(257);
    let want = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let g32 = dev
        .upload(x.iter().map(|v| *v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let g64 = dev.upload(x.clone()).await.unwrap();
    let n32 = n.normalize(g32.clone()).await.unwrap();
    let n64 = n.normalize(g64.clone()).await.unwrap();
    assert!((n32 as f64 - want).abs() < 1e-4 * want);
    assert!((n64 - want).abs() < 1e-12 * want);
    let unit = dev.download(&g64).await.unwrap();
    assert!((unit.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() < 1e-12);

    n.bump(5).unwrap();
    assert_eq!(n.calls().await.unwrap(), 7);

    // A handler's error reaches the asker; InvalidArgument resumes (state kept).
    let zero = dev.alloc::<f32>(8).await.unwrap();
    assert!(matches!(n.normalize(zero).await, Err(GpuError::InvalidArgument(_))));
    assert_eq!(n.calls().await.unwrap(), 8);

    // `Other` is in restart_on: the asker gets the error, the supervisor restarts the
    // actor (fresh state, pre_start again).
    assert_eq!(n.fail("boom".into()).await, Err(GpuError::Other("boom".into())));
    assert_eq!(n.calls().await.unwrap(), 0);
    assert_eq!(events.load(Ordering::SeqCst), 2);

    // The restart budget from the attribute (3 within 10 s), then a stop.
    for _ in 0..3 {
        let _ = n.fail("again".into()).await;
    }
    let t = tokio::time::timeout(Duration::from_secs(5), n.actor_ref().terminated())
        .await
        .unwrap();
    assert_eq!(t.path.as_str(), "/user/normalizer");
    assert!(events.load(Ordering::SeqCst) >= 100, "post_stop ran");
    assert!(matches!(n.calls().await, Err(GpuError::Stopped(_))));
}

#[tokio::test]
async fn message_enum_is_usable_directly() {
    let sys = ActorSystem::new("raw");
    let dev = Device::open(&sys, DeviceConfig::cpu()).await.unwrap();
    let n = spawn(&sys, &dev, &Arc::new(AtomicUsize::new(0)));
    n.actor_ref().tell(NormalizerMsg::Bump { by: 3 }).unwrap();
    let got = n
        .actor_ref()
        .ask_try(|reply| NormalizerMsg::Calls { reply }, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(got, 3);
}
