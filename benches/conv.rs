//! 2-D convolutions (forward, backward-data, backward-filter) and max pooling through
//! the dnn library (`Device::conv2d`, …, `pool2d`) against raw cudarc cuDNN in the same
//! process: the same descriptors, the algorithm cuDNN's heuristics rank first, one
//! workspace. A ResNet-50 3×3 layer (32 × 64 × 56², 64 filters) in f32 NCHW (FMA, no
//! TF32, on both sides) and f16 NHWC (tensor cores), and its stem's 3×3/2 max pooling.
//! Each call awaited; raw: the routine, then a stream synchronize; median of rounds.
//! Ours also with `AlgoSearch::Benchmark` (cuDNN times every algorithm once).
//! PyTorch's figures for the same shapes come from `benches/conv_torch.py`.

use std::sync::Arc;

use atomr_accel_cuda::prelude::*;
use cudarc::cudnn::{self, sys, ConvBackwardData, ConvBackwardFilter, ConvForward, Cudnn, CudnnDataType};
use cudarc::driver::{CudaSlice, CudaStream};

#[path = "support/gpu_bench.rs"]
mod gpu_bench;
#[path = "support/random.rs"]
mod random;

use gpu_bench::run_gpu;

/// The raw side: cudarc's safe cuDNN layer on the bench's stream.
struct Raw<T: CudnnDataType> {
    cudnn: Arc<Cudnn>,
    x: cudnn::TensorDescriptor<T>,
    y: cudnn::TensorDescriptor<T>,
    w: cudnn::FilterDescriptor<T>,
    conv: cudnn::ConvDescriptor<f32>,
}

fn dims(layout: ImageLayout) -> sys::cudnnTensorFormat_t {
    match layout {
        ImageLayout::Nchw => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
        ImageLayout::Nhwc => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
    }
}

impl<T: CudnnDataType> Raw<T> {
    fn new(stream: &Arc<CudaStream>, g: &Conv2d, math: sys::cudnnMathType_t) -> Self {
        let cudnn = Cudnn::new(stream.clone()).unwrap();
        let (p, q) = g.output();
        let f = dims(g.layout);
        let i = |v: usize| v as i32;
        let x = cudnn
            .create_4d_tensor::<T>(f, [i(g.batch), i(g.in_channels), i(g.input.0), i(g.input.1)])
            .unwrap();
        let y = cudnn
            .create_4d_tensor::<T>(f, [i(g.batch), i(g.out_channels), i(p), i(q)])
            .unwrap();
        let w = cudnn
            .create_4d_filter::<T>(f, [i(g.out_channels), i(g.in_channels), i(g.kernel.0), i(g.kernel.1)])
            .unwrap();
        let mut conv = cudnn
            .create_conv2d::<f32>(
                [i(g.padding.0), i(g.padding.1)],
                [i(g.stride.0), i(g.stride.1)],
                [i(g.dilation.0), i(g.dilation.1)],
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            )
            .unwrap();
        conv.set_math_type(math).unwrap();
        Raw { cudnn, x, y, w, conv }
    }
}

fn report(what: &str, (ours, benchmarked): (f64, f64), raw: f64, flops: f64) {
    println!(
        "RESULT | dnn.{what} | ours {:.1} µs ({:.1} TFLOP/s), raw cudarc cuDNN {:.1} µs, ratio {:.3}; \
         ours with AlgoSearch::Benchmark {:.1} µs ({:.1} TFLOP/s)",
        ours * 1e6,
        flops / ours / 1e12,
        raw * 1e6,
        raw / ours,
        benchmarked * 1e6,
        flops / benchmarked / 1e12
    );
}

async fn measure<T: DnnScalar + Float + CudnnDataType<Scalar = f32>>(
    dev: &Device,
    stream: &Arc<CudaStream>,
    layout: ImageLayout,
    math: sys::cudnnMathType_t,
    dtype: &str,
) {
    let g = Conv2d::new(32, 64, (56, 56), 64, (3, 3)).padding((1, 1)).layout(layout);
    let gb = g.search(AlgoSearch::Benchmark);
    let host = |len: usize, seed: u64| {
        random::random_f32(len, seed)
            .into_iter()
            .map(|v| T::from_f64(v as f64))
            .collect::<Vec<T>>()
    };
    let (hx, hw, hy) = (host(g.input_len(), 1), host(g.filter_len(), 2), host(g.output_len(), 3));
    let (x, w, dy) = (
        dev.upload(hx.clone()).await.unwrap(),
        dev.upload(hw.clone()).await.unwrap(),
        dev.upload(hy.clone()).await.unwrap(),
    );
    let (y, dx, dw) = (
        dev.alloc::<T>(g.output_len()).await.unwrap(),
        dev.alloc::<T>(g.input_len()).await.unwrap(),
        dev.alloc::<T>(g.filter_len()).await.unwrap(),
    );
    let (p, q) = g.output();
    let flops = 2.0 * (g.batch * g.out_channels * p * q * g.in_channels * 9) as f64;
    let label = format!("{:?} {dtype}", layout).to_lowercase();

    let raw = Raw::<T>::new(stream, &g, math);
    let (rx, rw): (CudaSlice<T>, CudaSlice<T>) = (stream.clone_htod(&hx).unwrap(), stream.clone_htod(&hw).unwrap());
    let rdy: CudaSlice<T> = stream.clone_htod(&hy).unwrap();
    let mut ry = stream.alloc_zeros::<T>(g.output_len()).unwrap();
    let mut rdx = stream.alloc_zeros::<T>(g.input_len()).unwrap();
    let mut rdw = stream.alloc_zeros::<T>(g.filter_len()).unwrap();
    let one = T::from_f64(1.0);
    let zero = T::from_f64(0.0);
    let _ = &raw.cudnn;

    // Forward.
    let op = ConvForward {
        conv: &raw.conv,
        x: &raw.x,
        w: &raw.w,
        y: &raw.y,
    };
    let algo = op.pick_algorithm().unwrap();
    eprintln!("raw conv2d {label}: {algo:?}");
    let mut ws = stream
        .alloc_zeros::<u8>(op.get_workspace_size(algo).unwrap().max(1))
        .unwrap();
    let ours = gpu_bench::per_call(20, || async { dev.conv2d(g, &x, &w, &y).await.unwrap() }).await;
    let found = gpu_bench::per_call(20, || async { dev.conv2d(gb, &x, &w, &y).await.unwrap() }).await;
    let rawt = gpu_bench::per_call(20, || {
        // SAFETY: buffers of the descriptors' shapes and types.
        unsafe { op.launch(algo, Some(&mut ws), (one, zero), &rx, &rw, &mut ry) }.unwrap();
        stream.synchronize().unwrap();
        async {}
    })
    .await;
    report(
        &format!("conv2d 32x64x56x56 k64 3x3 {label}"),
        (ours, found),
        rawt,
        flops,
    );

    // Backward data.
    let op = ConvBackwardData {
        conv: &raw.conv,
        dx: &raw.x,
        w: &raw.w,
        dy: &raw.y,
    };
    let algo = op.pick_algorithm().unwrap();
    eprintln!("raw conv2d_backward_data {label}: {algo:?}");
    let mut ws = stream
        .alloc_zeros::<u8>(op.get_workspace_size(algo).unwrap().max(1))
        .unwrap();
    let ours = gpu_bench::per_call(20, || async {
        dev.conv2d_backward_data(g, &dy, &w, &dx).await.unwrap()
    })
    .await;
    let found = gpu_bench::per_call(20, || async {
        dev.conv2d_backward_data(gb, &dy, &w, &dx).await.unwrap()
    })
    .await;
    let rawt = gpu_bench::per_call(20, || {
        // SAFETY: as above.
        unsafe { op.launch(algo, Some(&mut ws), (one, zero), &mut rdx, &rw, &rdy) }.unwrap();
        stream.synchronize().unwrap();
        async {}
    })
    .await;
    report(
        &format!("conv2d_backward_data 32x64x56x56 k64 3x3 {label}"),
        (ours, found),
        rawt,
        flops,
    );

    // Backward filter.
    let op = ConvBackwardFilter {
        conv: &raw.conv,
        x: &raw.x,
        dw: &raw.w,
        dy: &raw.y,
    };
    let algo = op.pick_algorithm().unwrap();
    eprintln!("raw conv2d_backward_filter {label}: {algo:?}");
    let mut ws = stream
        .alloc_zeros::<u8>(op.get_workspace_size(algo).unwrap().max(1))
        .unwrap();
    let ours = gpu_bench::per_call(20, || async {
        dev.conv2d_backward_filter(g, &x, &dy, &dw).await.unwrap()
    })
    .await;
    let found = gpu_bench::per_call(20, || async {
        dev.conv2d_backward_filter(gb, &x, &dy, &dw).await.unwrap()
    })
    .await;
    let rawt = gpu_bench::per_call(20, || {
        // SAFETY: as above.
        unsafe { op.launch(algo, Some(&mut ws), (one, zero), &rx, &mut rdw, &rdy) }.unwrap();
        stream.synchronize().unwrap();
        async {}
    })
    .await;
    report(
        &format!("conv2d_backward_filter 32x64x56x56 k64 3x3 {label}"),
        (ours, found),
        rawt,
        flops,
    );

    // The stem's max pooling: 32 × 64 × 112², 3×3 windows every 2, padding 1.
    let pool = Pool2d::new(32, 64, (112, 112), (3, 3), PoolMode::Max)
        .stride((2, 2))
        .padding((1, 1))
        .layout(layout);
    let px = dev.upload(host(pool.input_len(), 4)).await.unwrap();
    let py = dev.alloc::<T>(pool.output_len()).await.unwrap();
    let ours = gpu_bench::per_call(20, || async { dev.pool2d(pool, &px, &py).await.unwrap() }).await;
    let bytes = ((pool.input_len() + pool.output_len()) * std::mem::size_of::<T>()) as f64;
    println!(
        "RESULT | dnn.max_pool2d 32x64x112x112 3x3/2 {label} | ours {:.1} µs, {:.0} GB/s",
        ours * 1e6,
        bytes / ours / 1e9
    );
}

fn main() {
    // Shows the algorithm each of our plans takes (a debug event of the dnn library).
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(std::io::stderr)
        .init();
    run_gpu("conv", DeviceConfig::cuda(0), |dev, _ctx, stream| async move {
        measure::<f32>(
            &dev,
            &stream,
            ImageLayout::Nchw,
            sys::cudnnMathType_t::CUDNN_FMA_MATH,
            "f32",
        )
        .await;
        measure::<f16>(
            &dev,
            &stream,
            ImageLayout::Nhwc,
            sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
            "f16",
        )
        .await;
    });
}
