//! Actor core vs a plain tokio mpsc + task loop, in the same process.
//!
//! tell throughput (1M messages through a bounded mailbox, sender awaiting room) and ask
//! latency (p50/p99 of request → reply), on the multi-thread and the current-thread
//! runtime. Prints `RESULT | key | value` lines and the ratios that BENCHMARKS.md records.
//! Knobs: BENCH_MESSAGES (1_000_000), BENCH_ASKS (100_000).

use std::time::{Duration, Instant};

use atomr_accel_cuda::actor::{Actor, ActorSystem, Context, Props, Reply};
use atomr_accel_cuda::GpuError;
use tokio::sync::{mpsc, oneshot};

enum Msg {
    Add(u64),
    Total(Reply<u64>),
    Echo(u64, Reply<u64>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = Msg;
    async fn handle(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Result<(), GpuError> {
        match msg {
            Msg::Add(v) => self.0 += v,
            Msg::Total(r) => {
                r.send(self.0);
            }
            Msg::Echo(v, r) => {
                r.send(v);
            }
        }
        Ok(())
    }
}

const CAPACITY: usize = 1024;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// Messages per second through a plain bounded channel into a task loop.
async fn plain_tell(n: usize) -> f64 {
    let (tx, mut rx) = mpsc::channel::<Msg>(CAPACITY);
    tokio::spawn(async move {
        let mut total = 0;
        while let Some(m) = rx.recv().await {
            match m {
                Msg::Add(v) => total += v,
                Msg::Total(r) => {
                    r.send(total);
                }
                Msg::Echo(v, r) => {
                    r.send(v);
                }
            }
        }
    });
    let t = Instant::now();
    for i in 0..n as u64 {
        tx.send(Msg::Add(i)).await.ok().unwrap();
    }
    let (r, done) = Reply::pair();
    tx.send(Msg::Total(r)).await.ok().unwrap();
    assert_eq!(done.await.unwrap(), (n as u64) * (n as u64 - 1) / 2);
    n as f64 / t.elapsed().as_secs_f64()
}

async fn actor_tell(sys: &ActorSystem, n: usize) -> f64 {
    let a = sys.spawn(Props::new(|| Counter(0)).mailbox(CAPACITY), "tell").unwrap();
    let t = Instant::now();
    for i in 0..n as u64 {
        a.send(Msg::Add(i)).await.unwrap();
    }
    let total = a.ask(Msg::Total, Duration::from_secs(60)).await.unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    assert_eq!(total, (n as u64) * (n as u64 - 1) / 2);
    a.stop();
    a.terminated().await;
    rate
}

async fn plain_ask(n: usize) -> Vec<f64> {
    let (tx, mut rx) = mpsc::channel::<(u64, oneshot::Sender<u64>)>(CAPACITY);
    tokio::spawn(async move {
        while let Some((v, r)) = rx.recv().await {
            let _ = r.send(v);
        }
    });
    let mut lat = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let t = Instant::now();
        let (rtx, rrx) = oneshot::channel();
        tx.send((i, rtx)).await.ok().unwrap();
        assert_eq!(rrx.await.unwrap(), i);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat
}

async fn actor_ask(sys: &ActorSystem, n: usize) -> Vec<f64> {
    let a = sys.spawn(Props::new(|| Counter(0)).mailbox(CAPACITY), "ask").unwrap();
    let mut lat = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let t = Instant::now();
        assert_eq!(a.ask(|r| Msg::Echo(i, r), Duration::from_secs(10)).await.unwrap(), i);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    a.stop();
    a.terminated().await;
    lat
}

fn summarize(label: &str, mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (p50, p99) = (percentile(&v, 0.5), percentile(&v, 0.99));
    println!("RESULT | {label} | p50 {p50:.2} us, p99 {p99:.2} us (n={})", v.len());
    (p50, p99)
}

async fn run(flavor: &str) {
    let n = env("BENCH_MESSAGES", 1_000_000);
    let asks = env("BENCH_ASKS", 100_000);
    let sys = ActorSystem::new("bench");
    // Warm-up of both paths, then best of three for throughput.
    plain_tell(n / 10).await;
    actor_tell(&sys, n / 10).await;
    let mut plain = 0f64;
    let mut actor = 0f64;
    for _ in 0..3 {
        plain = plain.max(plain_tell(n).await);
        actor = actor.max(actor_tell(&sys, n).await);
    }
    println!("RESULT | {flavor}.tell plain mpsc | {:.0} msg/s", plain);
    println!("RESULT | {flavor}.tell actor | {:.0} msg/s", actor);
    println!(
        "RESULT | {flavor}.tell ratio actor/plain | {:.3} (target >= 0.8)",
        actor / plain
    );
    plain_ask(asks / 10).await;
    actor_ask(&sys, asks / 10).await;
    let (pp50, pp99) = summarize(&format!("{flavor}.ask plain"), plain_ask(asks).await);
    let (ap50, ap99) = summarize(&format!("{flavor}.ask actor"), actor_ask(&sys, asks).await);
    println!(
        "RESULT | {flavor}.ask ratio actor/plain | p50 {:.3} (target <= 1.5), p99 {:.3}",
        ap50 / pp50,
        ap99 / pp99
    );
}

fn main() {
    let mt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    mt.block_on(run("multi_thread"));
    drop(mt);
    let ct = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    ct.block_on(run("current_thread"));
}
