//! A GPU thread's idle time: how long it stays hot after its last work, and who spins.
//!
//! A thread parked for the length of a GPU operation takes tens of microseconds to wake,
//! so a GPU thread spins for a while after its last work instead (`DeviceConfig::
//! idle_spin`). An actor waiting for mail spins on its own mailbox inside its poll: a
//! request then reaches it as soon as the sender's write is visible, without the trip
//! through the runtime's queue of woken tasks and the thread's park/unpark hand-shake
//! (about half of a request's hop into a GPU thread). It spins only while nothing else on
//! the thread can run: not while completion waits of the thread are in progress (they
//! wake the actor when the last one ends), never longer than a short slice between two
//! turns of the scheduler, and not at all once a task arrives from another thread. What
//! is left of the spin when no actor spins runs in the runtime's park hook.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tokio::runtime::RuntimeMetrics;

use super::spin::spin_until;

/// The longest busy stretch of an actor's mailbox spin between two scheduler turns: what
/// a task woken on the thread itself can be kept waiting by a spinning actor.
const MAIL_SLICE: Duration = Duration::from_micros(10);

thread_local! {
    /// The idle state of the GPU thread this is, if it is one.
    static CURRENT: RefCell<Option<Arc<Idle>>> = const { RefCell::new(None) };
}

/// The idle state of one GPU thread, shared by its actors, its completion waits, its park
/// hook and its `GpuDispatcher` handles.
pub(crate) struct Idle {
    /// The configured idle spin in nanoseconds (zero: none, and end a spin in progress).
    spin_ns: AtomicU64,
    /// When the thread last finished a piece of work, in nanoseconds since `base`: the
    /// idle spin counts from there.
    last_work_ns: AtomicU64,
    base: Instant,
    /// Completion waits in progress on the thread (they wake themselves, so the thread is
    /// never idle while one is).
    waits: AtomicUsize,
    /// An actor to wake when the last wait ends, so that it spins for mail again.
    waiter: AtomicWaker,
    /// The thread's runtime metrics: the depth of its queue of tasks woken from other
    /// threads (made once: each `Handle::metrics` call clones the handle).
    metrics: OnceLock<RuntimeMetrics>,
}

/// What an actor's mailbox spin ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MailSpin {
    /// Mail is there: take it.
    Arrived,
    /// Let the scheduler take a turn (the slice is over, or a task came from another
    /// thread), then spin again.
    Yield,
    /// Wait to be woken: by mail, or by the end of the thread's last completion wait.
    Park,
}

/// Counts a completion wait as in progress on its thread until dropped.
pub(crate) struct WaitGuard(Option<Arc<Idle>>);

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if let Some(idle) = self.0.take() {
            idle.worked();
            if idle.waits.fetch_sub(1, Ordering::AcqRel) == 1 {
                idle.waiter.wake();
            }
        }
    }
}

impl Idle {
    /// A fresh state: no spin.
    pub(crate) fn new() -> Arc<Idle> {
        Arc::new(Idle {
            spin_ns: AtomicU64::new(0),
            last_work_ns: AtomicU64::new(0),
            base: Instant::now(),
            waits: AtomicUsize::new(0),
            waiter: AtomicWaker::new(),
            metrics: OnceLock::new(),
        })
    }

    /// Makes `self` the calling thread's idle state; `metrics` are its runtime's.
    pub(crate) fn install(self: &Arc<Self>, metrics: RuntimeMetrics) {
        let _ = self.metrics.set(metrics);
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
    }

    /// Sets the idle spin (zero ends a spin in progress).
    pub(crate) fn set_spin(&self, spin: Duration) {
        let ns = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
        self.spin_ns.store(ns, Ordering::Relaxed);
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Marks the thread as having just finished some work: the spin counts from now.
    pub(crate) fn worked(&self) {
        self.last_work_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    /// What is left of the idle spin, if anything.
    pub(crate) fn spin_left(&self) -> Option<Duration> {
        let spin = self.spin_ns.load(Ordering::Relaxed);
        let end = self.last_work_ns.load(Ordering::Relaxed).saturating_add(spin);
        let left = end.saturating_sub(self.now_ns());
        (spin > 0 && left > 0).then(|| Duration::from_nanos(left))
    }

    /// True when a task has been woken or spawned here from another thread.
    fn remote_work(&self) -> bool {
        self.metrics.get().is_some_and(|m| m.global_queue_depth() > 0)
    }

    /// True when the thread has other work: a task woken from another thread, or the spin
    /// turned off (a shutdown).
    fn interrupted(&self) -> bool {
        self.spin_ns.load(Ordering::Relaxed) == 0 || self.remote_work()
    }

    /// Starts counting a completion wait of this thread.
    pub(crate) fn wait_started(self: &Arc<Self>) -> WaitGuard {
        self.waits.fetch_add(1, Ordering::AcqRel);
        WaitGuard(Some(self.clone()))
    }

    /// An actor with an empty mailbox spins until `has_mail()`, for at most one slice of
    /// what is left of the idle spin. `waker` is the actor's: woken when the thread's last
    /// completion wait ends, if one is in progress now (then it does not spin).
    pub(crate) fn spin_for_mail(&self, waker: &Waker, mut has_mail: impl FnMut() -> bool) -> MailSpin {
        let Some(left) = self.spin_left() else {
            return MailSpin::Park;
        };
        if self.waits.load(Ordering::Acquire) > 0 {
            self.waiter.register(waker);
            // The last wait may have ended between the first load and the registration:
            // then spin now (its wake-up, if it came, costs one spurious poll at most).
            if self.waits.load(Ordering::Acquire) > 0 {
                return MailSpin::Park;
            }
        }
        let mut interrupted = false;
        let arrived = spin_until(left.min(MAIL_SLICE), || {
            if has_mail() {
                return true;
            }
            interrupted = self.interrupted();
            interrupted
        });
        match (arrived && !interrupted, left <= MAIL_SLICE && !arrived) {
            (true, _) => MailSpin::Arrived,
            (false, true) => MailSpin::Park,
            (false, false) => MailSpin::Yield,
        }
    }

    /// The park hook's spin: until a task arrives from another thread or the idle spin
    /// runs out.
    pub(crate) fn spin_at_park(&self) {
        if let Some(left) = self.spin_left() {
            spin_until(left, || self.interrupted());
        }
    }
}

/// The idle state of the calling thread, if it is a GPU thread.
pub(crate) fn current() -> Option<Arc<Idle>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Pauses a completion wait between two queries: spins for `d`, cut short on a GPU
/// thread when a task arrives from another thread (the actor's next request).
pub(crate) fn pause(d: Duration) {
    CURRENT.with(|c| match &*c.borrow() {
        Some(idle) => {
            spin_until(d, || idle.remote_work());
        }
        None => super::spin::spin_for(d),
    })
}

/// Counts a completion wait on the calling thread (a no-op guard elsewhere).
pub(crate) fn wait_started() -> WaitGuard {
    match current() {
        Some(idle) => idle.wait_started(),
        None => WaitGuard(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A state with a 60 s spin that has just begun.
    fn spinning() -> Arc<Idle> {
        let idle = Idle::new();
        idle.set_spin(Duration::from_secs(60));
        idle.worked();
        idle
    }

    fn flag_waker() -> (Arc<Flag>, Waker) {
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        (flag.clone(), Waker::from(flag))
    }

    /// Without a spin, or once it has run out, an actor parks; with one it takes mail as
    /// soon as there is some, and otherwise yields after a slice.
    #[test]
    fn a_mailbox_spin_takes_mail_yields_or_parks() {
        let idle = Idle::new();
        let (_, waker) = flag_waker();
        assert_eq!(
            idle.spin_for_mail(&waker, || true),
            MailSpin::Park,
            "no spin configured"
        );

        idle.set_spin(Duration::from_secs(60));
        idle.worked();
        assert_eq!(idle.spin_for_mail(&waker, || true), MailSpin::Arrived);
        // Mail that shows up on the 50th check is taken, within one slice or after a
        // few turns (a loaded machine may preempt the spin past its slice: no timing here).
        let mut checks = 0;
        let mut turns = 0;
        let taken = loop {
            let r = idle.spin_for_mail(&waker, || {
                checks += 1;
                checks >= 50
            });
            if r != MailSpin::Yield || turns == 1000 {
                break r;
            }
            turns += 1;
        };
        assert_eq!(taken, MailSpin::Arrived);
        assert_eq!(
            idle.spin_for_mail(&waker, || false),
            MailSpin::Yield,
            "a slice, then a turn"
        );

        idle.set_spin(Duration::from_millis(1));
        idle.worked();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(idle.spin_for_mail(&waker, || true), MailSpin::Park, "the spin ran out");
    }

    /// While a completion wait is in progress an actor does not spin; the end of the last
    /// wait wakes it (so it spins again), and not before.
    #[test]
    fn the_last_completion_wait_wakes_the_parked_actor() {
        let idle = spinning();
        let (first, second) = (idle.wait_started(), idle.wait_started());
        let (woken, waker) = flag_waker();
        assert_eq!(idle.spin_for_mail(&waker, || true), MailSpin::Park);
        drop(first);
        assert!(!woken.0.load(Ordering::SeqCst), "a wait is still in progress");
        drop(second);
        assert!(woken.0.load(Ordering::SeqCst));
        assert_eq!(idle.spin_for_mail(&waker, || true), MailSpin::Arrived);
    }

    /// A shutdown (the spin set to zero) ends a mailbox spin at once.
    #[test]
    fn turning_the_spin_off_ends_a_mailbox_spin() {
        let idle = spinning();
        let (_, waker) = flag_waker();
        let mut turns = 0;
        let r = idle.spin_for_mail(&waker, || {
            turns += 1;
            if turns == 10 {
                idle.set_spin(Duration::ZERO);
            }
            false
        });
        assert_eq!(r, MailSpin::Yield);
        assert_eq!(idle.spin_for_mail(&waker, || true), MailSpin::Park);
    }
}
