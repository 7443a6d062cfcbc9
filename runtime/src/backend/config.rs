//! `DeviceConfig`: which device, which backend, and how its actors behave.

use std::path::PathBuf;
use std::time::Duration;

use crate::completion::CompletionStrategy;
use crate::stream::StreamStrategy;

/// Which backend runs a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum BackendChoice {
    /// The CUDA GPU `device_id`; opening fails if it cannot be used.
    Cuda,
    /// The emulated CPU device: host memory, host GEMM. Same API, same results within
    /// floating-point tolerance.
    Cpu,
    /// The GPU when one is found, else the CPU device.
    #[default]
    Auto,
}

/// Writes [`Libraries`] from the table of the optional libraries (`crate::libraries`):
/// one switch per library, documented by its row, on by default (and when a saved
/// config predates it).
macro_rules! library_switches {
    (@libraries $($(#[$doc:meta])* $variant:ident: $field:ident { $($row:tt)* })*) => {
        /// The CUDA libraries a device starts actors for (each also needs its cargo
        /// feature; all on by default).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub struct Libraries {
            $(
                $(#[$doc])*
                #[serde(default = "on")]
                pub $field: bool,
            )*
        }

        impl Default for Libraries {
            fn default() -> Self {
                Libraries { $($field: true,)* }
            }
        }

        impl Libraries {
            /// Every library off: a device of kernels and copies only, or a start for
            /// switching on just the ones a program uses.
            pub fn none() -> Self {
                Libraries { $($field: false,)* }
            }
        }
    };
}

crate::libraries::library_table!(library_switches {});

fn on() -> bool {
    true
}

/// Everything that configures one device.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// use atomr_accel_cuda_runtime::StreamStrategy;
/// let config = DeviceConfig {
///     library_pool: 2,
///     streams: StreamStrategy::Pool(4),
///     request_timeout: std::time::Duration::from_secs(10),
///     ..DeviceConfig::cpu()
/// };
/// let dev = Device::open(&system, config).await?;
/// assert_eq!(dev.config().library_pool, 2);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeviceConfig {
    /// CUDA ordinal (and the id that `GpuRef`s are checked against).
    pub device_id: usize,
    /// Backend selection.
    pub backend: BackendChoice,
    /// Which streams the device's actors use.
    pub streams: StreamStrategy,
    /// How completions are observed.
    pub completion: CompletionStrategy,
    /// Requests the device holds while its inner tier (re)starts; beyond this,
    /// `Backpressure`.
    pub queue_capacity: usize,
    /// Mailbox capacity of the device's actors.
    pub mailbox_capacity: usize,
    /// Deadline of every wait for GPU work.
    pub op_timeout: Duration,
    /// Deadline of a request (an ask) through the device.
    pub request_timeout: Duration,
    /// Library actors to start.
    pub libraries: Libraries,
    /// Memory the CPU device may hand out, in bytes (host RAM is shared with everything
    /// else, so an allocation beyond this is `OutOfMemory` rather than an abort).
    pub cpu_memory_limit: u64,
    /// Bytes of free pinned host buffers the device keeps for reuse.
    pub pinned_pool_bytes: u64,
    /// Staging buffers (8 MiB each: what `write_slice`, `download_into` and owned-`Vec`
    /// copies stage through, three in flight per copy) pinned when the device starts and
    /// again at each restart, so that not even the first large copy from ordinary memory
    /// pays for pinning (milliseconds per buffer). They count against
    /// `pinned_pool_bytes`; more than it holds is an `InvalidArgument` from
    /// `Device::start`. Default 0: pinned on first use. An isolated device's copies
    /// stage through its shared arena instead (`IsolationConfig::pinned_arena_bytes`):
    /// its worker pins none.
    #[serde(default)]
    pub pinned_initial_buffers: usize,
    /// The largest pinned host buffer one request may take, in bytes: page-locked memory
    /// is taken from the whole machine (the OS cannot swap it), so a runaway length is
    /// an `InvalidArgument` naming this setting instead of a host brought to its knees.
    pub pinned_buffer_max_bytes: u64,
    /// How long a caller's task spins (in busy slices of at most 10 µs, yielding to its
    /// thread's other tasks between them) for a reply from a GPU before it parks (the
    /// CPU device's callers never spin: its work runs on this machine's cores). Spinning
    /// keeps the caller's thread hot — a thread parked for the length of a GPU operation
    /// wakes tens of microseconds late — at the price of a busy core while it waits, as
    /// `cudaStreamSynchronize` does by default. The default, 5 ms, with
    /// [`DeviceConfig::idle_spin`] and the `Spin` completion, brought the tiny round trip
    /// on the H200 to 21 µs against raw cuBLAS's 20 µs (BENCHMARKS.md). Zero: park at
    /// once.
    pub reply_spin: Duration,
    /// How long the device's GPU threads (the context's and each library actor's) spin
    /// for new work after their last work, before they park; on a GPU only (the CPU
    /// device's threads never spin). The thread's actor spins on its own mailbox, so a
    /// request reaches it without a trip through the runtime's scheduler (about 0.5 µs
    /// of the hop in on the H200, BENCHMARKS.md). A parked thread takes tens of
    /// microseconds to wake — more when it sat idle through a long GPU operation, and
    /// more in a virtual machine — and that is added to the next request's round trip.
    /// The default, 5 ms, covers the gap between calls of a program that alternates GPU
    /// work with a few milliseconds of its own (on the H200 it took an SGEMM 4096 called
    /// that way from 0.96× to 0.99× of raw cuBLAS, BENCHMARKS.md); it costs a busy core
    /// for up to that long after each burst of requests. Zero: park at once.
    pub idle_spin: Duration,
    /// Replay cuFFT transforms repeated on the same buffers as CUDA graphs (captured on
    /// their second run). cuFFT's own enqueue costs ~7–10 µs of host time per call, which
    /// a small transform waits for; a graph launch costs a few µs (an awaited 2^16 × 16
    /// C2C on the H200: 20 → 17 µs, BENCHMARKS.md). Only with
    /// [`StreamStrategy::PerActor`], where the FFT actor's stream is its own (a capture
    /// would take in other actors' work on a shared stream). Default: on.
    pub fft_graphs: bool,
    /// How many actors serve each of the BLAS, FFT, solver and kernel libraries for
    /// callers outside any actor (at least 1; the RNG is one actor: a seeded sequence is
    /// its state). Each member has its own thread, stream and handle — made on first use,
    /// beyond the first — and a request goes to the least busy one, so independent tasks
    /// calling `Device` methods overlap on the GPU while a lone caller keeps to one
    /// member. Actors with a GPU of their own (`ActorGpu`) do not use them. Default: 8 (with
    /// four, eight concurrent tasks reached only 0.75× of raw cudarc, BENCHMARKS.md).
    pub library_pool: usize,
    /// After the device opens, warm each library in the background (a tiny GEMM, RNG
    /// fill, FFT and factorization) so that the libraries' one-time initialisation —
    /// 84–119 ms on the H200 for the first call of each — is not paid by the first
    /// request. Default: on.
    pub warm_up: bool,
    /// Kernel disk cache directory (None: `KernelCache::default_dir()`).
    pub kernel_cache_dir: Option<std::path::PathBuf>,
    /// Diagnostics and test hook: the inner tier waits this long before building its
    /// context, which holds the device in `Starting` (to exercise queueing).
    pub start_delay: Option<Duration>,
    /// `Some`: the inner tier runs in a worker process of its own, which the device
    /// respawns after a sticky fault (see [`DeviceConfig::isolated`]).
    pub isolation: Option<IsolationConfig>,
    /// Report the device's metrics (requests in flight, generation, readiness, loss,
    /// rebuilds, request latency) through the `metrics` facade to the recorder the
    /// program installed before opening the device (`crate::observability`). Off by
    /// default: then nothing is measured.
    #[serde(default)]
    pub metrics: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            device_id: 0,
            backend: BackendChoice::Auto,
            streams: StreamStrategy::PerActor,
            completion: CompletionStrategy::default(),
            queue_capacity: 1024,
            mailbox_capacity: 1024,
            op_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            libraries: Libraries::default(),
            cpu_memory_limit: 8 << 30,
            pinned_pool_bytes: 1 << 30,
            pinned_initial_buffers: 0,
            pinned_buffer_max_bytes: 16 << 30,
            start_delay: None,
            kernel_cache_dir: None,
            reply_spin: Duration::from_millis(5),
            idle_spin: Duration::from_millis(5),
            fft_graphs: true,
            library_pool: 8,
            warm_up: true,
            isolation: None,
            metrics: false,
        }
    }
}

impl DeviceConfig {
    /// Checks the pinned-memory settings together: the initial staging buffers must fit
    /// the pool that keeps them and the per-buffer cap.
    pub(crate) fn check_pinned(&self) -> Result<(), crate::error::GpuError> {
        use crate::error::{GpuError, Invalid};
        let staging = crate::host::STAGING_BYTES as u64;
        let wanted = (self.pinned_initial_buffers as u64).saturating_mul(staging);
        if self.pinned_initial_buffers > 0
            && (wanted > self.pinned_pool_bytes || staging > self.pinned_buffer_max_bytes)
        {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "DeviceConfig::pinned_initial_buffers = {} staging buffers of {staging} bytes do not fit \
                     pinned_pool_bytes ({}) or pinned_buffer_max_bytes ({}): raise those or ask for fewer",
                    self.pinned_initial_buffers, self.pinned_pool_bytes, self.pinned_buffer_max_bytes
                ))
                .arg("pinned_initial_buffers")
                .mismatch(
                    format_args!("≤ {}", self.pinned_pool_bytes / staging),
                    self.pinned_initial_buffers,
                ),
            ));
        }
        Ok(())
    }

    /// The GPU when present, else the CPU device.
    pub fn auto() -> Self {
        DeviceConfig::default()
    }

    /// CUDA device `id`.
    pub fn cuda(id: usize) -> Self {
        DeviceConfig {
            device_id: id,
            backend: BackendChoice::Cuda,
            ..Default::default()
        }
    }

    /// The CPU device.
    pub fn cpu() -> Self {
        DeviceConfig {
            backend: BackendChoice::Cpu,
            ..Default::default()
        }
    }

    /// Sets the completion strategy.
    pub fn with_completion(mut self, c: CompletionStrategy) -> Self {
        self.completion = c;
        self
    }

    /// Sets the stream strategy.
    pub fn with_streams(mut self, s: StreamStrategy) -> Self {
        self.streams = s;
        self
    }

    /// Runs the device's inner tier — context, streams, library actors — in a worker
    /// process (this executable, re-entered: `main` must call
    /// [`crate::isolation::enter_worker_if_requested`] first, or carry `#[gpu_main]`).
    /// A sticky CUDA fault kills only the worker: the device respawns it, bumps the
    /// generation (older `GpuRef`s fail `Stale`) and serves queued requests. The API is
    /// the same as in-process; see `isolation` for what does not cross yet.
    pub fn isolated(self) -> Self {
        self.with_isolation(IsolationConfig::default())
    }

    /// As [`DeviceConfig::isolated`], with the worker's settings.
    pub fn with_isolation(mut self, iso: IsolationConfig) -> Self {
        self.isolation = Some(iso);
        self
    }

    /// Sets how many actors serve each pooled library ([`DeviceConfig::library_pool`]).
    pub fn with_library_pool(mut self, n: usize) -> Self {
        self.library_pool = n.max(1);
        self
    }

    /// Sets the queue capacity used while the inner tier starts.
    pub fn with_queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n;
        self
    }
}

/// How an isolated device runs its worker.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IsolationConfig {
    /// The worker executable; `None`: this executable (`std::env::current_exe`).
    pub program: Option<PathBuf>,
    /// Arguments for the worker executable.
    pub args: Vec<String>,
    /// Restarts allowed within `restart_window` before the device is given up as
    /// `DeviceLost` (stops a crash loop).
    pub max_restarts: u32,
    /// See `max_restarts`.
    pub restart_window: Duration,
    /// How long a worker may take to open its device (CUDA, cuBLAS: ~1–1.5 s on the
    /// H200).
    pub start_timeout: Duration,
    /// Size of each of the two shared-memory arenas (sparse: only touched pages use
    /// memory). Transfers that do not fit go through the socket, more slowly.
    pub arena_bytes: usize,
    /// Keep a warm standby worker (its device open, library handles made) that takes
    /// over at once when the serving one faults or dies; the next one then starts in
    /// the background. Costs a second worker process, with its own context and handles
    /// on the GPU (hundreds of MiB of device memory). On by default.
    #[serde(default = "standby_default")]
    pub standby: bool,
    /// Size of the shared-memory arena the device's pinned buffers (`Device::pinned`)
    /// are carved from, in the user process and mapped by every worker (sparse: only
    /// pages of buffers made use memory; they stay the arena's until the device is
    /// dropped, as the pinned pool keeps buffers).
    #[serde(default = "pinned_arena_default")]
    pub pinned_arena_bytes: usize,
    /// How often the user process asks the worker whether it is alive (a ping its
    /// runtime answers). Zero turns the heartbeat off.
    #[serde(default = "heartbeat_default")]
    pub heartbeat: Duration,
    /// How long a worker may go without sending anything (a reply, a pong) before it is
    /// taken for hung — stopped (`SIGSTOP`), deadlocked, starved — and killed, its pending
    /// requests answered with `DeviceLost` and the standby put in its place, as after a
    /// crash. A kernel that never ends is not a hang of the process (it still answers
    /// pings): its request's deadline (`DeviceConfig::op_timeout`) catches it.
    #[serde(default = "hang_timeout_default")]
    pub hang_timeout: Duration,
    /// The most requests one worker may have in flight; beyond it a request is answered
    /// `Backpressure` at once (the mailboxes of an in-process device bound it the same
    /// way), so a flood cannot pile up unbounded work and memory.
    #[serde(default = "max_in_flight_default")]
    pub max_in_flight: usize,
}

fn standby_default() -> bool {
    true
}

fn heartbeat_default() -> Duration {
    Duration::from_millis(500)
}

fn hang_timeout_default() -> Duration {
    Duration::from_secs(5)
}

fn max_in_flight_default() -> usize {
    4096
}

fn pinned_arena_default() -> usize {
    16 << 30
}

impl Default for IsolationConfig {
    fn default() -> Self {
        IsolationConfig {
            program: None,
            args: vec![],
            max_restarts: 20,
            restart_window: Duration::from_secs(60),
            start_timeout: Duration::from_secs(60),
            arena_bytes: 2 << 30,
            standby: true,
            pinned_arena_bytes: pinned_arena_default(),
            heartbeat: heartbeat_default(),
            hang_timeout: hang_timeout_default(),
            max_in_flight: max_in_flight_default(),
        }
    }
}
