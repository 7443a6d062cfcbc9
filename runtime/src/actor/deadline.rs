//! Cheap deadlines for asks and waits: one watchdog task per system instead of one tokio
//! timer per request.
//!
//! Registering a tokio timer for every ask costs more than the ask itself (an insert and a
//! removal in the timer wheel and, on the multi-thread runtime, waking the driver thread
//! to re-arm it). Deadlines here cost a map insert and removal under an uncontended lock;
//! a watchdog ticks every [`TICK`] while any are registered (lingering a second after the
//! last) and fires the expired ones. A deadline therefore fires up to one tick late.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tokio::sync::Notify;

/// The watchdog's resolution.
pub const TICK: Duration = Duration::from_millis(2);
/// Idle ticks before the watchdog parks.
const LINGER_TICKS: u32 = 500;

#[derive(Default)]
struct Slot {
    expired: AtomicBool,
    waker: AtomicWaker,
}

/// A slab of live deadlines: O(1) insert and removal without hashing.
#[derive(Default)]
struct Table {
    slots: Vec<Option<(Instant, Arc<Slot>)>>,
    free: Vec<usize>,
    live: usize,
    watchdog_awake: bool,
}

impl Table {
    fn insert(&mut self, entry: (Instant, Arc<Slot>)) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(entry);
                i
            }
            None => {
                self.slots.push(Some(entry));
                self.slots.len() - 1
            }
        }
    }

    fn remove(&mut self, i: usize) {
        if self.slots[i].take().is_some() {
            self.live -= 1;
            self.free.push(i);
        }
    }
}

#[derive(Default)]
struct Shared {
    table: Mutex<Table>,
    /// Held apart so a parked watchdog keeps no strong reference to the table.
    wake_watchdog: Arc<Notify>,
}

/// The deadline service of one actor system.
#[derive(Clone, Default)]
pub(crate) struct Deadlines {
    shared: Arc<Shared>,
}

impl Deadlines {
    /// Starts the watchdog on `handle`. It holds only a weak reference: it ends with the
    /// system.
    pub(crate) fn start(handle: &tokio::runtime::Handle) -> Deadlines {
        let d = Deadlines::default();
        let weak = Arc::downgrade(&d.shared);
        let wake = d.shared.wake_watchdog.clone();
        handle.spawn(async move {
            let mut idle = 0u32;
            loop {
                let Some(shared) = weak.upgrade() else { return };
                let park = {
                    let mut t = shared.table.lock().unwrap_or_else(|p| p.into_inner());
                    let now = Instant::now();
                    for i in 0..t.slots.len() {
                        if let Some((deadline, slot)) = &t.slots[i] {
                            if *deadline <= now {
                                slot.expired.store(true, Ordering::Release);
                                slot.waker.wake();
                                t.remove(i);
                            }
                        }
                    }
                    idle = if t.live == 0 { idle + 1 } else { 0 };
                    let park = idle > LINGER_TICKS;
                    if park {
                        t.watchdog_awake = false;
                    }
                    park
                };
                drop(shared);
                if park {
                    wake.notified().await;
                    idle = 0;
                } else {
                    tokio::time::sleep(TICK).await;
                }
            }
        });
        d
    }

    /// Runs `fut` until it completes or `timeout` passes (then `Err(Elapsed)`).
    pub(crate) fn run<F: Future>(&self, timeout: Duration, fut: F) -> WithDeadline<'_, F> {
        let slot = Arc::new(Slot::default());
        let deadline = Instant::now() + timeout;
        let id = {
            let mut t = self.shared.table.lock().unwrap_or_else(|p| p.into_inner());
            let id = t.insert((deadline, slot.clone()));
            if !t.watchdog_awake {
                t.watchdog_awake = true;
                self.shared.wake_watchdog.notify_one();
            }
            id
        };
        WithDeadline {
            fut,
            guard: Registration { slot, id, owner: self },
        }
    }
}

/// The deadline passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

pin_project_lite::pin_project! {
    /// A future bounded by a deadline from [`Deadlines::run`].
    pub(crate) struct WithDeadline<'a, F> {
        #[pin]
        fut: F,
        guard: Registration<'a>,
    }
}

/// Removes the deadline from the table when the bounded future is dropped.
pub(crate) struct Registration<'a> {
    slot: Arc<Slot>,
    id: usize,
    owner: &'a Deadlines,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if !self.slot.expired.load(Ordering::Acquire) {
            let mut t = self.owner.shared.table.lock().unwrap_or_else(|p| p.into_inner());
            t.remove(self.id);
        }
    }
}

impl<F: Future> Future for WithDeadline<'_, F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        this.guard.slot.waker.register(cx.waker());
        if this.guard.slot.expired.load(Ordering::Acquire) {
            return Poll::Ready(Err(Elapsed));
        }
        Poll::Pending
    }
}
