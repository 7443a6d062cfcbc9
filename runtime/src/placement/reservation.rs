//! `Placement`: a chosen device, with capacity reserved on it until dropped; `DeviceLoad`:
//! what a placement actor counts per device.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::device::Device;

/// A device chosen by a [`PlacementActor`](super::PlacementActor), with one request's
/// capacity reserved on it until this is dropped.
///
/// Why: a device's load is its requests in flight, and a request is in flight only once
/// sent; a burst of choices made before any of their requests is sent would all see the
/// same idle device. Each `Placement` counts as one request on its device for the
/// least-loaded policy, so the burst spreads. Derefs to the [`Device`]: do the work
/// through it and drop it once the work is sent (or done).
pub struct Placement {
    device: Device,
    _reserved: Reserved,
}

impl Placement {
    pub(crate) fn new(device: Device, count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Placement {
            device,
            _reserved: Reserved(count.clone()),
        }
    }

    /// The chosen device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The chosen device; the reservation ends here.
    pub fn into_device(self) -> Device {
        self.device.clone()
    }
}

impl std::ops::Deref for Placement {
    type Target = Device;

    fn deref(&self) -> &Device {
        &self.device
    }
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Placement({:?})", self.device)
    }
}

/// One reservation on a device's count, released when dropped.
struct Reserved(Arc<AtomicUsize>);

impl Drop for Reserved {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One device's load as a [`PlacementActor`](super::PlacementActor) sees it (what
/// [`PlacementActorRef::load`](super::PlacementActorRef::load) reports, in the order of
/// its devices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLoad {
    /// The device's id (its ordinal).
    pub device: usize,
    /// Requests sent to it and not answered yet (`Device::in_flight`).
    pub in_flight: usize,
    /// Placements on it not yet dropped.
    pub reserved: usize,
    /// Whether it is lost (never chosen).
    pub lost: bool,
}
