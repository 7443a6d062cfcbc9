//! The barrier behind `sync_threads()` and warp shuffles in the CPU emulation.
//!
//! Unlike `std::sync::Barrier` it knows that a thread which returned from the kernel no
//! longer takes part (CUDA's rule for exited threads), it can be broken (a thread of the
//! block panicked: the others must not wait forever), and it gives up after a deadline
//! with a message naming the likely cause — a `sync_threads()` that not every thread
//! reaches. An emulated launch never hangs.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long threads wait for the rest of their block before the launch fails.
pub(crate) const DEADLOCK_AFTER: Duration = Duration::from_secs(10);

/// Why a barrier released its waiters early.
#[derive(Debug, Clone)]
pub(crate) struct Broken(pub(crate) String);

#[derive(Debug)]
struct State {
    expected: usize,
    arrived: usize,
    generation: u64,
    broken: Option<Broken>,
}

/// A reusable barrier over a group of emulated threads.
#[derive(Debug)]
pub(crate) struct BlockBarrier {
    state: Mutex<State>,
    cv: Condvar,
    what: &'static str,
    deadline: Option<Duration>,
}

impl BlockBarrier {
    /// A barrier for `n` threads; `what` names it in errors (`"sync_threads()"`). It
    /// breaks after [`DEADLOCK_AFTER`] without progress.
    pub(crate) fn new(n: usize, what: &'static str) -> Self {
        Self::with_deadline(n, what, Some(DEADLOCK_AFTER))
    }

    /// A barrier that waits as long as it takes (or until broken), for waits whose
    /// length is the kernel's own work.
    pub(crate) fn without_deadline(n: usize, what: &'static str) -> Self {
        Self::with_deadline(n, what, None)
    }

    fn with_deadline(n: usize, what: &'static str, deadline: Option<Duration>) -> Self {
        BlockBarrier {
            state: Mutex::new(State {
                expected: n,
                arrived: 0,
                generation: 0,
                broken: None,
            }),
            cv: Condvar::new(),
            what,
            deadline,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-arms the barrier for `n` threads (a new block).
    pub(crate) fn reset(&self, n: usize) {
        let mut s = self.lock();
        *s = State {
            expected: n,
            arrived: 0,
            generation: s.generation + 1,
            broken: None,
        };
    }

    fn release(s: &mut State, cv: &Condvar) {
        s.arrived = 0;
        s.generation += 1;
        cv.notify_all();
    }

    /// Waits until every live thread of the group has arrived; `Ok(true)` for the one
    /// thread whose arrival released the others.
    pub(crate) fn wait(&self) -> Result<bool, Broken> {
        let mut s = self.lock();
        if let Some(b) = &s.broken {
            return Err(b.clone());
        }
        s.arrived += 1;
        if s.arrived >= s.expected {
            Self::release(&mut s, &self.cv);
            return Ok(true);
        }
        let generation = s.generation;
        let start = Instant::now();
        loop {
            let (guard, _) = self
                .cv
                .wait_timeout(s, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner());
            s = guard;
            if let Some(b) = &s.broken {
                return Err(b.clone());
            }
            if s.generation != generation {
                return Ok(false);
            }
            if self.deadline.is_some_and(|d| start.elapsed() > d) {
                let b = Broken(format!(
                    "{} deadlock: {} of {} threads waited {:?} for the rest; is a {} in code \
                     that not every thread reaches?",
                    self.what, s.arrived, s.expected, DEADLOCK_AFTER, self.what
                ));
                s.broken = Some(b.clone());
                self.cv.notify_all();
                return Err(b);
            }
        }
    }

    /// A thread returned from the kernel: the group no longer waits for it.
    pub(crate) fn exit(&self) {
        let mut s = self.lock();
        s.expected = s.expected.saturating_sub(1);
        if s.arrived > 0 && s.arrived >= s.expected {
            Self::release(&mut s, &self.cv);
        }
    }

    /// Releases every waiter with `why` (a thread of the group failed).
    pub(crate) fn break_with(&self, why: String) {
        let mut s = self.lock();
        if s.broken.is_none() {
            s.broken = Some(Broken(why));
        }
        self.cv.notify_all();
    }
}
