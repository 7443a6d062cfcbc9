//! Parent-decided supervision: strategies, deciders and restart budgets.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::failure::Failure;
use crate::error::GpuError;

/// What a parent decides to do with a failed child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Keep the instance and its state; drop only the failing message.
    Resume,
    /// Drop the instance (and stop its children), build a fresh one from the props.
    Restart,
    /// Stop the child for good.
    Stop,
    /// Fail the parent itself with this failure; the grandparent decides.
    Escalate,
}

/// What happens when a child exceeds its restart budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Stop the child.
    Stop,
    /// Escalate the failure to the parent's own supervisor.
    Escalate,
}

/// At most `max_restarts` restarts of one child within `within`; then `then`.
///
/// A crash loop (a device that faults on every start, say) must end in a clear stop
/// rather than burn the machine: this is what bounds it.
#[derive(Debug, Clone, Copy)]
pub struct RestartBudget {
    /// Restarts allowed inside the window.
    pub max_restarts: u32,
    /// Length of the sliding window.
    pub within: Duration,
    /// What to do once the budget is spent.
    pub then: Exhausted,
}

/// Whether a directive applies to the failed child only, or to all its siblings too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyKind {
    /// Only the failed child is resumed, restarted or stopped.
    OneForOne,
    /// A restart or stop of one child restarts or stops every child of the parent —
    /// for children that share state (a context and the library handles made in it).
    AllForOne,
}

/// Maps a failure to a directive.
pub type Decider = Arc<dyn Fn(&Failure) -> Directive + Send + Sync>;

/// How a parent supervises its children: the kind, the decider and the restart budget.
#[derive(Clone)]
pub struct SupervisorStrategy {
    pub(crate) kind: StrategyKind,
    pub(crate) decider: Decider,
    pub(crate) budget: RestartBudget,
}

impl std::fmt::Debug for SupervisorStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorStrategy")
            .field("kind", &self.kind)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl Default for SupervisorStrategy {
    fn default() -> Self {
        SupervisorStrategy::one_for_one()
    }
}

impl SupervisorStrategy {
    /// One-for-one with [`default_decider`] and a budget of 10 restarts a minute, then stop.
    pub fn one_for_one() -> Self {
        SupervisorStrategy {
            kind: StrategyKind::OneForOne,
            decider: Arc::new(default_decider),
            budget: RestartBudget {
                max_restarts: 10,
                within: Duration::from_secs(60),
                then: Exhausted::Stop,
            },
        }
    }

    /// All-for-one with the same defaults as [`SupervisorStrategy::one_for_one`].
    pub fn all_for_one() -> Self {
        SupervisorStrategy {
            kind: StrategyKind::AllForOne,
            ..Self::one_for_one()
        }
    }

    /// Replaces the decider.
    pub fn with_decider(mut self, decider: impl Fn(&Failure) -> Directive + Send + Sync + 'static) -> Self {
        self.decider = Arc::new(decider);
        self
    }

    /// Replaces the restart budget.
    pub fn with_budget(mut self, max_restarts: u32, within: Duration, then: Exhausted) -> Self {
        self.budget = RestartBudget {
            max_restarts,
            within,
            then,
        };
        self
    }

    /// The strategy's kind.
    pub fn kind(&self) -> StrategyKind {
        self.kind
    }

    /// Applies the decider.
    pub fn decide(&self, failure: &Failure) -> Directive {
        (self.decider)(failure)
    }
}

/// The default decider: sticky device errors escalate (nothing below the device tier can
/// mend them), bad input and out-of-memory resume (the actor's state is fine), everything
/// else — panics and other errors — restarts.
pub fn default_decider(failure: &Failure) -> Directive {
    match failure.gpu_error() {
        Some(e) if e.is_sticky() => Directive::Escalate,
        Some(GpuError::InvalidArgument(_))
        | Some(GpuError::OutOfMemory { .. })
        | Some(GpuError::Stale { .. })
        | Some(GpuError::Timeout(_))
        | Some(GpuError::Unsupported(_)) => Directive::Resume,
        _ => Directive::Restart,
    }
}

/// The restart times of one child inside the budget's window.
#[derive(Debug, Default)]
pub(crate) struct RestartWindow {
    times: VecDeque<Instant>,
}

impl RestartWindow {
    /// Records a restart at `now` if the budget allows it; false when it is spent.
    pub(crate) fn try_restart(&mut self, budget: &RestartBudget, now: Instant) -> bool {
        while let Some(&t) = self.times.front() {
            if now.duration_since(t) > budget.within {
                self.times.pop_front();
            } else {
                break;
            }
        }
        if self.times.len() as u32 >= budget.max_restarts {
            return false;
        }
        self.times.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_allows_max_then_refuses_then_recovers() {
        let b = RestartBudget {
            max_restarts: 2,
            within: Duration::from_millis(50),
            then: Exhausted::Stop,
        };
        let mut w = RestartWindow::default();
        let t0 = Instant::now();
        assert!(w.try_restart(&b, t0));
        assert!(w.try_restart(&b, t0));
        assert!(!w.try_restart(&b, t0));
        assert!(w.try_restart(&b, t0 + Duration::from_millis(60)));
    }

    #[test]
    fn tagged_panics_are_classified() {
        let f = Failure::Panic("ContextPoisoned: illegal address".into());
        assert_eq!(default_decider(&f), Directive::Escalate);
        let f = Failure::Panic("InvalidArgument: m too large".into());
        assert_eq!(default_decider(&f), Directive::Resume);
        let f = Failure::Panic("index out of bounds".into());
        assert_eq!(default_decider(&f), Directive::Restart);
    }
}
