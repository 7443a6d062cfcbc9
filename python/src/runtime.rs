//! The tokio runtime every call of the binding runs on, and the blocking bridge to it.
//!
//! Why blocking: Python calls are synchronous; each waits for its device's reply with the
//! GIL released, so other Python threads (and the device's actors) run meanwhile.

use std::future::Future;
use std::sync::OnceLock;

use pyo3::prelude::*;

/// The process's runtime (two worker threads: the device's actors run on their own).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("atomr-python")
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// Runs `f` to completion with the GIL released; a runtime error becomes its Python
/// exception.
pub fn block<T: Send, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Future<Output = Result<T, atomr_accel_cuda::GpuError>> + Send,
{
    py.detach(|| runtime().block_on(f)).map_err(crate::errors::to_py)
}
