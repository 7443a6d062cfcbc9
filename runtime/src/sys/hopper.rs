//! The driver calls of the Hopper primitives that cudarc's safe layer lacks:
//! `cuLaunchKernelEx` with a cluster-dimension attribute, and `cuTensorMapEncodeTiled`.
//! The checks that make them sound live in `crate::hopper`; these wrappers take
//! already-validated values.

use std::ffi::c_void;

use cudarc::driver::sys as ds;
use cudarc::driver::{CudaFunction, CudaStream};

use crate::error::GpuError;
use crate::sys::launch::Dims;

/// Grid, block and dynamic shared memory of one cluster launch, and its cluster.
pub(crate) struct ClusterDims {
    pub(crate) launch: Dims,
    pub(crate) cluster: (u32, u32, u32),
}

/// Enqueues `f` on `stream` as a cluster launch.
///
/// # Safety
/// `params` must hold one pointer per kernel parameter, in order, each to a live value
/// of the parameter's type (device addresses for pointers); `dims` must have been
/// validated against the device (`hopper::LaunchSpec::validate`).
pub(crate) unsafe fn launch_cluster(
    stream: &CudaStream,
    f: &CudaFunction,
    dims: &ClusterDims,
    params: &mut [*mut c_void],
) -> Result<(), GpuError> {
    stream.context().bind_to_thread()?;
    // SAFETY: a zeroed attribute is a valid bit pattern (plain integers and a union of
    // plain data); the id and the cluster dimension are set before use.
    let mut attr: ds::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = ds::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim = ds::CUlaunchAttributeValue_union__bindgen_ty_1 {
        x: dims.cluster.0,
        y: dims.cluster.1,
        z: dims.cluster.2,
    };
    let cfg = ds::CUlaunchConfig {
        gridDimX: dims.launch.grid.0,
        gridDimY: dims.launch.grid.1,
        gridDimZ: dims.launch.grid.2,
        blockDimX: dims.launch.block.0,
        blockDimY: dims.launch.block.1,
        blockDimZ: dims.launch.block.2,
        sharedMemBytes: dims.launch.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: `cfg` and `attr` live across the call; the function belongs to the
    // stream's context (loaded by the module actor of this device); `params` satisfies
    // the caller's contract above; no `extra` options.
    unsafe { ds::cuLaunchKernelEx(&cfg, f.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }.result()?;
    Ok(())
}

/// The 128-byte, 64-byte-aligned descriptor the driver encodes and a kernel takes as a
/// `const __grid_constant__` parameter.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct TensorMapBits(pub(crate) [u64; 16]);

// SAFETY: plain bytes with the layout of CUtensorMap (16 × u64, 64-byte aligned), passed
// by value as a kernel parameter exactly as the driver's own type is.
unsafe impl cudarc::driver::DeviceRepr for TensorMapBits {}

/// What `cuTensorMapEncodeTiled` takes, validated by `hopper::TensorMapBuilder`.
pub(crate) struct TiledEncoding<'a> {
    pub(crate) data_type: ds::CUtensorMapDataType,
    pub(crate) address: u64,
    pub(crate) dims: &'a [u64],
    /// Strides in bytes of dimensions 1.. (rank − 1 entries).
    pub(crate) strides: &'a [u64],
    pub(crate) box_dims: &'a [u32],
    pub(crate) element_strides: &'a [u32],
    pub(crate) swizzle: ds::CUtensorMapSwizzle,
    pub(crate) l2: ds::CUtensorMapL2promotion,
    pub(crate) oob_nan: bool,
}

/// Encodes a tiled tensor map.
pub(crate) fn encode_tiled(e: &TiledEncoding<'_>) -> Result<TensorMapBits, GpuError> {
    let rank = e.dims.len();
    let ok = rank >= 1 && e.strides.len() == rank - 1 && e.box_dims.len() == rank && e.element_strides.len() == rank;
    if !ok {
        return Err(GpuError::invalid("tensor map arrays of mismatched ranks"));
    }
    let mut map = ds::CUtensorMap { opaque: [0; 16] };
    let oob = if e.oob_nan {
        ds::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    } else {
        ds::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    };
    // SAFETY: every array holds the rank (or rank − 1) entries the driver reads for
    // `rank` (checked above); `map` is a writable CUtensorMap; the address is a device
    // allocation the builder checked spans the described tensor. Encoding only writes
    // the descriptor — no memory is touched.
    unsafe {
        ds::cuTensorMapEncodeTiled(
            &mut map,
            e.data_type,
            rank as u32,
            e.address as *mut c_void,
            e.dims.as_ptr(),
            e.strides.as_ptr(),
            e.box_dims.as_ptr(),
            e.element_strides.as_ptr(),
            ds::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            e.swizzle,
            e.l2,
            oob,
        )
    }
    .result()?;
    Ok(TensorMapBits(map.opaque))
}
