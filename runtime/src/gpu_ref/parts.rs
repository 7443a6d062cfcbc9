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
type Named<'n> = (&'n str, Range<usize>);

/// An argument's index and its window's elements.
type Window = (usize, Range<usize>);

/// Pieces cut so far: each argument's index and region.
type Pieces<'v, T> = Vec<(usize, RegionMut<'v, T>)>;

/// Refuses two arguments among `refs` that are overlapping windows of one buffer (an
/// `InvalidArgument` naming `op`, both arguments and their elements): what
/// [`with_parts`] refuses, for a routine to check before it picks a backend.
pub(crate) fn check_apart<T: DTypeBase>(op: &str, refs: &[(&GpuRef<T>, &str)]) -> Result<(), GpuError> {
    let first = refs.iter().enumerate().find_map(|(i, (x, xn))| {
        (refs[i + 1..].iter())
            .find(|(y, _)| x.overlaps(y))
            .map(|(y, yn)| ((*xn, x.window()), (*yn, y.window())))
    });
    match first {
        Some((x, y)) => Err(overlap_error(op, x, y)),
        None => Ok(()),
    }
}

/// The error for two overlapping windows of one buffer passed where a routine writes.
fn overlap_error(op: &str, (xn, wx): Named<'_>, (yn, wy): Named<'_>) -> GpuError {
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
    check_apart(op, &refs)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu_ref::Storage;

    fn host_buffer(v: Vec<f64>) -> GpuRef<f64> {
        let len = v.len();
        GpuRef::new(0, 0, len, Storage::Cpu(v.into()), None)
    }

    fn contents(r: &GpuRef<f64>) -> Vec<f64> {
        r.with_host(|v| v.to_vec()).unwrap()
    }

    #[test]
    fn each_argument_gets_its_window_in_argument_order() {
        let one = host_buffer((0..20).map(f64::from).collect());
        let other = host_buffer(vec![100.0; 3]);
        // Out of address order, with a separate buffer between them.
        let (a, b, c) = (
            one.view(12..15).unwrap(),
            one.view(2..5).unwrap(),
            one.view(7..9).unwrap(),
        );
        let seen = with_parts(
            "test",
            [(&a, "a"), (&other, "o"), (&b, "b"), (&c, "c")],
            |[a, o, b, c]| {
                let parts = [a, o, b, c].map(|p| p.into_host().unwrap());
                let seen: Vec<Vec<f64>> = parts.iter().map(|p| p.to_vec()).collect();
                for p in parts {
                    p.iter_mut().for_each(|x| *x = -*x);
                }
                seen
            },
        )
        .unwrap();
        assert_eq!(
            seen,
            vec![
                vec![12.0, 13.0, 14.0],
                vec![100.0; 3],
                vec![2.0, 3.0, 4.0],
                vec![7.0, 8.0]
            ]
        );
        let want: Vec<f64> = (0..20)
            .map(|i| {
                let x = f64::from(i);
                if (2..5).contains(&i) || (7..9).contains(&i) || (12..15).contains(&i) {
                    -x
                } else {
                    x
                }
            })
            .collect();
        assert_eq!(contents(&one), want, "only the windows were written");
        assert_eq!(contents(&other), vec![-100.0; 3]);
    }

    #[test]
    fn the_extra_buffer_is_locked_with_them() {
        let one = host_buffer(vec![1.0, 2.0, 3.0, 4.0]);
        let pivots = GpuRef::new(0, 0, 2, Storage::Cpu(vec![7i32, 8].into()), None);
        let (lo, hi) = (one.view(0..2).unwrap(), one.view(2..4).unwrap());
        let sum = with_parts_and("test", [(&hi, "hi"), (&lo, "lo")], Some(&pivots), |[hi, lo], p| {
            let p = p.expect("locked").host().unwrap().to_vec();
            let (hi, lo) = (hi.into_host().unwrap(), lo.into_host().unwrap());
            hi[0] += f64::from(p[0]);
            lo[1] += f64::from(p[1]);
            hi.iter().chain(lo.iter()).sum::<f64>()
        })
        .unwrap();
        assert_eq!(sum, 25.0);
        assert_eq!(contents(&one), vec![1.0, 10.0, 10.0, 4.0]);
    }

    #[test]
    fn overlapping_windows_are_refused_naming_both() {
        let one = host_buffer(vec![0.0; 10]);
        let (a, b) = (one.view(0..6).unwrap(), one.view(5..10).unwrap());
        let e = with_parts("lu_solve", [(&a, "the LU factors"), (&b, "B")], |_| ()).unwrap_err();
        let GpuError::InvalidArgument(i) = e else {
            panic!("expected InvalidArgument, got {e:?}")
        };
        assert_eq!(i.arg.as_deref(), Some("B"));
        let m = i.to_string();
        assert!(
            m.contains("lu_solve") && m.contains("the LU factors (elements 0..6)") && m.contains("5..10"),
            "{m}"
        );
        // Adjacent windows are apart.
        let c = one.view(6..10).unwrap();
        assert!(with_parts("t", [(&a, "a"), (&c, "c")], |_| ()).is_ok());
    }
}
