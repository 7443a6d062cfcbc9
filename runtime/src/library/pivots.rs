//! `PivotLedger`: where a generation's LU factorizations on a GPU wrote their pivots, so
//! that a solve takes only pivots a factorization made. One per generation, in its
//! library seed, shared by every solver of it (the device's solver actor and the
//! in-place ones of its slots).
//!
//! `getrs` (and cuBLAS's `getrsBatched`) trust their pivots: an out-of-range one makes
//! the routine read and write outside B, a sticky fault that poisons the context. Checking
//! the values would mean reading them back on the actor's thread before every solve, so
//! the solver remembers instead which windows of which buffers `lu_factor` and
//! `lu_factor_batched` wrote, and of what order. A batch is one span (its first window,
//! the order, how many matrices), so recording 10 000 factorizations costs one entry —
//! the ledger used to hold one map entry per matrix, which on a batch of 10 000 16×16
//! factorizations cost several times the routine (BENCHMARKS.md).

use std::collections::HashMap;

/// Consecutive pivot windows of one order written by one factorization call: matrix k's
/// pivots at `start + k·n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    n: usize,
    count: usize,
}

impl Span {
    fn end(&self) -> usize {
        self.start + self.n * self.count
    }
}

/// The spans of pivots written per buffer (by buffer id).
#[derive(Debug, Default)]
pub(crate) struct PivotLedger {
    spans: HashMap<u64, Vec<Span>>,
}

impl PivotLedger {
    /// Records that `count` order-`n` factorizations wrote their pivots into `buffer` from
    /// element `start` on. Whatever this overwrote no longer counts: a span it overlaps
    /// keeps only the whole windows outside it.
    pub(crate) fn record(&mut self, buffer: u64, start: usize, n: usize, count: usize) {
        if n == 0 || count == 0 {
            return;
        }
        let new = Span { start, n, count };
        let spans = self.spans.entry(buffer).or_default();
        let mut kept = Vec::with_capacity(spans.len() + 2);
        for s in spans.drain(..) {
            if s.end() <= new.start || new.end() <= s.start {
                kept.push(s);
                continue;
            }
            // Windows of `s` wholly before the new span.
            let before = new.start.saturating_sub(s.start) / s.n;
            if before > 0 {
                kept.push(Span { count: before, ..s });
            }
            // Windows of `s` wholly after it: the first starting at or past its end.
            let first_after = (new.end() - s.start).div_ceil(s.n);
            if first_after < s.count {
                kept.push(Span {
                    start: s.start + first_after * s.n,
                    n: s.n,
                    count: s.count - first_after,
                });
            }
        }
        kept.push(new);
        *spans = kept;
    }

    /// Checks that `count` order-`n` pivot windows of `buffer` from element `start` on
    /// were each written by a factorization of order `n`; the first matrix that was not,
    /// as the error.
    pub(crate) fn check(&self, buffer: u64, start: usize, n: usize, count: usize) -> Result<(), usize> {
        if n == 0 {
            return if count == 0 { Ok(()) } else { Err(0) };
        }
        let spans = self.spans.get(&buffer).map(Vec::as_slice).unwrap_or(&[]);
        let mut k = 0;
        while k < count {
            let at = start + k * n;
            let span = spans
                .iter()
                .find(|s| s.n == n && s.start <= at && at < s.end() && (at - s.start) % n == 0)
                .ok_or(k)?;
            // Every later window inside this span is covered too.
            k += (span.end() - at) / n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::PivotLedger;

    #[test]
    fn a_batch_covers_its_windows_and_no_others() {
        let mut l = PivotLedger::default();
        l.record(1, 0, 16, 10_000);
        assert_eq!(l.check(1, 0, 16, 10_000), Ok(()));
        assert_eq!(l.check(1, 16 * 37, 16, 100), Ok(()));
        // Past the batch's end, another order, a window not on a boundary, another buffer.
        assert_eq!(l.check(1, 16 * 9_999, 16, 2), Err(1));
        assert_eq!(l.check(1, 0, 8, 1), Err(0));
        assert_eq!(l.check(1, 3, 16, 1), Err(0));
        assert_eq!(l.check(2, 0, 16, 1), Err(0));
    }

    #[test]
    fn an_overwrite_keeps_only_whole_windows_outside_it() {
        let mut l = PivotLedger::default();
        l.record(1, 0, 4, 10); // windows at 0, 4, …, 36
        l.record(1, 10, 5, 2); // elements 10..20: windows 8, 12, 16 of order 4 are gone
        assert_eq!(l.check(1, 0, 4, 2), Ok(()));
        assert_eq!(l.check(1, 8, 4, 1), Err(0));
        assert_eq!(l.check(1, 16, 4, 1), Err(0));
        assert_eq!(l.check(1, 20, 4, 5), Ok(()));
        assert_eq!(l.check(1, 10, 5, 2), Ok(()));
        // Spans side by side cover a range across both.
        l.record(1, 40, 4, 3);
        assert_eq!(l.check(1, 20, 4, 8), Ok(()));
        assert_eq!(l.check(1, 0, 4, 3), Err(2));
    }
}
