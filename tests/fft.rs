//! `FftActor`: C2C, R2C and C2R in 1, 2 and 3 dimensions, batched, f32 and f64, against a
//! direct float64 DFT — on the CPU device and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::device::{DType, FftScalar};
use atomr_accel_cuda::dtype::{Complex, DTypeBase};
use atomr_accel_cuda::{Device, DeviceConfig, FftShape, GpuError, GpuRef};
use common::{rand_vec, rel_err};

on_both! {
    transforms_match_a_direct_dft => transforms;
    bad_shapes_are_typed_errors => bad_shapes;
    transforms_repeated_on_the_same_buffers_stay_right => repeated;
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = flat % dims[a];
        flat /= dims[a];
    }
    idx
}

/// The direct multi-dimensional DFT of one transform (sign -1 forward, +1 inverse).
fn dft(x: &[(f64, f64)], dims: &[usize], sign: f64) -> Vec<(f64, f64)> {
    let n = x.len();
    (0..n)
        .map(|k| {
            let kk = unravel(k, dims);
            let mut acc = (0.0, 0.0);
            for (j, xj) in x.iter().enumerate() {
                let jj = unravel(j, dims);
                let phase: f64 = kk
                    .iter()
                    .zip(&jj)
                    .zip(dims)
                    .map(|((a, b), d)| (a * b) as f64 / *d as f64)
                    .sum();
                let (s, c) = (sign * 2.0 * std::f64::consts::PI * phase).sin_cos();
                acc.0 += xj.0 * c - xj.1 * s;
                acc.1 += xj.0 * s + xj.1 * c;
            }
            acc
        })
        .collect()
}

fn flat(v: &[(f64, f64)]) -> Vec<f64> {
    v.iter().flat_map(|(a, b)| [*a, *b]).collect()
}

fn cplx<T: FftScalar>(v: &[(f64, f64)]) -> Vec<Complex<T>> {
    v.iter()
        .map(|(a, b)| Complex::new(T::from_f64(*a), T::from_f64(*b)))
        .collect()
}

fn pairs<T: FftScalar>(v: &[Complex<T>]) -> Vec<(f64, f64)> {
    v.iter()
        .map(|z| (DTypeBase::to_f64(z.re), DTypeBase::to_f64(z.im)))
        .collect()
}

async fn check<T: FftScalar>(dev: &Device, dims: &[usize], batch: usize, tol: f64)
where
    Complex<T>: DType,
{
    let shape = FftShape::new(dims, batch);
    let n = shape.points();
    let half = shape.half_points();
    let last = *dims.last().unwrap();
    let tag = format!("{} {dims:?} x {batch}", T::NAME);

    // C2C forward, then inverse (in place): N·x.
    let x: Vec<(f64, f64)> = rand_vec(2 * n * batch).chunks(2).map(|p| (p[0], p[1])).collect();
    let x = pairs::<T>(&cplx::<T>(&x)); // what the dtype can hold
    let gx = dev.upload(cplx::<T>(&x)).await.unwrap();
    let gy = dev.alloc::<Complex<T>>(n * batch).await.unwrap();
    dev.fft_c2c(&gx, &gy, &shape, false).await.unwrap();
    let got = pairs(&dev.download(&gy).await.unwrap());
    let want: Vec<(f64, f64)> = x.chunks(n).flat_map(|b| dft(b, dims, -1.0)).collect();
    assert!(
        rel_err(&flat(&got), &flat(&want)) < tol,
        "{tag} c2c: {}",
        rel_err(&flat(&got), &flat(&want))
    );
    dev.fft_c2c(&gy, &gy, &shape, true).await.unwrap();
    let back = pairs(&dev.download(&gy).await.unwrap());
    let scaled: Vec<(f64, f64)> = x.iter().map(|(a, b)| (a * n as f64, b * n as f64)).collect();
    assert!(rel_err(&flat(&back), &flat(&scaled)) < tol, "{tag} inverse");

    // R2C against the DFT's half spectrum, then C2R back: N·x, input left intact.
    let r: Vec<f64> = rand_vec(n * batch)
        .iter()
        .map(|v| DTypeBase::to_f64(T::from_f64(*v)))
        .collect();
    let gr = dev
        .upload(r.iter().map(|v| T::from_f64(*v)).collect::<Vec<T>>())
        .await
        .unwrap();
    let gh = dev.alloc::<Complex<T>>(half * batch).await.unwrap();
    dev.fft_r2c(&gr, &gh, &shape).await.unwrap();
    let got = pairs(&dev.download(&gh).await.unwrap());
    let want: Vec<(f64, f64)> = r
        .chunks(n)
        .flat_map(|b| {
            let full = dft(&b.iter().map(|v| (*v, 0.0)).collect::<Vec<_>>(), dims, -1.0);
            (0..n).filter(move |k| k % last <= last / 2).map(move |k| full[k])
        })
        .collect();
    assert_eq!(want.len(), half * batch);
    assert!(
        rel_err(&flat(&got), &flat(&want)) < tol,
        "{tag} r2c: {}",
        rel_err(&flat(&got), &flat(&want))
    );
    let spectrum = dev.download(&gh).await.unwrap();
    let gout = dev.alloc::<T>(n * batch).await.unwrap();
    dev.fft_c2r(&gh, &gout, &shape).await.unwrap();
    let got: Vec<f64> = dev
        .download(&gout)
        .await
        .unwrap()
        .iter()
        .map(|v| DTypeBase::to_f64(*v))
        .collect();
    let want: Vec<f64> = r.iter().map(|v| v * n as f64).collect();
    assert!(rel_err(&got, &want) < tol, "{tag} c2r: {}", rel_err(&got, &want));
    assert_eq!(
        dev.download(&gh).await.unwrap(),
        spectrum,
        "{tag}: c2r must leave its input intact"
    );
}

async fn transforms(config: DeviceConfig) {
    let sys = ActorSystem::new("fft");
    let dev = Device::open(&sys, config).await.unwrap();
    for (dims, batch) in [
        (&[64][..], 4),
        (&[7][..], 3),
        (&[8, 6][..], 2),
        (&[4, 5, 6][..], 3),
        (&[3, 4, 5][..], 1),
    ] {
        check::<f32>(&dev, dims, batch, 2e-5).await;
        check::<f64>(&dev, dims, batch, 1e-12).await;
    }
}

/// Fresh data through `input` → `output` (forward), then `output` in place (inverse),
/// each checked against the direct DFT.
async fn forward_and_back(dev: &Device, input: &GpuRef<Complex<f32>>, output: &GpuRef<Complex<f32>>, shape: &FftShape) {
    let n = shape.points();
    let x: Vec<(f64, f64)> = rand_vec(2 * n * shape.batch).chunks(2).map(|p| (p[0], p[1])).collect();
    let x = pairs::<f32>(&cplx::<f32>(&x));
    dev.write(input, cplx::<f32>(&x)).await.unwrap();
    dev.fft_c2c(input, output, shape, false).await.unwrap();
    let got = pairs(&dev.download(output).await.unwrap());
    let want: Vec<(f64, f64)> = x.chunks(n).flat_map(|b| dft(b, &shape.dims, -1.0)).collect();
    let e = rel_err(&flat(&got), &flat(&want));
    assert!(e < 2e-5, "forward: {e}");
    dev.fft_c2c(output, output, shape, true).await.unwrap();
    let back = pairs(&dev.download(output).await.unwrap());
    let scaled: Vec<(f64, f64)> = x.iter().map(|(a, b)| (a * n as f64, b * n as f64)).collect();
    let e = rel_err(&flat(&back), &flat(&scaled));
    assert!(e < 2e-5, "inverse: {e}");
}

/// The same transforms again and again on the same buffers, with fresh data each time —
/// on a GPU they are replayed as captured graphs from their second run — across more
/// buffer pairs than a plan keeps graphs for (so graphs are evicted and captured again),
/// and with graphs off: every result is the DFT of the data written last.
async fn repeated(config: DeviceConfig) {
    for graphs in [true, false] {
        let sys = ActorSystem::new("fft-repeat");
        let mut config = config.clone();
        config.fft_graphs = graphs;
        let dev = Device::open(&sys, config).await.unwrap();
        let shape = FftShape::new(&[32, 6], 3);
        let len = shape.points() * shape.batch;
        let mut buffers = Vec::new();
        for _ in 0..12 {
            buffers.push((
                dev.alloc::<Complex<f32>>(len).await.unwrap(),
                dev.alloc::<Complex<f32>>(len).await.unwrap(),
            ));
        }
        // Three pairs, four times each: captured on the second run, replayed after.
        for _ in 0..4 {
            for (i, o) in &buffers[..3] {
                forward_and_back(&dev, i, o, &shape).await;
            }
        }
        // Every pair twice in a row: twelve captures, more than a plan keeps.
        for (i, o) in &buffers {
            forward_and_back(&dev, i, o, &shape).await;
            forward_and_back(&dev, i, o, &shape).await;
        }
        // The first pairs once more, after their graphs were evicted.
        for (i, o) in &buffers[..3] {
            forward_and_back(&dev, i, o, &shape).await;
            forward_and_back(&dev, i, o, &shape).await;
        }
        sys.shutdown().await;
    }
}

async fn bad_shapes(config: DeviceConfig) {
    let sys = ActorSystem::new("fft-bad");
    let dev = Device::open(&sys, config).await.unwrap();
    let a = dev.alloc::<Complex<f32>>(64).await.unwrap();
    let b = dev.alloc::<Complex<f32>>(64).await.unwrap();
    let r = dev.alloc::<f32>(64).await.unwrap();
    let inv = |r: Result<(), GpuError>| matches!(r, Err(GpuError::InvalidArgument(_)));
    assert!(
        inv(dev.fft_c2c(&a, &b, &FftShape::new(&[32], 4), false).await),
        "length mismatch"
    );
    assert!(
        inv(dev.fft_c2c(&a, &b, &FftShape::new(&[2, 2, 2, 8], 1), false).await),
        "4 dimensions"
    );
    assert!(
        inv(dev.fft_c2c(&a, &b, &FftShape::new(&[0], 1), false).await),
        "zero size"
    );
    assert!(
        inv(dev.fft_c2c(&a, &b, &FftShape::new(&[64], 0), false).await),
        "zero batch"
    );
    assert!(
        inv(dev.fft_r2c(&r, &a, &FftShape::new(&[64], 1)).await),
        "r2c output must be the half spectrum"
    );
    // Still serving.
    dev.fft_c2c(&a, &b, &FftShape::new(&[64], 1), false).await.unwrap();
}
