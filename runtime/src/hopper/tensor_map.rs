//! TMA tensor maps: descriptors the Tensor Memory Accelerator reads to move boxes of a
//! tensor between global and shared memory without the threads computing addresses.

use crate::dtype::{DTypeBase, DTypeKind};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::launch::{tensor_map_data_type, KernelArgs, TiledSpec};
use crate::sys::hopper::TensorMapBits;

/// How a box is laid out in shared memory (bank-conflict avoidance); the innermost box
/// dimension must fit in the span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Swizzle {
    /// Row-major, as in global memory.
    #[default]
    None,
    /// 32-byte swizzle span.
    B32,
    /// 64-byte swizzle span.
    B64,
    /// 128-byte swizzle span.
    B128,
}

/// How far the TMA promotes loads into L2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L2Promotion {
    /// No promotion.
    #[default]
    None,
    /// 64-byte lines.
    B64,
    /// 128-byte lines.
    B128,
    /// 256-byte lines.
    B256,
}

/// Builds a [`TensorMap`] over a device buffer. Dimensions are innermost first, as CUDA
/// takes them (for a row-major `rows × cols` matrix: `[cols, rows]`).
#[derive(Debug, Clone)]
pub struct TensorMapBuilder<T: DTypeBase> {
    buffer: GpuRef<T>,
    dims: Vec<u64>,
    box_dims: Vec<u32>,
    strides: Option<Vec<u64>>,
    element_strides: Option<Vec<u32>>,
    swizzle: Swizzle,
    l2: L2Promotion,
    oob_nan: bool,
}

/// A tiled TMA descriptor of one buffer, ready to pass to a kernel (a
/// `const __grid_constant__ CUtensorMap` parameter) with [`KernelArgs::tensor_map`].
/// It keeps the buffer alive.
#[derive(Clone)]
pub struct TensorMap<T: DTypeBase> {
    /// The encoded descriptor; `None` over an isolated device's buffer (its worker
    /// encodes `spec` for its own copy of the buffer).
    bits: Option<TensorMapBits>,
    spec: TiledSpec,
    buffer: GpuRef<T>,
    box_bytes: usize,
}

impl<T: DTypeBase> std::fmt::Debug for TensorMap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorMap")
            .field("buffer", &self.buffer)
            .field("box_bytes", &self.box_bytes)
            .finish()
    }
}

impl<T: DTypeBase> TensorMap<T> {
    /// Bytes one box moves: what the kernel's mbarrier expects (`expect_tx`).
    pub fn box_bytes(&self) -> usize {
        self.box_bytes
    }

    /// The buffer the map describes.
    pub fn buffer(&self) -> &GpuRef<T> {
        &self.buffer
    }
}

fn invalid<V>(m: String) -> Result<V, GpuError> {
    Err(GpuError::invalid(format!("tensor map: {m}")))
}

impl<T: DTypeBase> TensorMapBuilder<T> {
    /// A map of `buffer` as a tensor of `dims` (innermost first), moved in boxes of
    /// `box_dims`; tight strides, element strides of 1, no swizzle, no L2 promotion,
    /// zero fill out of bounds.
    pub fn new(buffer: &GpuRef<T>, dims: &[u64], box_dims: &[u32]) -> Self {
        TensorMapBuilder {
            buffer: buffer.clone(),
            dims: dims.to_vec(),
            box_dims: box_dims.to_vec(),
            strides: None,
            element_strides: None,
            swizzle: Swizzle::None,
            l2: L2Promotion::None,
            oob_nan: false,
        }
    }

    /// Byte strides of dimensions 1.. (rank − 1 values; multiples of 16), for padded
    /// rows or a view into a larger tensor.
    pub fn strides(mut self, bytes: &[u64]) -> Self {
        self.strides = Some(bytes.to_vec());
        self
    }

    /// Every n-th element per dimension (1 to 8 each).
    pub fn element_strides(mut self, s: &[u32]) -> Self {
        self.element_strides = Some(s.to_vec());
        self
    }

    /// The shared-memory swizzle.
    pub fn swizzle(mut self, s: Swizzle) -> Self {
        self.swizzle = s;
        self
    }

    /// The L2 promotion.
    pub fn l2_promotion(mut self, p: L2Promotion) -> Self {
        self.l2 = p;
        self
    }

    /// Out-of-bounds elements read as NaN instead of zero (float types only).
    pub fn oob_nan(mut self, nan: bool) -> Self {
        self.oob_nan = nan;
        self
    }

    /// The tight byte strides of `dims`.
    fn tight_strides(&self) -> Vec<u64> {
        let mut s = Vec::with_capacity(self.dims.len().saturating_sub(1));
        let mut acc = std::mem::size_of::<T>() as u64;
        for d in &self.dims[..self.dims.len().saturating_sub(1)] {
            acc = acc.saturating_mul(*d);
            s.push(acc);
        }
        s
    }

    /// Checks everything the driver documents for `cuTensorMapEncodeTiled`, plus that
    /// the tensor lies inside the buffer; returns the strides and element strides.
    fn validate(&self) -> Result<(Vec<u64>, Vec<u32>), GpuError> {
        let rank = self.dims.len();
        let size = std::mem::size_of::<T>() as u64;
        if !(1..=5).contains(&rank) {
            return invalid(format!("rank {rank}; TMA takes 1 to 5 dimensions"));
        }
        if self.box_dims.len() != rank {
            return invalid(format!(
                "{} box dimensions for a rank-{rank} tensor",
                self.box_dims.len()
            ));
        }
        if let Some((i, d)) = self.dims.iter().enumerate().find(|(_, d)| **d == 0 || **d > 1 << 32) {
            return invalid(format!("dimension {i} is {d}; each must be in 1..=2^32"));
        }
        let strides = self.strides.clone().unwrap_or_else(|| self.tight_strides());
        if strides.len() != rank - 1 {
            return invalid(format!(
                "{} strides for a rank-{rank} tensor; give rank − 1",
                strides.len()
            ));
        }
        if let Some((i, s)) = strides
            .iter()
            .enumerate()
            .find(|(_, s)| **s % 16 != 0 || **s >= 1 << 40)
        {
            return invalid(format!(
                "stride {} is {s} bytes; each must be a multiple of 16 below 2^40",
                i + 1
            ));
        }
        let mut inner = self.dims[0] * size;
        for (i, s) in strides.iter().enumerate() {
            if *s < inner {
                return invalid(format!(
                    "stride {} ({s} bytes) is smaller than the {inner} bytes below it",
                    i + 1
                ));
            }
            inner = s.saturating_mul(self.dims[i + 1]);
        }
        let bytes = self.buffer.num_bytes() as u64;
        if inner > bytes {
            return invalid(format!("the tensor spans {inner} bytes; the buffer has {bytes}"));
        }
        if let Some((i, b)) = self.box_dims.iter().enumerate().find(|(_, b)| **b == 0 || **b > 256) {
            return invalid(format!("box dimension {i} is {b}; each must be in 1..=256"));
        }
        let inner_box = self.box_dims[0] as u64 * size;
        if inner_box % 16 != 0 {
            return invalid(format!(
                "the innermost box dimension spans {inner_box} bytes; it must be a multiple of 16"
            ));
        }
        let span = match self.swizzle {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        };
        if let Some(span) = span.filter(|s| inner_box > *s) {
            return invalid(format!(
                "the innermost box dimension spans {inner_box} bytes, more than the {span}-byte swizzle"
            ));
        }
        let element_strides = self.element_strides.clone().unwrap_or_else(|| vec![1; rank]);
        if element_strides.len() != rank || element_strides.iter().any(|e| !(1..=8).contains(e)) {
            return invalid(format!(
                "element strides {element_strides:?}; give {rank} values in 1..=8"
            ));
        }
        if self.oob_nan && T::KIND != DTypeKind::Float {
            return invalid(format!("NaN fill needs a float type, not {}", T::NAME));
        }
        Ok((strides, element_strides))
    }

    /// Validates and encodes the descriptor. `Unsupported` for a CPU-device buffer or a
    /// GPU before compute capability 9.0. Over an isolated device's buffer the map is
    /// checked here and encoded by the device's worker, which holds the buffer, when a
    /// launch there passes it (the GPU's own checks answer then).
    pub fn build(self) -> Result<TensorMap<T>, GpuError> {
        tensor_map_data_type::<T>()?;
        let (strides, element_strides) = self.validate()?;
        let spec = TiledSpec {
            dims: self.dims,
            strides,
            box_dims: self.box_dims,
            element_strides,
            swizzle: match self.swizzle {
                Swizzle::None => 0,
                Swizzle::B32 => 1,
                Swizzle::B64 => 2,
                Swizzle::B128 => 3,
            },
            l2: match self.l2 {
                L2Promotion::None => 0,
                L2Promotion::B64 => 1,
                L2Promotion::B128 => 2,
                L2Promotion::B256 => 3,
            },
            oob_nan: self.oob_nan,
        };
        let bits = match self.buffer.remote() {
            Some(_) => None,
            None => Some(spec.encode(&self.buffer)?),
        };
        let box_elems: u64 = spec
            .box_dims
            .iter()
            .zip(&spec.element_strides)
            .map(|(b, e)| b.div_ceil(*e) as u64)
            .product();
        Ok(TensorMap {
            bits,
            spec,
            buffer: self.buffer,
            box_bytes: (box_elems * std::mem::size_of::<T>() as u64) as usize,
        })
    }
}

impl KernelArgs {
    /// A TMA descriptor, passed by value (the kernel declares it
    /// `const __grid_constant__ CUtensorMap`); its buffer is validated with the other
    /// buffers, kept alive, and the launch ordered after its last use, as a written
    /// buffer (TMA may store through the map).
    /// A map over an isolated device's buffer crosses to its worker as what it encodes,
    /// and is encoded there.
    pub fn tensor_map<T: DTypeBase>(self, map: &TensorMap<T>) -> Self {
        match map.bits {
            Some(bits) => self.scalar(bits).reached(&map.buffer),
            None => self.remote_tensor_map(&map.spec, &map.buffer),
        }
    }
}
