//! `MatrixPointers`: the device arrays of matrix addresses that batched routines read
//! (`potrfBatched`, `getrfBatched`, their solves), made once per batch layout and kept.
//!
//! A batched routine of cuSOLVER or cuBLAS takes its matrices as a device array of
//! pointers. Made per call, that array costs a host vector, a pageable copy and an
//! allocation — on a batch of 10 000 16×16 factorizations (~0.1 ms of GPU work) about as
//! much as the routine itself (BENCHMARKS.md, "Issue 25's libraries vs raw"). An array
//! depends only on the first matrix's address, the distance between matrices and their
//! count, so it is kept under exactly that key: whatever buffer sits at that address
//! later, the array names the same addresses, and a call over the same buffer (the usual
//! case: a program refactoring its batch each step) finds it made.
//!
//! Arrays are written once, by a copy on the owner's stream, and only read after; one
//! that is evicted is freed stream-ordered (cudarc's free on that stream), after every
//! routine enqueued before — so a cached address stays valid for every routine enqueued
//! on the stream while it is handed out.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::GpuError;

/// How many batch layouts are kept per stream: a program alternates between a few
/// (the factors, the right-hand sides); more than this many is a program walking over
/// many buffers, for which keeping arrays would only hold memory.
const KEPT: usize = 8;

/// One kept array: its key (first address, bytes between matrices, count), its own
/// address (taken once: every use is on the one stream, whose order covers it, so no
/// per-use event is needed) and the array.
type Kept = ((CUdeviceptr, u64, usize), CUdeviceptr, CudaSlice<u64>);

/// The pointer arrays of one stream's batched routines, most recently used last.
pub(crate) struct MatrixPointers {
    stream: Arc<CudaStream>,
    kept: RefCell<Vec<Kept>>,
}

impl MatrixPointers {
    /// An empty cache for routines enqueued on `stream`.
    pub(crate) fn new(stream: Arc<CudaStream>) -> Self {
        MatrixPointers {
            stream,
            kept: RefCell::new(Vec::new()),
        }
    }

    /// The device address of an array of `count` matrix addresses, `bytes` apart from
    /// `first`, for a routine enqueued next on the cache's stream (which orders its read
    /// after the array's copy and before the array's free).
    pub(crate) fn get(&self, first: CUdeviceptr, bytes: u64, count: usize) -> Result<CUdeviceptr, GpuError> {
        let key = (first, bytes, count);
        let mut kept = self.kept.borrow_mut();
        if let Some(i) = kept.iter().position(|(k, _, _)| *k == key) {
            let hit = kept.remove(i);
            let address = hit.1;
            kept.push(hit);
            return Ok(address);
        }
        let host: Vec<u64> = (0..count as u64).map(|i| first + i * bytes).collect();
        let array = self.stream.clone_htod(&host)?;
        let (address, guard) = array.device_ptr(&self.stream);
        drop(guard);
        if kept.len() == KEPT {
            // Freed in stream order: after every routine that read it.
            kept.remove(0);
        }
        kept.push((key, address, array));
        Ok(address)
    }
}
