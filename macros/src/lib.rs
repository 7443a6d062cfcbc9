//! Procedural macros of `atomr-accel-cuda`.
//!
//! - `#[gpu_actor]` on an `impl` block turns its `#[handler]` methods into a typed actor:
//!   the message enum, the exhaustive dispatch, a typed client and the supervision and
//!   dispatcher wiring (see the facade's documentation and DESIGN.md, "The DSL").
//! - `#[kernel]` on a function in a Rust subset makes a GPU kernel: CUDA C++ generated at
//!   compile time (NVRTC-compiled and disk-cached at run time), the same body as Rust for
//!   the CPU device's emulated grid, and a typed launcher.
//! - `#[derive(KernelArg)]` lets a `#[repr(C)]` struct be a kernel parameter.
//! - `#[gpu_main]` on `main` lets the program's isolated devices start their GPU workers.
//!
//! Every macro follows parse → validate → expand, reports every error it finds in one
//! build at the user's tokens, and re-emits the user's item beside the errors so the IDE
//! keeps working.

mod crate_path;
mod error_tags;
mod errors;
mod gpu_actor;
mod gpu_main;
mod kernel;
mod kernel_arg;

use proc_macro::TokenStream;

/// Makes an actor of the `impl` block's type: one message variant per `#[handler]`
/// method (one per dtype for `#[handler(dtypes(...))]` on a generic method), the
/// `Actor` impl with an exhaustive dispatch `match`, a typed client `<Type>Ref`, and
/// `<Type>::gpu_props` carrying the supervision and dispatcher options.
///
/// Options: `crate = path`, `supervision(restart_on = [Tag, …], resume_on = [Tag, …],
/// max_restarts = N, within = "60s")`, `dispatcher = gpu | shared`, `mailbox = N`,
/// `ask_timeout = "30s"`, `wire` (the messages can cross to an isolated device's worker
/// process, and are journalled by a replay `Recorder`, in the same encoding: every field
/// and reply type implements `wire::Wire`), `device` (the runtime's own library actors
/// only: each `#[handler(device)]` becomes a `Device` method through a generated
/// `<actor>_device_surface!`). Methods may be marked `#[pre_start]` / `#[post_stop]` /
/// `#[pre_restart]`.
///
/// Handler keys: `tell` (no reply), `dtypes(f32, f64 | set)` (a generic handler per
/// dtype), `device` / `device(name = m, borrow(p, …), into(p, …))` (the `Device` method
/// takes `borrow`ed parameters by reference and `into` ones as `impl Into<T>`), `volatile` (the answer reports
/// the device's state, such as free memory, and may differ between runs: a replay
/// compares it for success only).
#[proc_macro_attribute]
pub fn gpu_actor(args: TokenStream, input: TokenStream) -> TokenStream {
    gpu_actor::entry(args.into(), input.into()).into()
}

/// Makes a GPU kernel of a function written in a Rust subset (see the runtime's
/// `kernel::dsl` docs and README.md): the function becomes a module with `launch`
/// (typed; through the device's kernel actor), `call`, `cuda_source::<T>()` and the body
/// as Rust for the CPU device. Generic parameters are bounded by `Float` or `Int`; one
/// instantiation per dtype used. Options: `cuda = "…"` (a raw CUDA C++ kernel whose
/// parameter list is checked against the signature; the Rust body then is the CPU
/// emulation), `crate = path`.
#[proc_macro_attribute]
pub fn kernel(args: TokenStream, input: TokenStream) -> TokenStream {
    kernel::entry(args.into(), input.into()).into()
}

/// Makes a helper that `#[kernel]`s (and other helpers) call: its body is in the same
/// Rust subset as a kernel's and becomes a `__device__` function (a C++ template over its
/// `Float`/`Int` generic parameters, deduced from the arguments as C++ does, or given by a
/// turbofish); the function stays callable as Rust for the CPU device. It takes scalars,
/// buffers (`&[T]`, `&mut [T]`) and `#[derive(KernelArg)]` structs and returns a scalar or
/// nothing; it may call intrinsics, synchronise, shuffle and call other helpers, but not
/// itself (recursion is refused). Options: `crate = path`.
#[proc_macro_attribute]
pub fn device(args: TokenStream, input: TokenStream) -> TokenStream {
    kernel::device_fn_entry(args.into(), input.into()).into()
}

/// Marks the program's `main` as the entry point of isolated devices' GPU workers too:
/// started as a worker (by an isolated device of this same program), `main` serves that
/// device and never returns; otherwise it runs as written. Same as calling
/// `isolation::enter_worker_if_requested()` first thing in `main`.
#[proc_macro_attribute]
pub fn gpu_main(args: TokenStream, input: TokenStream) -> TokenStream {
    gpu_main::entry(args.into(), input.into()).into()
}

/// Lets a `#[repr(C)]` struct of kernel scalars be passed by value to a `#[kernel]`.
/// Generates `GpuError::tag()` and `GpuError::TAGS` from the runtime's error enum and
/// checks its variants against the tags `#[gpu_actor]` accepts. For the runtime only.
#[doc(hidden)]
#[proc_macro_derive(GpuErrorTags)]
pub fn derive_gpu_error_tags(input: TokenStream) -> TokenStream {
    error_tags::derive(input.into()).into()
}

#[proc_macro_derive(KernelArg)]
pub fn derive_kernel_arg(input: TokenStream) -> TokenStream {
    kernel_arg::derive(input.into()).into()
}

/// Marks a message handler inside a `#[gpu_actor]` impl. Used anywhere else it is an
/// error: `#[gpu_actor]` consumes it before it runs.
#[proc_macro_attribute]
pub fn handler(_args: TokenStream, input: TokenStream) -> TokenStream {
    errors::misplaced("handler", input.into()).into()
}

/// Marks the start hook inside a `#[gpu_actor]` impl (an error anywhere else).
#[proc_macro_attribute]
pub fn pre_start(_args: TokenStream, input: TokenStream) -> TokenStream {
    errors::misplaced("pre_start", input.into()).into()
}

/// Marks the restart hook (run on the failed instance) inside a `#[gpu_actor]` impl (an
/// error anywhere else).
#[proc_macro_attribute]
pub fn pre_restart(_args: TokenStream, input: TokenStream) -> TokenStream {
    errors::misplaced("pre_restart", input.into()).into()
}

/// Marks the stop hook inside a `#[gpu_actor]` impl (an error anywhere else).
#[proc_macro_attribute]
pub fn post_stop(_args: TokenStream, input: TokenStream) -> TokenStream {
    errors::misplaced("post_stop", input.into()).into()
}
