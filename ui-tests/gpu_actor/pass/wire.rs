//! `#[gpu_actor(wire)]`: the message enum gets an encoding for isolated devices' workers.
use atomr_accel_cuda::gpu_actor;
use atomr_accel_cuda::wire::WireMessage;

struct Counter {
    n: u64,
}

#[gpu_actor(wire)]
impl Counter {
    #[handler]
    fn add(&mut self, by: u64, label: String) -> u64 {
        self.n += by + label.len() as u64;
        self.n
    }

    #[handler(tell)]
    fn reset(&mut self) {
        self.n = 0;
    }
}

fn assert_wire<M: WireMessage>() {}

fn main() {
    assert_wire::<CounterMsg>();
}
