//! Whether this process serves as an isolated device's worker. Known to the actor core
//! (the first `ActorSystem` of a worker whose `main` did not enter worker mode ends the
//! process) and to the isolation tier that sets it, so it lives below both.

use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable that starts a process in worker mode (its value: the
/// device's configuration, as JSON).
pub const WORKER_ENV: &str = "ATOMR_ACCEL_WORKER";

/// Exit status of a process started as a worker whose `main` did not enter worker mode.
pub(crate) const NOT_ENTERED_EXIT: i32 = 3;

/// Set once this process serves as a worker.
static IN_WORKER: AtomicBool = AtomicBool::new(false);

/// Ends a process started as a worker whose `main` went on as the program instead of
/// serving (no `#[gpu_main]`): called when it builds its first `ActorSystem`, so the
/// program's own work stops there and the device reports why.
pub(crate) fn refuse_unentered_worker() {
    if std::env::var_os(WORKER_ENV).is_some() && !IN_WORKER.load(Ordering::SeqCst) {
        eprintln!(
            "atomr-accel-cuda: this process was started as an isolated device's worker, but `main` did not enter \
             worker mode: put #[gpu_main] on `main`, or call isolation::enter_worker_if_requested() first in it"
        );
        std::process::exit(NOT_ENTERED_EXIT);
    }
}

/// Marks this process as serving as a worker (before it builds its actor system).
pub(crate) fn enter_worker_mode() {
    IN_WORKER.store(true, Ordering::SeqCst);
}
