// An actor under a cargo feature its crate was built without: the client and messages
// exist, and every request is answered `Unsupported`, naming the feature.
use std::time::Duration;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::{gpu_actor, GpuError};

struct Extra;

#[gpu_actor(feature = "extra-library")]
impl Extra {
    /// Would answer 7 with the feature on.
    #[handler]
    fn seven(&mut self) -> u32 {
        7
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sys = ActorSystem::new("ui");
        let e = ExtraRef::spawn(&sys, "e", || Extra).unwrap().with_timeout(Duration::from_secs(5));
        match e.seven().await {
            Err(GpuError::Unsupported(m)) => assert!(m.contains("`extra-library` cargo feature"), "{m}"),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    });
}
