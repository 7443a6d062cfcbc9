// A plain actor, a generic handler, a tell handler and hooks compile and run.
use std::time::Duration;

use atomr_accel_cuda::actor::{ActorSystem, Context};
use atomr_accel_cuda::device::DType;
use atomr_accel_cuda::{gpu_actor, GpuError};

struct Counter {
    n: u64,
}

#[gpu_actor(dispatcher = gpu, mailbox = 8)]
impl Counter {
    #[pre_start]
    async fn start(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        Ok(())
    }

    /// Adds one.
    #[handler(tell)]
    fn incr(&mut self) {
        self.n += 1;
    }

    /// The count.
    #[handler]
    async fn get(&self) -> u64 {
        self.n
    }

    /// The count as any numeric dtype.
    #[handler(dtypes(f32, u8, i64))]
    fn get_as<T: DType>(&mut self) -> Result<T, GpuError> {
        Ok(T::from_f64(self.n as f64))
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sys = ActorSystem::new("ui");
        let c = CounterRef::spawn(&sys, "c", || Counter { n: 0 }).unwrap().with_timeout(Duration::from_secs(5));
        c.incr().unwrap();
        c.incr().unwrap();
        assert_eq!(c.get().await.unwrap(), 2);
        assert_eq!(c.get_as::<f32>().await.unwrap(), 2.0);
        assert_eq!(c.get_as::<u8>().await.unwrap(), 2);
    });
}
