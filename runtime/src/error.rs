//! The one error type of the runtime.
//!
//! Every reply in the system is a `Result<_, GpuError>`: actor-level failures (a stopped
//! actor, a full mailbox, a timeout) and device-level ones (a poisoned context, a stale
//! buffer, a cuBLAS status) share one taxonomy, so a caller matches on one enum and a
//! supervisor's decider can classify any failure. The type is `Clone` because one fault
//! (a poisoned context, say) is fanned out to every pending asker.

pub use crate::invalid::Invalid;
use std::time::Duration;

/// Which CUDA library (or layer) produced a [`GpuError::Library`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Lib {
    /// The CUDA driver API.
    Driver,
    /// cuBLAS.
    Cublas,
    /// NVRTC, the runtime compiler.
    Nvrtc,
    /// cuRAND.
    Curand,
    /// cuFFT.
    Cufft,
    /// cuSOLVER.
    Cusolver,
    /// cuSPARSE.
    Cusparse,
    /// cuDNN, the deep-learning primitives (convolutions, pooling).
    Cudnn,
    /// NCCL, the collectives of GPU worlds.
    Nccl,
    /// The CPU device's own backend (host GEMM, host memory).
    Cpu,
}

impl std::fmt::Display for Lib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lib::Driver => "CUDA driver",
            Lib::Cublas => "cuBLAS",
            Lib::Nvrtc => "NVRTC",
            Lib::Curand => "cuRAND",
            Lib::Cufft => "cuFFT",
            Lib::Cusolver => "cuSOLVER",
            Lib::Cusparse => "cuSPARSE",
            Lib::Cudnn => "cuDNN",
            Lib::Nccl => "NCCL",
            Lib::Cpu => "CPU backend",
        })
    }
}

/// What [`GpuError::Numerical`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum NumericalIssue {
    /// LU met an exactly zero pivot: the matrix is singular (`info` is the pivot's index).
    Singular,
    /// Cholesky met a leading minor that is not positive definite (`info` is its order).
    NotPositiveDefinite,
    /// An iterative method (SVD, symmetric eigen) did not converge (`info` values left).
    NoConvergence,
}

impl std::fmt::Display for NumericalIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NumericalIssue::Singular => "the matrix is singular",
            NumericalIssue::NotPositiveDefinite => "the matrix is not positive definite",
            NumericalIssue::NoConvergence => "the iteration did not converge",
        })
    }
}

/// Every failure the runtime reports.
///
/// Variants carry owned strings rather than source errors so the type stays `Clone` and
/// `Send` and can cross actor (and later process) boundaries unchanged. The enum is
/// `#[non_exhaustive]`: new libraries add kinds of failure, so a `match` outside this
/// crate ends with a wildcard arm.
///
/// ```
/// use atomr_accel_cuda_runtime::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), GpuError> {
/// let system = ActorSystem::new("doc-errors");
/// let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// let x = dev.upload(vec![1.0f32; 4]).await?;
/// // Bad input is refused before any work is queued, naming what is wrong.
/// match dev.write(&x, vec![0.0f32; 5]).await {
///     Err(GpuError::InvalidArgument(why)) => println!("refused: {why}"),
///     Err(other) => return Err(other),
///     Ok(()) => unreachable!("a 5-element write into a 4-element buffer"),
/// }
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(
    Debug,
    Clone,
    PartialEq,
    thiserror::Error,
    serde::Serialize,
    serde::Deserialize,
    atomr_accel_cuda_macros::GpuErrorTags,
)]
#[non_exhaustive]
pub enum GpuError {
    /// A sticky CUDA error (illegal address, trap, …) killed the context: nothing on this
    /// device works again in this process (see DESIGN.md). Carries the CUDA code.
    #[error("ContextPoisoned: CUDA error {code} ({msg}); every context of this process on the device is dead")]
    ContextPoisoned {
        /// The `CUresult` code that poisoned the context (e.g. 700, 719).
        code: i32,
        /// The driver's description of the code.
        msg: String,
    },
    /// The device is gone for this process: it was poisoned earlier, or its inner tier
    /// stopped for good.
    #[error("DeviceLost: {0}")]
    DeviceLost(String),
    /// An allocation did not fit in device (or host) memory. Not sticky: free memory and
    /// try again.
    #[error("OutOfMemory: could not allocate {requested_bytes} bytes")]
    OutOfMemory {
        /// The size of the allocation that failed.
        requested_bytes: u64,
    },
    /// A `GpuRef` from before a context rebuild was used: its memory no longer exists.
    #[error("Stale: buffer of generation {buffer_generation} used on device generation {device_generation}")]
    Stale {
        /// Generation the buffer was allocated in.
        buffer_generation: u64,
        /// The device's current generation.
        device_generation: u64,
    },
    /// Bad input: a shape, length, dtype or device that does not fit the request — with
    /// the argument at fault and expected vs got where known ([`Invalid`]).
    #[error("InvalidArgument: {0}")]
    InvalidArgument(Invalid),
    /// A CUDA library returned a non-success status that is not one of the classified
    /// cases above.
    #[error("{lib} error {code}: {msg}")]
    Library {
        /// Which library.
        lib: Lib,
        /// The library's numeric status.
        code: i32,
        /// The library's description of the status.
        msg: String,
    },
    /// A factorization met a property of its matrix that makes the result undefined
    /// (LAPACK's `info > 0`): not a fault of the device or the call, so the actor keeps
    /// serving; the caller decides (regularise, pivot differently, use another method).
    #[error("Numerical: {op}: {issue} (LAPACK info {info})")]
    Numerical {
        /// The routine (`"lu_factor"`, `"cholesky"`, …).
        op: String,
        /// What went wrong.
        issue: NumericalIssue,
        /// LAPACK's `info`: the 1-based index of the zero pivot or of the leading minor
        /// that is not positive definite, or the number of unconverged values.
        info: i32,
    },
    /// A `#[kernel]` failed while the CPU device emulated it (an index out of bounds, an
    /// overflow, a `sync_threads()` not every thread reaches): the message names the
    /// kernel, block and thread. Unlike a GPU fault it is not sticky.
    #[error("KernelFault: {0}")]
    KernelFault(String),
    /// The feature exists in the API but not (yet) on this backend; README.md lists it.
    #[error("Unsupported: {0}")]
    Unsupported(String),
    /// The device's queue (work waiting for its inner tier) is full.
    #[error("Backpressure: the device queue is full ({capacity} requests waiting)")]
    Backpressure {
        /// The queue's capacity.
        capacity: usize,
    },
    /// A request (an `ask`, a completion wait) did not finish within its deadline.
    #[error("Timeout: no reply within {0:?}")]
    Timeout(Duration),
    /// The actor has stopped (or was never started): the message was not delivered.
    #[error("Stopped: actor {0} is not running")]
    Stopped(String),
    /// The actor's bounded mailbox is full; the message was not accepted.
    #[error("MailboxFull: mailbox of {0} is full")]
    MailboxFull(String),
    /// The actor took the request but dropped it without replying, because it failed (or
    /// stopped) while handling it. Reported at once, not after the ask's timeout.
    #[error("NoReply: actor {0} dropped the request without replying (it failed or stopped)")]
    NoReply(String),
    /// A child (or top-level actor) with this name already exists under the same parent.
    #[error("NameTaken: an actor named {0} already exists here")]
    NameTaken(String),
    /// The operating system refused what the runtime needed — a file (the kernel disk
    /// cache, a replay journal) or a thread — not a fault of the device or the request.
    #[error("Io: {what}: {message}")]
    Io {
        /// What the runtime was doing (`"kernel cache: write /path"`).
        what: String,
        /// The system's error.
        message: String,
    },
    /// An invariant of the runtime broke, or one of its own tasks panicked: a bug in
    /// atomr-accel-cuda (please report it with this message), never bad input.
    #[error("Internal: {0}")]
    Internal(String),
    /// A handler or hook failed for a reason of the user's own.
    #[error("{0}")]
    Other(String),
}

impl GpuError {
    /// An `Io` error: what the runtime was doing, and the system's error.
    pub fn io(what: impl Into<String>, e: impl std::fmt::Display) -> GpuError {
        GpuError::Io {
            what: what.into(),
            message: e.to_string(),
        }
    }

    /// Classifies a tagged panic message such as `"ContextPoisoned: illegal address"`.
    ///
    /// Code that cannot return an error (a callback, a `Drop`) panics with a tagged string;
    /// supervisors use this to treat it like the typed error. Returns `None` when the text
    /// carries no known tag.
    pub fn from_tagged(text: &str) -> Option<GpuError> {
        let (tag, rest) = text.split_once(':')?;
        let rest = rest.trim().to_string();
        Some(match tag.trim() {
            "ContextPoisoned" => GpuError::ContextPoisoned { code: 0, msg: rest },
            "DeviceLost" => GpuError::DeviceLost(rest),
            "OutOfMemory" => GpuError::OutOfMemory { requested_bytes: 0 },
            "InvalidArgument" => GpuError::invalid(rest),
            "Unsupported" => GpuError::Unsupported(rest),
            "KernelFault" => GpuError::KernelFault(rest),
            _ => return None,
        })
    }

    /// A bad request explained in words (`GpuError::InvalidArgument`); use
    /// [`Invalid`]'s builders for the argument at fault and expected vs got.
    pub fn invalid(message: impl Into<String>) -> GpuError {
        GpuError::InvalidArgument(Invalid::new(message))
    }

    /// What a call of a library this build was compiled without gets (`Unsupported`,
    /// naming the cargo feature of `krate` that brings it): a program written against
    /// every library compiles with a lean build and says at run time what it lacks.
    pub fn without_feature(what: &str, feature: &str, krate: &str) -> GpuError {
        GpuError::Unsupported(format!(
            "{what} needs the `{feature}` cargo feature of {krate}, which this build was compiled without \
             (features = [\"{feature}\"] on the {krate} dependency in Cargo.toml)"
        ))
    }

    /// The `DeviceLost` a request to `device` gets once the device is lost because of
    /// `cause`: the cause in its own words, without a second `DeviceLost:` prefix when
    /// the cause is itself a loss ("device 0 is lost: the device was stopped").
    pub fn lost(device: usize, cause: &GpuError) -> GpuError {
        GpuError::DeviceLost(format!("device {device} is lost: {}", cause.as_cause()))
    }

    /// This error as the cause of a loss: a loss's own words (no second `DeviceLost:`),
    /// any other error with its tag.
    pub(crate) fn as_cause(&self) -> String {
        match self {
            GpuError::DeviceLost(m) => m.clone(),
            other => other.to_string(),
        }
    }

    /// True for errors after which the device cannot be used again in this process.
    pub fn is_sticky(&self) -> bool {
        matches!(self, GpuError::ContextPoisoned { .. } | GpuError::DeviceLost(_))
    }
}

/// Shorthand used across the runtime.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// CUDA driver codes after which the process must be relaunched to use the device again
/// (the CUDA documentation's "sticky" errors; measured on the H200 for 700 and 719).
pub const STICKY_CUDA_CODES: &[i32] = &[
    700, // ILLEGAL_ADDRESS
    702, // LAUNCH_TIMEOUT
    714, // HARDWARE_STACK_ERROR
    715, // ILLEGAL_INSTRUCTION
    716, // MISALIGNED_ADDRESS
    717, // INVALID_ADDRESS_SPACE
    718, // INVALID_PC
    719, // LAUNCH_FAILED (a device-side trap)
    999, // UNKNOWN
];

/// CUDA_ERROR_OUT_OF_MEMORY.
const CUDA_OUT_OF_MEMORY: i32 = 2;

impl GpuError {
    /// Classifies a CUDA driver status: sticky codes poison the context, out-of-memory is
    /// its own (recoverable) variant, everything else is a `Library` error.
    pub fn from_cuda_code(code: i32, msg: String, requested_bytes: u64) -> GpuError {
        if STICKY_CUDA_CODES.contains(&code) {
            GpuError::ContextPoisoned { code, msg }
        } else if code == CUDA_OUT_OF_MEMORY {
            GpuError::OutOfMemory { requested_bytes }
        } else {
            GpuError::Library {
                lib: Lib::Driver,
                code,
                msg,
            }
        }
    }
}

impl From<cudarc::driver::DriverError> for GpuError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        let msg = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        GpuError::from_cuda_code(e.0 as i32, msg, 0)
    }
}

#[cfg(feature = "blas")]
impl From<cudarc::cublas::result::CublasError> for GpuError {
    fn from(e: cudarc::cublas::result::CublasError) -> Self {
        GpuError::Library {
            lib: Lib::Cublas,
            code: e.0 as i32,
            msg: format!("{:?}", e.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_codes_are_classified() {
        assert!(GpuError::from_cuda_code(700, "illegal address".into(), 0).is_sticky());
        assert!(GpuError::from_cuda_code(719, "launch failed".into(), 0).is_sticky());
        assert_eq!(
            GpuError::from_cuda_code(2, "oom".into(), 64),
            GpuError::OutOfMemory { requested_bytes: 64 }
        );
        assert!(matches!(
            GpuError::from_cuda_code(1, "invalid value".into(), 0),
            GpuError::Library {
                lib: Lib::Driver,
                code: 1,
                ..
            }
        ));
    }

    #[test]
    fn tagged_texts_round_trip() {
        let e = GpuError::from_tagged("DeviceLost: gone").unwrap();
        assert_eq!(e, GpuError::DeviceLost("gone".into()));
        assert!(GpuError::from_tagged("no tag here").is_none());
        // tag() and TAGS come from the enum (derive GpuErrorTags), which is checked at
        // compile time against the tags #[gpu_actor] supervision accepts.
        let numerical = GpuError::Numerical {
            op: "lu_factor".into(),
            issue: NumericalIssue::Singular,
            info: 3,
        };
        assert_eq!(numerical.tag(), "Numerical");
        assert_eq!(GpuError::KernelFault("x".into()).tag(), "KernelFault");
        assert_eq!(GpuError::TAGS.len(), 18);
        let io = GpuError::io("kernel cache: write /x", std::io::Error::other("disk full"));
        assert_eq!(
            (io.tag(), io.to_string().as_str()),
            ("Io", "Io: kernel cache: write /x: disk full")
        );
        assert_eq!(GpuError::Internal("x".into()).tag(), "Internal");
        let json = serde_json::to_string(&io).unwrap();
        assert_eq!(serde_json::from_str::<GpuError>(&json).unwrap(), io);
        assert!(GpuError::TAGS
            .iter()
            .all(|t| GpuError::from_tagged(&format!("{t}: x")).is_none_or(|e| e.tag() == *t)));
    }
}
