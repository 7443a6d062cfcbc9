//! Dead letters: every message that was not delivered is seen here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::path::ActorPath;

/// Why a message became a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// The recipient had stopped before the message was sent.
    RecipientStopped,
    /// `tell` found the mailbox full (a `try_tell` hands the message back instead).
    MailboxFull,
    /// The message was queued when its recipient stopped without draining.
    DroppedAtStop,
}

/// One message that did not reach its actor.
///
/// The message itself is dropped (its reply channel with it, so an asker learns at once);
/// what remains is enough to find the leak: the recipient, the message type, the reason.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The actor the message was for.
    pub recipient: ActorPath,
    /// `std::any::type_name` of the message.
    pub message_type: &'static str,
    /// Why it was not delivered.
    pub reason: DeadLetterReason,
}

type Observer = Arc<dyn Fn(&DeadLetter) + Send + Sync>;

#[derive(Default)]
struct Inner {
    count: AtomicU64,
    observers: RwLock<Vec<Observer>>,
}

/// The system-wide dead-letter office: an exact count and a list of observers.
#[derive(Clone, Default)]
pub struct DeadLetters {
    inner: Arc<Inner>,
}

impl DeadLetters {
    /// Registers an observer called (synchronously, on the sender's thread) for every
    /// dead letter from now on. Keep it cheap.
    pub fn subscribe(&self, observer: impl Fn(&DeadLetter) + Send + Sync + 'static) {
        self.inner
            .observers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(observer));
    }

    /// How many dead letters this system has seen.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }

    pub(crate) fn publish<M>(&self, recipient: &ActorPath, reason: DeadLetterReason) {
        self.inner.count.fetch_add(1, Ordering::Relaxed);
        let letter = DeadLetter {
            recipient: recipient.clone(),
            message_type: std::any::type_name::<M>(),
            reason,
        };
        tracing::debug!(recipient = %letter.recipient, message = letter.message_type, reason = ?reason, "dead letter");
        let observers = self.inner.observers.read().unwrap_or_else(|p| p.into_inner());
        for o in observers.iter() {
            o(&letter);
        }
    }
}
