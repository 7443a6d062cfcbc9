//! `Device::dense_to_csr` (our `#[kernel]`s: count, scan, fill) vs raw cudarc calls of
//! cuSPARSE's `cusparseDenseToSparse` (descriptors made per call as the conversion
//! needs them: buffer size, analysis, the count read, column and value buffers
//! allocated, convert, synchronize), f32 and f64, on a square and a wide dense matrix
//! with about 5 % non-zeros, calls alternated in both orders of `support/alternate.rs`.
//!
//! It also answers why we do not call cuSPARSE's conversion: for each shape it prints
//! whether cuSPARSE's column indices come out sorted within every row (a `CsrMatrix`
//! promises they do) and whether its structure, each row sorted, is ours.
//! Arguments: `rows cols` of the square-ish case (default 8192 8192).

use std::sync::Arc;
use std::time::Instant;

use atomr_accel_cuda::prelude::*;
use cudarc::cusparse::sys;
use cudarc::driver::{CudaSlice, CudaStream};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;

#[path = "support/alternate.rs"]
mod alternate;

#[path = "support/raw_cusparse.rs"]
mod raw_cusparse;

use alternate::{Order, Samples, Side};
use gpu_bench::run_gpu;
use raw_cusparse::{address, ok, Elem};

/// A CSR matrix made by cuSPARSE's conversion.
struct RawCsr<T> {
    offsets: CudaSlice<i32>,
    indices: CudaSlice<i32>,
    values: CudaSlice<T>,
}

/// One raw conversion of the column-major `rows × cols` matrix `dense`, synchronized.
fn raw_convert<T: Elem>(
    h: sys::cusparseHandle_t,
    stream: &Arc<CudaStream>,
    dense: &CudaSlice<T>,
    (rows, cols): (usize, usize),
) -> RawCsr<T> {
    let offsets = stream.alloc_zeros::<i32>(rows + 1).unwrap();
    let alg = sys::cusparseDenseToSparseAlg_t::CUSPARSE_DENSETOSPARSE_ALG_DEFAULT;
    // SAFETY: a live handle on `stream`; `dense` holds rows·cols elements, `offsets`
    // rows + 1; the descriptors are destroyed before returning, after the stream is
    // synchronized; the column and value buffers hold the count the analysis gave.
    unsafe {
        let (mut dn, mut sp) = (std::ptr::null_mut(), std::ptr::null_mut());
        ok(sys::cusparseCreateDnMat(
            &mut dn,
            rows as i64,
            cols as i64,
            rows as i64,
            address(dense, stream),
            T::DATA,
            sys::cusparseOrder_t::CUSPARSE_ORDER_COL,
        ));
        ok(sys::cusparseCreateCsr(
            &mut sp,
            rows as i64,
            cols as i64,
            0,
            address(&offsets, stream),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
            T::DATA,
        ));
        let mut bytes = 0usize;
        ok(sys::cusparseDenseToSparse_bufferSize(h, dn, sp, alg, &mut bytes));
        let work = stream.alloc_zeros::<u8>(bytes.max(1)).unwrap();
        ok(sys::cusparseDenseToSparse_analysis(
            h,
            dn,
            sp,
            alg,
            address(&work, stream),
        ));
        let (mut r, mut c, mut nnz) = (0i64, 0i64, 0i64);
        ok(sys::cusparseSpMatGetSize(sp, &mut r, &mut c, &mut nnz));
        let n = (nnz as usize).max(1);
        let (indices, values) = (
            stream.alloc_zeros::<i32>(n).unwrap(),
            stream.alloc_zeros::<T>(n).unwrap(),
        );
        ok(sys::cusparseCsrSetPointers(
            sp,
            address(&offsets, stream),
            address(&indices, stream),
            address(&values, stream),
        ));
        ok(sys::cusparseDenseToSparse_convert(
            h,
            dn,
            sp,
            alg,
            address(&work, stream),
        ));
        stream.synchronize().unwrap();
        ok(sys::cusparseDestroyDnMat(dn));
        ok(sys::cusparseDestroySpMat(sp));
        RawCsr {
            offsets,
            indices,
            values,
        }
    }
}

async fn measure<T: Elem>(
    dev: &Device,
    stream: &Arc<CudaStream>,
    h: sys::cusparseHandle_t,
    (rows, cols): (usize, usize),
) {
    // About 5 % non-zeros, at pseudo-random places, with pseudo-random values.
    let dense: Vec<T> = (0..rows * cols)
        .map(|k| {
            let x = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            if x % 20 == 0 {
                T::from_f64((x % 1999) as f64 / 1000.0 - 1.0 + 1e-3)
            } else {
                T::default()
            }
        })
        .collect();
    let ours_in = dev.upload(dense.as_slice()).await.unwrap();
    let raw_in = stream.clone_htod(&dense).unwrap();
    let mut kept = None;
    for order in Order::ALL {
        let mut samples = Samples::new(1);
        for side in [Side::Raw, Side::Ours].into_iter().chain(order.schedule(10)) {
            let t = Instant::now();
            match side {
                Side::Raw => kept = Some(raw_convert(h, stream, &raw_in, (rows, cols))),
                Side::Ours => drop(dev.dense_to_csr(&ours_in, rows, cols).await.unwrap()),
            }
            samples.record(side, t.elapsed().as_secs_f64());
        }
        let (raw, ours) = samples.medians();
        println!(
            "RESULT | dense_to_csr<{}> {rows}×{cols} ({order:?}, median of 10) | ours {:.1} µs, raw {:.1} µs, ratio {:.3}",
            T::NAME,
            ours * 1e6,
            raw * 1e6,
            raw / ours
        );
    }
    // Whose structure is what: cuSPARSE's rows as it leaves them, and sorted.
    let ours = dev
        .download_csr(&dev.dense_to_csr(&ours_in, rows, cols).await.unwrap())
        .await
        .unwrap();
    let raw = kept.expect("a raw conversion ran");
    let (offsets, mut indices, mut values) = (
        stream.clone_dtoh(&raw.offsets).unwrap(),
        stream.clone_dtoh(&raw.indices).unwrap(),
        stream.clone_dtoh(&raw.values).unwrap(),
    );
    indices.truncate(ours.indices.len());
    values.truncate(ours.values.len());
    let mut unsorted_rows = 0;
    for r in 0..rows {
        let (a, b) = (offsets[r] as usize, offsets[r + 1].min(indices.len() as i32) as usize);
        if indices[a..b].windows(2).any(|w| w[0] >= w[1]) {
            unsorted_rows += 1;
            let mut pairs: Vec<(i32, T)> = indices[a..b]
                .iter()
                .copied()
                .zip(values[a..b].iter().copied())
                .collect();
            pairs.sort_by_key(|p| p.0);
            for (k, (i, v)) in pairs.into_iter().enumerate() {
                indices[a + k] = i;
                values[a + k] = v;
            }
        }
    }
    let same = offsets == ours.offsets
        && indices == ours.indices
        && values.iter().zip(&ours.values).all(|(a, b)| a.to_f64() == b.to_f64());
    println!(
        "check | dense_to_csr<{}> {rows}×{cols}: {} non-zeros; cuSPARSE left {unsorted_rows} of {rows} rows' column \
         indices unsorted; its structure, rows sorted, is ours: {same}",
        T::NAME,
        ours.values.len()
    );
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rows, cols) = (
        args.first().copied().unwrap_or(8192),
        args.get(1).copied().unwrap_or(8192),
    );
    run_gpu("dense_to_csr", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        let h = cudarc::cusparse::result::create().unwrap();
        // SAFETY: a live handle, put on the bench's stream.
        ok(unsafe { sys::cusparseSetStream(h, stream.cu_stream() as sys::cudaStream_t) });
        for shape in [(rows, cols), (16, 1 << 22), (173, 121)] {
            measure::<f32>(&dev, &stream, h, shape).await;
            measure::<f64>(&dev, &stream, h, shape).await;
        }
        // SAFETY: made above, destroyed once, every call synchronized.
        unsafe { cudarc::cusparse::result::destroy(h) }.unwrap();
    });
}
