//! The warm standby of an isolated device: a second worker, its device already open
//! (context, streams, library handles, warm-up calls done), waiting to take over.
//!
//! Why: after a sticky fault the old worker's process is finished, and a new one spends
//! most of a second creating its CUDA context and library handles (0.46–1.09 s measured
//! on the H200) while every request waits. With a standby, a fault costs the swap —
//! promoting the ready worker and publishing it — and the next standby starts in the
//! background. A standby serves no generation until promoted, so nothing reaches it
//! before; one that dies while waiting is dropped (and replaced at the next promotion).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use super::link::{LinkShared, OnDeath};
use crate::backend::state::{DeviceInfo, DeviceShared};
use crate::error::GpuError;

/// Where the standby is.
enum Slot {
    /// None, none starting.
    Empty,
    /// One starting (spawn `epoch`).
    Starting(u64),
    /// One ready (spawn `epoch`).
    Ready(u64, Arc<LinkShared>, DeviceInfo),
    /// The device stopped: no more standbys.
    Closed,
}

/// The standby worker of one isolated device (shared by the incarnations of its
/// `WorkerActor`, which a restart rebuilds).
pub(crate) struct Standby {
    shared: Arc<DeviceShared>,
    slot: Mutex<Slot>,
    /// Spawns so far: tells a late report from an old spawn apart.
    epochs: std::sync::atomic::AtomicU64,
    runtime: tokio::runtime::Handle,
}

impl Standby {
    /// The standby of the device `shared` describes (its `IsolationConfig::standby`
    /// says whether one is kept); spawns run on `runtime`.
    pub(crate) fn new(shared: Arc<DeviceShared>, runtime: tokio::runtime::Handle) -> Arc<Self> {
        Arc::new(Standby {
            shared,
            slot: Mutex::new(Slot::Empty),
            epochs: Default::default(),
            runtime,
        })
    }

    fn enabled(&self) -> bool {
        self.shared.config.isolation.as_ref().is_some_and(|i| i.standby)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the ready standby's process id (0: none).
    fn show(&self, slot: &Slot) {
        let pid = match slot {
            Slot::Ready(_, link, _) => link.pid(),
            _ => 0,
        };
        self.shared.standby_pid.store(pid, Ordering::Relaxed);
    }

    /// Takes the ready standby, if there is one: the worker that serves next.
    pub(crate) fn take(&self) -> Option<(Arc<LinkShared>, DeviceInfo)> {
        let mut slot = self.lock();
        let taken = match std::mem::replace(&mut *slot, Slot::Empty) {
            Slot::Ready(_, link, info) => Some((link, info)),
            other => {
                *slot = other;
                None
            }
        };
        self.show(&slot);
        taken
    }

    /// Starts a standby in the background, unless one is ready or starting (or the
    /// device keeps none, or stopped). A standby that cannot start is logged, not
    /// retried: the next promotion tries again.
    pub(crate) fn refill(self: &Arc<Self>) {
        if !self.enabled() {
            return;
        }
        let epoch = {
            let mut slot = self.lock();
            if !matches!(*slot, Slot::Empty) {
                return;
            }
            let epoch = self.epochs.fetch_add(1, Ordering::Relaxed) + 1;
            *slot = Slot::Starting(epoch);
            epoch
        };
        let me = Arc::downgrade(self);
        let standby = self.clone();
        self.runtime.spawn(async move {
            let spawned = LinkShared::spawn(&standby.shared, on_standby_death(me, epoch)).await;
            let mut slot = standby.lock();
            match spawned {
                Ok((link, info)) if matches!(*slot, Slot::Starting(e) if e == epoch) => {
                    tracing::info!(
                        device = standby.shared.config.device_id,
                        pid = link.pid(),
                        "isolated device: standby worker ready"
                    );
                    *slot = Slot::Ready(epoch, link, info);
                }
                Ok((link, _)) => {
                    drop(slot);
                    link.shutdown(GpuError::DeviceLost("the device stopped".into()));
                    return;
                }
                Err(e) => {
                    tracing::warn!(device = standby.shared.config.device_id, error = %e, "standby worker did not start");
                    if matches!(*slot, Slot::Starting(x) if x == epoch) {
                        *slot = Slot::Empty;
                    }
                }
            }
            standby.show(&slot);
        });
    }

    /// Ends the standby for good (the device stops).
    pub(crate) fn close(&self) {
        let old = {
            let mut slot = self.lock();
            let old = std::mem::replace(&mut *slot, Slot::Closed);
            self.show(&slot);
            old
        };
        if let Slot::Ready(_, link, _) = old {
            link.shutdown(GpuError::DeviceLost("the device stopped".into()));
        }
    }
}

/// What a standby's death does before it is promoted: empties the slot it is in.
fn on_standby_death(standby: Weak<Standby>, epoch: u64) -> OnDeath {
    Box::new(move |error: GpuError| {
        let Some(standby) = standby.upgrade() else {
            return;
        };
        let mut slot = standby.lock();
        if matches!(*slot, Slot::Ready(e, ..) if e == epoch) {
            tracing::warn!(device = standby.shared.config.device_id, %error, "standby worker died while waiting");
            *slot = Slot::Empty;
            standby.show(&slot);
        }
    })
}
