//! What went wrong in an actor, as its supervisor sees it.

use std::any::Any;

use super::path::ActorPath;
use crate::error::GpuError;

/// A failure of an actor's handler or lifecycle hook, handed to the parent's decider.
///
/// Handlers fail in two ways — they return a typed [`GpuError`], or they panic — and a
/// supervisor must be able to tell a poisoned context from a bad argument in both cases;
/// [`Failure::gpu_error`] classifies tagged panic strings (`"ContextPoisoned: …"`) too.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The handler or hook returned an error.
    Error(GpuError),
    /// The handler or hook panicked; the payload's text.
    Panic(String),
    /// A child failed and its parent's decider chose `Escalate`: the parent fails with this.
    Escalated {
        /// The child whose failure escalated.
        child: ActorPath,
        /// The child's own failure.
        cause: Box<Failure>,
    },
}

impl Failure {
    /// Builds a failure from a caught panic payload.
    pub(crate) fn from_panic(payload: Box<dyn Any + Send>) -> Failure {
        let text = if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(e) = payload.downcast_ref::<GpuError>() {
            return Failure::Error(e.clone());
        } else {
            "panic with a non-text payload".to_string()
        };
        Failure::Panic(text)
    }

    /// The typed error behind this failure, if it has one: the returned error, a tagged
    /// panic message, or the root cause of an escalation.
    pub fn gpu_error(&self) -> Option<GpuError> {
        match self {
            Failure::Error(e) => Some(e.clone()),
            Failure::Panic(text) => GpuError::from_tagged(text),
            Failure::Escalated { cause, .. } => cause.gpu_error(),
        }
    }

    /// The failure at the bottom of an escalation chain (itself if not escalated).
    pub fn root_cause(&self) -> &Failure {
        match self {
            Failure::Escalated { cause, .. } => cause.root_cause(),
            other => other,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Error(e) => write!(f, "error: {e}"),
            Failure::Panic(p) => write!(f, "panic: {p}"),
            Failure::Escalated { child, cause } => write!(f, "escalated from {child}: {cause}"),
        }
    }
}
