//! The GPU matmul: the operands' addresses, their alignments told to cuBLASLt, one
//! `cublasLtMatmul` on the BLAS actor's stream.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::operand::HeldOperand;
use super::{timeline_name, Epilogue, Matmul, MatmulBuffer};
use crate::error::GpuError;
use crate::observability::gpu_timed;
use crate::sys::cublaslt::{alignment, elem_bytes, LtHandle, LtKey};

/// Enqueues the matmul `key` describes (from [`Matmul::check`]) over the locked operands
/// (`held`: every buffer of the call, locked once each) on `stream`, timed on the
/// timeline.
pub(crate) fn run(
    handle: &mut LtHandle,
    stream: &Arc<CudaStream>,
    device: usize,
    (op, epilogue): (&Matmul, &Epilogue),
    [a, b, c]: [&MatmulBuffer; 3],
    held: &mut [(u64, HeldOperand<'_>)],
    key: LtKey,
) -> Result<(), GpuError> {
    // Each buffer's address once (a write if C lies in it), then each operand's window
    // in it.
    let mut bases = Vec::with_capacity(held.len());
    let mut guards = Vec::with_capacity(held.len());
    for (id, h) in held.iter_mut() {
        let (base, guard) = h.launch_base(stream, *id == c.id())?;
        bases.push((*id, base));
        guards.extend(guard);
    }
    let base = |o: &MatmulBuffer| bases.iter().find(|(id, _)| *id == o.id()).map_or(0, |(_, b)| *b);
    let r = gpu_timed(stream, device, "blas", timeline_name(a, c), || {
        // SAFETY: the bases are the locked operands' buffers, ordered for this stream by
        // their guards (dropped after the enqueue); `check` made `key`.
        unsafe { enqueue_at(handle, (op, epilogue), [a, b, c], base, key) }
    });
    drop(guards);
    r
}

/// Enqueues the matmul `key` describes on the handle's stream, each operand at its
/// buffer's address (`base`) plus its window's offset, the alignments cuBLASLt is told
/// taken from those addresses — what a call on the BLAS actor's stream and a CUDA
/// graph's capture share.
///
/// # Safety
/// `base` gives each operand's buffer's device address, valid and ordered for the
/// handle's stream; `key` is [`Matmul::check`]'s for these operands (shapes, strides,
/// lengths, the bias's length and alignment, C apart from every input validated).
pub(crate) unsafe fn enqueue_at(
    handle: &mut LtHandle,
    (op, epilogue): (&Matmul, &Epilogue),
    [a, b, c]: [&MatmulBuffer; 3],
    base: impl Fn(&MatmulBuffer) -> u64,
    mut key: LtKey,
) -> Result<(), GpuError> {
    let address = |o: &MatmulBuffer| base(o) + o.byte_offset() as u64;
    let (pa, pb, pc) = (address(a), address(b), address(c));
    let pbias = epilogue.bias.as_ref().map(address);
    // A batch's later matrices are as aligned as the first one and the stride allow.
    let batched = |p: u64, stride: i64, t| {
        let step = if key.batch > 1 {
            stride as u64 * elem_bytes(t)
        } else {
            0
        };
        alignment(p).min(alignment(step))
    };
    key.align = [
        batched(pa, key.stride_a, key.a),
        batched(pb, key.stride_b, key.b),
        batched(pc, key.stride_c, key.c),
    ];
    // SAFETY: the caller's contract: valid, ordered addresses of the validated windows.
    unsafe { handle.matmul(&key, op.shape.alpha, op.shape.beta, pa, pb, pc, pbias) }
}
