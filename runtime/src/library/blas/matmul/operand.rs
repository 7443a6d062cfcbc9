//! A matmul's operands: buffers of different element types in one call (FP8 inputs, a
//! bf16 or f32 output, a bias of a third type), locked together in buffer-id order.
//!
//! Why an enum: a handler has one type parameter (its dtype), while a cuBLASLt matmul
//! mixes up to three; [`MatmulBuffer`] carries the type as a variant, checked against
//! cuBLASLt's table of type combinations when the call is validated.

use std::sync::Arc;

use cudarc::driver::{CudaStream, SyncOnDrop};
use half::{bf16, f16};

use crate::dtype::{f8e4m3, f8e5m2, DTypeBase};
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, Locked, Region, RegionMut};
use crate::sys::cublaslt::LtType;
use crate::wire::{Reader, Wire, Writer};

/// Writes [`MatmulBuffer`] and [`HeldOperand`] over the element types of matmuls, and
/// every per-type dispatch on them, once.
macro_rules! matmul_types {
    ($($v:ident($t:ty) = $tag:literal),* $(,)?) => {
        /// A buffer (or view) of a matmul: f32, f16, bf16 or FP8 (E4M3, E5M2). Made from
        /// any `GpuRef` of those types with `into()` (the `Device` method takes
        /// `impl Into<MatmulBuffer>`, so `&a` is enough).
        #[derive(Debug, Clone)]
        pub enum MatmulBuffer {
            $(
                #[doc = concat!("A `", stringify!($t), "` buffer.")]
                $v(GpuRef<$t>),
            )*
        }

        $(
            impl From<GpuRef<$t>> for MatmulBuffer {
                fn from(r: GpuRef<$t>) -> Self {
                    MatmulBuffer::$v(r)
                }
            }
            impl From<&GpuRef<$t>> for MatmulBuffer {
                fn from(r: &GpuRef<$t>) -> Self {
                    MatmulBuffer::$v(r.clone())
                }
            }
        )*

        impl MatmulBuffer {
            /// The element type cuBLASLt sees.
            pub(crate) fn lt_type(&self) -> LtType {
                match self { $(MatmulBuffer::$v(_) => LtType::$v,)* }
            }

            /// The element type's name (`"bf16"`), for errors.
            pub fn dtype_name(&self) -> &'static str {
                match self { $(MatmulBuffer::$v(_) => <$t as DTypeBase>::NAME,)* }
            }

            /// Elements in the handle's window.
            pub fn len(&self) -> usize {
                match self { $(MatmulBuffer::$v(r) => r.len(),)* }
            }

            /// Whether the window is empty (never: buffers are not).
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// The buffer's id (shared by its views).
            pub(crate) fn id(&self) -> u64 {
                match self { $(MatmulBuffer::$v(r) => r.id(),)* }
            }

            /// The window's start in bytes from the buffer's.
            pub(crate) fn byte_offset(&self) -> usize {
                match self { $(MatmulBuffer::$v(r) => r.offset() * std::mem::size_of::<$t>(),)* }
            }

            /// The generation check of every operation.
            pub(crate) fn validate(&self, device_id: usize, generation: u64) -> Result<(), GpuError> {
                match self { $(MatmulBuffer::$v(r) => r.validate(device_id, generation),)* }
            }

            /// Whether the two windows share an element (buffers of different element
            /// types never do).
            pub(crate) fn overlaps(&self, other: &MatmulBuffer) -> bool {
                match (self, other) {
                    $((MatmulBuffer::$v(x), MatmulBuffer::$v(y)) => x.overlaps(y),)*
                    _ => false,
                }
            }

            /// `args` with this buffer added, read or written (a graph orders it so).
            pub(crate) fn add_to(&self, args: crate::launch::KernelArgs, writes: bool) -> crate::launch::KernelArgs {
                match self {
                    $(MatmulBuffer::$v(r) => if writes { args.buf_mut(r) } else { args.buf(r) },)*
                }
            }

            /// Locked as for a launch: the matmul orders the buffer itself
            /// ([`HeldOperand::launch_base`]; on the CPU device there is nothing to order).
            fn lock(&self) -> HeldOperand<'_> {
                match self { $(MatmulBuffer::$v(r) => HeldOperand::$v(r.lock_for_launch()),)* }
            }
        }

        impl Wire for MatmulBuffer {
            fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
                match self {
                    $(MatmulBuffer::$v(r) => {
                        w.put_u8($tag);
                        r.put(w)
                    })*
                }
            }
            fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
                match r.take_u8()? {
                    $($tag => Ok(MatmulBuffer::$v(GpuRef::take(r)?)),)*
                    t => Err(GpuError::invalid(format!("{t} is not a matmul buffer type"))),
                }
            }
        }

        /// One locked buffer of a matmul, whichever its element type.
        pub(crate) enum HeldOperand<'a> {
            $($v(Locked<'a, $t>),)*
        }

        impl HeldOperand<'_> {
            /// The buffer's device address for a matmul on `stream` that `writes` it or
            /// reads it, ordered as a kernel launch orders it
            /// ([`Locked::launch_address`]): on the stream of its last use there, only
            /// noted — no event waited on or recorded, which cost a few µs of every
            /// awaited call's host time, while the GPU sat idle —; elsewhere after its
            /// last writer (and readers), the guard recording the use when dropped after
            /// the enqueue.
            pub(crate) fn launch_base<'b>(
                &'b mut self,
                stream: &'b Arc<CudaStream>,
                writes: bool,
            ) -> Result<(u64, Option<SyncOnDrop<'b>>), GpuError> {
                match self {
                    $(HeldOperand::$v(l) => {
                        // Locked through one operand's handle: its window's address less
                        // its offset.
                        let offset = l.byte_offset();
                        let (address, recorded) = l.launch_address(stream, writes)?;
                        Ok((address - offset, recorded))
                    })*
                }
            }

            /// `of`'s elements (a window of this buffer) widened to f32, on the CPU
            /// device.
            pub(crate) fn read_f32(&self, of: &MatmulBuffer) -> Result<Vec<f32>, GpuError> {
                match (self, of) {
                    $((HeldOperand::$v(l), MatmulBuffer::$v(r)) => widen(l.region_of(r)),)*
                    _ => Err(GpuError::Internal("a matmul operand read through another buffer's lock".into())),
                }
            }

            /// Writes `values` rounded to `of`'s element type into `of`'s window, on the
            /// CPU device.
            pub(crate) fn write_f32(&mut self, of: &MatmulBuffer, values: &[f32]) -> Result<(), GpuError> {
                match (self, of) {
                    $((HeldOperand::$v(l), MatmulBuffer::$v(r)) => narrow(l.region_mut_of(r), values),)*
                    _ => Err(GpuError::Internal("a matmul operand written through another buffer's lock".into())),
                }
            }
        }
    };
}

matmul_types!(
    F32(f32) = 0,
    F16(f16) = 1,
    Bf16(bf16) = 2,
    E4m3(f8e4m3) = 3,
    E5m2(f8e5m2) = 4
);

fn widen<T: DTypeBase>(r: Region<'_, T>) -> Result<Vec<f32>, GpuError> {
    match r {
        Region::Cpu(v) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        Region::Cuda(_) => Err(GpuError::invalid("a GPU buffer on the CPU device's matmul")),
    }
}

fn narrow<T: DTypeBase>(r: RegionMut<'_, T>, values: &[f32]) -> Result<(), GpuError> {
    match r {
        RegionMut::Cpu(v) => {
            for (dst, x) in v.iter_mut().zip(values) {
                *dst = T::from_f32(*x);
            }
            Ok(())
        }
        RegionMut::Cuda(_) => Err(GpuError::invalid("a GPU buffer on the CPU device's matmul")),
    }
}

/// Locks each distinct buffer among `ops` once, in buffer-id order (as every operation
/// does, so two calls over the same buffers cannot deadlock).
pub(crate) fn lock_all<'a>(ops: &[&'a MatmulBuffer]) -> Vec<(u64, HeldOperand<'a>)> {
    let mut distinct: Vec<&MatmulBuffer> = Vec::with_capacity(ops.len());
    for o in ops {
        if !distinct.iter().any(|d| d.id() == o.id()) {
            distinct.push(o);
        }
    }
    distinct.sort_by_key(|o| o.id());
    distinct.into_iter().map(|o| (o.id(), o.lock())).collect()
}

/// The lock of `of`'s buffer among `held`.
pub(crate) fn held_of<'h, 'a>(held: &'h mut [(u64, HeldOperand<'a>)], of: &MatmulBuffer) -> &'h mut HeldOperand<'a> {
    let at = held
        .iter()
        .position(|(id, _)| *id == of.id())
        .expect("every operand was locked");
    &mut held[at].1
}
