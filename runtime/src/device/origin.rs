//! Origins: which `ActorGpu` a request to the device comes from.
//!
//! Why: an `ActorGpu` on an isolated device cannot enqueue in place — the GPU is in the
//! worker process — so its calls go to the device. Tagged with their origin (the
//! `ActorGpu`'s id), the worker serves them on an `ActorGpu` of its own for that origin: a
//! stream and library handles per user actor there too, instead of the worker's shared
//! library pool. Untagged requests (origin 0: the `Device` itself) go to the pool as before.
//!
//! The origin travels as a task-local set around the call (the `Device` methods are the
//! same for every caller), read where the request leaves for the worker.

use std::future::Future;

/// The origin of requests made by the `Device` itself (no `ActorGpu`).
pub(crate) const DEVICE: u64 = 0;

tokio::task_local! {
    static ORIGIN: u64;
}

/// Runs `f` with its requests marked as coming from `origin`.
pub(crate) async fn on<F: Future>(origin: u64, f: F) -> F::Output {
    ORIGIN.scope(origin, f).await
}

/// The origin of the request being made now ([`DEVICE`] outside any `on`).
pub(crate) fn current() -> u64 {
    ORIGIN.try_with(|l| *l).unwrap_or(DEVICE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_origin_holds_inside_its_scope_only() {
        assert_eq!(current(), DEVICE);
        let inside = on(7, async { current() }).await;
        assert_eq!(inside, 7);
        assert_eq!(current(), DEVICE);
    }
}
