//! Quickstart: README's main command.
//!
//! Today this shows the actor core that the GPU layers are built on: a supervised actor
//! that fails, is restarted by its parent without losing the messages queued behind the
//! failure, and answers typed asks. (The device tier and SGEMM through `BlasActor` replace
//! this program once they land; README.md's status table says what exists.)

use std::time::{Duration, Instant};

use atomr_accel_cuda::prelude::*;

enum Msg {
    Add(f64),
    Sum(Reply<f64>),
    Fail,
}

struct Accumulator {
    sum: f64,
}

impl Actor for Accumulator {
    type Msg = Msg;
    async fn handle(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Result<(), GpuError> {
        match msg {
            Msg::Add(v) => self.sum += v,
            Msg::Sum(r) => {
                r.send(self.sum);
            }
            Msg::Fail => panic!("deliberate failure"),
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), GpuError> {
    let t0 = Instant::now();
    let system = ActorSystem::new("quickstart");
    let acc = system.spawn(Props::new(|| Accumulator { sum: 0.0 }), "accumulator")?;
    for i in 1..=100 {
        acc.tell(Msg::Add(i as f64))?;
    }
    let before = acc.ask(Msg::Sum, Duration::from_secs(5)).await?;
    println!("sum of 1..=100 = {before}");
    acc.tell(Msg::Fail)?;
    acc.tell(Msg::Add(1.0))?;
    let after = acc.ask(Msg::Sum, Duration::from_secs(5)).await?;
    println!("after a panic and a restart by the supervisor, a fresh instance saw the next message: sum = {after}");
    assert_eq!(before, 5050.0);
    assert_eq!(after, 1.0);
    system.shutdown().await;
    println!("done in {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    Ok(())
}
