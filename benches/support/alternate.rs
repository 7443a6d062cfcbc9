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

/// Uniform values in [-1, 1) from a seeded xorshift: fresh, non-zero data (the power a GPU
/// draws, and so its clock, depends on the data; zeros would flatter both paths).
pub fn random_f32(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}
