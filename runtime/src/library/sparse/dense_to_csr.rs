//! The kernels and launch plans of `Device::dense_to_csr` (`device/dense_to_csr.rs`): the
//! non-zeros of a dense column-major matrix as a CSR matrix, converted on the device by
//! `#[kernel]`s — count, scan, fill — on every backend (the CPU device emulates them),
//! so the structure is the same everywhere.
//!
//! Why not cuSPARSE's `cusparseDenseToSparse`: it may leave a row's column indices
//! unsorted (NVIDIA's answer, CUDALibrarySamples issue 21: "even if CSR column indices
//! are not sorted, it is still a valid CSR format"), which is what its first run on the
//! H200 showed (another structure than the host's for a 173×121 matrix), while a
//! `CsrMatrix` promises strictly increasing indices per row. Here each thread walks its
//! columns in order, so the order holds by construction.
//!
//! The work is split into (row, chunk of columns) pairs: thread `(r, chunk)` reads row
//! `r` of a run of columns — a warp's threads read consecutive rows of one column, so
//! the reads coalesce — and enough chunks are made that a wide matrix with few rows
//! still fills the GPU. Counted pairs, scanned in CSR order (row by row, chunk by
//! chunk), give each pair the place of its first non-zero.

use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};
use crate::gpu_ref::GpuRef;
use crate::kernel::dsl::{Float, KernelCall};
use crate::launch::LaunchConfig;
use crate::library::sparse::{CsrMatrix, MAX_DIM};

/// Threads per block of both passes (one row each, along x).
const THREADS: u32 = 128;
/// About how many (row, chunk) pairs a conversion aims at: enough threads to fill a
/// GPU twice over. The fill pass waits on its scattered loads and stores; at 2^17 pairs
/// it ran with half the warps a GPU holds (Nsight Compute: 47 % active), and 2^19
/// takes the benchmark's conversions 4–19 % faster (BENCHMARKS.md).
const TARGET_PAIRS: usize = 1 << 19;
/// The fewest columns a chunk reads (below this a thread does too little to pay for
/// its place in the scan).
const MIN_WIDTH: usize = 32;
/// The most elements of a matrix whose CSR buffers are sized for every element, so that
/// the conversion is one request (4 MiB of indices at most).
pub(crate) const ONE_REQUEST: usize = 1 << 20;
/// The most elements of a matrix converted by one block ([`dense_to_csr_block`]).
const ONE_BLOCK: usize = 1 << 16;
/// The most chunks per row: the grid's y dimension.
const MAX_CHUNKS: usize = 65_535;

/// Where the run of columns starting at `first` ends: `width` columns on, or at `cols`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn run_end(first: usize, width: u32, cols: u32) -> usize {
    let mut end = first + width as usize;
    if end > cols as usize {
        end = cols as usize;
    }
    end
}

/// The non-zeros (`!= 0`: a NaN counts, −0 does not) of row `r` of the column-major
/// `dense` of `rows` rows in columns `first .. end`.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn run_count<T: Float>(dense: &[T], rows: u32, r: usize, first: usize, end: usize) -> i32 {
    let mut n: i32 = 0;
    let mut c = first;
    while c < end {
        if dense[c * rows as usize + r] != T::zero() {
            n += 1;
        }
        c += 1;
    }
    n
}

/// Writes the non-zeros [`run_count`] counts — column index and value — to `indices` and
/// `values` from place `k` on.
#[atomr_accel_cuda_macros::device(crate = crate)]
fn run_fill<T: Float>(
    dense: &[T],
    rows: u32,
    r: usize,
    first: usize,
    end: usize,
    k: usize,
    indices: &mut [i32],
    values: &mut [T],
) {
    let mut at = k;
    let mut c = first;
    while c < end {
        let v = dense[c * rows as usize + r];
        if v != T::zero() {
            indices[at] = c as i32;
            values[at] = v;
            at += 1;
        }
        c += 1;
    }
}

/// Thread `(r, chunk)` counts the non-zeros (`!= 0`: a NaN counts, −0 does not) of row
/// `r` in columns `chunk·width ..` (at most `width`, within `cols`) of the column-major
/// `rows × cols` matrix `dense`, into `counts[r·chunks + chunk]`.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn dense_counts<T: Float>(dense: &[T], rows: u32, cols: u32, width: u32, chunks: u32, counts: &mut [i32]) {
    let r = global_index();
    let chunk = global_index_y();
    if r < rows as usize && chunk < chunks as usize {
        let first = chunk * width as usize;
        counts[r * chunks as usize + chunk] = run_count(dense, rows, r, first, run_end(first, width, cols));
    }
}

/// Writes the column indices and values of each (row, chunk) pair's non-zeros (as
/// [`dense_counts`] found them) from the place `ends` (the counts' inclusive scan) gives
/// it; chunk 0 writes row `r`'s offset, the last pair the total. Blocks of
/// [`THREADS`] rows, as [`dense_counts`]'s.
///
/// A warp takes its 32 rows 32 columns at a time: each lane reads its row's 32 values —
/// one load per column, consecutive rows across the warp, so every load is coalesced —
/// into shared memory; then row by row, each lane a column, a `ballot` of the non-zeros
/// and its count below the lane give every non-zero its place, and the warp writes the
/// row's run of indices and values contiguously. (A thread per pair walking its columns
/// wrote one element at a time to its own place: 32 scattered stores per warp store.)
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn dense_fill<T: Float>(
    dense: &[T],
    rows: u32,
    cols: u32,
    width: u32,
    chunks: u32,
    ends: &[i64],
    offsets: &mut [i32],
    indices: &mut [i32],
    values: &mut [T],
) {
    // Each warp's 32 columns × 32 rows, the rows padded to 33 so that reading a row
    // across the lanes meets no bank twice.
    let mut tile = shared_array::<T, 4224>();
    let lane = lane_id();
    let w = thread_idx_x() as usize / 32;
    let r = global_index();
    let chunk = global_index_y();
    let n = rows as usize;
    let first = chunk * width as usize;
    let end = run_end(first, width, cols);
    // Where this lane's row writes next.
    let mut next: i64 = 0;
    if r < n && chunk < chunks as usize {
        let at = r * chunks as usize + chunk;
        if at > 0 {
            next = ends[at - 1];
        }
        if chunk == 0 {
            offsets[r] = next as i32;
        }
        if at + 1 == ends.len() {
            offsets[n] = ends[at] as i32;
        }
    }
    // A warp wholly past the last row has nothing to write (no block-wide barrier
    // follows: it may leave) — most of each block of a matrix of few rows.
    if r - lane >= n {
        return;
    }
    let below = (1u32 << lane as u32) - 1;
    let mut c0 = first;
    while c0 < end {
        let mut j: usize = 0;
        while j < 32 {
            let c = c0 + j;
            let mut v = T::zero();
            if r < n && c < end {
                v = dense[c * n + r];
            }
            tile[(w * 32 + j) * 33 + lane] = v;
            j += 1;
        }
        sync_warp();
        let mut i: usize = 0;
        while i < 32 {
            let v = tile[(w * 32 + lane) * 33 + i];
            let nonzero = v != T::zero();
            let mask = ballot(nonzero);
            let base = shfl(next, i as u32);
            if nonzero {
                let at = base as usize + (mask & below).count_ones() as usize;
                indices[at] = (c0 + lane) as i32;
                values[at] = v;
            }
            if lane == i {
                next += mask.count_ones() as i64;
            }
            i += 1;
        }
        sync_warp();
        c0 += 32;
    }
}

/// A tiny matrix whole, in one block of 1024 threads: thread `t` = (row, chunk) in CSR
/// order counts its run of columns as [`dense_counts`] does, the block scans the counts
/// in shared memory, and each thread writes its non-zeros as [`dense_fill`] does, the
/// last one the total to `offsets[rows]` and `nnz[0]` — one launch where the general
/// path takes five.
#[atomr_accel_cuda_macros::kernel(crate = crate)]
fn dense_to_csr_block<T: Float>(
    dense: &[T],
    rows: u32,
    cols: u32,
    width: u32,
    chunks: u32,
    offsets: &mut [i32],
    indices: &mut [i32],
    values: &mut [T],
    nnz: &mut [i64],
) {
    let mut part = shared_array::<i32, 1024>();
    let t = thread_idx_x();
    let pairs = rows as usize * chunks as usize;
    let r = t / chunks as usize;
    let chunk = t % chunks as usize;
    let first = chunk * width as usize;
    let end = run_end(first, width, cols);
    let mut n: i32 = 0;
    if t < pairs {
        n = run_count(dense, rows, r, first, end);
    }
    part[t] = n;
    sync_threads();
    // The counts' inclusive scan across the block (Hillis–Steele).
    let mut off: usize = 1;
    while off < 1024 {
        let mut add: i32 = 0;
        if t >= off {
            add = part[t - off];
        }
        sync_threads();
        part[t] += add;
        sync_threads();
        off *= 2;
    }
    if t < pairs {
        let k = part[t] - n;
        if chunk == 0 {
            offsets[r] = k;
        }
        if t + 1 == pairs {
            offsets[rows as usize] = part[t];
            nnz[0] = part[t] as i64;
        }
        run_fill(dense, rows, r, first, end, k as usize, indices, values);
    }
}

/// How a `rows × cols` matrix is split: (columns per chunk, chunks per row).
fn split(rows: usize, cols: usize) -> (usize, usize) {
    let most = cols.div_ceil(MIN_WIDTH).clamp(1, MAX_CHUNKS);
    let chunks = TARGET_PAIRS.div_ceil(rows).clamp(1, most);
    let width = cols.div_ceil(chunks);
    // No empty chunk at the end.
    (width, cols.div_ceil(width))
}

/// How a tiny matrix (at most [`ONE_BLOCK`] elements, 1024 rows) is split for one block
/// of 1024 threads: (columns per chunk, chunks per row), at most 1024 pairs; `None` for
/// a larger one.
fn split_one_block(rows: usize, cols: usize) -> Option<(usize, usize)> {
    if rows * cols > ONE_BLOCK || rows > 1024 {
        return None;
    }
    let chunks = (1024 / rows).clamp(1, cols.div_ceil(MIN_WIDTH).max(1));
    let width = cols.div_ceil(chunks);
    Some((width, cols.div_ceil(width)))
}


/// How one conversion of a `rows × cols` matrix is split: `chunks` runs of `width`
/// columns per row, each (row, chunk) pair a thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conversion {
    rows: usize,
    cols: usize,
    width: usize,
    chunks: usize,
}

impl Conversion {
    /// The split of a matrix converted by the count, scan and fill passes.
    pub(crate) fn new(rows: usize, cols: usize) -> Self {
        let (width, chunks) = split(rows, cols);
        Conversion { rows, cols, width, chunks }
    }

    /// The split of a tiny matrix converted by one block ([`dense_to_csr_block`]);
    /// `None` for a larger one.
    pub(crate) fn one_block(rows: usize, cols: usize) -> Option<Self> {
        split_one_block(rows, cols).map(|(width, chunks)| Conversion { rows, cols, width, chunks })
    }

    /// The matrix's (rows, columns).
    pub(crate) fn size(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The (row, chunk) pairs: the counts and their scan's length.
    pub(crate) fn pairs(&self) -> usize {
        self.rows * self.chunks
    }

    /// The passes' grid: one thread per row along x, one chunk per y.
    fn grid(&self) -> LaunchConfig {
        LaunchConfig {
            grid: (self.rows.div_ceil(THREADS as usize) as u32, self.chunks as u32, 1),
            block: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// The shape as the kernels take it.
    fn shape(&self) -> (u32, u32, u32, u32) {
        (self.rows as u32, self.cols as u32, self.width as u32, self.chunks as u32)
    }

    /// The count pass: each pair's non-zeros into `counts` (`pairs` of them).
    pub(crate) fn count<T: Float + DTypeBase>(&self, dense: &GpuRef<T>, counts: &mut GpuRef<i32>) -> KernelCall {
        let (r, c, w, k) = self.shape();
        dense_counts::call::<T>(self.grid(), dense, r, c, w, k, counts)
    }

    /// The fill pass: each pair's non-zeros written from where the inclusive scan of
    /// the counts, `ends`, places them.
    pub(crate) fn fill<T: Float + DTypeBase>(&self, dense: &GpuRef<T>, ends: &GpuRef<i64>, (offsets, indices, values): &mut CsrBuffers<T>) -> KernelCall {
        let (r, c, w, k) = self.shape();
        dense_fill::call::<T>(self.grid(), dense, r, c, w, k, ends, offsets, indices, values)
    }

    /// The one launch of a tiny matrix's conversion (its split from
    /// [`Conversion::one_block`]), the count of non-zeros into `nnz`.
    pub(crate) fn in_one_block<T: Float + DTypeBase>(&self, dense: &GpuRef<T>, (offsets, indices, values): &mut CsrBuffers<T>, nnz: &mut GpuRef<i64>) -> KernelCall {
        let block = LaunchConfig {
            grid: (1, 1, 1),
            block: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let (r, c, w, k) = self.shape();
        dense_to_csr_block::call::<T>(block, dense, r, c, w, k, offsets, indices, values, nnz)
    }
}

/// Checks the shape (each side 1..=`MAX_DIM`) and that `dense` holds it.
pub(crate) fn check_shape<T: DTypeBase>(dense: &GpuRef<T>, rows: usize, cols: usize) -> Result<(), GpuError> {
    const OP: &str = "dense_to_csr";
    for (v, what) in [(rows, "rows"), (cols, "cols")] {
        if v == 0 || v > MAX_DIM {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("{OP}: {what} = {v}; a sparse matrix has 1..={MAX_DIM} of them"))
                    .arg(what)
                    .mismatch(format_args!("1..={MAX_DIM}"), v),
            ));
        }
    }
    let need = rows
        .checked_mul(cols)
        .ok_or_else(|| GpuError::invalid(format!("{OP}: {rows}×{cols} overflows")))?;
    if dense.len() < need {
        return Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{OP}: dense must hold {rows}×{cols} = {need} elements, the buffer has {}",
                dense.len()
            ))
            .arg("dense")
            .mismatch(
                format_args!("≥ {need} elements"),
                format_args!("{} elements", dense.len()),
            ),
        ));
    }
    Ok(())
}

/// A CSR matrix's offsets, column indices and values.
pub(crate) type CsrBuffers<T> = (GpuRef<i32>, GpuRef<i32>, GpuRef<T>);

/// The `rows × cols` matrix of `nnz` non-zeros whose CSR arrays are `buffers` (the
/// indices and values may have room for more).
pub(crate) fn csr_matrix<T: DTypeBase>(rows: usize, cols: usize, nnz: usize, buffers: CsrBuffers<T>) -> CsrMatrix<T> {
    let (offsets, indices, values) = buffers;
    CsrMatrix {
        rows,
        cols,
        nnz,
        offsets,
        indices,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_the_columns_without_empty_chunks() {
        for (rows, cols) in [
            (1, 1),
            (1, 31),
            (1, 33),
            (3, 1_000_000),
            (173, 121),
            (1 << 20, 8),
            (100, 10_000),
        ] {
            let (width, chunks) = split(rows, cols);
            assert!(width >= 1 && (1..=MAX_CHUNKS).contains(&chunks), "{rows}×{cols}");
            assert!(
                width * chunks >= cols && width * (chunks - 1) < cols,
                "{rows}×{cols}: {width}·{chunks}"
            );
        }
        // One block: at most 1024 pairs covering the columns, tiny matrices only.
        for (rows, cols) in [
            (1, 1),
            (1, 5000),
            (173, 121),
            (256, 256),
            (1000, 65),
            (1024, 64),
            (2, 32_768),
        ] {
            let (width, chunks) = split_one_block(rows, cols).expect("tiny");
            assert!(rows * chunks <= 1024 && chunks >= 1, "{rows}×{cols}: {chunks}");
            assert!(
                width * chunks >= cols && width * (chunks - 1) < cols,
                "{rows}×{cols}: {width}·{chunks}"
            );
        }
        assert_eq!(split_one_block(1025, 1), None);
        assert_eq!(split_one_block(300, 300), None);
        // Many rows: one chunk each; few rows of many columns: many chunks of ≥ 32.
        assert_eq!(split(1 << 20, 1000).1, 1);
        let (width, chunks) = split(4, 1 << 20);
        assert!(chunks > 1000 && width >= MIN_WIDTH, "{width}·{chunks}");
    }
}
