//! A TMA tensor map as a launch argument. For a buffer of this process the descriptor is
//! encoded here, with the buffer's address; an isolated device's buffer lives in its
//! worker process, whose address only the worker knows — so such a map crosses as what
//! it encodes (its [`TiledSpec`] and its buffer) and the worker encodes it again for its
//! own copy of the buffer, checked there like any map.
//!
//! Why here, under `launch` (and not in `hopper`, which builds and checks maps): the
//! worker rebuilds a launch's arguments from the wire in this layer, below `hopper`.

use cudarc::driver::sys::{CUtensorMapDataType as Ty, CUtensorMapL2promotion as L2, CUtensorMapSwizzle as Sw};
use cudarc::driver::{DevicePtr, DeviceSlice};

use super::{Arg, KernelArgs, ScalarArg};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Region};
use crate::sys::hopper::{encode_tiled, TensorMapBits, TiledEncoding};
use crate::wire::{BufferOnWire, Reader, Side, Wire, Writer};

/// Everything a tiled tensor map encodes but its buffer's address, validated
/// (`hopper::TensorMapBuilder`): dimensions innermost first, byte strides of dimensions
/// 1.., box and element strides, and the swizzle (0 none, 1–3: 32/64/128 bytes), L2
/// promotion (0 none, 1–3: 64/128/256 bytes) and NaN fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TiledSpec {
    pub(crate) dims: Vec<u64>,
    pub(crate) strides: Vec<u64>,
    pub(crate) box_dims: Vec<u32>,
    pub(crate) element_strides: Vec<u32>,
    pub(crate) swizzle: u8,
    pub(crate) l2: u8,
    pub(crate) oob_nan: bool,
}

crate::wire::wire_struct!(TiledSpec {
    dims,
    strides,
    box_dims,
    element_strides,
    swizzle,
    l2,
    oob_nan
});

/// The TMA element type of `T`: floats as themselves (so out-of-bounds NaN fill works),
/// other types as unsigned integers of their size (TMA moves bits).
pub(crate) fn data_type<T: DTypeBase>() -> Result<Ty, GpuError> {
    Ok(match (T::NAME, std::mem::size_of::<T>()) {
        ("f16", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        ("bf16", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        ("f32", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        ("f64", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        ("i32", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_INT32,
        ("i64", _) => Ty::CU_TENSOR_MAP_DATA_TYPE_INT64,
        (_, 1) => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        (_, 2) => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        (_, 4) => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        (_, 8) => Ty::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        (name, size) => {
            return Err(GpuError::Unsupported(format!(
                "TMA moves elements of 1, 2, 4 or 8 bytes; {name} has {size}"
            )))
        }
    })
}

impl TiledSpec {
    /// Encodes the map for `buffer` (a buffer or view of this process on a GPU of
    /// compute capability 9.0 or later, 16-byte aligned). `Unsupported` for a CPU-device
    /// buffer or an older GPU.
    pub(crate) fn encode<T: DTypeBase>(&self, buffer: &GpuRef<T>) -> Result<TensorMapBits, GpuError> {
        let data_type = data_type::<T>()?;
        let address = {
            let guard = buffer.lock();
            let Region::Cuda(s) = guard.region() else {
                return Err(GpuError::Unsupported("TMA tensor maps need a GPU buffer".into()));
            };
            let stream = s.stream().clone();
            let (major, _) = stream.context().compute_capability()?;
            if major < 9 {
                return Err(GpuError::Unsupported(
                    "TMA needs a GPU of compute capability 9.0 or later".into(),
                ));
            }
            let (ptr, _read) = s.device_ptr(&stream);
            ptr
        };
        if address % 16 != 0 {
            return Err(GpuError::invalid(format!(
                "tensor map: the buffer's address {address:#x} is not 16-byte aligned"
            )));
        }
        encode_tiled(&TiledEncoding {
            data_type,
            address,
            dims: &self.dims,
            strides: &self.strides,
            box_dims: &self.box_dims,
            element_strides: &self.element_strides,
            swizzle: match self.swizzle {
                0 => Sw::CU_TENSOR_MAP_SWIZZLE_NONE,
                1 => Sw::CU_TENSOR_MAP_SWIZZLE_32B,
                2 => Sw::CU_TENSOR_MAP_SWIZZLE_64B,
                3 => Sw::CU_TENSOR_MAP_SWIZZLE_128B,
                s => return Err(GpuError::invalid(format!("tensor map: swizzle code {s}"))),
            },
            l2: match self.l2 {
                0 => L2::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                1 => L2::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                2 => L2::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                3 => L2::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                p => return Err(GpuError::invalid(format!("tensor map: L2 promotion code {p}"))),
            },
            oob_nan: self.oob_nan,
        })
    }
}

/// The wire tag of a tensor map to encode in the worker (after 0, a buffer, and 1, a
/// scalar's bytes).
pub(crate) const TENSOR_MAP_TAG: u8 = 2;

/// A tensor map of an isolated device's buffer: not encoded here, where the buffer has
/// no address; its spec and buffer cross to the worker, which encodes it.
struct RemoteTensorMap<T: DTypeBase> {
    spec: TiledSpec,
    buffer: GpuRef<T>,
}

impl<T: DTypeBase> ScalarArg for RemoteTensorMap<T> {
    fn push<'b>(&'b self, _: &mut cudarc::driver::LaunchArgs<'b>) {
        // Never launched in this process: `check_local` refuses it in every launch's
        // validation, which comes before any enqueue.
        debug_assert!(false, "an isolated device's tensor map launched in the user process");
    }

    fn as_param(&self) -> *mut std::ffi::c_void {
        debug_assert!(false, "an isolated device's tensor map launched in the user process");
        std::ptr::null_mut()
    }

    fn bytes(&self) -> Result<Vec<u8>, GpuError> {
        Err(GpuError::Unsupported(
            "a tensor map of an isolated device's buffer in a #[kernel] launch (TMA from #[kernel]s is missing)".into(),
        ))
    }

    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(TENSOR_MAP_TAG);
        T::NAME.to_string().put(w)?;
        self.spec.put(w)?;
        self.buffer.put(w)
    }

    fn check_local(&self) -> Result<(), GpuError> {
        Err(GpuError::invalid(
            "a tensor map of an isolated device's buffer, launched on another device: build the map over a buffer \
             of the device that launches it",
        ))
    }
}

impl KernelArgs {
    /// A tensor map of an isolated device's buffer `buffer` (`spec` validated), to be
    /// encoded by the worker that launches it.
    pub(crate) fn remote_tensor_map<T: DTypeBase>(mut self, spec: &TiledSpec, buffer: &GpuRef<T>) -> Self {
        self.items.push(Arg::Scalar(Box::new(RemoteTensorMap {
            spec: spec.clone(),
            buffer: buffer.clone(),
        })));
        self
    }
}

/// Reads a tensor map written by `RemoteTensorMap::put_wire` (after its tag), encodes it
/// for the worker's copy of its buffer and adds it to `args` as an in-process map is
/// added: the descriptor by value, its buffer validated, kept alive and ordered with the
/// launch.
pub(crate) fn take_tensor_map(args: KernelArgs, r: &mut Reader<'_>) -> Result<KernelArgs, GpuError> {
    let name = String::take(r)?;
    let spec = TiledSpec::take(r)?;
    let b = BufferOnWire::take(r)?;
    if let Side::Client(_) = r.side {
        return Err(GpuError::invalid("a tensor map sent to the user process"));
    }
    crate::dtype::with_dtype_named!(any, name.as_str(), D => {
        let buffer = b.resolve::<D>(r.side)?;
        let bits = spec.encode(&buffer)?;
        Ok(args.scalar(bits).reached(&buffer))
    });
    Err(GpuError::invalid(format!("`{name}` is not an element type")))
}
