//! Names the platform conditions the runtime's code is gated on, once.

use cfg_aliases::cfg_aliases;

fn main() {
    cfg_aliases! {
        // Isolated devices and the shared-memory arenas they (and CUDA IPC's liveness
        // files) are built on: Linux calls (memfd_create, prctl, SCM_RIGHTS, /proc).
        linux: { target_os = "linux" },
        // The worker-process device: the `isolation` feature, on Linux.
        isolation: { all(feature = "isolation", target_os = "linux") },
    }
}
