//! Fresh random inputs for benches and examples.
#![allow(dead_code)]

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
