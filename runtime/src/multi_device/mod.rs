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
//! Where the data moves (`rank.rs`'s `Plane`): a world of CPU devices — or of isolated
//! devices, whose contexts live in worker processes out of NCCL's reach, or a mix —
//! combines host buffers (`host.rs`: each rank's data downloaded and written back through
//! its own device; the semantics the API and its tests run on in CI); a world of
//! in-process GPUs runs on NCCL (`nccl.rs`; DESIGN.md: multi-GPU on NCCL, never a home-made transport) —
//! one communicator per GPU, every rank's call of a collective enqueued in one NCCL group
//! once the meeting checked them. Ranks may also be processes, on one host or many
//! (`World::join`, [`Rendezvous`]): rank 0's process holds the meetings and serves the
//! others over TCP (`remote.rs`, `rendezvous.rs`), GPU data moving on NCCL's own
//! transport between them.

mod exchange;
mod host;
#[cfg(feature = "nccl")]
mod nccl;
mod rank;
mod reduce;
pub(crate) mod remote;
mod rendezvous;

pub use rank::{Rank, World};
pub use reduce::{CollectiveScalar, ReduceOp};
pub use rendezvous::Rendezvous;
