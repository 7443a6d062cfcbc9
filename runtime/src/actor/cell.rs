//! The running actor: one task that owns the instance, its mailbox and its system channel.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::task::Poll;

use futures::FutureExt;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use super::actor_trait::Actor;
use super::context::Context;
use super::dead_letters::DeadLetterReason;
use super::failure::Failure;
use super::props::Props;
use super::supervision::Directive;
use super::system_msg::SystemMsg;
use super::terminated::{StopMode, StopReason, Terminated};
use crate::dispatcher::idle::{self, Idle, MailSpin};
use crate::error::GpuError;

/// Where a cell reports failures and its end.
pub(crate) struct ParentLink {
    pub(crate) sys: mpsc::UnboundedSender<SystemMsg>,
}

/// Everything the actor's task owns.
pub(crate) struct Cell<A: Actor> {
    props: Props<A>,
    ctx: Context<A>,
    mailbox: mpsc::Receiver<A::Msg>,
    sys_rx: mpsc::UnboundedReceiver<SystemMsg>,
    /// System messages set aside while waiting for a directive.
    stash: VecDeque<SystemMsg>,
    parent: ParentLink,
    name: String,
    id: u64,
    terminated_tx: watch::Sender<Option<Terminated>>,
    instance: Option<A>,
    /// Messages taken on the fast path since the last full poll.
    fast_run: u32,
    /// The idle state of the GPU thread the actor runs on (none on the shared runtime),
    /// found on the first wait for mail (the cell is built on its spawner's thread).
    idle: OnceLock<Option<Arc<Idle>>>,
}

/// Messages taken without yielding to the scheduler before one full (yielding) poll.
const FAST_RUN: u32 = 64;

/// Runs a handler or hook, turning a panic into a [`Failure`] like a returned error.
async fn guarded(fut: impl Future<Output = Result<(), GpuError>>) -> Result<(), Failure> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::Error(e)),
        Err(payload) => Err(Failure::from_panic(payload)),
    }
}

enum Event<M> {
    Sys(SystemMsg),
    Msg(M),
}

impl<A: Actor> Cell<A> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        props: Props<A>,
        ctx: Context<A>,
        mailbox: mpsc::Receiver<A::Msg>,
        sys_rx: mpsc::UnboundedReceiver<SystemMsg>,
        parent: ParentLink,
        name: String,
        id: u64,
        terminated_tx: watch::Sender<Option<Terminated>>,
    ) -> Self {
        Cell {
            props,
            ctx,
            mailbox,
            sys_rx,
            stash: VecDeque::new(),
            parent,
            name,
            id,
            terminated_tx,
            instance: None,
            fast_run: 0,
            idle: OnceLock::new(),
        }
    }

    /// Builds an instance with the factory (a panicking factory is a failure too).
    fn build(&self) -> Result<A, Failure> {
        std::panic::catch_unwind(AssertUnwindSafe(|| (self.props.factory)())).map_err(Failure::from_panic)
    }

    async fn start(&mut self) -> Result<(), Failure> {
        let mut instance = self.build()?;
        let r = guarded(instance.pre_start(&mut self.ctx)).await;
        self.instance = Some(instance);
        r
    }

    /// Drops the old instance (after its `pre_restart` and after stopping its children)
    /// and builds a new one: two instances — two CUDA contexts — never coexist.
    async fn restart(&mut self, failure: &Failure) -> Result<(), Failure> {
        let mut first_error = Ok(());
        if let Some(mut old) = self.instance.take() {
            first_error = guarded(old.pre_restart(&mut self.ctx, failure)).await;
            self.ctx.children.stop_all().await;
            drop(old);
        } else {
            self.ctx.children.stop_all().await;
        }
        let mut fresh = self.build()?;
        let r = guarded(fresh.post_restart(&mut self.ctx, failure)).await;
        self.instance = Some(fresh);
        first_error.and(r)
    }

    /// Reports `failure` to the parent and waits for its directive. Other system
    /// messages arriving meanwhile are stashed (child notices are handled at once).
    async fn await_directive(&mut self, failure: &Failure) -> (Directive, Option<Failure>) {
        let report = SystemMsg::ChildFailed {
            name: self.name.clone(),
            id: self.id,
            failure: failure.clone(),
            awaits_directive: true,
        };
        if self.parent.sys.send(report).is_err() {
            return (Directive::Stop, None);
        }
        loop {
            match self.sys_rx.recv().await {
                Some(SystemMsg::Supervise(d)) => return (d, None),
                Some(SystemMsg::Stop(_)) | None => return (Directive::Stop, None),
                Some(SystemMsg::RestartBySibling(f)) => return (Directive::Restart, Some(f)),
                Some(SystemMsg::ChildTerminated { name, id }) => self.ctx.children.remove(&name, id),
                Some(other) => self.stash.push_back(other),
            }
        }
    }

    async fn next_event(&mut self) -> Event<A::Msg> {
        if let Some(s) = self.stash.pop_front() {
            return Event::Sys(s);
        }
        // Fast path without a select: system messages first, then a queued message. A
        // bounded run of fast-path messages keeps tokio's cooperative budget in play.
        if self.fast_run < FAST_RUN {
            match self.sys_rx.try_recv() {
                Ok(s) => return Event::Sys(s),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Event::Sys(SystemMsg::Stop(StopMode::DeadLetter))
                }
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if let Ok(m) = self.mailbox.try_recv() {
                self.fast_run += 1;
                return Event::Msg(m);
            }
        }
        self.fast_run = 0;
        let idle = self.idle.get_or_init(idle::current).as_deref();
        if let Some(idle) = idle {
            idle.worked();
        }
        let (sys_rx, mailbox) = (&mut self.sys_rx, &mut self.mailbox);
        // After a spin saw mail that a receive did not take (tokio's cooperative budget is
        // spent: it has scheduled this task again), wait for that turn.
        let mut saw_mail = false;
        std::future::poll_fn(|cx| loop {
            // System messages first, as on the fast path.
            if let Poll::Ready(s) = sys_rx.poll_recv(cx) {
                return Poll::Ready(Event::Sys(s.unwrap_or(SystemMsg::Stop(StopMode::DeadLetter))));
            }
            if let Poll::Ready(m) = mailbox.poll_recv(cx) {
                return Poll::Ready(match m {
                    Some(m) => Event::Msg(m),
                    // Unreachable while the context holds our own sender; stop if it happens.
                    None => Event::Sys(SystemMsg::Stop(StopMode::DeadLetter)),
                });
            }
            let Some(idle) = idle else {
                return Poll::Pending;
            };
            if std::mem::take(&mut saw_mail) {
                return Poll::Pending;
            }
            // On a GPU thread, spin on the mailbox while the thread has nothing else to do.
            match idle.spin_for_mail(cx.waker(), || !sys_rx.is_empty() || !mailbox.is_empty()) {
                MailSpin::Arrived => saw_mail = true,
                MailSpin::Yield => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                MailSpin::Park => return Poll::Pending,
            }
        })
        .await
    }

    /// The actor's life: start, handle messages and system messages, obey directives,
    /// stop.
    async fn run(mut self) {
        let mut pending: Option<Failure> = self.start().await.err();
        let (reason, mode) = loop {
            if let Some(failure) = pending.take() {
                let (directive, sibling_failure) = self.await_directive(&failure).await;
                match directive {
                    Directive::Resume if self.instance.is_some() => self.ctx.children.resume_escalated(),
                    Directive::Resume | Directive::Restart => {
                        let cause = sibling_failure.unwrap_or(failure);
                        pending = self.restart(&cause).await.err();
                    }
                    Directive::Stop | Directive::Escalate => break (StopReason::Failed(failure), StopMode::DeadLetter),
                }
                continue;
            }
            match self.next_event().await {
                Event::Msg(msg) => {
                    let Some(instance) = self.instance.as_mut() else {
                        continue;
                    };
                    let span = tracing::debug_span!("message", actor = %self.ctx.path, handler = A::message_name(&msg));
                    if let Err(f) = guarded(instance.handle(&mut self.ctx, msg)).instrument(span).await {
                        pending = Some(f);
                    }
                }
                Event::Sys(SystemMsg::Stop(mode)) => break (StopReason::Requested, mode),
                Event::Sys(SystemMsg::ChildFailed {
                    name,
                    id,
                    failure,
                    awaits_directive,
                }) => {
                    pending = self.ctx.children.on_child_failed(&name, id, failure, awaits_directive);
                }
                Event::Sys(SystemMsg::ChildTerminated { name, id }) => self.ctx.children.remove(&name, id),
                Event::Sys(SystemMsg::RestartBySibling(f)) => pending = self.restart(&f).await.err(),
                // A directive for a failure we no longer wait on.
                Event::Sys(SystemMsg::Supervise(_)) => {}
            }
        };
        self.stop(reason, mode).await;
    }

    /// Closes the mailbox, drains or dead-letters what is queued, stops the children,
    /// runs `post_stop`, publishes the death notice and tells the parent.
    async fn stop(mut self, reason: StopReason, mode: StopMode) {
        self.mailbox.close();
        while let Some(msg) = self.mailbox.recv().await {
            match (mode, self.instance.as_mut()) {
                (StopMode::Drain, Some(instance)) => {
                    if let Err(f) = guarded(instance.handle(&mut self.ctx, msg)).await {
                        tracing::warn!(actor = %self.ctx.path, %f, "failure while draining before stop");
                    }
                }
                _ => {
                    drop(msg);
                    self.ctx
                        .system
                        .dead_letters()
                        .publish::<A::Msg>(&self.ctx.path, DeadLetterReason::DroppedAtStop);
                }
            }
        }
        self.ctx.children.stop_all().await;
        if let Some(mut instance) = self.instance.take() {
            if let Err(failure) = guarded(instance.post_stop(&mut self.ctx)).await {
                let _ = self.parent.sys.send(SystemMsg::ChildFailed {
                    name: self.name.clone(),
                    id: self.id,
                    failure,
                    awaits_directive: false,
                });
            }
        }
        // Messages that raced the close (none can be accepted after it) are already out;
        // later senders see a closed mailbox and record their own dead letters.
        self.terminated_tx.send_replace(Some(Terminated {
            path: self.ctx.path.clone(),
            reason,
        }));
        let _ = self.parent.sys.send(SystemMsg::ChildTerminated {
            name: self.name,
            id: self.id,
        });
    }
}

/// The task body of an actor.
pub(crate) async fn run_cell<A: Actor>(cell: Cell<A>) {
    cell.run().await
}
