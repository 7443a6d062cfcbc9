//! Tensor contractions (`Device::contract`, einsum notation) of f16, bf16, f32 and f64
//! against a float64 einsum reference on fresh random data: matrix products of every
//! layout, attention's two contractions over batch and heads, permuted and strided
//! outputs (scatter), modes summed from one operand, diagonals, outer and inner
//! products, views at an offset, alpha and beta; bad equations, shapes, strides and
//! overlapping outputs as typed errors. Element-wise binary ops (add, multiply, max,
//! min; permuted, broadcast and strided operands; NaNs) and reductions over chosen modes
//! (permuted outputs, to one value, alpha and beta) against float64; trinary ops (two
//! ops chained, three operands each permuted, broadcast or strided, a strided output)
//! likewise. On the CPU device and on the GPU.

#[macro_use]
mod common;

use std::collections::BTreeMap;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::prelude::*;
use common::rand_vec;

on_both! {
    contract_e2e_two_by_two => two_by_two;
    contractions_match_a_float64_reference => references;
    half_precision_contractions => halves;
    bad_contractions_are_typed_errors => errors;
    elementwise_ops_match_a_float64_reference => elementwise_ops;
    reductions_over_modes_match_a_float64_reference => mode_reductions;
    bad_elementwise_ops_and_reductions_are_typed_errors => mode_errors;
    trinary_ops_match_a_float64_reference => trinary_ops;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("tensor");
    let d = Device::open(&sys, config).await.unwrap();
    (sys, d)
}

/// `$check::<T>(d, tol)` for each float type, with its tolerance: the unit roundoff of
/// T (of the f32 it computes in, for f16 and bf16, plus T's own last rounding).
macro_rules! each_float {
    ($check:ident($d:expr)) => {
        $check::<f64>($d, 1e-14).await;
        $check::<f32>($d, 1e-6).await;
        $check::<f16>($d, 2e-3).await;
        $check::<bf16>($d, 1e-2).await;
    };
}

/// The float64 einsum of `a` and `b` (laid out as given) added to `beta · c0`, into C's
/// layout (its untouched elements kept from `c0`); also the sum of |terms| per output
/// element, the scale of its rounding error.
fn reference(
    eq: &str,
    (a, la): (&[f64], &TensorLayout),
    (b, lb): (&[f64], &TensorLayout),
    (c0, lc): (&[f64], &TensorLayout),
    (alpha, beta): (f64, f64),
) -> (Vec<f64>, Vec<f64>) {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (ins, out) = eq.split_once("->").unwrap();
    let (ma, mb) = ins.split_once(',').unwrap();
    let (ma, mb, mc): (Vec<char>, Vec<char>, Vec<char>) =
        (ma.chars().collect(), mb.chars().collect(), out.chars().collect());
    let mut size = BTreeMap::new();
    for (m, l) in [(&ma, la), (&mb, lb)] {
        for (ch, &n) in m.iter().zip(&l.shape) {
            size.insert(*ch, n);
        }
    }
    let letters: Vec<char> = size.keys().copied().collect();
    let offset = |modes: &[char], l: &TensorLayout, at: &BTreeMap<char, usize>| -> usize {
        modes.iter().zip(&l.strides).map(|(m, s)| at[m] * s).sum()
    };
    let mut c = c0.to_vec();
    let mut mag = vec![0.0; c0.len()];
    let mut acc: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
    let total: usize = letters.iter().map(|m| size[m]).product();
    for mut flat in 0..total {
        let mut at = BTreeMap::new();
        for m in &letters {
            at.insert(*m, flat % size[m]);
            flat /= size[m];
        }
        let t = a[offset(&ma, la, &at)] * b[offset(&mb, lb, &at)];
        let e = acc.entry(offset(&mc, lc, &at)).or_default();
        e.0 += t;
        e.1 += t.abs();
    }
    // Every output element, even one no term reaches (a contracted size of 0).
    let out_total: usize = mc.iter().map(|m| size[m]).product();
    for mut flat in 0..out_total {
        let mut at = BTreeMap::new();
        for m in &mc {
            at.insert(*m, flat % size[m]);
            flat /= size[m];
        }
        let o = offset(&mc, lc, &at);
        let (s, m) = acc.get(&o).copied().unwrap_or_default();
        c[o] = alpha * s + beta * c0[o];
        mag[o] = alpha.abs() * m + (beta * c0[o]).abs();
    }
    (c, mag)
}

/// One contraction of dtype `T` on `d` checked against [`reference`]: operands from fresh
/// random data in buffers of `a_len`/`b_len`/`c_len` elements (views at `offset` when it
/// is not 0), C filled with random values first.
#[allow(clippy::too_many_arguments)]
async fn check<T: TensorScalar + Float>(d: &Device, op: Contraction, lens: [usize; 3], offset: usize, tol: f64) {
    let c_layout =
        op.c.clone()
            .unwrap_or_else(|| TensorLayout::row_major(&op.output_shape().unwrap()));
    let round = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| T::from_f64(x).to_f64()).collect() };
    let (a, b, c0) = (
        round(rand_vec(lens[0])),
        round(rand_vec(lens[1])),
        round(rand_vec(lens[2])),
    );
    let up = |v: &[f64]| {
        let mut host = vec![T::from_f64(0.5); offset];
        host.extend(v.iter().map(|&x| T::from_f64(x)));
        host
    };
    let (ga, gb, gc) = (
        d.upload(up(&a)).await.unwrap(),
        d.upload(up(&b)).await.unwrap(),
        d.upload(up(&c0)).await.unwrap(),
    );
    let view = |g: &GpuRef<T>, n: usize| g.view(offset..offset + n).unwrap();
    let (va, vb, vc) = (view(&ga, lens[0]), view(&gb, lens[1]), view(&gc, lens[2]));
    d.contract(op.clone(), &va, &vb, &vc).await.unwrap();
    let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|v| v.to_f64()).collect();
    let (want, mag) = reference(
        &op.equation_full(),
        (&a, &op.a),
        (&b, &op.b),
        (&c0, &c_layout),
        (op.alpha, op.beta),
    );
    assert!(
        got[..offset].iter().all(|&v| v == 0.5),
        "{}: C's buffer before the view was written",
        op.equation
    );
    for (i, ((&g, &w), &m)) in got[offset..].iter().zip(&want).zip(&mag).enumerate() {
        assert!(
            (g - w).abs() <= tol * (m + 1e-30),
            "{} ({}): element {i} is {g}, want {w} (tolerance {})",
            op.equation,
            std::any::type_name::<T>(),
            tol * m
        );
    }
}

/// The equation with its output written out (NumPy's implicit one made explicit).
trait Explicit {
    fn equation_full(&self) -> String;
}

impl Explicit for Contraction {
    fn equation_full(&self) -> String {
        if self.equation.contains("->") {
            return self.equation.clone();
        }
        let mut count = BTreeMap::new();
        for ch in self.equation.chars().filter(|c| c.is_ascii_alphabetic()) {
            *count.entry(ch).or_insert(0) += 1;
        }
        let out: String = count.into_iter().filter(|&(_, n)| n == 1).map(|(c, _)| c).collect();
        format!("{}->{out}", self.equation)
    }
}

/// The peer scenario `contract_e2e`: `ij,jk->ik` of 2×2 f32 matrices stored
/// column-major, C = [19, 43, 22, 50] column-major.
async fn two_by_two(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let col = TensorLayout::column_major(&[2, 2]);
    let a = d.upload(vec![1.0f32, 3.0, 2.0, 4.0]).await.unwrap();
    let b = d.upload(vec![5.0f32, 7.0, 6.0, 8.0]).await.unwrap();
    let c = d.alloc::<f32>(4).await.unwrap();
    let op = Contraction::with_layouts("ij,jk->ik", col.clone(), col.clone()).output(col);
    d.contract(op, &a, &b, &c).await.unwrap();
    assert_eq!(d.download(&c).await.unwrap(), vec![19.0, 43.0, 22.0, 50.0]);
}

fn elems(l: &TensorLayout) -> usize {
    l.span()
}

/// The contractions every dtype runs: (operation, offset of the views).
fn cases(gpu_sized: bool) -> Vec<(Contraction, usize)> {
    let (q, k, dh) = if gpu_sized { (67, 75, 64) } else { (17, 19, 16) };
    let rm = TensorLayout::row_major;
    let cm = TensorLayout::column_major;
    vec![
        // Matrix products: row-major, column-major, a transposed operand, odd sizes.
        (Contraction::new("ij,jk->ik", &[37, 29], &[29, 41]), 0),
        (
            Contraction::with_layouts("ij,jk->ik", cm(&[37, 29]), cm(&[29, 41])).output(cm(&[37, 41])),
            0,
        ),
        (
            Contraction::with_layouts(
                "ij,jk->ik",
                TensorLayout::strided(&[37, 29], &[1, 37]).unwrap(),
                rm(&[29, 41]),
            ),
            3,
        ),
        // Attention: scores over batch and heads (a transposed key), then the weighted values.
        (
            Contraction::new("bhqd,bhkd->bhqk", &[2, 3, q, dh], &[2, 3, k, dh]).scaled(0.125, 0.0),
            0,
        ),
        (Contraction::new("bhqk,bhkd->bhqd", &[2, 3, q, k], &[2, 3, k, dh]), 5),
        // A permuted, padded output through the scatter, added to beta · C.
        (
            Contraction::new("bij,bjk->kbi", &[3, 5, 7], &[3, 7, 4])
                .output(TensorLayout::strided(&[4, 3, 5], &[1, 40, 8]).unwrap())
                .scaled(-1.5, 0.5),
            0,
        ),
        // Every operand gathered: interleaved modes.
        (Contraction::new("iajb,bjc->cai", &[4, 3, 5, 2], &[2, 5, 6]), 1),
        // A mode of one operand summed (B broadcast along it), a diagonal, NumPy's
        // implicit output, an outer and an inner product, a broadcast batch.
        (Contraction::new("ijs,jk->ik", &[6, 5, 4], &[5, 7]), 0),
        (Contraction::new("iij,jk->ik", &[6, 6, 5], &[5, 3]), 0),
        (Contraction::new("kj,ji", &[4, 9], &[9, 5]), 0),
        (Contraction::new("i,j->ij", &[13], &[11]), 0),
        (Contraction::new("i,i->", &[1000], &[1000]), 2),
        (Contraction::new("bij,jk->bik", &[4, 6, 5], &[5, 3]), 0),
        // Nothing to sum: C = beta · C.
        (Contraction::new("ij,jk->ik", &[3, 0], &[0, 4]).scaled(1.0, 2.0), 0),
    ]
}

async fn run_cases<T: TensorScalar + Float>(d: &Device, gpu: bool, tol: f64) {
    for (op, offset) in cases(gpu) {
        let c =
            op.c.clone()
                .unwrap_or_else(|| TensorLayout::row_major(&op.output_shape().unwrap()));
        check::<T>(
            d,
            op.clone(),
            [elems(&op.a).max(1), elems(&op.b).max(1), elems(&c).max(1)],
            offset,
            tol,
        )
        .await;
    }
}

async fn references(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    run_cases::<f64>(&d, gpu, 1e-13).await;
    run_cases::<f32>(&d, gpu, 1e-5).await;
}

async fn halves(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let gpu = d.ready().await.unwrap().backend == BackendKind::Cuda;
    run_cases::<f16>(&d, gpu, 2e-3).await;
    run_cases::<bf16>(&d, gpu, 1.6e-2).await;
}

async fn errors(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let a = d
        .upload(rand_vec(12).iter().map(|&x| x as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let b = d
        .upload(rand_vec(12).iter().map(|&x| x as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let c = d.alloc::<f32>(16).await.unwrap();
    let invalid = |r: Result<(), GpuError>, what: &str| {
        assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    };
    // Three modes for a 2-D operand; sizes that disagree; a buffer too short.
    invalid(
        d.contract(Contraction::new("ijk,jk->i", &[3, 4], &[4, 3]), &a, &b, &c)
            .await,
        "rank",
    );
    invalid(
        d.contract(Contraction::new("ij,jk->ik", &[3, 4], &[3, 4]), &a, &b, &c)
            .await,
        "sizes",
    );
    invalid(
        d.contract(Contraction::new("ij,jk->ik", &[3, 5], &[5, 2]), &a, &b, &c)
            .await,
        "short A",
    );
    // Output modes that are not the operands', or twice; not two operands; not letters.
    for eq in ["ij,jk->iz", "ij,jk->ii", "ij->ij", "i1,1k->ik"] {
        invalid(d.contract(Contraction::new(eq, &[3, 4], &[4, 3]), &a, &b, &c).await, eq);
    }
    // An output whose elements share memory, and one overlapping an input.
    let shared =
        Contraction::new("ij,jk->ik", &[3, 4], &[4, 3]).output(TensorLayout::strided(&[3, 3], &[1, 1]).unwrap());
    invalid(d.contract(shared, &a, &b, &c).await, "self-overlapping C");
    invalid(
        d.contract(
            Contraction::new("ij,jk->ik", &[2, 2], &[2, 2]),
            &a,
            &b,
            &a.view(4..8).unwrap(),
        )
        .await,
        "C over A",
    );
    // Ellipses are not supported (yet): said, not mis-parsed.
    let r = d
        .contract(Contraction::new("...j,jk->...k", &[3, 4], &[4, 3]), &a, &b, &c)
        .await;
    assert!(matches!(r, Err(GpuError::Unsupported(_))), "{r:?}");
    // The device still serves.
    let ok = Contraction::new("ij,jk->ik", &[3, 4], &[4, 3]);
    d.contract(ok, &a, &b, &c.view(0..9).unwrap()).await.unwrap();
}

/// Every index of the modes `letters` of sizes `size`, each as a map mode → index.
fn every_index(letters: &[char], size: &BTreeMap<char, usize>) -> Vec<BTreeMap<char, usize>> {
    let total: usize = letters.iter().map(|m| size[m]).product();
    (0..total)
        .map(|mut flat| {
            let mut at = BTreeMap::new();
            for m in letters.iter().rev() {
                at.insert(*m, flat % size[m]);
                flat /= size[m];
            }
            at
        })
        .collect()
}

/// The offset of index `at` in an operand of modes `modes` laid out as `l`.
fn offset_of(modes: &str, l: &TensorLayout, at: &BTreeMap<char, usize>) -> usize {
    modes.chars().zip(&l.strides).map(|(m, s)| at[&m] * s).sum()
}

/// `op` of two floats, NaN winning max and min.
fn apply(op: TensorOp, x: f64, y: f64) -> f64 {
    match op {
        TensorOp::Add => x + y,
        TensorOp::Mul => x * y,
        _ if x.is_nan() || y.is_nan() => f64::NAN,
        TensorOp::Max => x.max(y),
        TensorOp::Min => x.min(y),
    }
}

fn same(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (w.abs() + 1.0),
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// An element-wise case: equation, A's shape, B's shape, op, alpha, beta, and whether
/// A lies strided inside a larger buffer.
type Case<'a> = (&'a str, &'a [usize], &'a [usize], TensorOp, f64, f64, bool);

async fn elementwise_of<T: TensorScalar + Float>(d: &Device, tol: f64) {
    let name = std::any::type_name::<T>();
    let cases: [Case<'_>; 6] = [
        ("ab,ba->ab", &[5, 7], &[7, 5], TensorOp::Add, 1.0, 1.0, false),
        ("abc,c->abc", &[3, 4, 6], &[6], TensorOp::Mul, 0.5, 2.0, false),
        ("ab,ab->ba", &[9, 4], &[9, 4], TensorOp::Max, 1.0, 1.0, false),
        (
            "abcd,dbca->cabd",
            &[2, 3, 4, 5],
            &[5, 3, 4, 2],
            TensorOp::Min,
            -1.0,
            1.5,
            false,
        ),
        ("ij,j->ji", &[6, 8], &[8], TensorOp::Add, 2.0, -3.0, true),
        ("ab,b->ab", &[1, 33], &[33], TensorOp::Max, 1.0, 1.0, false),
    ];
    for (eq, sa, sb, op, alpha, beta, strided) in cases {
        let la = if strided {
            // Every other column of a twice-as-wide matrix.
            TensorLayout::strided(sa, &[2 * sa[1], 2]).unwrap()
        } else {
            TensorLayout::row_major(sa)
        };
        let lb = TensorLayout::row_major(sb);
        let mut a: Vec<f64> = rand_vec(la.span()).iter().map(|&v| T::from_f64(v).to_f64()).collect();
        let b: Vec<f64> = rand_vec(lb.span()).iter().map(|&v| T::from_f64(v).to_f64()).collect();
        if matches!(op, TensorOp::Max | TensorOp::Min) {
            a[1] = f64::NAN;
        }
        let spec = Elementwise::new(eq, sa, sb)
            .layouts(la.clone(), lb.clone())
            .op(op)
            .scaled(alpha, beta);
        let (ins, out) = eq.split_once("->").unwrap();
        let (ma, mb) = ins.split_once(',').unwrap();
        let mut size = BTreeMap::new();
        for (m, sh) in [(ma, sa), (mb, sb)] {
            size.extend(m.chars().zip(sh.iter().copied()));
        }
        let mc: Vec<char> = out.chars().collect();
        let shape: Vec<usize> = mc.iter().map(|m| size[m]).collect();
        let lc = TensorLayout::row_major(&shape);
        let mut want = vec![0.0; lc.elements()];
        for at in every_index(&mc, &size) {
            let x = alpha * a[offset_of(ma, &la, &at)];
            let y = beta * b[offset_of(mb, &lb, &at)];
            want[offset_of(out, &lc, &at)] = apply(op, x, y);
        }
        let up = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
        let (ga, gb) = (d.upload(up(&a)).await.unwrap(), d.upload(up(&b)).await.unwrap());
        let gc = d.alloc::<T>(lc.elements()).await.unwrap();
        d.elementwise(spec, &ga, &gb, &gc).await.unwrap();
        let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|v| v.to_f64()).collect();
        same(&format!("elementwise {eq} {op:?} {name}"), &got, &want, tol);
    }
    // A + Aᵀ from one buffer: inputs may share memory.
    let a: Vec<f64> = rand_vec(16).iter().map(|&v| T::from_f64(v).to_f64()).collect();
    let ga = d
        .upload(a.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>())
        .await
        .unwrap();
    let gc = d.alloc::<T>(16).await.unwrap();
    d.elementwise(Elementwise::new("ab,ba->ab", &[4, 4], &[4, 4]), &ga, &ga, &gc)
        .await
        .unwrap();
    let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|v| v.to_f64()).collect();
    let want: Vec<f64> = (0..16).map(|i| a[i] + a[(i % 4) * 4 + i / 4]).collect();
    same(&format!("A + Aᵀ {name}"), &got, &want, tol);
}

async fn elementwise_ops(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    each_float!(elementwise_of(&d));
}

/// A trinary case: equation, the three input shapes, the two ops, alpha, beta, gamma.
type Trinary<'a> = (&'a str, [&'a [usize]; 3], [TensorOp; 2], [f64; 3]);

async fn trinary_of<T: TensorScalar + Float>(d: &Device, tol: f64) {
    let name = std::any::type_name::<T>();
    let cases: [Trinary<'_>; 6] = [
        (
            "ab,ba,b->ab",
            [&[5, 7], &[7, 5], &[7]],
            [TensorOp::Add, TensorOp::Mul],
            [1.0, 1.0, 1.0],
        ),
        (
            "abc,c,ab->cab",
            [&[3, 4, 6], &[6], &[3, 4]],
            [TensorOp::Mul, TensorOp::Add],
            [0.5, 2.0, -1.0],
        ),
        (
            "ij,ij,ij->ij",
            [&[9, 4], &[9, 4], &[9, 4]],
            [TensorOp::Max, TensorOp::Min],
            [1.0, 1.0, 1.0],
        ),
        (
            "abcd,dcba,bd->dbca",
            [&[2, 3, 4, 5], &[5, 4, 3, 2], &[3, 5]],
            [TensorOp::Min, TensorOp::Max],
            [-1.0, 1.5, 0.25],
        ),
        (
            "ij,j,i->ji",
            [&[6, 8], &[8], &[6]],
            [TensorOp::Add, TensorOp::Add],
            [2.0, -3.0, 0.5],
        ),
        (
            "a,a,a->a",
            [&[1000], &[1000], &[1000]],
            [TensorOp::Mul, TensorOp::Mul],
            [1.0, 1.0, 1.0],
        ),
    ];
    for (k, (eq, shapes, [op_ab, op_abc], [alpha, beta, gamma])) in cases.into_iter().enumerate() {
        let (ins, out) = eq.split_once("->").unwrap();
        let modes: Vec<&str> = ins.split(',').collect();
        // The first case reads C strided (every third element); the fifth writes D
        // strided, into every other element of a larger buffer it leaves alone elsewhere.
        let layouts: Vec<TensorLayout> = shapes
            .iter()
            .enumerate()
            .map(|(i, sh)| match (k, i) {
                (0, 2) => TensorLayout::strided(sh, &[3]).unwrap(),
                _ => TensorLayout::row_major(sh),
            })
            .collect();
        let values: Vec<Vec<f64>> = layouts
            .iter()
            .map(|l| rand_vec(l.span()).iter().map(|&v| T::from_f64(v).to_f64()).collect())
            .collect();
        let mut values = values;
        if matches!(op_ab, TensorOp::Max | TensorOp::Min) {
            values[0][1] = f64::NAN;
        }
        let mut size = BTreeMap::new();
        for (m, sh) in modes.iter().zip(shapes) {
            size.extend(m.chars().zip(sh.iter().copied()));
        }
        let mo: Vec<char> = out.chars().collect();
        let shape: Vec<usize> = mo.iter().map(|m| size[m]).collect();
        let ld = if k == 4 {
            let mut strides = TensorLayout::row_major(&shape).strides;
            strides.iter_mut().for_each(|s| *s *= 2);
            TensorLayout::strided(&shape, &strides).unwrap()
        } else {
            TensorLayout::row_major(&shape)
        };
        let d0: Vec<f64> = rand_vec(ld.span()).iter().map(|&v| T::from_f64(v).to_f64()).collect();
        let mut want = d0.clone();
        for at in every_index(&mo, &size) {
            let v = |i: usize| values[i][offset_of(modes[i], &layouts[i], &at)];
            let ab = apply(op_ab, alpha * v(0), beta * v(1));
            want[offset_of(out, &ld, &at)] = apply(op_abc, ab, gamma * v(2));
        }
        let spec = ElementwiseTrinary::new(eq, shapes[0], shapes[1], shapes[2])
            .layouts(layouts[0].clone(), layouts[1].clone(), layouts[2].clone())
            .output(ld.clone())
            .ops(op_ab, op_abc)
            .scaled(alpha, beta, gamma);
        let up = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
        let ga = d.upload(up(&values[0])).await.unwrap();
        let gb = d.upload(up(&values[1])).await.unwrap();
        let gc = d.upload(up(&values[2])).await.unwrap();
        let gd = d.upload(up(&d0)).await.unwrap();
        d.elementwise_trinary(spec, &ga, &gb, &gc, &gd).await.unwrap();
        let got: Vec<f64> = d.download(&gd).await.unwrap().iter().map(|v| v.to_f64()).collect();
        // Two roundings of the compute type, then one of T.
        same(
            &format!("elementwise_trinary {eq} {op_ab:?} {op_abc:?} {name}"),
            &got,
            &want,
            2.0 * tol,
        );
    }
}

async fn trinary_ops(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    each_float!(trinary_of(&d));
}

async fn reductions_of<T: TensorScalar + Float>(d: &Device, tol: f64) {
    let name = std::any::type_name::<T>();
    let cases: [(&str, &[usize], TensorOp, f64, f64); 6] = [
        ("abc->ac", &[4, 9, 5], TensorOp::Add, 1.0, 0.0),
        ("abc->ca", &[3, 6, 7], TensorOp::Max, 1.0, 0.0),
        ("ab->", &[13, 11], TensorOp::Add, 0.5, 0.0),
        ("abcd->db", &[2, 3, 4, 5], TensorOp::Min, 2.0, 0.0),
        ("ij->i", &[5, 6], TensorOp::Mul, 1.0, 0.0),
        ("ijk->ki", &[3, 4, 2], TensorOp::Add, 1.5, -0.5),
    ];
    for (eq, sa, op, alpha, beta) in cases {
        let la = TensorLayout::row_major(sa);
        let mut a: Vec<f64> = rand_vec(la.elements())
            .iter()
            .map(|&v| T::from_f64(v + 0.2).to_f64())
            .collect();
        if matches!(op, TensorOp::Max | TensorOp::Min) {
            a[2] = f64::NAN;
        }
        let (ma, out) = eq.split_once("->").unwrap();
        let size: BTreeMap<char, usize> = ma.chars().zip(sa.iter().copied()).collect();
        let mc: Vec<char> = out.chars().collect();
        let shape: Vec<usize> = mc.iter().map(|m| size[m]).collect();
        let lc = TensorLayout::row_major(&shape);
        let c0: Vec<f64> = rand_vec(lc.elements())
            .iter()
            .map(|&v| T::from_f64(v).to_f64())
            .collect();
        let identity = match op {
            TensorOp::Add => 0.0,
            TensorOp::Mul => 1.0,
            TensorOp::Max => f64::NEG_INFINITY,
            TensorOp::Min => f64::INFINITY,
        };
        let mut acc = vec![identity; lc.elements()];
        let letters: Vec<char> = ma.chars().collect();
        for at in every_index(&letters, &size) {
            let o = offset_of(out, &lc, &at);
            acc[o] = apply(op, acc[o], a[offset_of(ma, &la, &at)]);
        }
        let want: Vec<f64> = acc.iter().zip(&c0).map(|(s, c)| alpha * s + beta * c).collect();
        let up = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
        let (ga, gc) = (d.upload(up(&a)).await.unwrap(), d.upload(up(&c0)).await.unwrap());
        let spec = TensorReduction::new(eq, sa).op(op).scaled(alpha, beta);
        d.reduce_modes(spec, &ga, &gc).await.unwrap();
        let got: Vec<f64> = d.download(&gc).await.unwrap().iter().map(|v| v.to_f64()).collect();
        // A sum of n rounded terms: n roundings of the running sum at most.
        let n = (la.elements() / lc.elements().max(1)) as f64;
        same(&format!("reduce_modes {eq} {op:?} {name}"), &got, &want, tol * n);
    }
}

async fn mode_reductions(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    each_float!(reductions_of(&d));
}

async fn mode_errors(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let x = d
        .upload(rand_vec(64).iter().map(|&v| v as f32).collect::<Vec<_>>())
        .await
        .unwrap();
    let y = d.alloc::<f32>(64).await.unwrap();
    let invalid = |r: Result<(), GpuError>, what: &str| {
        assert!(matches!(r, Err(GpuError::InvalidArgument(_))), "{what}: {r:?}");
    };
    let ew = |eq: &str, a: &[usize], b: &[usize]| Elementwise::new(eq, a, b);
    invalid(
        d.elementwise(ew("ab,bc->ac", &[4, 4], &[4, 4]), &x, &x, &y).await,
        "a mode reduced",
    );
    invalid(
        d.elementwise(ew("ab,ba", &[4, 4], &[4, 4]), &x, &x, &y).await,
        "no output",
    );
    invalid(
        d.elementwise(ew("ab->ab", &[4, 4], &[4, 4]), &x, &x, &y).await,
        "one operand",
    );
    invalid(
        d.elementwise(ew("ab,ba->ab", &[4, 4], &[5, 4]), &x, &x, &y).await,
        "sizes disagree",
    );
    invalid(
        d.elementwise(ew("aa,a->a", &[4, 4], &[4]), &x, &x, &y).await,
        "a diagonal",
    );
    invalid(
        d.elementwise(ew("ab,ba->ab", &[8, 8], &[8, 8]), &x, &x, &x.view(..).unwrap())
            .await,
        "C is A",
    );
    invalid(
        d.elementwise(ew("ab,ba->ab", &[9, 9], &[9, 9]), &x, &x, &y).await,
        "A too short",
    );
    invalid(
        d.reduce_modes(TensorReduction::new("ab->c", &[4, 4]), &x, &y).await,
        "output mode in no input",
    );
    invalid(
        d.reduce_modes(TensorReduction::new("ab,b->a", &[4, 4]), &x, &y).await,
        "two operands",
    );
    invalid(
        d.reduce_modes(TensorReduction::new("ab->aa", &[4, 4]), &x, &y).await,
        "an output mode twice",
    );
    invalid(
        d.reduce_modes(TensorReduction::new("ab->a", &[4, 4]), &x, &x.view(60..).unwrap())
            .await,
        "C overlaps A",
    );
    let tri = |eq: &str, c: &[usize]| ElementwiseTrinary::new(eq, &[4, 4], &[4, 4], c);
    invalid(
        d.elementwise_trinary(tri("ab,ba->ab", &[4]), &x, &x, &x, &y).await,
        "two operands",
    );
    invalid(
        d.elementwise_trinary(tri("ab,ba,c->ab", &[4]), &x, &x, &x, &y).await,
        "C's mode reduced",
    );
    invalid(
        d.elementwise_trinary(tri("ab,ba,b->ab", &[5]), &x, &x, &x, &y).await,
        "sizes disagree",
    );
    let (c, dd) = (y.view(12..16).unwrap(), y.view(0..16).unwrap());
    invalid(
        d.elementwise_trinary(tri("ab,ba,b->ab", &[4]), &x, &x, &c, &dd).await,
        "D overlaps C",
    );
    let wide = TensorLayout::strided(&[4, 4], &[32, 2]).unwrap();
    let row = TensorLayout::row_major(&[4, 4]);
    let long = ElementwiseTrinary::new("ab,ba,ab->ab", &[4, 4], &[4, 4], &[4, 4]).layouts(row.clone(), row, wide);
    invalid(d.elementwise_trinary(long, &x, &x, &x, &y).await, "C too short");
    let bad_d = tri("ab,ba,b->ab", &[4]).output(TensorLayout::row_major(&[4, 5]));
    invalid(
        d.elementwise_trinary(bad_d, &x, &x, &x, &y).await,
        "D's layout of the wrong shape",
    );
    // The device still serves.
    d.elementwise_trinary(tri("ab,ba,b->ab", &[4]), &x, &x, &x, &y)
        .await
        .unwrap();
    d.reduce_modes(TensorReduction::new("ab->a", &[8, 8]), &x, &y)
        .await
        .unwrap();
}
