//! Actor paths: where an actor sits in the supervision tree.

use std::fmt;
use std::sync::Arc;

/// The slash-separated position of an actor in its system's tree, e.g.
/// `/user/device-0/context/blas`.
///
/// Paths name actors in errors, dead letters and traces, so a failure report says *which*
/// actor failed, not just that one did. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ActorPath(Arc<str>);

impl ActorPath {
    /// The root under which every user-spawned top-level actor lives.
    pub(crate) fn user_root() -> Self {
        ActorPath(Arc::from("/user"))
    }

    /// The path of a child called `name` under this actor.
    pub(crate) fn child(&self, name: &str) -> Self {
        ActorPath(Arc::from(format!("{}/{}", self.0, name)))
    }

    /// The last segment: the actor's own name.
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The whole path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ActorPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ActorPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorPath({})", self.0)
    }
}
