//! A cuBLASLt matmul as a graph operation: captured on the graph's own cuBLASLt handle
//! (made at the first capture that needs one, with its workspace, outside the capture),
//! at the buffers' addresses resolved before the capture; run by the CPU device's matmul.

use super::op::{Capture, GraphNode, MATMUL};
use crate::error::GpuError;
use crate::launch::KernelArgs;
#[cfg(feature = "blas")]
use crate::library::blas::matmul::{enqueue_at, lock_all, run_cpu};
use crate::library::blas::matmul::{Epilogue, Matmul, MatmulBuffer};
use crate::wire::{Reader, Wire, Writer};

/// `C = act(alpha·op(A)·op(B) + beta·C + bias)`, as `Device::matmul`.
pub(crate) struct MatmulNode {
    op: Matmul,
    epilogue: Epilogue,
    a: MatmulBuffer,
    b: MatmulBuffer,
    c: MatmulBuffer,
    args: KernelArgs,
}

impl MatmulNode {
    pub(crate) fn new(op: Matmul, epilogue: Epilogue, a: MatmulBuffer, b: MatmulBuffer, c: MatmulBuffer) -> Self {
        // One argument per buffer (views of one buffer share it), written where C lies.
        let mut args = KernelArgs::new();
        let mut seen: Vec<u64> = Vec::with_capacity(4);
        for o in [Some(&a), Some(&b), Some(&c), epilogue.bias.as_ref()]
            .into_iter()
            .flatten()
        {
            if !seen.contains(&o.id()) {
                seen.push(o.id());
                args = o.add_to(args, o.id() == c.id());
            }
        }
        MatmulNode {
            op,
            epilogue,
            a,
            b,
            c,
            args,
        }
    }

    fn operands(&self) -> [&MatmulBuffer; 3] {
        [&self.a, &self.b, &self.c]
    }
}

impl GraphNode for MatmulNode {
    fn args(&self) -> &KernelArgs {
        &self.args
    }

    // Without the `blas` feature `check` refuses the node first: neither `capture` nor
    // `run_cpu` runs.
    fn check(&self) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        self.op.check(&self.epilogue, &self.a, &self.b, &self.c).map(|_| ())
    }

    fn uses_matmul(&self) -> bool {
        true
    }

    fn capture(&self, cx: &Capture<'_>) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        #[cfg(feature = "blas")]
        {
            let key = self.op.check(&self.epilogue, &self.a, &self.b, &self.c)?;
            let mut lt = cx.blas.lt.borrow_mut();
            let handle = lt
                .as_mut()
                .ok_or_else(|| GpuError::Internal("graph matmul captured without a cuBLASLt handle".into()))?;
            for o in self.operands().into_iter().chain(self.epilogue.bias.as_ref()) {
                if !cx.addresses.contains_key(&o.id()) {
                    return Err(GpuError::Internal(format!(
                        "graph: buffer #{} was not resolved before capture",
                        o.id()
                    )));
                }
            }
            let base = |o: &MatmulBuffer| cx.addresses[&o.id()];
            // SAFETY: every operand's buffer address was resolved (and ordered) on the
            // capturing stream before the capture began (checked present above); `key` is
            // `check`'s for these operands.
            unsafe { enqueue_at(handle, (&self.op, &self.epilogue), self.operands(), base, key) }
        }
        #[cfg(not(feature = "blas"))]
        {
            let _ = cx;
            Ok(())
        }
    }

    fn run_cpu(&self) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        #[cfg(feature = "blas")]
        {
            let key = self.op.check(&self.epilogue, &self.a, &self.b, &self.c)?;
            let mut operands = self.operands().to_vec();
            operands.extend(self.epilogue.bias.as_ref());
            let mut held = lock_all(&operands);
            run_cpu(&self.op, &self.epilogue, key.tf32, self.operands(), &mut held)
        }
        #[cfg(not(feature = "blas"))]
        {
            Ok(())
        }
    }

    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(MATMUL);
        self.op.put(w)?;
        self.epilogue.put(w)?;
        self.a.put(w)?;
        self.b.put(w)?;
        self.c.put(w)
    }
}

/// Reads what [`MatmulNode::put_wire`] wrote after its kind.
pub(crate) fn take(r: &mut Reader<'_>) -> Result<Box<dyn GraphNode>, GpuError> {
    let (op, epilogue) = (Matmul::take(r)?, Epilogue::take(r)?);
    let (a, b, c) = (MatmulBuffer::take(r)?, MatmulBuffer::take(r)?, MatmulBuffer::take(r)?);
    Ok(Box::new(MatmulNode::new(op, epilogue, a, b, c)))
}
