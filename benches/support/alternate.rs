//! The order in which a bench alternates between the raw baseline and our path, both in
//! one process so that clock and thermal drift hit both alike.
//!
//! Two orders answer different questions:
//! - `Order::PerCall`: raw, ours, raw, ours, … Each of our calls comes after our actor's
//!   thread sat idle for a whole raw call: the latency of an occasional call.
//! - `Order::Blocks`: `BLOCK` raw calls, then `BLOCK` of ours, … Within a block the calls
//!   follow each other as in a loop of awaited calls: what a program issuing them one
//!   after another gets.
#![allow(dead_code)]

/// Calls per block in `Order::Blocks`.
pub const BLOCK: usize = 10;

/// How the raw and our calls alternate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// raw, ours, raw, ours, …
    PerCall,
    /// `BLOCK` raw, `BLOCK` ours, …
    Blocks,
}

/// Which path a call of the schedule is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The raw baseline.
    Raw,
    /// Our path.
    Ours,
}

impl Order {
    /// Both orders, blocks first.
    pub const ALL: [Order; 2] = [Order::Blocks, Order::PerCall];

    /// The sides of `calls` calls of each path, in this order.
    pub fn schedule(self, calls: usize) -> impl Iterator<Item = Side> {
        let run = if self == Order::Blocks { BLOCK } else { 1 };
        (0..calls.div_ceil(run))
            .flat_map(move |_| std::iter::repeat_n(Side::Raw, run).chain(std::iter::repeat_n(Side::Ours, run)))
    }
}

/// Seconds per call of each path, the first calls of each path dropped as warm-up.
pub struct Samples {
    warmup: usize,
    seen: [usize; 2],
    raw: Vec<f64>,
    ours: Vec<f64>,
}

impl Samples {
    /// Drops the first `warmup` calls of each path.
    pub fn new(warmup: usize) -> Self {
        Samples {
            warmup,
            seen: [0, 0],
            raw: vec![],
            ours: vec![],
        }
    }

    /// Records one call of `side` that took `secs`.
    pub fn record(&mut self, side: Side, secs: f64) {
        let (seen, v) = match side {
            Side::Raw => (&mut self.seen[0], &mut self.raw),
            Side::Ours => (&mut self.seen[1], &mut self.ours),
        };
        *seen += 1;
        if *seen > self.warmup {
            v.push(secs);
        }
    }

    /// The median seconds of (raw, ours).
    pub fn medians(mut self) -> (f64, f64) {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).expect("finite times"));
            v[v.len() / 2]
        };
        (median(&mut self.raw), median(&mut self.ours))
    }
}

/// Times `calls` awaited calls of each path in `order`, after `warmup` unmeasured calls
/// of each (alternating): `raw` runs one raw call to completion, `ours` returns the
/// future of one of ours. The median seconds of (raw, ours).
pub async fn measure<F: std::future::Future<Output = ()>>(
    order: Order,
    warmup: usize,
    calls: usize,
    mut raw: impl FnMut(),
    mut ours: impl FnMut() -> F,
) -> (f64, f64) {
    let mut samples = Samples::new(warmup);
    let first = [Side::Raw, Side::Ours].repeat(warmup);
    for side in first.into_iter().chain(order.schedule(calls)) {
        let t = std::time::Instant::now();
        match side {
            Side::Raw => raw(),
            Side::Ours => ours().await,
        }
        samples.record(side, t.elapsed().as_secs_f64());
    }
    samples.medians()
}
