//! Messages of the supervision protocol, on each actor's unbounded system channel.
//!
//! They never queue behind user messages (the loop polls the system channel first), so a
//! stop or a supervisor's directive is acted on after the current message at the latest.

use super::failure::Failure;
use super::supervision::Directive;
use super::terminated::StopMode;

/// A supervision-protocol message.
pub(crate) enum SystemMsg {
    /// Stop, treating queued messages as `mode` says.
    Stop(StopMode),
    /// The parent's answer to this actor's failure report (never `Escalate`).
    Supervise(Directive),
    /// An all-for-one sibling failed: restart although this actor did not fail.
    RestartBySibling(Failure),
    /// A child failed and waits for a directive.
    ChildFailed {
        name: String,
        id: u64,
        failure: Failure,
        /// False when the child is already stopping (a `post_stop` failure): it awaits no
        /// answer, but the decider still sees (and may escalate) the failure.
        awaits_directive: bool,
    },
    /// A child has stopped and released its name.
    ChildTerminated { name: String, id: u64 },
}
