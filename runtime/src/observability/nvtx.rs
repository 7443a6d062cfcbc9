//! NVTX ranges: every device operation a range on the thread that enqueues it, named
//! `lane: operation`, so Nsight Systems shows our calls — and the CUDA calls and kernels
//! inside them — on its timeline.
//!
//! Only while a profiler is attached (it sets `NVTX_INJECTION64_PATH` for the program it
//! starts): otherwise a range costs one load of a flag and nothing is allocated. Built
//! with the `nvtx` cargo feature (default); without it there are no ranges.

use std::sync::OnceLock;

/// True when an NVTX tool is attached to this process.
pub(crate) fn profiling() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| cfg!(feature = "nvtx") && std::env::var_os("NVTX_INJECTION64_PATH").is_some())
}

/// An open NVTX range on this thread; dropping it ends the range.
pub(crate) struct Range(());

impl Range {
    /// Opens `lane: name` on this thread (only call while [`profiling`]).
    pub(crate) fn push(lane: &str, name: &str) -> Range {
        #[cfg(feature = "nvtx")]
        nvtx::range_push!("{lane}: {name}");
        #[cfg(not(feature = "nvtx"))]
        let _ = (lane, name);
        Range(())
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        #[cfg(feature = "nvtx")]
        nvtx::range_pop!();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ranges_open_and_close_without_a_profiler() {
        // No tool attached here: the range is a no-op that must not fail or leak.
        assert!(!super::profiling() || std::env::var_os("NVTX_INJECTION64_PATH").is_some());
        for i in 0..1000 {
            let _r = super::Range::push("test", &format!("op {i}"));
        }
    }
}
