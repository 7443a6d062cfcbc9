use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(mailboxes = 3, supervision(restart_when = [Other]))]
impl A {
    #[handler(ask)]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
