use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(mailbox = 3, mailbox = 4)]
impl A {
    #[handler(tell, tell)]
    fn one(&mut self) {}
}

fn main() {}
