//! The `Device` methods written from the library actors' handlers. Each actor marked
//! `#[gpu_actor(device)]` generates a `<actor>_device_surface!` macro holding one method
//! per `#[handler(device)]`; they are expanded here, with the public bound of each of the
//! actor's dtype sets, so the device tier depends on the actors and not the reverse.
//! Adding an operation to an actor adds its method here without an edit (unless it takes
//! an argument type of a kind no handler took before: the methods name their argument
//! types as the handlers wrote them, so those types are in scope here).

use super::bounds::{BlasScalar, DType};
use crate::dtype::Complex;
use crate::gpu_ref::GpuRef;
use crate::host::{PinnedBuf, Uploaded};
use crate::kernel::dsl::{KernelCall, KernelSequence};
use crate::library::blas::matmul::{Epilogue, Matmul, MatmulBuffer};
use crate::library::blas::Gemm;
use crate::memory::{Advice, Location};
use crate::wire::HostData;

super::context_actor::context_actor_device_surface!(crate::device::context_actor; any = DType);
/// Expands each optional library's `Device` methods, from the table of libraries.
macro_rules! library_surfaces {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident {
        $actor:ident, $msg:ident, $client:ident, $pool:ident, $device:ident, wire($tag:literal), $what:literal, $feature:literal,
        $dsurf:ident, $gsurf:ident, [$($set:ident = $bound:ident),*]
        bounds { $($bounds:tt)* }
    })*) => {
        $(library_surfaces!(@one $device $field, $dsurf, [$($set = $bound),*]);)*
    };
    // A `by_message` library's methods are its actor's messages (`device_in_place!`).
    (@one by_message $field:ident, $dsurf:ident, [$($set:ident = $bound:ident),*]) => {
        crate::library::$field::$dsurf!(crate::library::$field; $($set = crate::device::$bound),*);
    };
    (@one in_place $field:ident, $dsurf:ident, [$($set:ident = $bound:ident),*]) => {
        crate::library::$field::$dsurf!(crate::library::$field, via = $field; $($set = crate::device::$bound),*);
    };
}
crate::libraries::library_table!(library_surfaces {});
crate::library::kernels::kernel_actor_device_surface!(crate::library::kernels, via = kernel; any = DType);
crate::event::event_actor_device_surface!(crate::event);

impl crate::kernel::dsl::LaunchTarget for super::Device {
    fn launch_kernel(&self, call: KernelCall) -> impl std::future::Future<Output = Result<(), crate::GpuError>> + Send {
        super::Device::launch_kernel(self, call)
    }
}

/// `gemm`: `gemm_strided_batched` with a batch of one — written once for the `Device`
/// and for an `ActorGpu`, whose `gemm_strided_batched` each calls its own way.
macro_rules! gemm_shorthand {
    () => {
        /// `C = alpha·op(A)·op(B) + beta·C`; resolves when the GPU has finished.
        pub async fn gemm<T: BlasScalar>(
            &self,
            g: Gemm<T>,
            a: &GpuRef<T>,
            b: &GpuRef<T>,
            c: &GpuRef<T>,
        ) -> Result<(), crate::GpuError> {
            self.gemm_strided_batched(g, crate::library::blas::Batch::one(), a, b, c)
                .await
        }
    };
}
pub(crate) use gemm_shorthand;

impl super::Device {
    gemm_shorthand!();
}
