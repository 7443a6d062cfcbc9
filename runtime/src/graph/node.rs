//! The operations a graph holds: GEMMs, `#[kernel]` launches, device-to-device copies
//! (and cuBLASLt matmuls, `matmul_node.rs`).
//! Each knows its buffers (as launch arguments, so validation and ordering are the
//! launch path's), how to capture itself on raw addresses, and how the CPU device runs
//! it.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::op::{Capture, GraphNode, COPY, GEMM, KERNEL, MATMUL};
use crate::dtype::{BlasBase, DTypeBase};
use crate::error::GpuError;
use crate::gpu_ref::{with_operands, GpuRef, Region, RegionMut};
use crate::kernel::dsl::KernelCall;
use crate::launch::{with_host_buffers, Arg, KernelArgs};
#[cfg(feature = "blas")]
use crate::library::blas::{cpu_gemm, enqueue_gemm};
use crate::library::blas::{validate as validate_gemm, Batch, Gemm};
use crate::wire::{Reader, Wire, Writer};

/// Reads an operation written by [`GraphNode::put_wire`] (in the worker): its kind, then
/// for a GEMM or a copy the element type by name and the operation of that type.
pub(crate) fn take_node(r: &mut Reader<'_>) -> Result<Box<dyn GraphNode>, GpuError> {
    let kind = r.take_u8()?;
    if kind == KERNEL {
        return Ok(Box::new(KernelNode {
            call: KernelCall::take(r)?,
        }));
    }
    if kind == MATMUL {
        return super::matmul_node::take(r);
    }
    let name = String::take(r)?;
    fn gemm<T: BlasBase>(r: &mut Reader<'_>) -> Result<Box<dyn GraphNode>, GpuError> {
        let (g, batch) = (Gemm::<T>::take(r)?, Batch::take(r)?);
        let (a, b, c) = (GpuRef::<T>::take(r)?, GpuRef::<T>::take(r)?, GpuRef::<T>::take(r)?);
        Ok(Box::new(GemmNode::new(g, batch, &a, &b, &c)))
    }
    fn copy<T: DTypeBase>(r: &mut Reader<'_>) -> Result<Box<dyn GraphNode>, GpuError> {
        let (src, dst) = (GpuRef::<T>::take(r)?, GpuRef::<T>::take(r)?);
        Ok(Box::new(CopyNode::new(&src, &dst)))
    }
    match kind {
        GEMM => crate::dtype::with_dtype_named!(float, name.as_str(), D => gemm::<D>(r)),
        COPY => crate::dtype::with_dtype_named!(any, name.as_str(), D => copy::<D>(r)),
        k => return Err(GpuError::invalid(format!("unknown graph operation {k}"))),
    }
    Err(GpuError::invalid(format!(
        "a graph operation over `{name}`, not an element type it takes"
    )))
}

/// `C = alpha·op(A)·op(B) + beta·C` (strided-batched when the batch says so).
pub(crate) struct GemmNode<T: BlasBase> {
    pub(crate) g: Gemm<T>,
    pub(crate) batch: Batch,
    pub(crate) a: GpuRef<T>,
    pub(crate) b: GpuRef<T>,
    pub(crate) c: GpuRef<T>,
    pub(crate) args: KernelArgs,
}

impl<T: BlasBase> GemmNode<T> {
    pub(crate) fn new(g: Gemm<T>, batch: Batch, a: &GpuRef<T>, b: &GpuRef<T>, c: &GpuRef<T>) -> Self {
        // One argument per buffer (views of one buffer share it; the graph orders
        // buffers, not views), written where C lies.
        let mut args = KernelArgs::new();
        if !a.same_buffer(c) {
            args = args.buf(a);
        }
        if !b.same_buffer(a) && !b.same_buffer(c) {
            args = args.buf(b);
        }
        GemmNode {
            g,
            batch,
            a: a.clone(),
            b: b.clone(),
            c: c.clone(),
            args: args.buf_mut(c),
        }
    }
}

impl<T: BlasBase> GraphNode for GemmNode<T> {
    fn args(&self) -> &KernelArgs {
        &self.args
    }

    fn check(&self) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        if self.c.overlaps(&self.a) || self.c.overlaps(&self.b) {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new("graph GEMM: the output C must not overlap A or B")
                    .arg("c")
                    .mismatch("elements apart from A's and B's", "elements of A or B"),
            ));
        }
        validate_gemm(&self.g, &self.batch, self.a.len(), self.b.len(), self.c.len())
    }

    // Without the `blas` feature `check` refuses the node first: neither runs.
    fn capture(&self, cx: &Capture<'_>) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        #[cfg(feature = "blas")]
        {
            let (a, b, mut c) = (cx.view(&self.a)?, cx.view(&self.b)?, cx.view(&self.c)?);
            enqueue_gemm(&cx.blas.blas, &self.g, &self.batch, &a, &b, &mut c).map_err(GpuError::from)
        }
        #[cfg(not(feature = "blas"))]
        {
            let _ = cx;
            Ok(())
        }
    }

    fn run_cpu(&self) -> Result<(), GpuError> {
        super::blas_handles::without_blas()?;
        with_operands([&self.a, &self.b], &self.c, |[a, b], c| match (a, b, c) {
            (Region::Cpu(a), Region::Cpu(b), RegionMut::Cpu(c)) => {
                #[cfg(feature = "blas")]
                cpu_gemm(&self.g, &self.batch, a, b, c);
                #[cfg(not(feature = "blas"))]
                let _ = (a, b, c);
                Ok(())
            }
            _ => Err(GpuError::invalid("graph GEMM: buffers of another backend")),
        })?
    }

    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(GEMM);
        T::NAME.to_string().put(w)?;
        self.g.put(w)?;
        self.batch.put(w)?;
        self.a.put(w)?;
        self.b.put(w)?;
        self.c.put(w)
    }
}

/// `dst = src` (equal lengths).
pub(crate) struct CopyNode<T: DTypeBase> {
    pub(crate) src: GpuRef<T>,
    pub(crate) dst: GpuRef<T>,
    pub(crate) args: KernelArgs,
}

impl<T: DTypeBase> CopyNode<T> {
    pub(crate) fn new(src: &GpuRef<T>, dst: &GpuRef<T>) -> Self {
        CopyNode {
            src: src.clone(),
            dst: dst.clone(),
            // One argument per buffer, as for GEMM.
            args: if src.same_buffer(dst) {
                KernelArgs::new().buf_mut(dst)
            } else {
                KernelArgs::new().buf(src).buf_mut(dst)
            },
        }
    }
}

impl<T: DTypeBase> GraphNode for CopyNode<T> {
    fn args(&self) -> &KernelArgs {
        &self.args
    }

    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(COPY);
        T::NAME.to_string().put(w)?;
        self.src.put(w)?;
        self.dst.put(w)
    }

    fn check(&self) -> Result<(), GpuError> {
        if self.src.len() != self.dst.len() {
            return Err(GpuError::InvalidArgument(crate::error::Invalid::length(
                format!("graph copy of {} elements into {}", self.src.len(), self.dst.len()),
                "dst",
                self.src.len(),
                self.dst.len(),
            )));
        }
        if self.src.overlaps(&self.dst) {
            return Err(GpuError::InvalidArgument(
                crate::error::Invalid::new("graph copy: the destination overlaps the source")
                    .arg("dst")
                    .mismatch("elements apart from the source's", "elements of the source"),
            ));
        }
        Ok(())
    }

    fn capture(&self, cx: &Capture<'_>) -> Result<(), GpuError> {
        let (src, mut dst) = (cx.view(&self.src)?, cx.view(&self.dst)?);
        cx.stream.memcpy_dtod(&src, &mut dst)?;
        Ok(())
    }

    fn run_cpu(&self) -> Result<(), GpuError> {
        with_operands([&self.src], &self.dst, |[s], d| match (s, d) {
            (Region::Cpu(a), RegionMut::Cpu(b)) => {
                b.copy_from_slice(a);
                Ok(())
            }
            _ => Err(GpuError::invalid("graph copy: buffers of another backend")),
        })?
    }
}

/// One `#[kernel]` launch.
pub(crate) struct KernelNode {
    pub(crate) call: KernelCall,
}

impl GraphNode for KernelNode {
    fn args(&self) -> &KernelArgs {
        &self.call.args
    }

    fn put_wire(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        w.put_u8(KERNEL);
        self.call.put(w)
    }

    fn check(&self) -> Result<(), GpuError> {
        self.call.args.check_buffers()?;
        self.call.check_launch(&crate::kernel::dsl::grid::LIMITS)
    }

    fn prepare(&self, stream: &Arc<CudaStream>) -> Result<(), GpuError> {
        self.call.function_for(stream).map(|_| ())
    }

    fn capture(&self, cx: &Capture<'_>) -> Result<(), GpuError> {
        let f = self.call.function_for(cx.stream)?;
        let addresses: Vec<u64> = self
            .call
            .args
            .items
            .iter()
            .filter_map(|a| match a {
                Arg::Buffer(b) => Some(cx.addresses.get(&b.id()).map(|a| a + b.byte_offset()).ok_or(b.id())),
                Arg::Scalar(_) => None,
            })
            .collect::<Result<_, u64>>()
            .map_err(|id| GpuError::Internal(format!("graph: buffer #{id} was not resolved before capture")))?;
        let mut b = cx.stream.launch_builder(&f);
        let mut next = addresses.iter();
        for a in &self.call.args.items {
            match a {
                Arg::Buffer(_) => {
                    use cudarc::driver::PushKernelArg;
                    b.arg(next.next().expect("one address per buffer"));
                }
                Arg::Scalar(s) => s.push(&mut b),
            }
        }
        let c = self.call.cfg;
        let lc = cudarc::driver::LaunchConfig {
            grid_dim: c.grid,
            block_dim: c.block,
            shared_mem_bytes: c.shared_mem_bytes,
        };
        // SAFETY: the call was built by a `#[kernel]` launcher, whose signature generated
        // both the argument list and the kernel's parameters; each buffer is passed as
        // the address of its live allocation (held by this node), in parameter order;
        // the dimensions were checked by `function_for`.
        unsafe { b.launch(lc) }?;
        Ok(())
    }

    fn run_cpu(&self) -> Result<(), GpuError> {
        with_host_buffers(&self.call.args, |bufs| (self.call.emulate)(&bufs))
    }
}
