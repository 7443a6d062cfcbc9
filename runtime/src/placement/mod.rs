//! `PlacementActor`: chooses a device per request, by policy, so work spreads over
//! several devices (GPUs, CPU devices, or both) without the caller tracking them.
//!
//! Policies: round-robin, and least-loaded — the device with the fewest requests in
//! flight (`Device::in_flight`: queued, running or waiting for the GPU) plus placements
//! not yet dropped (each choice reserves its request's place: [`Placement`]), ties broken
//! by the most free memory (asked of the devices, cached briefly). Lost devices are
//! skipped; when every device is lost the answer is `DeviceLost`. Written with
//! `#[gpu_actor]`.

mod reservation;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atomr_accel_cuda_macros::gpu_actor;

pub use self::reservation::{DeviceLoad, Placement};
use crate::device::{Device, Status};
use crate::error::GpuError;
use crate::multi_device::World;

/// How a [`PlacementActor`] picks a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementPolicy {
    /// Each device in turn.
    RoundRobin,
    /// The device with the fewest requests in flight; the most free memory on a tie.
    LeastLoaded,
}

/// How long a device's free-memory figure is reused before it is asked again.
const MEMORY_TTL: Duration = Duration::from_millis(50);

/// Places requests on a fixed set of devices.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// let mut devices = vec![];
/// for device_id in 0..2 {
///     devices.push(Device::open(&system, DeviceConfig { device_id, ..DeviceConfig::cpu() }).await?);
/// }
/// let all = devices.clone();
/// let placement = PlacementActorRef::spawn(&system, "placement", move || {
///     PlacementActor::new(all.clone(), PlacementPolicy::RoundRobin)
/// })?;
/// let first = placement.choose().await?;
/// let second = placement.choose().await?;
/// assert_eq!((first.id(), second.id()), (0, 1));
/// let x = first.upload(vec![1.0f32; 8]).await?; // a placement is its device, reserved
/// assert_eq!(first.sum(&x).await?, 8.0);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct PlacementActor {
    devices: Vec<Device>,
    policy: PlacementPolicy,
    next: usize,
    free_memory: Vec<Option<(u64, Instant)>>,
    /// Placements not yet dropped, per device.
    reserved: Vec<Arc<AtomicUsize>>,
}

impl PlacementActor {
    /// Places over `devices` (at least one) with `policy`.
    pub fn new(devices: Vec<Device>, policy: PlacementPolicy) -> Self {
        let n = devices.len();
        PlacementActor {
            devices,
            policy,
            next: 0,
            free_memory: vec![None; n],
            reserved: (0..n).map(|_| Arc::default()).collect(),
        }
    }

    /// Places over the devices of `world`, in rank order: the work of a data-parallel
    /// program spread over every member.
    pub fn over_world(world: &World, policy: PlacementPolicy) -> Self {
        PlacementActor::new(world.ranks().iter().map(|r| r.device().clone()).collect(), policy)
    }

    /// Device `i`'s load: requests in flight plus placements held.
    fn load_of(&self, i: usize) -> usize {
        self.devices[i].in_flight() + self.reserved[i].load(Ordering::Relaxed)
    }

    fn usable(&self, i: usize) -> bool {
        !matches!(self.devices[i].state().status, Status::Lost(_))
    }

    fn none_usable(&self) -> GpuError {
        GpuError::DeviceLost(format!(
            "no device to place the request on: all {} devices are lost",
            self.devices.len()
        ))
    }

    /// Free memory of device `i`, cached for [`MEMORY_TTL`]; 0 if it cannot be asked.
    async fn free(&mut self, i: usize) -> u64 {
        if let Some((free, at)) = self.free_memory[i] {
            if at.elapsed() < MEMORY_TTL {
                return free;
            }
        }
        let free = self.devices[i].memory().await.map(|(free, _)| free).unwrap_or(0);
        self.free_memory[i] = Some((free, Instant::now()));
        free
    }
}

#[gpu_actor(crate = crate)]
impl PlacementActor {
    /// The device for the next request, with its place reserved until the returned
    /// [`Placement`] is dropped.
    #[handler]
    async fn choose(&mut self) -> Result<Placement, GpuError> {
        let n = self.devices.len();
        if n == 0 {
            return Err(GpuError::invalid("a placement over no devices"));
        }
        let usable: Vec<usize> = (0..n).filter(|&i| self.usable(i)).collect();
        if usable.is_empty() {
            return Err(self.none_usable());
        }
        let i = match self.policy {
            PlacementPolicy::RoundRobin => {
                let i = (0..n)
                    .map(|k| (self.next + k) % n)
                    .find(|i| usable.contains(i))
                    .ok_or_else(|| self.none_usable())?;
                self.next = (i + 1) % n;
                i
            }
            PlacementPolicy::LeastLoaded => {
                let loads: Vec<(usize, usize)> = usable.iter().map(|&i| (i, self.load_of(i))).collect();
                let least = loads.iter().map(|&(_, l)| l).min().unwrap_or(0);
                let tied: Vec<usize> = loads.into_iter().filter(|&(_, l)| l == least).map(|(i, _)| i).collect();
                let mut best = (tied[0], 0u64);
                if tied.len() > 1 {
                    best.1 = self.free(tied[0]).await;
                    for &i in &tied[1..] {
                        let free = self.free(i).await;
                        if free > best.1 {
                            best = (i, free);
                        }
                    }
                }
                best.0
            }
        };
        Ok(Placement::new(self.devices[i].clone(), &self.reserved[i]))
    }

    /// Each device's load, in order: what least-loaded placement weighs.
    #[handler]
    fn load(&mut self) -> Result<Vec<DeviceLoad>, GpuError> {
        Ok((0..self.devices.len())
            .map(|i| DeviceLoad {
                device: self.devices[i].id(),
                in_flight: self.devices[i].in_flight(),
                reserved: self.reserved[i].load(Ordering::Relaxed),
                lost: !self.usable(i),
            })
            .collect())
    }

    /// The devices placed over, in order.
    #[handler]
    fn devices(&mut self) -> Result<Vec<Device>, GpuError> {
        Ok(self.devices.clone())
    }
}
