//! Completion events, reused. Every GPU request marks the end of its work with an event;
//! creating and destroying one per request costs two driver calls on the actor's thread
//! (host time every call pays). A completed event is recorded again instead.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaEvent, CudaStream};

use crate::error::GpuError;

/// Completed events kept for reuse, at most this many (a burst of requests in flight
/// leaves up to as many behind; the rest are destroyed).
const KEEP: usize = 64;

/// Completed events of one context, ready to be recorded again. Shared by the clones of
/// a `Completer`; a context rebuild makes a new completer and so a new pool.
#[derive(Clone, Default)]
pub(crate) struct EventPool(Arc<Mutex<Vec<CudaEvent>>>);

impl EventPool {
    /// An event recorded at the current end of `stream` (a reused one when the pool has
    /// one). `stream` must belong to the pool's context.
    pub(crate) fn record(&self, stream: &Arc<CudaStream>) -> Result<PooledEvent, GpuError> {
        let reused = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let event = match reused {
            Some(e) => {
                e.record(stream)?;
                e
            }
            None => stream.record_event(None)?,
        };
        Ok(PooledEvent {
            event: Some(event),
            pool: self.clone(),
            complete: false,
        })
    }

    /// Events waiting for reuse.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A recorded event that goes back to its pool when dropped — only if it was seen
/// complete: one dropped while pending (a wait given up at its deadline, or after a
/// fault) is destroyed, so a later request never inherits unfinished work.
pub(crate) struct PooledEvent {
    event: Option<CudaEvent>,
    pool: EventPool,
    complete: bool,
}

impl PooledEvent {
    /// Whether the GPU has passed the event; an error when the stream failed.
    pub(crate) fn query(&mut self) -> Result<bool, GpuError> {
        let event = self.event.as_ref().expect("present until dropped");
        let done = event.try_is_complete()?;
        self.complete |= done;
        Ok(done)
    }

    /// Records that the event is complete, known another way (a host function enqueued
    /// after it has run).
    pub(crate) fn mark_complete(&mut self) {
        self.complete = true;
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        let Some(event) = self.event.take() else { return };
        if self.complete {
            let mut kept = self.pool.0.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < KEEP {
                kept.push(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::CudaContext;

    /// An event seen complete goes back and is recorded again by the next request; one
    /// never seen complete is destroyed, not reused.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_events_seen_complete_are_reused() {
        let ctx = CudaContext::new(0).unwrap();
        let stream = ctx.new_stream().unwrap();
        let pool = EventPool::default();
        let mut first = pool.record(&stream).unwrap();
        stream.synchronize().unwrap();
        assert!(first.query().unwrap(), "recorded before a synchronize, so complete");
        let raw = first.event.as_ref().unwrap().cu_event() as usize;
        drop(first);
        assert_eq!(pool.len(), 1);
        let mut again = pool.record(&stream).unwrap();
        assert_eq!(pool.len(), 0, "the pooled event was taken");
        assert_eq!(
            again.event.as_ref().unwrap().cu_event() as usize,
            raw,
            "the same event, recorded again"
        );
        stream.synchronize().unwrap();
        assert!(again.query().unwrap());
        drop(again);
        let unseen = pool.record(&stream).unwrap();
        drop(unseen);
        assert_eq!(pool.len(), 0, "an event never seen complete is not kept");
    }
}
