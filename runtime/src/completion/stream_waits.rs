//! The `Spin` waits of one stream, sharing their completion events.
//!
//! Why: an event recorded and queried per request costs ~1.4 µs of host time on the H200
//! (`benches/actors.rs`, "raw launch + its own event, 64 in flight"), more than a third of
//! a small kernel's launch. Work on one stream completes in order, so one event marks the
//! end of every request enqueued before it: a wait joining an idle stream records its own
//! event (an exact completion, as before), while waits joining a stream with waits already
//! pending record none — the oldest pending wait records one mark covering all of them
//! when it needs one. With many launches in flight, a mark serves a run of them.
//!
//! Only the oldest live wait of a stream queries (and, when no mark covers it, records);
//! the others sleep until a wait ahead of them leaves, which wakes the next. A failed
//! query fails every wait of the stream pending then. The logic is generic over the mark
//! (`Mark`), so its bookkeeping is tested without a GPU.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use crate::error::GpuError;

/// A point on a stream whose completion can be asked (a recorded CUDA event).
pub(crate) trait Mark: Send + 'static {
    /// Whether the stream has passed the point; an error when the stream failed.
    fn query(&mut self) -> Result<bool, GpuError>;
}

/// What one poll of a wait found.
#[derive(Debug)]
pub(crate) enum Step {
    /// Resolved: the work before the wait is done (or failed).
    Done(Result<(), GpuError>),
    /// The oldest wait, not done yet: poll again soon (it queries).
    Spin,
    /// A younger wait: sleeps until woken.
    Park,
}

/// One stream's waits (the state behind a [`StreamWaits`]).
struct Waits<M> {
    /// The sequence number the next wait gets.
    next: u64,
    /// Every wait numbered below this is done.
    done: u64,
    /// Marks recorded on the stream, oldest first, each with the number below which it
    /// covers every wait.
    marks: VecDeque<(u64, M)>,
    /// Live waits, oldest first, with the waker of each sleeping one.
    waiting: VecDeque<(u64, Option<Waker>)>,
    /// A failed query: the waits numbered below the first field get the error.
    failed: Option<(u64, GpuError)>,
}

/// The waits of one stream, shared by the futures waiting on it.
pub(crate) struct StreamWaits<M>(Arc<Mutex<Waits<M>>>);

impl<M> Clone for StreamWaits<M> {
    fn clone(&self) -> Self {
        StreamWaits(self.0.clone())
    }
}

impl<M: Mark> Default for StreamWaits<M> {
    fn default() -> Self {
        StreamWaits(Arc::new(Mutex::new(Waits {
            next: 0,
            done: 0,
            marks: VecDeque::new(),
            waiting: VecDeque::new(),
            failed: None,
        })))
    }
}

impl<M: Mark> StreamWaits<M> {
    fn lock(&self) -> MutexGuard<'_, Waits<M>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new wait for everything enqueued on the stream so far; call after enqueueing.
    /// `record` marks the stream's current end: called now when no other wait is
    /// pending (the wait's own exact mark), else not (a later shared mark covers it).
    pub(crate) fn join(&self, record: impl FnOnce() -> Result<M, GpuError>) -> Result<u64, GpuError> {
        let mut w = self.lock();
        let seq = w.next;
        if w.waiting.is_empty() {
            let mark = record()?;
            w.marks.push_back((seq + 1, mark));
        }
        w.next += 1;
        w.waiting.push_back((seq, None));
        Ok(seq)
    }

    /// One poll of wait `seq`: `record` is called when it is the oldest and no mark
    /// covers it yet (the mark then covers every wait joined so far).
    pub(crate) fn poll(&self, seq: u64, waker: &Waker, record: impl FnOnce() -> Result<M, GpuError>) -> Step {
        let mut w = self.lock();
        if let Some((below, e)) = &w.failed {
            if seq < *below {
                return Step::Done(Err(e.clone()));
            }
        }
        if w.done > seq {
            return Step::Done(Ok(()));
        }
        if w.waiting.front().is_some_and(|(s, _)| *s != seq) {
            // A wait parks on its first poll, just after joining: look from the back.
            if let Some(entry) = w.waiting.iter_mut().rev().find(|(s, _)| *s == seq) {
                entry.1 = Some(waker.clone());
            }
            return Step::Park;
        }
        if w.marks.back().is_none_or(|(below, _)| *below <= seq) {
            match record() {
                Ok(mark) => {
                    let below = w.next;
                    w.marks.push_back((below, mark));
                }
                Err(e) => return Step::Done(Err(w.fail(e))),
            }
        }
        while let Some((below, mark)) = w.marks.front_mut() {
            match mark.query() {
                Ok(true) => {
                    let below = *below;
                    w.done = w.done.max(below);
                    w.marks.pop_front();
                }
                Ok(false) => break,
                Err(e) => return Step::Done(Err(w.fail(e))),
            }
        }
        if w.done > seq {
            Step::Done(Ok(()))
        } else {
            Step::Spin
        }
    }

    /// Wait `seq` leaves (resolved, or its future dropped): the next oldest is woken, to
    /// resolve or take over the queries.
    pub(crate) fn leave(&self, seq: u64) {
        let next = {
            let mut w = self.lock();
            let was_first = w.waiting.front().is_some_and(|(s, _)| *s == seq);
            match w.waiting.iter().position(|(s, _)| *s == seq) {
                Some(0) => {
                    w.waiting.pop_front();
                }
                Some(i) => {
                    w.waiting.remove(i);
                }
                None => {}
            }
            if w.waiting.is_empty() {
                // No wait left to cover: marks not yet passed go (destroyed, not reused),
                // so a later wait never queries an event of work long gone — nor one of
                // a stream since destroyed whose address a new stream reuses.
                w.marks.clear();
            }
            if was_first {
                w.waiting.front_mut().and_then(|(_, waker)| waker.take())
            } else {
                None
            }
        };
        if let Some(waker) = next {
            waker.wake();
        }
    }

    /// Whether no wait is live (the queue may be dropped).
    pub(crate) fn is_idle(&self) -> bool {
        self.lock().waiting.is_empty()
    }

    /// Marks recorded and not yet seen complete (for tests).
    #[cfg(test)]
    fn marks(&self) -> usize {
        self.lock().marks.len()
    }
}

impl<M> Waits<M> {
    /// Fails every wait joined so far with `e` (the stream failed); returns it.
    fn fail(&mut self, e: GpuError) -> GpuError {
        self.failed = Some((self.next, e.clone()));
        self.marks.clear();
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::task::Wake;

    /// A mark that completes when the shared flag says so.
    struct Fake {
        done: Arc<AtomicBool>,
        fail: Arc<AtomicBool>,
    }

    impl Mark for Fake {
        fn query(&mut self) -> Result<bool, GpuError> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(GpuError::DeviceLost("stream failed".into()));
            }
            Ok(self.done.load(Ordering::SeqCst))
        }
    }

    /// Counts its wakes.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct Stream {
        waits: StreamWaits<Fake>,
        records: AtomicUsize,
        /// The flag of the marks recorded from now on.
        current: Mutex<Arc<AtomicBool>>,
        fail: Arc<AtomicBool>,
    }

    impl Stream {
        fn new() -> Self {
            Stream {
                waits: StreamWaits::default(),
                records: AtomicUsize::new(0),
                current: Mutex::new(Arc::new(AtomicBool::new(false))),
                fail: Arc::new(AtomicBool::new(false)),
            }
        }
        fn record(&self) -> Result<Fake, GpuError> {
            self.records.fetch_add(1, Ordering::SeqCst);
            Ok(Fake {
                done: self.current.lock().unwrap().clone(),
                fail: self.fail.clone(),
            })
        }
        /// The GPU passes every mark recorded so far; later marks get a new flag.
        fn finish(&self) {
            let mut c = self.current.lock().unwrap();
            c.store(true, Ordering::SeqCst);
            *c = Arc::new(AtomicBool::new(false));
        }
        fn join(&self) -> u64 {
            self.waits.join(|| self.record()).unwrap()
        }
        fn poll(&self, seq: u64, waker: &Waker) -> Step {
            self.waits.poll(seq, waker, || self.record())
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    /// A wait on an idle stream records its own mark at once (an exact completion).
    #[test]
    fn a_lone_wait_records_its_own_mark() {
        let s = Stream::new();
        let (_, w) = waker();
        let a = s.join();
        assert_eq!(s.records.load(Ordering::SeqCst), 1);
        assert!(matches!(s.poll(a, &w), Step::Spin));
        assert_eq!(
            s.records.load(Ordering::SeqCst),
            1,
            "its mark covers it: no second record"
        );
        s.finish();
        assert!(matches!(s.poll(a, &w), Step::Done(Ok(()))));
        s.waits.leave(a);
        assert!(s.waits.is_idle());
    }

    /// 64 waits joined while one is pending share marks: two records in all, not 64;
    /// only the oldest queries, the others sleep and are woken one after another.
    #[test]
    fn waits_in_flight_share_one_mark() {
        let s = Stream::new();
        let seqs: Vec<u64> = (0..64).map(|_| s.join()).collect();
        assert_eq!(s.records.load(Ordering::SeqCst), 1, "only the first wait recorded");
        let wakers: Vec<_> = seqs.iter().map(|_| waker()).collect();
        for (seq, (_, w)) in seqs.iter().zip(&wakers).skip(1) {
            assert!(matches!(s.poll(*seq, w), Step::Park));
        }
        assert!(matches!(s.poll(seqs[0], &wakers[0].1), Step::Spin));
        s.finish();
        assert!(matches!(s.poll(seqs[0], &wakers[0].1), Step::Done(Ok(()))));
        s.waits.leave(seqs[0]);
        assert_eq!(wakers[1].0 .0.load(Ordering::SeqCst), 1, "the next oldest is woken");
        // The second wait is not covered by the first mark: it records one for all 63.
        assert!(matches!(s.poll(seqs[1], &wakers[1].1), Step::Spin));
        assert_eq!(s.records.load(Ordering::SeqCst), 2);
        s.finish();
        for (i, seq) in seqs.iter().enumerate().skip(1) {
            assert!(matches!(s.poll(*seq, &wakers[i].1), Step::Done(Ok(()))), "wait {i}");
            s.waits.leave(*seq);
        }
        assert_eq!(s.records.load(Ordering::SeqCst), 2, "two marks served 64 waits");
        assert_eq!(s.waits.marks(), 0);
        assert!(s.waits.is_idle());
    }

    /// Work joined after a mark is not reported done by it.
    #[test]
    fn a_mark_does_not_cover_later_waits() {
        let s = Stream::new();
        let (_, w) = waker();
        let a = s.join();
        let b = s.join();
        s.finish(); // passes a's mark only (b's work came after it)
        assert!(matches!(s.poll(a, &w), Step::Done(Ok(()))));
        s.waits.leave(a);
        assert!(matches!(s.poll(b, &w), Step::Spin), "b is not covered by a's mark");
        s.finish();
        assert!(matches!(s.poll(b, &w), Step::Done(Ok(()))));
    }

    /// The oldest wait dropped unresolved hands the queries to the next, which would
    /// otherwise sleep for ever.
    #[test]
    fn a_dropped_oldest_wait_hands_over() {
        let s = Stream::new();
        let (a, b) = (s.join(), s.join());
        let (count, w) = waker();
        assert!(matches!(s.poll(b, &w), Step::Park));
        s.waits.leave(a);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "b woken");
        assert!(matches!(s.poll(b, &w), Step::Spin), "b queries now");
        s.finish();
        assert!(matches!(s.poll(b, &w), Step::Done(Ok(()))));
    }

    /// The last wait leaving unresolved takes the marks with it: a later wait records
    /// its own and queries only that.
    #[test]
    fn marks_go_with_the_last_wait() {
        let s = Stream::new();
        let a = s.join();
        assert_eq!(s.waits.marks(), 1);
        s.waits.leave(a);
        assert_eq!(s.waits.marks(), 0, "an unpassed mark of no wait is dropped");
        s.fail.store(true, Ordering::SeqCst); // the old mark would now fail a query
        let (_, w) = waker();
        let b = s.join();
        s.fail.store(false, Ordering::SeqCst);
        s.finish();
        assert!(matches!(s.poll(b, &w), Step::Done(Ok(()))));
    }

    /// A failed query fails every pending wait, and later waits start afresh.
    #[test]
    fn a_failed_stream_fails_every_pending_wait() {
        let s = Stream::new();
        let (_, w) = waker();
        let (a, b) = (s.join(), s.join());
        s.fail.store(true, Ordering::SeqCst);
        assert!(matches!(s.poll(a, &w), Step::Done(Err(GpuError::DeviceLost(_)))));
        s.waits.leave(a);
        assert!(matches!(s.poll(b, &w), Step::Done(Err(GpuError::DeviceLost(_)))));
        s.waits.leave(b);
        s.fail.store(false, Ordering::SeqCst);
        let c = s.join();
        s.finish();
        assert!(matches!(s.poll(c, &w), Step::Done(Ok(()))));
    }
}
