//! `ActorRef<M>`: the address of an actor, and the ways to send it messages.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::dead_letters::{DeadLetterReason, DeadLetters};
use super::deadline::Deadlines;
use super::path::ActorPath;
use super::system_msg::SystemMsg;
use super::terminated::{StopMode, Terminated};
use crate::error::GpuError;

/// The untyped half of an address: the system channel and the death notice. Parents and
/// watchers need only this, whatever the actor's message type.
#[derive(Clone)]
pub(crate) struct Control {
    pub(crate) path: ActorPath,
    pub(crate) sys: mpsc::UnboundedSender<SystemMsg>,
    pub(crate) terminated: watch::Receiver<Option<Terminated>>,
}

impl Control {
    /// Sends a stop; a no-op on an actor that is already gone.
    pub(crate) fn stop(&self, mode: StopMode) {
        let _ = self.sys.send(SystemMsg::Stop(mode));
    }

    /// Resolves once the actor has stopped (at once if it already has).
    pub(crate) fn terminated(&self) -> impl Future<Output = Terminated> + Send + 'static {
        let mut rx = self.terminated.clone();
        let path = self.path.clone();
        async move {
            match rx.wait_for(|t| t.is_some()).await {
                Ok(t) => t.clone().expect("wait_for checked Some"),
                // The cell's sender is dropped only after it published the notice, so this
                // means the task was torn down (runtime shut down): report it as a stop.
                Err(_) => Terminated {
                    path,
                    reason: super::terminated::StopReason::Requested,
                },
            }
        }
    }
}

struct RefInner<M> {
    tx: mpsc::Sender<M>,
    control: Control,
    dead_letters: DeadLetters,
    deadlines: Deadlines,
}

/// A cheap, cloneable, typed address of an actor whose messages are `M`.
///
/// Every way of sending is explicit about a full mailbox: [`tell`](Self::tell) reports it
/// (and records a dead letter), [`try_tell`](Self::try_tell) hands the message back,
/// [`send`](Self::send) waits for room. Nothing is dropped silently.
pub struct ActorRef<M> {
    inner: Arc<RefInner<M>>,
}

impl<M> Clone for ActorRef<M> {
    fn clone(&self) -> Self {
        ActorRef {
            inner: self.inner.clone(),
        }
    }
}

impl<M> std::fmt::Debug for ActorRef<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorRef({})", self.inner.control.path)
    }
}

/// A message handed back by [`ActorRef::try_tell`], with the reason it was not accepted.
#[derive(Debug)]
pub struct Rejected<M> {
    /// `MailboxFull` or `Stopped`.
    pub error: GpuError,
    /// The message, returned to the caller.
    pub msg: M,
}

impl<M: Send + 'static> ActorRef<M> {
    pub(crate) fn new(tx: mpsc::Sender<M>, control: Control, dead_letters: DeadLetters, deadlines: Deadlines) -> Self {
        ActorRef {
            inner: Arc::new(RefInner {
                tx,
                control,
                dead_letters,
                deadlines,
            }),
        }
    }

    /// The actor's path.
    pub fn path(&self) -> &ActorPath {
        &self.inner.control.path
    }

    /// True until the actor has stopped.
    pub fn is_alive(&self) -> bool {
        self.inner.control.terminated.borrow().is_none() && !self.inner.tx.is_closed()
    }

    /// Fire-and-forget without waiting. A full mailbox gives `MailboxFull`, a stopped
    /// actor `Stopped`; either way the message is recorded as a dead letter.
    pub fn tell(&self, msg: M) -> Result<(), GpuError> {
        self.try_tell(msg).map_err(|r| {
            let reason = match r.error {
                GpuError::MailboxFull(_) => DeadLetterReason::MailboxFull,
                _ => DeadLetterReason::RecipientStopped,
            };
            self.inner.dead_letters.publish::<M>(self.path(), reason);
            r.error
        })
    }

    /// Like [`tell`](Self::tell), but a message that is not accepted comes back to the
    /// caller (and is not a dead letter: the caller still holds it).
    pub fn try_tell(&self, msg: M) -> Result<(), Rejected<M>> {
        match self.inner.tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(msg)) => Err(Rejected {
                error: GpuError::MailboxFull(self.path().to_string()),
                msg,
            }),
            Err(mpsc::error::TrySendError::Closed(msg)) => Err(Rejected {
                error: GpuError::Stopped(self.path().to_string()),
                msg,
            }),
        }
    }

    /// Waits for room in the mailbox, then enqueues. `Stopped` (and a dead letter) if the
    /// actor is gone.
    pub async fn send(&self, msg: M) -> Result<(), GpuError> {
        self.inner.tx.send(msg).await.map_err(|_| {
            self.inner
                .dead_letters
                .publish::<M>(self.path(), DeadLetterReason::RecipientStopped);
            GpuError::Stopped(self.path().to_string())
        })
    }

    /// Request-reply with a deadline. `make` builds the message around the reply handle.
    ///
    /// Errors: `Timeout` after `timeout`; `Stopped` if the actor is (or becomes) stopped
    /// before replying; `NoReply` at once if it failed while holding the request.
    pub async fn ask<R: Send + 'static>(
        &self,
        make: impl FnOnce(Reply<R>) -> M,
        timeout: Duration,
    ) -> Result<R, GpuError> {
        let (tx, rx) = oneshot::channel();
        let msg = make(Reply { tx, tap: None });
        let exchange = async {
            self.send(msg).await?;
            rx.await.map_err(|_| self.no_reply_error())
        };
        match self.inner.deadlines.run(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(GpuError::Timeout(timeout)),
        }
    }

    /// [`ask`](Self::ask) for replies that are themselves results: the two error layers
    /// are flattened into one.
    pub async fn ask_try<R: Send + 'static>(
        &self,
        make: impl FnOnce(Reply<Result<R, GpuError>>) -> M,
        timeout: Duration,
    ) -> Result<R, GpuError> {
        self.ask(make, timeout).await?
    }

    fn no_reply_error(&self) -> GpuError {
        if self.inner.tx.is_closed() {
            GpuError::Stopped(self.path().to_string())
        } else {
            GpuError::NoReply(self.path().to_string())
        }
    }

    /// Asks the actor to stop after its current message; queued messages become dead
    /// letters (their askers get `Stopped`).
    pub fn stop(&self) {
        self.inner.control.stop(StopMode::DeadLetter);
    }

    /// Asks the actor to stop, treating queued messages as `mode` says.
    pub fn stop_with(&self, mode: StopMode) {
        self.inner.control.stop(mode);
    }

    /// Resolves with the death notice once the actor has stopped — at once if it already
    /// has.
    pub fn terminated(&self) -> impl Future<Output = Terminated> + Send + 'static {
        self.inner.control.terminated()
    }
}

/// The reply half of an `ask`. Dropping it without replying tells the asker at once.
pub struct Reply<R> {
    tx: oneshot::Sender<R>,
    /// Sees the answer just before the asker does (the replay journal's hook): a
    /// callback on the replying thread, so a tapped request costs no extra task or hop.
    tap: Option<Tap<R>>,
}

/// A callback that sees an answer on its way to the asker.
type Tap<R> = Box<dyn FnOnce(&R) + Send>;

impl<R> Reply<R> {
    /// Sends the reply. False if the asker has already given up (timed out).
    pub fn send(self, value: R) -> bool {
        if let Some(tap) = self.tap {
            tap(&value);
        }
        self.tx.send(value).is_ok()
    }

    /// The same reply, with `tap` seeing the answer before the asker does (after any
    /// tap already set). A reply dropped unanswered runs no tap.
    pub(crate) fn tapped(mut self, tap: impl FnOnce(&R) + Send + 'static) -> Self
    where
        R: 'static,
    {
        self.tap = Some(match self.tap.take() {
            None => Box::new(tap),
            Some(first) => Box::new(move |v: &R| {
                first(v);
                tap(v)
            }),
        });
        self
    }

    /// True if the asker has given up: work for it can be skipped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// A reply handle and the receiver it feeds, for code that builds requests by hand
    /// (tests, adapters).
    pub fn pair() -> (Reply<R>, oneshot::Receiver<R>) {
        let (tx, rx) = oneshot::channel();
        (Reply { tx, tap: None }, rx)
    }
}

impl<R> std::fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}
