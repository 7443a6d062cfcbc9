//! cuBLASLt matmuls (`Device::matmul`): f32 exact and TF32, f16/bf16 inputs with their own
//! or an f32 output, FP8 (E4M3, E5M2) inputs, fused epilogues (bias, ReLU, GELU), strided
//! batches and views — each against a float64 reference over the inputs as their element
//! type holds them, on fresh random data; and the typed errors of every rule the call has.
//! On the CPU device (cuBLASLt's arithmetic emulated) and on the GPU.

#[macro_use]
mod common;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::backend::state::BackendKind;
use atomr_accel_cuda::dtype::DTypeBase;
use atomr_accel_cuda::prelude::*;
use common::slow::slow_copy;
use common::{gemm_ref, rand_vec, rel_err};

on_both! {
    f32_is_exact_unless_tf32_is_asked_for => f32_and_tf32;
    half_inputs_write_their_own_type_or_f32 => halves;
    fp8_inputs_accumulate_in_f32 => fp8;
    epilogues_batches_and_views => epilogues;
    bad_matmuls_are_typed_errors => errors;
    matmuls_are_ordered_with_kernels_on_other_streams => ordering;
}

async fn open(config: DeviceConfig) -> (ActorSystem, Device) {
    let sys = ActorSystem::new("matmul");
    let d = Device::open(&sys, config).await.unwrap();
    (sys, d)
}

/// `values` as element type `T` holds them, and those values exactly in f64 (what the
/// reference multiplies).
fn quantize<T: DTypeBase>(values: &[f64]) -> (Vec<T>, Vec<f64>) {
    let typed: Vec<T> = values.iter().map(|&v| T::from_f64(v)).collect();
    let exact = typed.iter().map(|v| v.to_f64()).collect();
    (typed, exact)
}

/// Random data of `n` elements in `T`: the typed values and their exact f64 values.
fn random<T: DTypeBase>(n: usize, scale: f64) -> (Vec<T>, Vec<f64>) {
    quantize(&rand_vec(n).iter().map(|v| v * scale).collect::<Vec<_>>())
}

async fn download_f64<T: DType>(d: &Device, r: &GpuRef<T>) -> Vec<f64> {
    d.download(r).await.unwrap().iter().map(|v| v.to_f64()).collect()
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// f32 inputs: `Compute::F32` is f32 arithmetic (1e-6 of float64); `Compute::Tf32` rounds
/// the inputs to TF32 — visibly less exact, within TF32's error.
async fn f32_and_tf32(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let (m, n, k) = (67, 45, 130);
    let (a, ae) = random::<f32>(m * k, 1.0);
    let (b, be) = random::<f32>(k * n, 1.0);
    let (c0, c0e) = random::<f32>(m * n, 1.0);
    let (ga, gb) = (d.upload(a).await.unwrap(), d.upload(b).await.unwrap());
    let gc = d.upload(c0.clone()).await.unwrap();
    let op = Matmul::new(m, n, k).scaled(0.75, -0.5);
    d.matmul(op, Epilogue::none(), &ga, &gb, &gc).await.unwrap();
    let mut want = c0e;
    gemm_ref(false, false, m, n, k, 0.75, &ae, m, &be, k, -0.5, &mut want, m);
    let exact = rel_err(&download_f64(&d, &gc).await, &want);
    assert!(exact < 1e-6, "f32 matmul: rel err {exact}");

    d.write(&gc, c0).await.unwrap();
    d.matmul(op.compute(Compute::Tf32), Epilogue::none(), &ga, &gb, &gc)
        .await
        .unwrap();
    let e = rel_err(&download_f64(&d, &gc).await, &want);
    // TF32 keeps 10 of f32's 23 mantissa bits: measurably off f32 (~1e-4 here), never
    // beyond TF32's own error.
    assert!(
        e > 1e-6 && e < 3e-3,
        "TF32 rel err {e} (TF32 in use, within its precision)"
    );
}

/// f16 and bf16 inputs, f32 accumulation, C in the inputs' type or f32, transposes.
async fn halves(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let (m, n, k) = (48, 40, 96);
    async fn case<I: DType, O: DType>(d: &Device, m: usize, n: usize, k: usize, tol: f64)
    where
        MatmulBuffer: From<GpuRef<I>> + From<GpuRef<O>>,
    {
        let (a, ae) = random::<I>(m * k, 1.0);
        let (b, be) = random::<I>(k * n, 1.0);
        let ga = d.upload(a).await.unwrap();
        let gb = d.upload(b).await.unwrap();
        let gc = d.alloc::<O>(m * n).await.unwrap();
        let op = Matmul::new(m, n, k).transposed(true, true).scaled(2.0, 0.0);
        d.matmul(op, Epilogue::none(), ga, gb, gc.clone()).await.unwrap();
        let mut want = vec![0.0; m * n];
        gemm_ref(true, true, m, n, k, 2.0, &ae, k, &be, n, 0.0, &mut want, m);
        let e = rel_err(&download_f64(d, &gc).await, &want);
        assert!(e < tol, "{} → {}: rel err {e}", I::NAME, O::NAME);
    }
    case::<bf16, bf16>(&d, m, n, k, 8e-3).await;
    case::<bf16, f32>(&d, m, n, k, 1e-5).await;
    case::<f16, f16>(&d, m, n, k, 1e-3).await;
    case::<f16, f32>(&d, m, n, k, 1e-5).await;
}

/// FP8: A stored k×m (TN), per-tensor scales folded into alpha, an f32 C accumulated
/// onto (beta = 1), and E4M3×E5M2 into bf16 with a bf16 bias and GELU.
async fn fp8(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let (m, n, k) = (64, 32, 128);
    let (a, ae) = random::<f8e4m3>(k * m, 8.0);
    let (b, be) = random::<f8e4m3>(k * n, 8.0);
    let (c0, c0e) = random::<f32>(m * n, 1.0);
    let ga = d.upload(a).await.unwrap();
    let gb = d.upload(b).await.unwrap();
    let gc = d.upload(c0).await.unwrap();
    let scale = 1.0 / 64.0;
    let op = Matmul::new(m, n, k).transposed(true, false).scaled(scale, 1.0);
    d.matmul(op, Epilogue::none(), &ga, &gb, &gc).await.unwrap();
    let mut want = c0e;
    gemm_ref(true, false, m, n, k, scale as f64, &ae, k, &be, k, 1.0, &mut want, m);
    let e = rel_err(&download_f64(&d, &gc).await, &want);
    // Products of FP8 values are exact in f32; the tensor cores' FP8 accumulation keeps
    // fewer bits than an f32 add between its promotions to f32.
    assert!(e < 5e-4, "E4M3 → f32: rel err {e}");

    let (b2, b2e) = random::<f8e5m2>(k * n, 8.0);
    let gb2 = d.upload(b2).await.unwrap();
    let (bias, biase) = random::<bf16>(m, 1.0);
    let gbias = d.upload(bias).await.unwrap();
    let gout = d.alloc::<bf16>(m * n).await.unwrap();
    let op = Matmul::new(m, n, k).transposed(true, false).scaled(scale, 0.0);
    d.matmul(op, Epilogue::bias(&gbias).then(Activation::Gelu), &ga, &gb2, &gout)
        .await
        .unwrap();
    let mut want = vec![0.0; m * n];
    gemm_ref(true, false, m, n, k, scale as f64, &ae, k, &b2e, k, 0.0, &mut want, m);
    for (i, w) in want.iter_mut().enumerate() {
        *w = gelu(*w + biase[i % m]);
    }
    let e = rel_err(&download_f64(&d, &gout).await, &want);
    assert!(e < 8e-3, "E4M3×E5M2 → bf16 + bias + GELU: rel err {e}");
}

/// Bias + ReLU, GELU alone and bias alone over a strided batch of three, with A a view
/// in the middle of a larger buffer and C a view with ldc > m: the elements around and
/// between C's matrices are left as they were.
async fn epilogues(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let (m, n, k, count) = (40, 24, 56, 3);
    let (ldc, stride_c) = (m + 8, (m + 8) * n + 16);
    let pad = 32;
    let (a_all, a_alle) = random::<f32>(pad + count * m * k + pad, 1.0);
    let (b, be) = random::<f32>(count * k * n, 1.0);
    let (bias, biase) = random::<f32>(m, 1.0);
    let c_len = stride_c * (count - 1) + ldc * n;
    let (c_all, c_alle) = random::<f32>(pad + c_len + pad, 1.0);
    let ga_all = d.upload(a_all).await.unwrap();
    let ga = ga_all.view(pad..pad + count * m * k).unwrap();
    let gb = d.upload(b).await.unwrap();
    let gbias = d.upload(bias).await.unwrap();
    let batch = Batch {
        count,
        stride_a: m * k,
        stride_b: k * n,
        stride_c,
    };
    let op = Matmul::new(m, n, k).leading(m, k, ldc).batched(batch);
    let ae = &a_alle[pad..pad + count * m * k];
    for (epilogue, with_bias, act) in [
        (Epilogue::bias(&gbias).then(Activation::Relu), true, Activation::Relu),
        (Epilogue::gelu(), false, Activation::Gelu),
        (Epilogue::bias(&gbias), true, Activation::Identity),
    ] {
        let gc_all = d.upload(c_all.clone()).await.unwrap();
        let gc = gc_all.view(pad..pad + c_len).unwrap();
        d.matmul(op, epilogue, &ga, &gb, &gc).await.unwrap();
        let got = download_f64(&d, &gc_all).await;
        let mut want = c_alle.clone();
        for i in 0..count {
            let cw = &mut want[pad + i * stride_c..];
            gemm_ref(
                false,
                false,
                m,
                n,
                k,
                1.0,
                &ae[i * m * k..],
                m,
                &be[i * k * n..],
                k,
                0.0,
                cw,
                ldc,
            );
            for j in 0..n {
                for r in 0..m {
                    let v = &mut cw[j * ldc + r];
                    let x = *v + if with_bias { biase[r] } else { 0.0 };
                    *v = match act {
                        Activation::Relu => x.max(0.0),
                        Activation::Gelu => gelu(x),
                        Activation::Identity => x,
                    };
                }
            }
        }
        let e = rel_err(&got, &want);
        assert!(e < 1e-5, "{act:?} (bias {with_bias}): rel err {e}");
        // The padding and the gaps between matrices are bit for bit the old values.
        for (i, (g, w)) in got.iter().zip(&c_alle).enumerate() {
            let rel = i.checked_sub(pad).filter(|&r| r < c_len);
            let inside = rel.is_some_and(|r| {
                let within = r % stride_c;
                r / stride_c < count && within < ldc * n && within % ldc < m
            });
            if !inside {
                assert_eq!(g, w, "element {i} outside C's matrices changed");
            }
        }
    }
}

fn invalid(r: Result<(), GpuError>, what: &str, arg: &str) {
    match r {
        Err(GpuError::InvalidArgument(m)) => assert!(
            m.arg.as_deref() == Some(arg),
            "{what}: expected the argument `{arg}` at fault, got {m:?}"
        ),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// Every rule of the call, as a typed error naming the argument at fault.
async fn errors(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let (m, n, k) = (32, 16, 48);
    let a32 = d.upload(random::<f32>(m * k, 1.0).0).await.unwrap();
    let b32 = d.upload(random::<f32>(k * n, 1.0).0).await.unwrap();
    let c32 = d.alloc::<f32>(m * n).await.unwrap();
    let abf = d.upload(random::<bf16>(m * k, 1.0).0).await.unwrap();
    let bbf = d.upload(random::<bf16>(k * n, 1.0).0).await.unwrap();
    let cbf = d.alloc::<bf16>(m * n).await.unwrap();
    let a8 = d.upload(random::<f8e5m2>(k * m, 1.0).0).await.unwrap();
    let b8 = d.upload(random::<f8e5m2>(k * n, 1.0).0).await.unwrap();
    let c8 = d.alloc::<f8e4m3>(m * n).await.unwrap();
    let op = Matmul::new(m, n, k);
    let none = Epilogue::none;

    invalid(d.matmul(op, none(), &a32, &bbf, &c32).await, "f32 × bf16", "b");
    invalid(
        d.matmul(op, none(), &a32, &b32, &cbf).await,
        "f32 inputs into bf16",
        "c",
    );
    invalid(
        d.matmul(op.compute(Compute::Tf32), none(), &abf, &bbf, &c32).await,
        "TF32 on bf16",
        "compute",
    );
    let tn = Matmul::new(m, n, k).transposed(true, false);
    invalid(d.matmul(tn, none(), &a8, &b8, &c32).await, "E5M2 × E5M2", "b");
    let a8e4 = d.upload(random::<f8e4m3>(k * m, 1.0).0).await.unwrap();
    invalid(d.matmul(op, none(), &a8e4, &b8, &c32).await, "FP8 not TN", "transa");
    match d.matmul(tn, none(), &a8e4, &b8, &c8).await {
        Err(GpuError::Unsupported(m)) => assert!(m.contains("FP8 outputs"), "{m}"),
        other => panic!("FP8 output: expected Unsupported, got {other:?}"),
    }
    let short = d.alloc::<f32>(m - 1).await.unwrap();
    invalid(
        d.matmul(op, Epilogue::bias(&short), &a32, &b32, &c32).await,
        "short bias",
        "bias",
    );
    let bias_bf = d.alloc::<bf16>(m).await.unwrap();
    invalid(
        d.matmul(op, Epilogue::bias(&bias_bf), &a32, &b32, &c32).await,
        "bias type",
        "bias",
    );
    let long = d.alloc::<f32>(m + 1).await.unwrap();
    let misaligned = long.view(1..).unwrap();
    invalid(
        d.matmul(op, Epilogue::bias(&misaligned), &a32, &b32, &c32).await,
        "misaligned bias",
        "bias",
    );
    invalid(d.matmul(op, none(), &a32, &b32, &short).await, "short C", "c");
    invalid(
        d.matmul(op.leading(m - 1, k, m), none(), &a32, &b32, &c32).await,
        "lda < m",
        "lda",
    );
    // C overlapping A: views of one buffer.
    let both = d.alloc::<f32>(m * k + m * n).await.unwrap();
    let (va, vc) = (
        both.view(..m * k).unwrap(),
        both.view(m * k - 1..m * k - 1 + m * n).unwrap(),
    );
    invalid(d.matmul(op, none(), &va, &b32, &vc).await, "C over A", "c");
    // Disjoint views of one buffer are fine: A and C side by side.
    let vc = both.view(m * k..).unwrap();
    d.matmul(op, Epilogue::relu(), &va, &b32, &vc).await.unwrap();
    invalid(
        d.matmul(Matmul::new(0, n, k), none(), &a32, &b32, &c32).await,
        "m = 0",
        "m",
    );
}

/// Matmuls and kernels on other streams, each enqueued without waiting for the one
/// before: a matmul reads A only after a slow kernel wrote it, and writes C only after a
/// slow kernel read it — the second matmul of a run on one stream too, whose operands'
/// uses are only noted (`gpu_ref::locked`), not recorded in events, until another
/// stream needs them.
async fn ordering(config: DeviceConfig) {
    let (_sys, d) = open(config).await;
    let on_gpu = d.state().info.map(|i| i.backend) == Some(BackendKind::Cuda);
    let rounds = if on_gpu { 20_000 } else { 1 };
    let (m, n, k) = (256, 192, 128);
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (x, b1, b2) = (rand_vec(m * k), rand_vec(k * n), rand_vec(k * n));
    let ga = d.upload(f32s(&rand_vec(m * k))).await.unwrap();
    let gx = d.upload(f32s(&x)).await.unwrap();
    let (gb1, gb2) = (d.upload(f32s(&b1)).await.unwrap(), d.upload(f32s(&b2)).await.unwrap());
    let gc = d.alloc::<f32>(m * n).await.unwrap();
    let gd = d.alloc::<f32>(m * n).await.unwrap();
    let op = Matmul::new(m, n, k);
    // Warm up the matmul's stream on these buffers, so the next calls only note uses.
    d.matmul(op, Epilogue::none(), &ga, &gb1, &gc).await.unwrap();
    let gpu = d.actor_gpu();
    // A slow write of A on the actor's stream, then C = A·B1 on the BLAS stream.
    slow_copy::enqueue(
        &gpu,
        LaunchConfig::for_elements(m * k, 256),
        rounds,
        &gx,
        &mut ga.clone(),
    )
    .await
    .unwrap();
    d.matmul(op, Epilogue::none(), &ga, &gb1, &gc).await.unwrap();
    // A slow read of C on the actor's stream, then C = A·B2 over it.
    slow_copy::enqueue(
        &gpu,
        LaunchConfig::for_elements(m * n, 256),
        rounds,
        &gc,
        &mut gd.clone(),
    )
    .await
    .unwrap();
    d.matmul(op, Epilogue::none(), &ga, &gb2, &gc).await.unwrap();
    gpu.synchronize().await.unwrap();
    let a = download_f64(&d, &ga).await;
    for i in (0..m * k).step_by(97) {
        assert!(
            (a[i] - (x[i] as f32 as f64 + 1.0)).abs() < 1e-4,
            "A[{i}] written by the slow kernel"
        );
    }
    let product = |b: &[f64]| {
        let b: Vec<f64> = b.iter().map(|&v| v as f32 as f64).collect();
        let mut c = vec![0.0; m * n];
        gemm_ref(false, false, m, n, k, 1.0, &a, m, &b, k, 0.0, &mut c, m);
        c
    };
    let (first, second) = (product(&b1), product(&b2));
    let read: Vec<f64> = download_f64(&d, &gd).await.iter().map(|v| v - 1.0).collect();
    // (The slow kernel's rounds move a value by a few ulps.)
    let e = rel_err(&read, &first);
    assert!(
        e < 1e-4,
        "the slow read saw C = A·B1 (rel err {e}; vs A·B2: {})",
        rel_err(&read, &second)
    );
    let e = rel_err(&download_f64(&d, &gc).await, &second);
    assert!(e < 1e-5, "C = A·B2 at the end: rel err {e}");
}
