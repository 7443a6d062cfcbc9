//! Shared by the GPU benches: the median, and opening GPU 0 (or saying why not).
#![allow(dead_code)]

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::{Device, DeviceConfig};

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Opens GPU 0 with `config`, or prints why the bench measures nothing and returns None.
pub async fn open_gpu(bench: &str, config: DeviceConfig) -> Option<(ActorSystem, Device)> {
    let sys = ActorSystem::new(bench);
    match Device::open(&sys, config).await {
        Ok(d) => Some((sys, d)),
        Err(e) => {
            println!("{bench} bench: no usable GPU ({e}); nothing measured");
            None
        }
    }
}
