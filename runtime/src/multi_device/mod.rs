//! Worlds of devices and their collectives (all-reduce, broadcast, all-gather,
//! reduce-scatter, send/recv).
//!
//! Why: data-parallel work over several devices needs their buffers combined — gradients
//! summed, a batch scattered, results gathered — in the pattern NCCL defines, with the
//! semantics a user of NCCL (or `torch.distributed`) expects: every rank calls the same
//! collectives in the same order, each with its own buffers, and each call resolves when
//! its rank's part is done. A [`World`] is a group of devices of this process, one
//! [`Rank`] each. Its collectives are matched across ranks by their order on each rank
//! (`exchange.rs`), checked (the same collective, lengths, element type and root on every
//! rank, else `InvalidArgument` on all), and fail on every rank — never hang — when a
//! member's device is lost, a rank's buffer is stale, or the deadline passes.
//!
//! The world of CPU devices combines host buffers (the semantics the API and its tests
//! run on in CI). GPU members need NCCL communicators (DESIGN.md: multi-GPU on NCCL, never
//! a home-made transport): not built yet, so a world with a GPU is `Unsupported`
//! (README: what is missing), as are ranks in other processes.

mod exchange;
mod rank;
mod reduce;

pub use rank::{Rank, World};
pub use reduce::{CollectiveScalar, ReduceOp};
