//! Views (`GpuRef::view`, `GpuRef::columns`): windows of a buffer that every operation
//! takes like any buffer — copies, BLAS on panels and sub-blocks (with the parent's
//! leading dimension), FFT on a batch slice, solvers, RNG fills, `#[kernel]` launches,
//! graphs — touching only their elements (the rest of the buffer is checked unchanged),
//! against float64 references on fresh random data. Disjoint views of one buffer may be
//! an operation's output and input (a `#[kernel]` launch's too, read views overlapping
//! each other); an output overlapping an input, a bad range, a stale view are typed
//! errors. On the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::dtype::c64;
use atomr_accel_cuda::kernel;
use atomr_accel_cuda::prelude::*;
use atomr_accel_cuda::testing::TestHooks;
use common::{gemm_ref, rand_vec, rel_err, spd};

on_both! {
    views_window_their_buffer => windows;
    blas_runs_on_panels_and_blocks_of_one_buffer => blas;
    fft_solvers_rng_and_kernels_take_views => others;
    overlapping_operands_and_bad_ranges_are_typed_errors => overlaps;
    graphs_capture_views => graphs;
    kernels_take_several_views_of_one_buffer => kernels_on_one_buffer;
    solvers_take_panels_of_one_buffer => solvers_on_one_buffer;
    panels_and_split_at_carve_a_window => carving;
}

/// y = a·x + y over the view lengths.
#[kernel]
pub fn view_axpy<T: Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// z = x + y over z's length.
#[kernel]
pub fn view_add<T: Float>(x: &[T], y: &[T], z: &mut [T]) {
    let i = global_index();
    if i < z.len() {
        z[i] = x[i] + y[i];
    }
}

/// y = 2·x, four elements per thread (vector loads and stores).
#[kernel]
pub fn view_double4<T: Float>(x: &[T], y: &mut [T]) {
    let i = global_index();
    if i < y.len() / 4 {
        let v: Vec4<T> = x.load4(i);
        y.store4(i, v * (T::one() + T::one()));
    }
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("views");
    let d = Device::open(&sys, config).await.unwrap();
    (sys, d)
}

fn invalid<T: std::fmt::Debug>(r: Result<T, GpuError>, what: &str, needle: &str) {
    match r {
        Err(GpuError::InvalidArgument(m)) => assert!(m.contains(needle), "{what}: {m}"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// Windows, views of views, columns; writes and copies through views touch only their
/// elements; a view outlives the handle it came from.
async fn windows(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let n = 1000;
    let data = rand_vec(n);
    let buf = d.upload(data.clone()).await.unwrap();
    let v = buf.view(100..400).unwrap();
    assert_eq!((v.len(), v.offset(), v.buffer_len(), v.is_view()), (300, 100, n, true));
    assert!(v.same_buffer(&buf) && v.overlaps(&buf));
    let vv = v.view(50..=59).unwrap();
    assert_eq!((vv.len(), vv.offset()), (10, 150));
    assert!(!vv.overlaps(&buf.view(160..).unwrap()));
    assert_eq!(d.download(&vv).await.unwrap(), data[150..160]);
    assert!(!buf.view(..).unwrap().is_view());

    // A write through a view changes its window only.
    let fresh = rand_vec(300);
    d.write(&v, fresh.clone()).await.unwrap();
    let mut want = data.clone();
    want[100..400].copy_from_slice(&fresh);
    assert_eq!(d.download(&buf).await.unwrap(), want);
    let mut part = vec![0.0; 300];
    d.download_into(&v, &mut part).await.unwrap();
    assert_eq!(part, fresh);
    d.write_slice(&buf.view(900..).unwrap(), &fresh[..100]).await.unwrap();
    want[900..].copy_from_slice(&fresh[..100]);

    // Copies: between views of one buffer (disjoint), and into another buffer's view.
    d.copy(&buf.view(0..100).unwrap(), &buf.view(500..600).unwrap())
        .await
        .unwrap();
    want.copy_within(0..100, 500);
    let other = d.upload(rand_vec(200)).await.unwrap();
    let mut other_want = d.download(&other).await.unwrap();
    d.copy(&buf.view(700..750).unwrap(), &other.view(150..).unwrap())
        .await
        .unwrap();
    other_want[150..].copy_from_slice(&want[700..750]);
    assert_eq!(d.download(&buf).await.unwrap(), want);
    assert_eq!(d.download(&other).await.unwrap(), other_want);

    // Columns of a column-major 10×100 matrix: columns 3..7 are elements 30..70.
    let cols = buf.columns(10, 3..7).unwrap();
    assert_eq!((cols.offset(), cols.len()), (30, 40));
    assert_eq!(d.download(&cols).await.unwrap(), want[30..70]);

    // The view keeps the buffer alive after the parent handle is dropped.
    let tail = buf.view(990..).unwrap();
    drop(buf);
    assert_eq!(d.download(&tail).await.unwrap(), want[990..]);

    // Stale after a rebuild, like its buffer.
    d.rebuild().await.unwrap();
    assert!(matches!(d.download(&tail).await, Err(GpuError::Stale { .. })));
}

/// GEMM on blocks of one matrix with the parent's leading dimension — C = A·B where A, B
/// and C are disjoint panels of a single buffer — GEMV on a sub-block, and level-1 BLAS
/// between the halves of one vector.
async fn blas(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    // One column-major ld×cols buffer: A = rows 0..m of columns 0..k, B = rows 0..k of
    // columns k..k+n, C = rows 0..m of columns k+n..k+2n: disjoint column panels, each
    // addressed from its first element with lda = ldb = ldc = ld.
    let (m, n, k, ld) = (37, 29, 41, 50);
    let cols = k + 2 * n;
    let all = rand_vec(ld * cols);
    let buf = d.upload(all.clone()).await.unwrap();
    let a = buf.view(0..(k - 1) * ld + m).unwrap();
    let b = buf.view(k * ld..(k + n - 1) * ld + k).unwrap();
    let c = buf.view((k + n) * ld..(k + 2 * n - 1) * ld + m).unwrap();
    let g = Gemm::<f64>::new(m, n, k).leading(ld, ld, ld).scaled(0.5, 2.0);
    d.gemm(g, &a, &b, &c).await.unwrap();
    let mut want = all.clone();
    let mut cw = all[(k + n) * ld..].to_vec();
    gemm_ref(
        false,
        false,
        m,
        n,
        k,
        0.5,
        &all,
        ld,
        &all[k * ld..],
        ld,
        2.0,
        &mut cw,
        ld,
    );
    for j in 0..n {
        for i in 0..m {
            want[(k + n + j) * ld + i] = cw[j * ld + i];
        }
    }
    let got = d.download(&buf).await.unwrap();
    assert!(
        rel_err(&got, &want) < 1e-13,
        "gemm on panels: {:e}",
        rel_err(&got, &want)
    );
    // Rows m..ld of C's columns (padding) and A, B untouched.
    for j in 0..n {
        for i in m..ld {
            let at = (k + n + j) * ld + i;
            assert_eq!(got[at], all[at], "padding of C at {at}");
        }
    }

    // GEMV: y (a view of another buffer) = A_block · x (a view of the same big buffer).
    let x = buf.view(ld * (cols - 1)..ld * (cols - 1) + k).unwrap();
    let ys = d.upload(rand_vec(m + 20)).await.unwrap();
    let y = ys.view(10..10 + m).unwrap();
    let ys_before = d.download(&ys).await.unwrap();
    d.gemv(Gemv::<f64>::new(m, k).leading(ld), &a, &x, &y).await.unwrap();
    let xs = &got[ld * (cols - 1)..ld * (cols - 1) + k];
    let ygot = d.download(&ys).await.unwrap();
    for i in 0..m {
        let want: f64 = (0..k).map(|p| got[i + p * ld] * xs[p]).sum();
        assert!(
            (ygot[10 + i] - want).abs() < 1e-12 * want.abs().max(1.0),
            "gemv row {i}"
        );
    }
    assert_eq!(ygot[..10], ys_before[..10]);
    assert_eq!(ygot[10 + m..], ys_before[10 + m..]);

    // GEMV with strides: x a row of another column-major matrix (stride its leading
    // dimension), y every other element of a vector.
    let (ld2, cols2, row) = (7, k, 4);
    let mat = rand_vec(ld2 * cols2);
    let gm = d.upload(mat.clone()).await.unwrap();
    let xrow = gm.view(row..).unwrap();
    let ystrided = d.upload(rand_vec(2 * m)).await.unwrap();
    let y0 = d.download(&ystrided).await.unwrap();
    let g = Gemv::<f64>::new(m, k).leading(ld).strides(ld2, 2).scaled(1.5, -1.0);
    d.gemv(g, &a, &xrow, &ystrided).await.unwrap();
    let yg = d.download(&ystrided).await.unwrap();
    for i in 0..m {
        let ax: f64 = (0..k).map(|p| got[i + p * ld] * mat[row + p * ld2]).sum();
        let want = 1.5 * ax - y0[2 * i];
        assert!(
            (yg[2 * i] - want).abs() < 1e-12 * want.abs().max(1.0),
            "strided gemv row {i}"
        );
        assert_eq!(yg[2 * i + 1], y0[2 * i + 1], "between y's entries");
    }
    // A stride reaching past the buffer, and a zero stride, are refused.
    let short = gm.view(ld2 * (cols2 - 1)..).unwrap();
    invalid(
        d.gemv(g, &a, &short, &ystrided).await,
        "x stride past the view",
        "x needs",
    );
    invalid(d.gemv(g.strides(0, 1), &a, &xrow, &ystrided).await, "zero incx", "incx");

    // Level 1 between the two halves of one vector.
    let h = 501;
    let vals = rand_vec(2 * h + 3);
    let v = d.upload(vals.clone()).await.unwrap();
    let (lo, hi) = (v.view(0..h).unwrap(), v.view(h..2 * h).unwrap());
    let dot = d.dot(&lo, &hi).await.unwrap();
    let want: f64 = (0..h).map(|i| vals[i] * vals[h + i]).sum();
    assert!((dot - want).abs() < 1e-12 * want.abs().max(1.0), "dot {dot} vs {want}");
    let self_dot = d.dot(&lo, &v.view(0..h).unwrap()).await.unwrap();
    let want_sq: f64 = vals[..h].iter().map(|x| x * x).sum();
    assert!(
        (self_dot - want_sq).abs() < 1e-12 * want_sq,
        "dot of a view with itself"
    );
    let nrm = d.nrm2(&hi).await.unwrap();
    let want_nrm = vals[h..2 * h].iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((nrm - want_nrm).abs() < 1e-12 * want_nrm, "nrm2 of a view");
    let amax = d.iamax(&hi).await.unwrap();
    let best = (0..h).fold(0, |b, i| if vals[h + i].abs() > vals[h + b].abs() { i } else { b });
    assert_eq!(amax, best, "iamax of a view");
    d.axpy(-2.0, &lo, &hi).await.unwrap();
    d.scal(3.0, &v.view(2 * h..).unwrap()).await.unwrap();
    let mut want = vals.clone();
    for i in 0..h {
        want[h + i] -= 2.0 * vals[i];
    }
    for w in &mut want[2 * h..] {
        *w *= 3.0;
    }
    let got = d.download(&v).await.unwrap();
    assert!(rel_err(&got, &want) < 1e-14, "axpy/scal on views");
    assert_eq!(got[..h], vals[..h]);
}

/// An FFT of a batch slice, a Cholesky factorization and an LU solve of matrices
/// inside larger buffers, a uniform fill of a window, and a `#[kernel]` on views.
async fn others(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    // FFT: transform batches 1..3 of a 4-batch signal into the middle of another buffer.
    let len = 64;
    let re = rand_vec(4 * len);
    let im = rand_vec(4 * len);
    let signal: Vec<c64> = re.iter().zip(&im).map(|(&r, &i)| c64::new(r, i)).collect();
    let input = d.upload(signal.clone()).await.unwrap();
    let output = d.upload(vec![c64::new(7.0, 7.0); 4 * len]).await.unwrap();
    let (src, dst) = (input.view(len..3 * len).unwrap(), output.view(len..3 * len).unwrap());
    d.fft_c2c(&src, &dst, &FftShape::new(&[len], 2), false).await.unwrap();
    let got = d.download(&output).await.unwrap();
    for b in 1..3 {
        for f in 0..len {
            let mut acc = (0.0, 0.0);
            for t in 0..len {
                let x = signal[b * len + t];
                let w = -2.0 * std::f64::consts::PI * (f * t) as f64 / len as f64;
                acc.0 += x.re * w.cos() - x.im * w.sin();
                acc.1 += x.re * w.sin() + x.im * w.cos();
            }
            let g = got[b * len + f];
            assert!(
                (g.re - acc.0).abs() < 1e-9 && (g.im - acc.1).abs() < 1e-9,
                "fft batch {b} bin {f}"
            );
        }
    }
    assert!(got[..len]
        .iter()
        .chain(&got[3 * len..])
        .all(|z| *z == c64::new(7.0, 7.0)));
    // In place on one view.
    d.fft_c2c(&dst, &dst, &FftShape::new(&[len], 2), true).await.unwrap();
    let back = d.download(&dst).await.unwrap();
    for (i, z) in back.iter().enumerate() {
        let x = signal[len + i];
        assert!((z.re / len as f64 - x.re).abs() < 1e-10 && (z.im / len as f64 - x.im).abs() < 1e-10);
    }

    // Cholesky of the second of two SPD matrices stored back to back.
    let n = 24;
    let (s0, s1) = (spd(n), spd(n));
    let both: Vec<f64> = s0.iter().chain(&s1).copied().collect();
    let pair = d.upload(both).await.unwrap();
    let second = pair.view(n * n..).unwrap();
    d.cholesky(&second, n).await.unwrap();
    let f = d.download(&pair).await.unwrap();
    assert_eq!(f[..n * n], s0[..], "the first matrix is untouched");
    let l = &f[n * n..];
    for i in 0..n {
        for j in 0..=i {
            let want = s1[i + j * n];
            let got: f64 = (0..=j).map(|p| l[i + p * n] * l[j + p * n]).sum();
            assert!((got - want).abs() < 1e-9 * want.abs().max(1.0), "L·Lᵀ at ({i},{j})");
        }
    }
    // LU of a matrix at an offset, solving a right-hand side that is a view of another
    // buffer (views of one buffer: `solvers_on_one_buffer`).
    let a = rand_vec(n * n);
    let rhs = rand_vec(n);
    let mut packed = rand_vec(5);
    packed.extend(&a);
    let p = d.upload(packed.clone()).await.unwrap();
    let av = p.view(5..).unwrap();
    let mut rhs_packed = rand_vec(3);
    rhs_packed.extend(&rhs);
    let bs = d.upload(rhs_packed.clone()).await.unwrap();
    let bv = bs.view(3..).unwrap();
    let piv = d.lu_factor(&av, n).await.unwrap();
    d.lu_solve(&av, &piv, &bv, n, 1).await.unwrap();
    let x = d.download(&bv).await.unwrap();
    for i in 0..n {
        let ax: f64 = (0..n).map(|j| a[i + j * n] * x[j]).sum();
        assert!((ax - rhs[i]).abs() < 1e-9 * rhs[i].abs().max(1.0), "A·x row {i}");
    }
    assert_eq!(d.download(&p.view(..5).unwrap()).await.unwrap(), packed[..5]);
    assert_eq!(d.download(&bs.view(..3).unwrap()).await.unwrap(), rhs_packed[..3]);
    invalid(
        d.lu_solve(&av, &piv, &p.view(4..6).unwrap(), 1, 1).await,
        "a solver given overlapping views of one buffer",
        "overlapping views of one buffer",
    );

    // A uniform fill of a window.
    let u = d.upload(vec![-1.0f32; 1000]).await.unwrap();
    d.fill_uniform(&u.view(200..800).unwrap()).await.unwrap();
    let got = d.download(&u).await.unwrap();
    assert!(got[..200].iter().chain(&got[800..]).all(|&x| x == -1.0));
    assert!(got[200..800].iter().all(|&x| x > 0.0 && x <= 1.0));
    let mean = got[200..800].iter().map(|&x| x as f64).sum::<f64>() / 600.0;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");

    // A kernel on views of two buffers.
    let xs = rand_vec(300);
    let ys = rand_vec(300);
    let gx = d.upload(xs.clone()).await.unwrap();
    let gy = d.upload(ys.clone()).await.unwrap();
    let mut yv = gy.view(100..250).unwrap();
    view_axpy::launch(
        &d,
        LaunchConfig::for_elements(150, 64),
        2.0,
        &gx.view(..150).unwrap(),
        &mut yv,
    )
    .await
    .unwrap();
    let got = d.download(&gy).await.unwrap();
    for i in 0..300 {
        let want = if (100..250).contains(&i) {
            2.0 * xs[i - 100] + ys[i]
        } else {
            ys[i]
        };
        assert!((got[i] - want).abs() < 1e-12, "kernel on views at {i}");
    }
}

/// An output overlapping an input and bad ranges are typed errors (an FFT between two
/// disjoint views of one buffer works); the device serves afterwards.
async fn overlaps(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let buf = d.upload(rand_vec(400)).await.unwrap();
    invalid(buf.view(10..10), "empty", "non-empty range");
    invalid(buf.view(300..401), "past the end", "within 0..400");
    invalid(
        buf.view(100..200).unwrap().view(50..101),
        "past a view's end",
        "within 0..100",
    );
    invalid(buf.columns(7, 0..2), "rows not dividing", "must divide");
    invalid(
        d.copy(&buf.view(0..100).unwrap(), &buf.view(50..150).unwrap()).await,
        "overlapping copy",
        "overlaps",
    );
    invalid(
        d.gemm(
            Gemm::<f64>::new(10, 10, 10),
            &buf.view(0..100).unwrap(),
            &buf.view(100..200).unwrap(),
            &buf.view(150..250).unwrap(),
        )
        .await,
        "C overlapping B",
        "must not overlap",
    );
    invalid(
        d.axpy(1.0, &buf.view(0..100).unwrap(), &buf.view(99..199).unwrap())
            .await,
        "axpy y overlapping x",
        "overlaps",
    );
    let mut y = buf.view(50..150).unwrap();
    invalid(
        view_axpy::launch(
            &d,
            LaunchConfig::for_elements(100, 64),
            1.0,
            &buf.view(..100).unwrap(),
            &mut y,
        )
        .await,
        "a kernel writing a view that overlaps its input",
        "`x` (elements 0..100) and `y` (elements 50..150) are overlapping windows of the same buffer, and the \
         kernel writes `y`",
    );
    // Vector access needs a view aligned for the vector: refused, not a misaligned load.
    let mut out = d.alloc::<f64>(200).await.unwrap();
    let cfg = LaunchConfig::for_elements(50, 64);
    invalid(
        view_double4::launch(&d, cfg, &buf.view(1..201).unwrap(), &mut out).await,
        "a view misaligned for load4",
        "vectors of 4",
    );
    let mut out_view = out.view(2..).unwrap();
    invalid(
        view_double4::launch(&d, cfg, &buf.view(..198).unwrap(), &mut out_view).await,
        "an output view misaligned for store4",
        "vectors of 4",
    );
    view_double4::launch(&d, cfg, &buf.view(4..204).unwrap(), &mut out)
        .await
        .unwrap();
    let (src, got) = (d.download(&buf).await.unwrap(), d.download(&out).await.unwrap());
    for i in 0..200 {
        assert_eq!(got[i], 2.0 * src[4 + i], "an aligned view read as vectors, at {i}");
    }
    // An FFT between two disjoint views of one buffer is out of place; overlapping ones
    // are refused.
    let signal: Vec<c64> = rand_vec(256).chunks(2).map(|p| c64::new(p[0], p[1])).collect();
    let z = d.upload(signal.clone()).await.unwrap();
    let shape = FftShape::new(&[40], 1);
    d.fft_c2c(&z.view(..40).unwrap(), &z.view(64..104).unwrap(), &shape, false)
        .await
        .unwrap();
    let got = d.download(&z).await.unwrap();
    assert_eq!(got[..64], signal[..64], "the input and the gap untouched");
    assert_eq!(got[104..], signal[104..], "past the output untouched");
    for (k, g) in got[64..104].iter().enumerate() {
        // The forward DFT, unnormalised, in float64.
        let (mut re, mut im) = (0.0, 0.0);
        for (j, x) in signal[..40].iter().enumerate() {
            let a = -2.0 * std::f64::consts::PI * (j * k) as f64 / 40.0;
            re += x.re * a.cos() - x.im * a.sin();
            im += x.re * a.sin() + x.im * a.cos();
        }
        let err = ((g.re - re).powi(2) + (g.im - im).powi(2)).sqrt();
        assert!(err < 1e-9 * (1.0 + re.hypot(im)), "bin {k}: {g:?} vs ({re}, {im})");
    }
    invalid(
        d.fft_c2c(&z.view(..40).unwrap(), &z.view(20..60).unwrap(), &shape, false)
            .await,
        "an FFT between overlapping views",
        "overlapping views",
    );
    // Still serving, and nothing was written.
    let before = d.download(&buf).await.unwrap();
    d.axpy(1.0, &buf.view(0..100).unwrap(), &buf.view(100..200).unwrap())
        .await
        .unwrap();
    let after = d.download(&buf).await.unwrap();
    for i in 0..100 {
        assert_eq!(after[100 + i], before[100 + i] + before[i]);
    }
}

/// A graph copying between views of one buffer and multiplying blocks of it, replayed.
async fn graphs(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let n = 16;
    let all = rand_vec(4 * n * n);
    let buf = d.upload(all.clone()).await.unwrap();
    let [a, b, c, cc] = [0, 1, 2, 3].map(|i| buf.view(i * n * n..(i + 1) * n * n).unwrap());
    let graph = d
        .capture_graph(
            GraphBuilder::new()
                .gemm(Gemm::<f64>::new(n, n, n), &a, &b, &c)
                .copy(&c, &cc),
        )
        .await
        .unwrap();
    d.replay(&graph, 2).await.unwrap();
    let mut want = vec![0.0; n * n];
    gemm_ref(false, false, n, n, n, 1.0, &all, n, &all[n * n..], n, 0.0, &mut want, n);
    let got = d.download(&buf).await.unwrap();
    assert_eq!(got[..2 * n * n], all[..2 * n * n]);
    assert!(
        rel_err(&got[2 * n * n..3 * n * n], &want) < 1e-13,
        "graph gemm on views"
    );
    assert_eq!(got[2 * n * n..3 * n * n], got[3 * n * n..]);
}

/// One `#[kernel]` launch over several views of one buffer: an output beside its input,
/// inputs overlapping each other, the whole buffer written in halves — direct, in a
/// graph, replayed — each against float64 on fresh data, the elements outside the
/// windows unchanged.
async fn kernels_on_one_buffer(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let all = rand_vec(1000);
    let buf = d.upload(all.clone()).await.unwrap();
    // y = 3·x + y with x and y two halves of one buffer's first 300 elements.
    let mut y = buf.view(150..300).unwrap();
    view_axpy::launch(
        &d,
        LaunchConfig::for_elements(150, 64),
        3.0,
        &buf.view(..150).unwrap(),
        &mut y,
    )
    .await
    .unwrap();
    let mut want = all.clone();
    for i in 0..150 {
        want[150 + i] += 3.0 * want[i];
    }
    // (On a GPU a·x + y may be one fused multiply-add: equal within a rounding.)
    let got = d.download(&buf).await.unwrap();
    assert!(rel_err(&got, &want) < 1e-15, "axpy between views of one buffer");
    assert_eq!(got[..150], want[..150]);
    assert_eq!(got[300..], want[300..]);
    want = got;
    // z = x + y where x and y overlap (both read) and z lies after them.
    let mut z = buf.view(500..700).unwrap();
    view_add::launch(
        &d,
        LaunchConfig::for_elements(200, 64),
        &buf.view(100..300).unwrap(),
        &buf.view(200..400).unwrap(),
        &mut z,
    )
    .await
    .unwrap();
    for i in 0..200 {
        want[500 + i] = want[100 + i] + want[200 + i];
    }
    assert_eq!(d.download(&buf).await.unwrap(), want, "overlapping inputs, one output");
    // One view as both inputs.
    let x = buf.view(..100).unwrap();
    let mut z = buf.view(900..).unwrap();
    view_add::launch(&d, LaunchConfig::for_elements(100, 32), &x, &x, &mut z)
        .await
        .unwrap();
    for i in 0..100 {
        want[900 + i] = 2.0 * want[i];
    }
    assert_eq!(d.download(&buf).await.unwrap(), want, "one view passed twice to read");
    // The same in a graph, replayed twice: the output reads back into the next replay.
    let cfg = LaunchConfig::for_elements(100, 64);
    let mut out = buf.view(700..800).unwrap();
    let graph = d
        .capture_graph(GraphBuilder::new().kernel(view_axpy::call::<f64>(
            cfg,
            0.5,
            &buf.view(800..900).unwrap(),
            &mut out,
        )))
        .await
        .unwrap();
    d.replay(&graph, 2).await.unwrap();
    for _ in 0..2 {
        for i in 0..100 {
            want[700 + i] += 0.5 * want[800 + i];
        }
    }
    let got = d.download(&buf).await.unwrap();
    assert!(
        rel_err(&got[700..800], &want[700..800]) < 1e-15,
        "graph of a kernel on views of one buffer"
    );
    assert_eq!(got[..700], want[..700]);
    assert_eq!(got[800..], want[800..]);
    // A graph whose kernel writes over its own input: refused when captured.
    let mut bad = buf.view(850..950).unwrap();
    invalid(
        d.capture_graph(GraphBuilder::new().kernel(view_axpy::call::<f64>(
            cfg,
            0.5,
            &buf.view(800..900).unwrap(),
            &mut bad,
        )))
        .await,
        "a graph kernel writing over its input",
        "overlapping windows",
    );
}

/// Panels of one workspace buffer, a few guard elements apart: `take(len)` hands out the
/// next panel (filled with `data`), `check_guards` that nothing between them changed.
struct Workspace {
    host: Vec<f64>,
    panels: Vec<std::ops::Range<usize>>,
}

const GUARD: usize = 3;

impl Workspace {
    fn new() -> Self {
        Workspace {
            host: rand_vec(GUARD),
            panels: Vec::new(),
        }
    }

    /// The next panel's range, holding `data`, then guards.
    fn put(&mut self, data: &[f64]) -> std::ops::Range<usize> {
        let at = self.host.len();
        self.host.extend(data);
        self.host.extend(rand_vec(GUARD));
        self.panels.push(at..at + data.len());
        at..at + data.len()
    }

    /// The guard elements of `got` (the whole buffer downloaded) are as uploaded.
    fn check_guards(&self, got: &[f64], what: &str) {
        for (i, (g, h)) in got.iter().zip(&self.host).enumerate() {
            if !self.panels.iter().any(|p| p.contains(&i)) {
                assert_eq!(g, h, "{what}: guard element {i} changed");
            }
        }
    }
}

/// Column-major m×k · k×n.
fn matmul(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for j in 0..n {
        for p in 0..k {
            for i in 0..m {
                c[i + j * m] += a[i + p * m] * b[p + j * k];
            }
        }
    }
    c
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * scale, "{what} at {i}: {g} vs {w}");
    }
}

/// Every solver routine with all its floating-point operands as panels of one buffer —
/// LU and Cholesky solves, QR, SVD (vectors and values only), eigh, and the batched
/// factorizations and solves — against float64 references and the same calls on
/// separate buffers; the guards between the panels untouched; overlapping panels are
/// typed errors.
async fn solvers_on_one_buffer(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let (n, nrhs, m) = (12, 2, 16);

    // LU factor and solve, A and B panels of one buffer.
    let a = rand_vec(n * n);
    let b = rand_vec(n * nrhs);
    let mut ws = Workspace::new();
    let (ra, rb) = (ws.put(&a), ws.put(&b));
    let g = d.upload(ws.host.clone()).await.unwrap();
    let (av, bv) = (g.view(ra.clone()).unwrap(), g.view(rb.clone()).unwrap());
    let piv = d.lu_factor(&av, n).await.unwrap();
    d.lu_solve(&av, &piv, &bv, n, nrhs).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "lu");
    close(&matmul(&a, &got[rb.clone()], (n, n, nrhs)), &b, 1e-9, "A·X = B (LU)");
    let (a2, b2) = (d.upload(a.clone()).await.unwrap(), d.upload(b.clone()).await.unwrap());
    let piv2 = d.lu_factor(&a2, n).await.unwrap();
    d.lu_solve(&a2, &piv2, &b2, n, nrhs).await.unwrap();
    close(
        &got[rb],
        &d.download(&b2).await.unwrap(),
        1e-12,
        "X on panels vs separate buffers",
    );
    invalid(
        d.lu_solve(&av, &piv, &g.view(ra.end - 1..ra.end + n * nrhs).unwrap(), n, nrhs)
            .await,
        "B overlapping the LU factors",
        "overlapping views of one buffer",
    );

    // Cholesky factor and solve.
    let spd_a = spd(n);
    let mut ws = Workspace::new();
    let (rl, rb) = (ws.put(&spd_a), ws.put(&b));
    let g = d.upload(ws.host.clone()).await.unwrap();
    let (lv, bv) = (g.view(rl).unwrap(), g.view(rb.clone()).unwrap());
    d.cholesky(&lv, n).await.unwrap();
    d.cholesky_solve(&lv, &bv, n, nrhs).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "cholesky");
    close(&matmul(&spd_a, &got[rb], (n, n, nrhs)), &b, 1e-9, "A·X = B (Cholesky)");

    // QR: A, Q and R in one buffer.
    let a = rand_vec(m * n);
    let mut ws = Workspace::new();
    let (ra, rq, rr) = (ws.put(&a), ws.put(&rand_vec(m * n)), ws.put(&rand_vec(n * n)));
    let g = d.upload(ws.host.clone()).await.unwrap();
    let [av, qv, rv] = [&ra, &rq, &rr].map(|r| g.view(r.clone()).unwrap());
    d.qr_into(&av, &qv, &rv, m, n).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "qr");
    assert_eq!(got[ra.clone()], a[..], "qr leaves A intact");
    close(
        &matmul(&got[rq.clone()], &got[rr.clone()], (m, n, n)),
        &a,
        1e-10,
        "Q·R = A",
    );
    let (q2, r2) = d.qr(&d.upload(a.clone()).await.unwrap(), m, n).await.unwrap();
    close(
        &got[rq],
        &d.download(&q2).await.unwrap(),
        1e-10,
        "Q on panels vs separate",
    );
    close(
        &got[rr],
        &d.download(&r2).await.unwrap(),
        1e-10,
        "R on panels vs separate",
    );

    // SVD: A, U, S, Vᵀ in one buffer; then the values alone into a fifth panel.
    let mut ws = Workspace::new();
    let ra = ws.put(&a);
    let (ru, rs, rvt, rs2) = (
        ws.put(&rand_vec(m * n)),
        ws.put(&rand_vec(n)),
        ws.put(&rand_vec(n * n)),
        ws.put(&rand_vec(n)),
    );
    let g = d.upload(ws.host.clone()).await.unwrap();
    let [av, uv, sv, vtv, s2v] = [&ra, &ru, &rs, &rvt, &rs2].map(|r| g.view(r.clone()).unwrap());
    let out = Svd { u: uv, s: sv, vt: vtv };
    d.svd_into(&av, &out, m, n).await.unwrap();
    d.svd_values(&av, &s2v, m, n).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "svd");
    let mut us = got[ru].to_vec();
    for (j, s) in got[rs.clone()].iter().enumerate() {
        us[j * m..(j + 1) * m].iter_mut().for_each(|x| *x *= s);
    }
    close(&matmul(&us, &got[rvt], (m, n, n)), &a, 1e-10, "U·S·Vᵀ = A");
    close(&got[rs2], &got[rs], 1e-12, "values alone = the SVD's");
    invalid(
        d.svd_values(&av, &g.view(ra.end - 2..ra.end - 2 + n).unwrap(), m, n)
            .await,
        "S overlapping A",
        "overlapping views of one buffer",
    );

    // eigh: A (vectors in place) and W in one buffer.
    let sym = spd(n);
    let mut ws = Workspace::new();
    let (ra, rw) = (ws.put(&sym), ws.put(&rand_vec(n)));
    let g = d.upload(ws.host.clone()).await.unwrap();
    d.eigh_into(
        &g.view(ra.clone()).unwrap(),
        &g.view(rw.clone()).unwrap(),
        n,
        Eigh::default(),
    )
    .await
    .unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "eigh");
    let (v, w) = (&got[ra], &got[rw]);
    let av = matmul(&sym, v, (n, n, n));
    let vw: Vec<f64> = (0..n * n).map(|i| v[i] * w[i / n]).collect();
    close(&av, &vw, 1e-9, "A·V = V·diag(W)");

    // Batched LU and Cholesky, factors and right-hand sides in one buffer.
    let (k, count) = (6, 5);
    let mats: Vec<f64> = (0..count).flat_map(|_| spd(k)).collect();
    let rhs = rand_vec(k * count);
    let mut ws = Workspace::new();
    let (rlu, rb, rl, rb1) = (ws.put(&mats), ws.put(&rhs), ws.put(&mats), ws.put(&rhs));
    let g = d.upload(ws.host.clone()).await.unwrap();
    let [luv, bv, lv, b1v] = [&rlu, &rb, &rl, &rb1].map(|r| g.view(r.clone()).unwrap());
    let piv = d.alloc::<i32>(k * count).await.unwrap();
    d.lu_factor_batched(&luv, &piv, k, count).await.unwrap();
    d.lu_solve_batched(&luv, &piv, &bv, k, 1, count).await.unwrap();
    d.cholesky_batched(&lv, k, count).await.unwrap();
    d.cholesky_solve_batched(&lv, &b1v, k, count).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "batched");
    for c in 0..count {
        let mat = &mats[c * k * k..(c + 1) * k * k];
        let want = &rhs[c * k..(c + 1) * k];
        close(
            &matmul(mat, &got[rb.start + c * k..rb.start + (c + 1) * k], (k, k, 1)),
            want,
            1e-9,
            "batched LU",
        );
        close(
            &matmul(mat, &got[rb1.start + c * k..rb1.start + (c + 1) * k], (k, k, 1)),
            want,
            1e-9,
            "batched Cholesky",
        );
    }

    // Batched SVD: A, S, U and V in one buffer, vs separate buffers.
    let (sm, sn) = (5, 3);
    let a = rand_vec(sm * sn * count);
    let mut ws = Workspace::new();
    let (ra, rs, ru, rv) = (
        ws.put(&a),
        ws.put(&rand_vec(sn * count)),
        ws.put(&rand_vec(sm * sm * count)),
        ws.put(&rand_vec(sn * sn * count)),
    );
    let g = d.upload(ws.host.clone()).await.unwrap();
    let [av, sv, uv, vv] = [&ra, &rs, &ru, &rv].map(|r| g.view(r.clone()).unwrap());
    d.svd_batched(&av, &sv, &uv, &vv, sm, sn, count).await.unwrap();
    let got = d.download(&g).await.unwrap();
    ws.check_guards(&got, "svd_batched");
    let [a2, s2, u2, v2] = [&ra, &rs, &ru, &rv].map(|r| ws.host[r.clone()].to_vec());
    let [a2, s2, u2, v2] = [a2, s2, u2, v2].map(|h| d.upload(h));
    let (a2, s2, u2, v2) = (
        a2.await.unwrap(),
        s2.await.unwrap(),
        u2.await.unwrap(),
        v2.await.unwrap(),
    );
    d.svd_batched(&a2, &s2, &u2, &v2, sm, sn, count).await.unwrap();
    close(
        &got[rs],
        &d.download(&s2).await.unwrap(),
        1e-12,
        "batched S on panels vs separate",
    );
    close(
        &got[ru.clone()],
        &d.download(&u2).await.unwrap(),
        1e-10,
        "batched U on panels vs separate",
    );
    close(
        &got[rv.clone()],
        &d.download(&v2).await.unwrap(),
        1e-10,
        "batched V on panels vs separate",
    );
    invalid(
        d.svd_batched(
            &av,
            &sv,
            &uv,
            &g.view(ru.end - 1..ru.end - 1 + rv.len()).unwrap(),
            sm,
            sn,
            count,
        )
        .await,
        "V overlapping U",
        "overlapping views of one buffer",
    );
    // The device serves after the refusals.
    assert_eq!(d.download(&g.view(ra).unwrap()).await.unwrap(), a);
}

/// `panels` and `split_at`: consecutive windows of a handle (of a view too), written
/// through independently; empty or too long panels are typed errors.
async fn carving(config: DeviceConfig) {
    let (_s, d) = open(config).await;
    let host: Vec<f64> = rand_vec(12);
    let ws = d.upload(host.clone()).await.unwrap();
    let [p, q, r] = ws.panels([2, 3, 4]).unwrap();
    assert_eq!(
        [(p.offset(), p.len()), (q.offset(), q.len()), (r.offset(), r.len())],
        [(0, 2), (2, 3), (5, 4)]
    );
    assert_eq!(d.download(&q).await.unwrap(), host[2..5]);
    // Of a view: offsets compose.
    let inner = ws.view(3..12).unwrap();
    let [a, b] = inner.panels([4, 5]).unwrap();
    assert_eq!((a.offset(), b.offset(), b.len()), (3, 7, 5));
    d.write(&b, vec![-1.0; 5]).await.unwrap();
    let (lo, hi) = inner.split_at(4).unwrap();
    assert_eq!((lo.offset(), lo.len(), hi.offset(), hi.len()), (3, 4, 7, 5));
    assert_eq!(d.download(&hi).await.unwrap(), vec![-1.0; 5]);
    assert_eq!(d.download(&lo).await.unwrap(), host[3..7]);
    let got = d.download(&ws).await.unwrap();
    assert_eq!(got[..7], host[..7]);
    invalid(ws.panels([3, 0]), "an empty panel", "at least one element");
    invalid(ws.panels([6, 7]), "panels past the window", "no more than the window");
    invalid(
        ws.panels([usize::MAX, 2]),
        "overflowing panels",
        "no more than the window",
    );
    invalid(ws.split_at(0), "split at 0", "non-empty range");
    invalid(ws.split_at(12), "split at the end", "non-empty range");
}
