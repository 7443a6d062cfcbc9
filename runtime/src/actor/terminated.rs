//! Death notices: why an actor stopped, and how watchers learn of it.

use super::failure::Failure;
use super::path::ActorPath;

/// Why an actor stopped.
#[derive(Debug, Clone)]
pub enum StopReason {
    /// Someone asked it to stop (or its parent or the system stopped).
    Requested,
    /// Its supervisor stopped it after this failure (decider said Stop, or the restart
    /// budget ran out).
    Failed(Failure),
}

/// Delivered to every watcher of an actor once it has stopped — also to watchers that
/// start watching after the fact.
#[derive(Debug, Clone)]
pub struct Terminated {
    /// The actor that stopped.
    pub path: ActorPath,
    /// Why it stopped.
    pub reason: StopReason,
}

/// How an actor treats the messages still queued when it is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopMode {
    /// Hand them to the dead-letter office (their askers get `Stopped` at once).
    #[default]
    DeadLetter,
    /// Handle them first, then stop.
    Drain,
}
