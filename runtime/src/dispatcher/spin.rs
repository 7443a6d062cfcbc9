//! Busy-waiting that is light on the core it shares.
//!
//! A spinning thread on a GPU host usually shares its physical core with another thread
//! (hyperthreads): the caller enqueuing the next request, or another library's actor.
//! Reading the clock on every turn keeps that core's pipeline full of `clock_gettime`
//! work; these loops check their condition on every turn with a `pause` in between and
//! read the clock only every [`TURNS_PER_CLOCK`]th turn.

use std::time::{Duration, Instant};

/// Turns of a spin between two reads of the clock. A turn is one check of the condition
/// and one `pause` (tens of nanoseconds): the limit is overrun by well under a
/// microsecond.
const TURNS_PER_CLOCK: u32 = 16;

/// Spins until `done()` holds (then `true`) or `limit` has passed (then `false`).
/// `done` is checked on every turn, first before any wait; a zero limit checks it once.
pub(crate) fn spin_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut turn: u32 = 0;
    loop {
        if done() {
            return true;
        }
        if turn % TURNS_PER_CLOCK == 0 && start.elapsed() >= limit {
            return false;
        }
        turn = turn.wrapping_add(1);
        std::hint::spin_loop();
    }
}

/// Spins for `d` (a pause shorter than any timer or sleep could give).
pub(crate) fn spin_for(d: Duration) {
    spin_until(d, || false);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The condition ends the spin at once, however long the limit; without it the spin
    /// lasts its limit (and a zero limit still checks the condition once).
    #[test]
    fn a_spin_ends_on_its_condition_or_its_limit() {
        let t = Instant::now();
        assert!(spin_until(Duration::from_secs(60), || true));
        assert!(t.elapsed() < Duration::from_secs(5));

        let mut checks = 0;
        assert!(!spin_until(Duration::ZERO, || {
            checks += 1;
            false
        }));
        assert_eq!(checks, 1);

        let mut left = 1000;
        assert!(spin_until(Duration::from_secs(60), || {
            left -= 1;
            left == 0
        }));

        let t = Instant::now();
        spin_for(Duration::from_millis(3));
        assert!(t.elapsed() >= Duration::from_millis(3));
    }
}
