//! One load per key, run off the asker's thread and shared by everyone who asks for the
//! same key meanwhile.
//!
//! Why: an NVRTC compile takes 30–75 ms. Run on an actor's thread it stalls every launch
//! queued behind it, including launches of kernels loaded long ago; run twice for two
//! actors asking at once it wastes a compile. Here a miss starts the load on a thread of
//! its own and stores the shared future; a second asker for the key awaits the same
//! future, and askers for keys already loaded get their value at once — the map's lock is
//! never held across a load.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use futures::future::{BoxFuture, FutureExt, Shared};

use crate::error::GpuError;

type Loading<V> = Shared<BoxFuture<'static, Result<V, GpuError>>>;

/// What a lookup found.
pub(crate) enum Lookup<V> {
    /// Loaded: the value.
    Ready(V),
    /// Being loaded (by this lookup or an earlier one): resolves with the value.
    Pending(BoxFuture<'static, Result<V, GpuError>>),
}

impl<V: Clone + Send + Sync + 'static> Lookup<V> {
    /// The value, waiting for the load if needed (for callers without an executor of
    /// their own: a synchronous launch on a caller's stream, a graph before capture).
    pub(crate) fn wait(self) -> Result<V, GpuError> {
        match self {
            Lookup::Ready(v) => Ok(v),
            Lookup::Pending(f) => futures::executor::block_on(f),
        }
    }
}

/// Values loaded once per key.
pub(crate) struct OnceLoads<K, V> {
    entries: Mutex<HashMap<K, Loading<V>>>,
    /// Names the load threads (`<what>-load`).
    what: &'static str,
}

impl<K: Hash + Eq + Clone, V: Clone + Send + Sync + 'static> OnceLoads<K, V> {
    /// An empty map whose load threads are named after `what`.
    pub(crate) fn new(what: &'static str) -> Self {
        OnceLoads {
            entries: Mutex::new(HashMap::new()),
            what,
        }
    }

    /// The value of `key`: at once when loaded; else the pending load — started here on a
    /// new thread with the loader `make()` returns (`make` is called only on a miss, so a
    /// hit costs no allocation). A failed load is forgotten once seen, so the next lookup
    /// tries again (the failure may have been transient: memory, a full disk).
    pub(crate) fn get<L>(&self, key: K, make: impl FnOnce() -> L) -> Result<Lookup<V>, GpuError>
    where
        L: FnOnce() -> Result<V, GpuError> + Send + 'static,
    {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(loading) = entries.get(&key) {
            match loading.peek() {
                Some(Ok(v)) => return Ok(Lookup::Ready(v.clone())),
                Some(Err(e)) => {
                    let e = e.clone();
                    entries.remove(&key);
                    return Err(e);
                }
                None => return Ok(Lookup::Pending(loading.clone().boxed())),
            }
        }
        let load = make();
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::Builder::new()
            .name(format!("{}-load", self.what))
            .spawn(move || {
                let _ = tx.send(load());
            })
            .map_err(|e| GpuError::Io {
                what: format!("starting a {} load thread", self.what),
                message: e.to_string(),
            })?;
        let what = self.what;
        let loading: Loading<V> = async move {
            rx.await.unwrap_or_else(|_| {
                Err(GpuError::Internal(format!(
                    "a {what} load thread ended without an answer"
                )))
            })
        }
        .boxed()
        .shared();
        entries.insert(key, loading.clone());
        Ok(Lookup::Pending(loading.boxed()))
    }

    /// How many keys are loaded or loading.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    /// A loader that waits at `gate` (so the test decides when the load ends) and counts
    /// its runs.
    fn gated(runs: &Arc<AtomicUsize>, gate: &Arc<Barrier>, v: u32) -> impl FnOnce() -> Result<u32, GpuError> {
        let (runs, gate) = (runs.clone(), gate.clone());
        move || {
            runs.fetch_add(1, Ordering::SeqCst);
            gate.wait();
            Ok(v)
        }
    }

    #[test]
    fn concurrent_askers_share_one_load_and_a_loaded_key_answers_during_it() {
        let loads = OnceLoads::<u32, u32>::new("test");
        let runs = Arc::new(AtomicUsize::new(0));
        // Key 1 loads and finishes.
        let open = Arc::new(Barrier::new(1));
        let first = loads.get(1, || gated(&runs, &open, 10)).unwrap().wait().unwrap();
        assert_eq!(first, 10);
        // Key 2's load is held at its gate while others ask.
        let gate = Arc::new(Barrier::new(2));
        let a = loads.get(2, || gated(&runs, &gate, 20)).unwrap();
        let b = loads.get(2, || -> fn() -> Result<u32, GpuError> {
            panic!("a second load of key 2 was started")
        });
        assert!(matches!(a, Lookup::Pending(_)));
        assert!(matches!(b, Ok(Lookup::Pending(_))));
        // A loaded key answers at once while key 2 is still loading.
        match loads.get(1, || -> fn() -> Result<u32, GpuError> { panic!("key 1 reloaded") }) {
            Ok(Lookup::Ready(v)) => assert_eq!(v, 10),
            _ => panic!("a loaded key waited for another key's load"),
        }
        gate.wait();
        assert_eq!(a.wait().unwrap(), 20);
        assert_eq!(b.unwrap().wait().unwrap(), 20);
        assert_eq!(runs.load(Ordering::SeqCst), 2, "one load per key");
        assert!(matches!(loads.get(2, || gated(&runs, &open, 0)), Ok(Lookup::Ready(20))));
        assert_eq!(loads.len(), 2);
    }

    #[test]
    fn a_failed_load_is_reported_to_every_waiter_then_retried() {
        let loads = OnceLoads::<&str, u32>::new("test");
        let gate = Arc::new(Barrier::new(2));
        let g = gate.clone();
        let a = loads
            .get("k", move || {
                move || {
                    g.wait();
                    Err(GpuError::invalid("bad source"))
                }
            })
            .unwrap();
        let b = loads.get("k", || || Ok(1)).unwrap();
        gate.wait();
        assert!(matches!(a.wait(), Err(GpuError::InvalidArgument(_))));
        assert!(matches!(b.wait(), Err(GpuError::InvalidArgument(_))));
        // Seen once by a lookup, the failure is dropped and the key loads again.
        assert!(loads.get("k", || || Ok(1)).is_err());
        assert_eq!(loads.get("k", || || Ok(7)).unwrap().wait().unwrap(), 7);
    }
}
