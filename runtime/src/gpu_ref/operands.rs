//! The operands of one operation, locked together: each distinct buffer once, in buffer-id
//! order, its handles' windows handed out as regions.
//!
//! Why: an operation may take several views of one buffer (a panel and the rest of a
//! matrix). Locking per handle would lock that buffer twice (a deadlock), and Rust's
//! borrows forbid a write region next to read regions of the same storage unless it is
//! split — which `Locked::split` does, after checking the output overlaps no input.
//! Locking in id order means two operations over the same buffers cannot deadlock.

use super::{GpuRef, Locked, Region, RegionMut};
use crate::dtype::DTypeBase;
use crate::error::GpuError;

/// Locks `inputs` and `out` and runs `f` on their regions: `out` writable, the inputs
/// readable. Inputs may be views of any buffers, `out`'s included, and may overlap each
/// other; an input overlapping `out` is an `InvalidArgument`.
pub(crate) fn with_operands<T: DTypeBase, const N: usize, R>(
    inputs: [&GpuRef<T>; N],
    out: &GpuRef<T>,
    f: impl FnOnce([Region<'_, T>; N], RegionMut<'_, T>) -> R,
) -> Result<R, GpuError> {
    let mut locks = lock_distinct(inputs.iter().copied().chain([out]));
    let at = locks
        .iter()
        .position(|(r, _)| r.same_buffer(out))
        .expect("out was locked");
    let (_, mut out_lock) = locks.swap_remove(at);
    // Locked through whichever handle of the buffer came first: split at out's window.
    out_lock.window = out.window();
    let same = inputs.map(|i| i.same_buffer(out).then(|| i.window()));
    out_lock.split(same, |o, mut parts| {
        let regions = std::array::from_fn(|k| {
            parts[k].take().unwrap_or_else(|| {
                let (_, l) = locks
                    .iter()
                    .find(|(r, _)| r.same_buffer(inputs[k]))
                    .expect("every input was locked");
                l.region_of(inputs[k])
            })
        });
        f(regions, o)
    })
}

/// Locks `inputs` (views of any buffers, overlapping or not) and runs `f` on their
/// regions, to read.
pub(crate) fn with_inputs<T: DTypeBase, const N: usize, R>(
    inputs: [&GpuRef<T>; N],
    f: impl FnOnce([Region<'_, T>; N]) -> R,
) -> R {
    let locks = lock_distinct(inputs.iter().copied());
    let regions = std::array::from_fn(|k| {
        let (_, l) = locks
            .iter()
            .find(|(r, _)| r.same_buffer(inputs[k]))
            .expect("every input was locked");
        l.region_of(inputs[k])
    });
    f(regions)
}

/// Locks the one buffer that `refs` (views of it) lie in and runs `f` on the span from
/// the first element any of them holds to the last, writable, with each view's offset in
/// that span: for an operation over views whose windows interleave — two rows of a
/// column-major matrix — which no split into disjoint windows can hand out. `f` must
/// keep its writes to elements it was asked to write (the caller has checked those are
/// read through no other view). Views of different buffers are an `InvalidArgument`.
pub(crate) fn with_span<T: DTypeBase, const N: usize, R>(
    refs: [&GpuRef<T>; N],
    f: impl FnOnce(RegionMut<'_, T>, [usize; N]) -> R,
) -> Result<R, GpuError> {
    let first = refs[0];
    if refs.iter().any(|r| !r.same_buffer(first)) {
        return Err(GpuError::invalid("views of different buffers taken as one span"));
    }
    let start = refs.iter().map(|r| r.window().start).min().expect("N ≥ 1");
    let end = refs.iter().map(|r| r.window().end).max().expect("N ≥ 1");
    let mut lock = first.lock();
    Ok(f(
        lock.region_mut_at(start..end),
        refs.map(|r| r.window().start - start),
    ))
}

/// Locks each distinct buffer among `refs` once, in buffer-id order.
fn lock_distinct<'a, T: DTypeBase>(refs: impl Iterator<Item = &'a GpuRef<T>>) -> Vec<(&'a GpuRef<T>, Locked<'a, T>)> {
    let mut distinct: Vec<&GpuRef<T>> = Vec::with_capacity(4);
    for r in refs {
        if !distinct.iter().any(|d| d.same_buffer(r)) {
            distinct.push(r);
        }
    }
    distinct.sort_by_key(|r| r.id());
    distinct.into_iter().map(|r| (r, r.lock())).collect()
}

/// Locks two buffers of any element types in buffer-id order (as every operation locks
/// its operands, so two operations over the same buffers in opposite argument orders
/// cannot deadlock), and hands the locks back in argument order. The buffers must be
/// distinct (the callers check: a routine takes each buffer once).
pub(crate) fn lock2<'a, A: DTypeBase, B: DTypeBase>(
    a: &'a GpuRef<A>,
    b: &'a GpuRef<B>,
) -> (Locked<'a, A>, Locked<'a, B>) {
    if a.id() <= b.id() {
        let la = a.lock();
        (la, b.lock())
    } else {
        let lb = b.lock();
        (a.lock(), lb)
    }
}

/// Writes a lock of several buffers of any element types: each locked in buffer-id
/// order, the locks handed back in argument order — [`lock2`]'s rule for more buffers.
macro_rules! lock_in_id_order {
    ($(#[$doc:meta])* $name:ident($($r:ident: $t:ident => $l:ident),+)) => {
        $(#[$doc])*
        #[allow(unused_assignments)]
        pub(crate) fn $name<'a, $($t: DTypeBase),+>($($r: &'a GpuRef<$t>),+) -> ($(Locked<'a, $t>),+) {
            $(let mut $l = None;)+
            let mut k = 0;
            let mut order = [$($r.id()),+].map(|id| {
                k += 1;
                (id, k - 1)
            });
            order.sort_unstable();
            for (_, at) in order {
                let mut i = 0;
                $(
                    if at == i {
                        $l = Some($r.lock());
                    }
                    i += 1;
                )+
            }
            ($($l.expect("locked")),+)
        }
    };
}

lock_in_id_order!(
    /// As [`lock2`], for four buffers.
    lock4(a: A => la, b: B => lb, c: C => lc, d: D => ld)
);
lock_in_id_order!(
    /// As [`lock2`], for five buffers (a sparse matrix's three and two vectors).
    lock5(a: A => la, b: B => lb, c: C => lc, d: D => ld, e: E => le)
);
