//! The CPU device's Sobol sequences: the points cuRAND's quasi-random generators give,
//! in one or many dimensions, 32- or 64-bit, plain or scrambled.
//!
//! Direction numbers are Joe and Kuo's (`new-joe-kuo-6.21201`, through the `sobol`
//! crate), as cuRAND's `CURAND_DIRECTION_VECTORS_{32,64}_JOEKUO6`, so plain sequences
//! give the GPU's points. Points come in Gray-code order (point `i` is the XOR of the
//! direction numbers of the bits of `i ^ (i >> 1)`), and a fill of `n` numbers in `d`
//! dimensions holds `n / d` points ordered by dimension — first dimension 1's values,
//! then dimension 2's — as cuRAND's default quasi-random ordering.
//!
//! Scrambled sequences: cuRAND's scrambled generators use fixed tables of its own
//! (scrambled direction vectors and a constant per dimension) that are not public, so
//! the CPU device scrambles its own way — Matoušek's affine scramble: each dimension's
//! direction numbers multiplied by a random lower-triangular bit matrix with a unit
//! diagonal, every point XORed with a random shift, both drawn once from a fixed seed.
//! That keeps what makes the sequence useful (the first 2^k points of each dimension
//! fall one into each interval of width 2^-k); the points differ from a GPU's, as the
//! pseudo-random kinds' do.

use std::sync::OnceLock;

#[cfg(feature = "rand")]
use rand::{Rng, SeedableRng};
#[cfg(feature = "rand")]
use rand_chacha::ChaCha12Rng;
#[cfg(feature = "rand")]
use sobol::params::JoeKuoD6;

use crate::error::{GpuError, Invalid};

/// The most dimensions a Sobol generator takes (cuRAND's limit).
pub const MAX_SOBOL_DIMENSIONS: u32 = 20_000;

/// The seed of the CPU device's scrambles (fixed: like cuRAND's, a scrambled sequence
/// is the same on every run and ignores the generator's seed).
const SCRAMBLE_SEED: u64 = 0x50B0_15C4_A3B1_ED00;

#[cfg(feature = "rand")]
/// Joe–Kuo's parameters, parsed once (the smallest table that holds `dims`).
fn joe_kuo(dims: usize) -> &'static JoeKuoD6 {
    static MINIMAL: OnceLock<JoeKuoD6> = OnceLock::new();
    static STANDARD: OnceLock<JoeKuoD6> = OnceLock::new();
    static EXTENDED: OnceLock<JoeKuoD6> = OnceLock::new();
    if dims <= 100 {
        MINIMAL.get_or_init(JoeKuoD6::minimal)
    } else if dims <= 1000 {
        STANDARD.get_or_init(JoeKuoD6::standard)
    } else {
        EXTENDED.get_or_init(JoeKuoD6::extended)
    }
}

/// `dims` is one cuRAND accepts.
pub(crate) fn check_dimensions(dims: u32) -> Result<(), GpuError> {
    if dims == 0 || dims > MAX_SOBOL_DIMENSIONS {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "a Sobol sequence has 1 to {MAX_SOBOL_DIMENSIONS} dimensions, got {dims}"
            ))
            .arg("dims")
            .mismatch(format_args!("1..={MAX_SOBOL_DIMENSIONS}"), dims),
        ));
    }
    Ok(())
}

/// A fill of `len` numbers from `dims` dimensions: a whole number of points.
pub(crate) fn check_length(len: usize, dims: u32) -> Result<(), GpuError> {
    if len % dims as usize != 0 {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "a fill from a {dims}-dimensional quasi-random sequence takes whole points: \
                 its length must be a multiple of {dims}, got {len}"
            ))
            .arg("dst")
            .mismatch(format_args!("a multiple of {dims} elements"), len),
        ));
    }
    Ok(())
}

#[cfg(feature = "rand")]
/// One Sobol sequence on the CPU device, at its next point.
pub(crate) struct SobolSeq {
    /// 32 or 64: the width of a point's coordinates.
    bits: u32,
    /// Per dimension, its direction numbers (`bits` of them, the most significant bit
    /// at `bits - 1`).
    dirs: Vec<Vec<u64>>,
    /// Per dimension, the first point (0, or the scramble's shift).
    first: Vec<u64>,
    /// Per dimension, the point before `next` (the last one handed out).
    x: Vec<u64>,
    /// The index of the next point.
    next: u64,
}

#[cfg(feature = "rand")]
impl SobolSeq {
    /// The sequence of `dims` dimensions, `bits` (32 or 64) wide, scrambled or not, at
    /// its first point.
    pub(crate) fn new(dims: u32, bits: u32, scrambled: bool) -> Result<Self, GpuError> {
        check_dimensions(dims)?;
        let d = dims as usize;
        let dirs: Vec<Vec<u64>> = if bits == 32 {
            sobol::Sobol::<u32>::init_direction_vals::<u32>(d, 32, joe_kuo(d))
                .into_iter()
                .map(|v| v.into_iter().map(u64::from).collect())
                .collect()
        } else {
            sobol::Sobol::<u64>::init_direction_vals::<u32>(d, 64, joe_kuo(d))
        };
        let mut s = SobolSeq {
            bits,
            dirs,
            first: vec![0; d],
            x: vec![0; d],
            next: 0,
        };
        if scrambled {
            s.scramble();
        }
        Ok(s)
    }

    /// Matoušek's affine scramble of every dimension (see the module's doc).
    fn scramble(&mut self) {
        let bits = self.bits;
        let mut rng = ChaCha12Rng::seed_from_u64(SCRAMBLE_SEED ^ bits as u64);
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        for (dirs, first) in self.dirs.iter_mut().zip(&mut self.first) {
            // Row r of the matrix (output bit r counted from the most significant) reads
            // input bits 0..=r: a random mask of the more significant bits, bit r set.
            let rows: Vec<u64> = (0..bits)
                .map(|r| {
                    let at = bits - 1 - r;
                    let above = mask & !((1u64 << at) - 1) & !(1u64 << at);
                    (rng.random::<u64>() & above) | (1u64 << at)
                })
                .collect();
            for v in dirs.iter_mut() {
                *v = rows.iter().enumerate().fold(0, |out, (r, row)| {
                    out | (((*v & row).count_ones() as u64 & 1) << (bits - 1 - r as u32))
                });
            }
            *first = rng.random::<u64>() & mask;
        }
        self.x.clone_from(&self.first);
    }

    /// Back to the first point.
    pub(crate) fn restart(&mut self) {
        self.next = 0;
        self.x.clone_from(&self.first);
    }

    /// The point's coordinate as a number in (0, 1] (32 bits: `(x + 1) / 2³²`, cuRAND's
    /// double) or (0, 1) (64 bits: `(x >> 11) / 2⁵³ + 2⁻⁵⁴`, the top 53 bits centred).
    fn unit(&self, x: u64) -> f64 {
        if self.bits == 32 {
            (x as f64 + 1.0) / 4_294_967_296.0
        } else {
            ((x >> 11) as f64 + 0.5) / 9_007_199_254_740_992.0
        }
    }

    /// Hands the next `len / dims` points to `put(position, value)`, ordered by
    /// dimension; `len` must be a whole number of points.
    pub(crate) fn fill(&mut self, len: usize, mut put: impl FnMut(usize, f64)) -> Result<(), GpuError> {
        let dims = self.dirs.len();
        check_length(len, dims as u32)?;
        let per = (len / dims) as u64;
        let limit = if self.bits == 32 { 1u64 << 32 } else { u64::MAX };
        if per > limit - self.next {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "the {}-bit Sobol sequence has {limit} points per dimension; {} are used and {per} more were asked for",
                    self.bits, self.next
                ))
                .arg("dst"),
            ));
        }
        for d in 0..dims {
            let mut x = self.x[d];
            for k in 0..per {
                let i = self.next + k;
                if i == 0 {
                    x = self.first[d];
                } else {
                    // Gray code: point i differs from point i - 1 by the direction number
                    // of the rightmost zero bit of i - 1.
                    x ^= self.dirs[d][(i - 1).trailing_ones() as usize];
                }
                put(d * per as usize + k as usize, self.unit(x));
            }
            self.x[d] = x;
        }
        self.next += per;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(s: &mut SobolSeq, n: usize) -> Vec<f64> {
        let mut v = vec![0.0; n];
        s.fill(n, |i, x| v[i] = x).unwrap();
        v
    }

    /// Dimension 1 is van der Corput's; dimension 2 (Joe–Kuo: s = 1, m = 1) is
    /// 0, ½, ¼, ¾, 3/8, 7/8, 1/8, 5/8 in Gray-code order.
    #[test]
    fn the_first_points_are_the_definitions() {
        let mut s = SobolSeq::new(2, 32, false).unwrap();
        let v = points(&mut s, 16);
        let e = 1.0 / 4_294_967_296.0;
        let d1 = [0.0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125];
        let d2 = [0.0, 0.5, 0.25, 0.75, 0.375, 0.875, 0.125, 0.625];
        for k in 0..8 {
            assert_eq!(v[k], d1[k] + e, "dimension 1 point {k}");
            assert_eq!(v[8 + k], d2[k] + e, "dimension 2 point {k}");
        }
        // A second fill continues (point 8 of each dimension), a restart starts over.
        assert_eq!(points(&mut s, 2), vec![0.1875 + e, 0.3125 + e]);
        s.restart();
        assert_eq!(points(&mut s, 16), v);
    }

    /// Every dimension, plain or scrambled, 32 or 64 bits: the first 2^k points fall one
    /// into each interval of width 2^-k.
    #[test]
    fn every_dimension_is_stratified() {
        for (bits, scrambled) in [(32, false), (32, true), (64, false), (64, true)] {
            let dims = 37;
            let mut s = SobolSeq::new(dims, bits, scrambled).unwrap();
            let per = 1 << 12;
            let v = points(&mut s, per * dims as usize);
            for d in 0..dims as usize {
                for k in [3, 8, 12] {
                    let mut seen = vec![false; 1 << k];
                    for x in &v[d * per..d * per + (1 << k)] {
                        assert!(*x > 0.0 && *x <= 1.0 && (bits == 32 || *x < 1.0));
                        // 32 bits: (0, 1], cell j is (j / 2^k, (j + 1) / 2^k]; 64 bits: (0, 1),
                        // cell j is [j / 2^k, (j + 1) / 2^k) (2⁻⁵⁴ is below a double's
                        // resolution beside ½).
                        let scaled = x * (1u64 << k) as f64;
                        let cell = if bits == 32 {
                            scaled.ceil() as usize - 1
                        } else {
                            scaled.floor() as usize
                        };
                        assert!(
                            !seen[cell],
                            "{bits}-bit scrambled {scrambled}: dimension {d}, 2^{k} points, cell {cell} twice"
                        );
                        seen[cell] = true;
                    }
                }
            }
        }
    }
}
