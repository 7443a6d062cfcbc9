//! The link to an isolated device's worker in a build without isolated devices (the
//! `isolation` feature off, or not Linux): a type with no values, so the route's
//! `Inner::Worker` arm — and every call on a link — type-checks and provably never
//! runs (`Device::start` refuses an isolated config first).

use crate::device::route::Routed;
use crate::error::GpuError;
use crate::observability::{RemoteTimeline, TimelineEvent};

/// No link can exist in this build.
pub(crate) enum LinkShared {}

impl LinkShared {
    pub(crate) fn submit(&self, _routed: Routed, _origin: u64) {
        match *self {}
    }

    pub(crate) fn pid(&self) -> u32 {
        match *self {}
    }

    pub(crate) fn pending(&self) -> usize {
        match *self {}
    }

    pub(crate) fn kill(&self) -> Result<(), GpuError> {
        match *self {}
    }

    pub(crate) fn close_origin(&self, _origin: u64) {
        match *self {}
    }
}

impl RemoteTimeline for LinkShared {
    fn set_enabled(&self, _on: bool) {
        match *self {}
    }

    fn take(&self) -> Vec<TimelineEvent> {
        match *self {}
    }
}
