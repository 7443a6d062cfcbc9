//! Operands that a routine writes, any of them views of one buffer: each distinct buffer
//! locked once, in buffer-id order, and cut into its handles' windows — disjoint, so
//! each is handed out writable.
//!
//! Why: a library routine (a solver's factor and right-hand side, an SVD's U, S and Vᵀ)
//! may take panels of one workspace. Locking per handle would lock that buffer twice (a
//! deadlock), and Rust's borrows allow several writable regions of one storage only as
//! the pieces of a split. cudarc splits a device view only through a borrow of the view
//! being split, so the cutting recurses: each piece lives in the frame that cut it, and
//! the routine runs in the innermost one.

use std::ops::Range;

use super::{GpuRef, Locked, RegionMut};
use crate::dtype::DTypeBase;
use crate::error::{GpuError, Invalid};

/// One distinct buffer of the operands, locked, and the windows of the arguments in it
/// (argument index, elements), sorted by start.
struct Cut<'g, T> {
    lock: Locked<'g, T>,
    windows: Vec<Window>,
}

/// An argument's name and its window's elements, for an error that names it.
pub(crate) type Named<'n> = (&'n str, Range<usize>);

/// An argument's index and its window's elements.
type Window = (usize, Range<usize>);

/// Pieces cut so far: each argument's index and region.
type Pieces<'v, T> = Vec<(usize, RegionMut<'v, T>)>;

/// The first two arguments among `refs` that are overlapping windows of one buffer, if
/// any: what [`with_parts`] refuses.
pub(crate) fn overlapping<'n, T: DTypeBase>(refs: &[(&GpuRef<T>, &'n str)]) -> Option<(Named<'n>, Named<'n>)> {
    refs.iter().enumerate().find_map(|(i, (x, xn))| {
        refs[i + 1..].iter().find_map(|(y, yn)| {
            let (wx, wy) = (x.window(), y.window());
            let overlap = wx.start < wy.end && wy.start < wx.end;
            (x.same_buffer(y) && overlap).then_some(((*xn, wx), (*yn, wy)))
        })
    })
}

/// The error for two overlapping windows of one buffer passed where a routine writes.
pub(crate) fn overlap_error(op: &str, (xn, wx): Named<'_>, (yn, wy): Named<'_>) -> GpuError {
    GpuError::InvalidArgument(
        Invalid::new(format!(
            "{op}: {xn} (elements {wx:?}) and {yn} (elements {wy:?}) are overlapping views of one buffer; pass views \
             that lie apart, or separate buffers"
        ))
        .arg(yn)
        .mismatch(format_args!("a window apart from {xn}'s"), "an overlapping one"),
    )
}

/// Locks `refs` and runs `f` on their regions, all writable, in argument order. Any of
/// them may be views of one buffer, which must lie apart (an `InvalidArgument` naming
/// both otherwise: `op` and the names given).
pub(crate) fn with_parts<T: DTypeBase, const N: usize, R>(
    op: &str,
    refs: [(&GpuRef<T>, &str); N],
    f: impl for<'x> FnOnce([RegionMut<'x, T>; N]) -> R,
) -> Result<R, GpuError> {
    with_parts_and(op, refs, None::<&GpuRef<u8>>, |parts, _| f(parts))
}

/// As [`with_parts`], with one more buffer of another element type (a factorization's
/// pivots) locked in the same id order and handed to `f` whole.
pub(crate) fn with_parts_and<T: DTypeBase, P: DTypeBase, const N: usize, R>(
    op: &str,
    refs: [(&GpuRef<T>, &str); N],
    extra: Option<&GpuRef<P>>,
    f: impl for<'x> FnOnce([RegionMut<'x, T>; N], Option<&mut Locked<'_, P>>) -> R,
) -> Result<R, GpuError> {
    if let Some((x, y)) = overlapping(&refs) {
        return Err(overlap_error(op, x, y));
    }
    let mut distinct: Vec<&GpuRef<T>> = Vec::with_capacity(N);
    for (r, _) in &refs {
        if !distinct.iter().any(|d| d.same_buffer(r)) {
            distinct.push(r);
        }
    }
    distinct.sort_by_key(|r| r.id());
    // Every buffer in id order, the extra one at its place (it is of another element
    // type, so never one of `distinct`).
    let mut extra_lock = None;
    let mut cuts: Vec<Cut<'_, T>> = Vec::with_capacity(distinct.len());
    for d in distinct {
        if let Some(e) = extra.filter(|e| extra_lock.is_none() && e.id() < d.id()) {
            extra_lock = Some(e.lock());
        }
        let mut windows: Vec<Window> = (refs.iter().enumerate())
            .filter(|(_, (r, _))| r.same_buffer(d))
            .map(|(k, (r, _))| (k, r.window()))
            .collect();
        windows.sort_by_key(|(_, w)| (w.start, w.end));
        cuts.push(Cut {
            lock: d.lock(),
            windows,
        });
    }
    if extra_lock.is_none() {
        extra_lock = extra.map(|e| e.lock());
    }
    Ok(cut(None, &mut cuts, Vec::with_capacity(N), |mut pieces| {
        pieces.sort_by_key(|(k, _)| *k);
        let parts: [RegionMut<'_, T>; N] = match pieces.into_iter().map(|(_, r)| r).collect::<Vec<_>>().try_into() {
            Ok(parts) => parts,
            Err(_) => unreachable!("one region per argument"),
        };
        f(parts, extra_lock.as_mut())
    }))
}

/// Cuts the region `current` (starting at element `at` of its buffer) at its remaining
/// `windows`, then each buffer of `rest` likewise, and calls `f` with every piece
/// (argument index, region). Each piece borrows the frame that cut it, so `f` runs in
/// the innermost frame.
fn cut<'v, T, R, F>(
    current: Option<(RegionMut<'v, T>, usize, &'v [Window])>,
    rest: &'v mut [Cut<'_, T>],
    done: Pieces<'v, T>,
    f: F,
) -> R
where
    F: for<'x> FnOnce(Pieces<'x, T>) -> R,
{
    match current {
        Some((mut region, at, [(k, w), windows @ ..])) => {
            let (_, mut from) = region.split_at(w.start - at);
            let (piece, after) = from.split_at(w.len());
            let mut done: Pieces<'_, T> = done;
            done.push((*k, piece));
            cut(Some((after, w.end, windows)), rest, done, f)
        }
        _ => match rest.split_first_mut() {
            None => f(done),
            Some((Cut { lock, windows }, rest)) => {
                let start = windows.first().map_or(0, |(_, w)| w.start);
                let end = windows.iter().map(|(_, w)| w.end).max().unwrap_or(start);
                cut(Some((lock.region_mut_at(start..end), start, windows)), rest, done, f)
            }
        },
    }
}
