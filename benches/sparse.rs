//! SpMV and SpMM of a large random CSR matrix (default 4 Mi rows × 4 Mi columns, 16
//! stored elements per row: 64 Mi non-zeros, a call of ~0.2 ms or more on the H200)
//! through the device (`Device::spmv`, `Device::spmm` with 8 columns) vs raw cudarc
//! calls of cuSPARSE's generic API (handle, descriptors and workspace made once; per
//! call `cusparseSpMV`/`cusparseSpMM` + synchronize), f32 and f64, calls alternated in
//! both orders of `support/alternate.rs`, with one check that both give the same y.
//! Arguments: `rows per_row` (default 4194304 16).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::prelude::*;
use cudarc::cusparse::sys;
use cudarc::driver::CudaStream;

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/raw_cusparse.rs"]
mod raw_cusparse;

use alternate::{Order, Samples, Side};
use gpu_bench::run_gpu;
use raw_cusparse::{address, ok, Elem};

/// A `rows × rows` structure with `per_row` sorted distinct columns per row: column k of
/// row i lies in band k (of `per_row` equal bands), at a pseudo-random place in it.
fn structure(rows: usize, per_row: usize) -> (Vec<i32>, Vec<i32>) {
    let band = rows / per_row;
    let offsets: Vec<i32> = (0..=rows).map(|i| (i * per_row) as i32).collect();
    let indices: Vec<i32> = (0..rows)
        .flat_map(|i| {
            (0..per_row).map(move |k| {
                let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                (k * band + (h >> 33) as usize % band) as i32
            })
        })
        .collect();
    (offsets, indices)
}

async fn measure<T: Elem>(dev: &Device, stream: &Arc<CudaStream>, (offsets, indices): (&[i32], &[i32]), rows: usize) {
    let nnz = indices.len();
    let values: Vec<T> = (0..nnz)
        .map(|k| T::from_f64(((k * 37 % 101) as f64 - 50.0) / 50.0))
        .collect();
    let n = 8;
    let x: Vec<T> = (0..rows * n)
        .map(|k| T::from_f64(((k * 13 % 97) as f64 - 48.0) / 48.0))
        .collect();
    // Ours.
    let a = dev.upload_csr(rows, rows, offsets, indices, &values).await.unwrap();
    let (gx, gy) = (
        dev.upload(x.clone()).await.unwrap(),
        dev.alloc::<T>(rows * n).await.unwrap(),
    );
    // Raw: the same data, descriptors and workspace made once.
    let ro = stream.clone_htod(offsets).unwrap();
    let ri = stream.clone_htod(indices).unwrap();
    let rv = stream.clone_htod(&values).unwrap();
    let rx = stream.clone_htod(&x).unwrap();
    let ry = stream.alloc_zeros::<T>(rows * n).unwrap();
    let h = cudarc::cusparse::result::create().unwrap();
    let (alpha, beta) = (T::from_f64(1.0), T::default());
    let (pa, pb) = (&alpha as *const T as *const c_void, &beta as *const T as *const c_void);
    let nt = sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
    // SAFETY: a live handle, the buffers above (rows + 1 offsets, nnz indices and values,
    // rows·n of x and y), descriptors destroyed at the end; alpha/beta host scalars.
    let (mat, vx, vy, bx, by, work_v, work_m) = unsafe {
        ok(sys::cusparseSetStream(h, stream.cu_stream() as sys::cudaStream_t));
        let mut mat = std::ptr::null_mut();
        ok(sys::cusparseCreateCsr(
            &mut mat,
            rows as i64,
            rows as i64,
            nnz as i64,
            address(&ro, stream),
            address(&ri, stream),
            address(&rv, stream),
            sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
            T::DATA,
        ));
        let (mut vx, mut vy, mut bx, mut by) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        ok(sys::cusparseCreateDnVec(
            &mut vx,
            rows as i64,
            address(&rx, stream),
            T::DATA,
        ));
        ok(sys::cusparseCreateDnVec(
            &mut vy,
            rows as i64,
            address(&ry, stream),
            T::DATA,
        ));
        let col = sys::cusparseOrder_t::CUSPARSE_ORDER_COL;
        ok(sys::cusparseCreateDnMat(
            &mut bx,
            rows as i64,
            n as i64,
            rows as i64,
            address(&rx, stream),
            T::DATA,
            col,
        ));
        ok(sys::cusparseCreateDnMat(
            &mut by,
            rows as i64,
            n as i64,
            rows as i64,
            address(&ry, stream),
            T::DATA,
            col,
        ));
        let (mut sv, mut sm) = (0usize, 0usize);
        let spmv_alg = sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT;
        let spmm_alg = sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;
        ok(sys::cusparseSpMV_bufferSize(
            h,
            nt,
            pa,
            mat,
            vx,
            pb,
            vy,
            T::DATA,
            spmv_alg,
            &mut sv,
        ));
        ok(sys::cusparseSpMM_bufferSize(
            h,
            nt,
            nt,
            pa,
            mat,
            bx,
            pb,
            by,
            T::DATA,
            spmm_alg,
            &mut sm,
        ));
        let work_v = stream.alloc_zeros::<u8>(sv.max(1)).unwrap();
        let work_m = stream.alloc_zeros::<u8>(sm.max(1)).unwrap();
        (mat, vx, vy, bx, by, work_v, work_m)
    };
    let (wv, wm) = (address(&work_v, stream), address(&work_m, stream));
    for op in ["spmv", "spmm"] {
        for order in Order::ALL {
            let mut samples = Samples::new(1);
            for side in [Side::Raw, Side::Ours].into_iter().chain(order.schedule(20)) {
                let secs = match side {
                    Side::Raw => {
                        let t = Instant::now();
                        // SAFETY: the descriptors and workspaces above, alive; the
                        // stream is synchronized before the next call.
                        unsafe {
                            if op == "spmv" {
                                let alg = sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT;
                                ok(sys::cusparseSpMV(h, nt, pa, mat, vx, pb, vy, T::DATA, alg, wv));
                            } else {
                                let alg = sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;
                                ok(sys::cusparseSpMM(h, nt, nt, pa, mat, bx, pb, by, T::DATA, alg, wm));
                            }
                        }
                        stream.synchronize().unwrap();
                        t.elapsed().as_secs_f64()
                    }
                    Side::Ours => {
                        let t = Instant::now();
                        if op == "spmv" {
                            dev.spmv(&a, &gx, &gy, SparseOp::new()).await.unwrap();
                        } else {
                            dev.spmm(&a, &gx, &gy, n, SparseOp::new()).await.unwrap();
                        }
                        t.elapsed().as_secs_f64()
                    }
                };
                samples.record(side, secs);
            }
            let (raw, ours) = samples.medians();
            println!(
                "RESULT | {op}<{}> {rows}×{rows}, {nnz} non-zeros{} ({order:?}, median of 20) | ours {:.1} µs, raw {:.1} µs, ratio {:.3}",
                T::NAME,
                if op == "spmm" { format!(", {n} columns") } else { String::new() },
                ours * 1e6,
                raw * 1e6,
                raw / ours
            );
        }
    }
    // The same product both ways (the last call of each was the SpMM).
    let (ours_y, raw_y) = (dev.download(&gy).await.unwrap(), stream.clone_dtoh(&ry).unwrap());
    let same = ours_y.iter().zip(&raw_y).all(|(a, b)| a.to_f64() == b.to_f64());
    println!("check | {}: ours and raw SpMM agree bit for bit: {same}", T::NAME);
    // SAFETY: made above, destroyed once; every call synchronized.
    unsafe {
        ok(sys::cusparseDestroySpMat(mat));
        for v in [vx, vy] {
            ok(sys::cusparseDestroyDnVec(v));
        }
        for m in [bx, by] {
            ok(sys::cusparseDestroyDnMat(m));
        }
        cudarc::cusparse::result::destroy(h).unwrap();
    }
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rows, per_row) = (
        args.first().copied().unwrap_or(4 << 20),
        args.get(1).copied().unwrap_or(16),
    );
    let (offsets, indices) = structure(rows, per_row);
    run_gpu("sparse", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        measure::<f32>(&dev, &stream, (&offsets, &indices), rows).await;
        measure::<f64>(&dev, &stream, (&offsets, &indices), rows).await;
    });
}
