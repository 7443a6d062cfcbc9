//! Peer access between two GPUs, which cudarc's safe layer lacks: whether one device can
//! address another's memory directly (NVLink or PCIe peer-to-peer), and turning it on for
//! a pair of contexts so that a copy between them is one DMA, not staged by the driver.

use std::sync::Arc;

use cudarc::driver::{result as dresult, sys, CudaContext};

use crate::error::GpuError;

/// The number of CUDA GPUs this process sees (0 without a driver).
pub(crate) fn gpu_count() -> Result<usize, GpuError> {
    if !super::cuda_driver_present() {
        return Ok(0);
    }
    dresult::init()?;
    Ok(usize::try_from(dresult::device::get_count()?).unwrap_or(0))
}

/// Whether GPU `from` can address GPU `to`'s memory directly.
pub(crate) fn can_access_peer(from: usize, to: usize) -> Result<bool, GpuError> {
    let ordinal = |i: usize| i32::try_from(i).map_err(|_| GpuError::invalid(format!("no GPU {i}")));
    let a = dresult::device::get(ordinal(from)?)?;
    let b = dresult::device::get(ordinal(to)?)?;
    let mut can = 0i32;
    // SAFETY: `a` and `b` are device handles from `cuDeviceGet` (the driver initialised by
    // it), and `can` outlives the call, which only writes it.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) }.result()?;
    Ok(can != 0)
}

/// Lets `ctx` address `peer`'s memory directly (one direction). Already enabled is fine.
pub(crate) fn enable_peer_access(ctx: &Arc<CudaContext>, peer: &Arc<CudaContext>) -> Result<(), GpuError> {
    ctx.bind_to_thread()?;
    // SAFETY: both contexts are alive (held by the `Arc`s) and `ctx` is current on this
    // thread, as `cuCtxEnablePeerAccess` requires; flags must be 0.
    match unsafe { sys::cuCtxEnablePeerAccess(peer.cu_ctx(), 0) } {
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        other => Err(other.result().expect_err("not a success").into()),
    }
}
