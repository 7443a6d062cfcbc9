use atomr_accel_cuda::gpu_actor;

struct A;

#[gpu_actor(supervision(restart_on = [Explosion], within = "soon"), ask_timeout = "3 hours")]
impl A {
    #[handler]
    fn one(&mut self) -> u32 {
        1
    }
}

fn main() {}
