//! The geometry of 2-D convolutions and pooling: how a batch of images lies in memory
//! ([`ImageLayout`]), a convolution's shape ([`Conv2d`]), and the checks and index maps
//! both backends share — cuDNN's descriptors are built from the same checked numbers
//! the CPU device's reference loops walk.

use crate::error::{GpuError, Invalid};

/// How a batch of 2-D images — N images of C channels of H × W — lies in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ImageLayout {
    /// `[N, C, H, W]` row-major: each channel a contiguous plane (PyTorch's default).
    /// A convolution's filters are then `[K, C/groups, R, S]`.
    #[default]
    Nchw,
    /// `[N, H, W, C]` row-major: a pixel's channels contiguous (PyTorch's
    /// `channels_last`; what tensor cores read best). Filters are then `[K, R, S, C/groups]`.
    Nhwc,
}

crate::wire::wire_enum!(ImageLayout {
    ImageLayout::Nchw,
    ImageLayout::Nhwc
});

/// How a convolution's cuDNN algorithm is chosen, once per shape and dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AlgoSearch {
    /// cuDNN's heuristics rank the algorithms (no GPU time; PyTorch's default).
    #[default]
    Heuristic,
    /// cuDNN times every algorithm on the first call of the shape and the fastest is
    /// kept (PyTorch's `cudnn.benchmark = True`): that first call takes tens of
    /// milliseconds and waits for the GPU; later ones may be faster.
    Benchmark,
}

crate::wire::wire_enum!(AlgoSearch {
    AlgoSearch::Heuristic,
    AlgoSearch::Benchmark
});

/// A 2-D convolution (cross-correlation, as every deep-learning framework computes it):
/// `batch` images of `in_channels` × `input` through `out_channels` filters of `kernel`,
/// with padding, stride, dilation and groups, in one [`ImageLayout`].
///
/// The output is `out_channels` × [`Conv2d::output`] per image. Filters hold
/// `out_channels × in_channels/groups × kernel` elements (`[K, C/g, R, S]` for NCHW,
/// `[K, R, S, C/g]` for NHWC).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // One 1-channel 3×3 image, one 2×2 filter of ones: each output sums a 2×2 window.
/// let conv = Conv2d::new(1, 1, (3, 3), 1, (2, 2));
/// assert_eq!(conv.output(), (2, 2));
/// let x = dev.upload((1..=9).map(|v| v as f32).collect::<Vec<_>>()).await?;
/// let w = dev.upload(vec![1.0f32; 4]).await?;
/// let y = dev.alloc::<f32>(conv.output_len()).await?;
/// dev.conv2d(conv, &x, &w, &y).await?;
/// assert_eq!(dev.download(&y).await?, vec![12.0, 16.0, 24.0, 28.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conv2d {
    /// Images in the batch (N).
    pub batch: usize,
    /// Channels of each input image (C).
    pub in_channels: usize,
    /// Input height and width (H, W).
    pub input: (usize, usize),
    /// Filters, so channels of each output image (K).
    pub out_channels: usize,
    /// Filter height and width (R, S).
    pub kernel: (usize, usize),
    /// Zero padding added on both sides of the height and the width.
    pub padding: (usize, usize),
    /// Steps between windows, down and across.
    pub stride: (usize, usize),
    /// Steps between a filter's taps (1: adjacent).
    pub dilation: (usize, usize),
    /// Channel groups: each filter sees `in_channels / groups` channels (`groups ==
    /// in_channels == out_channels` is a depthwise convolution).
    pub groups: usize,
    /// How the input, output and filters lie in memory.
    pub layout: ImageLayout,
    /// How cuDNN's algorithm is chosen (the direct kernels that serve the CPU device
    /// and shapes cuDNN lacks have no choice to make).
    pub search: AlgoSearch,
}

crate::wire::wire_struct!(Conv2d {
    batch,
    in_channels,
    input,
    out_channels,
    kernel,
    padding,
    stride,
    dilation,
    groups,
    layout,
    search
});

impl Conv2d {
    /// `batch` images of `in_channels` × `input` through `out_channels` filters of
    /// `kernel`: no padding, stride 1, dilation 1, one group, NCHW.
    pub fn new(batch: usize, in_channels: usize, input: (usize, usize), out_channels: usize, kernel: (usize, usize)) -> Self {
        Conv2d {
            batch,
            in_channels,
            input,
            out_channels,
            kernel,
            padding: (0, 0),
            stride: (1, 1),
            dilation: (1, 1),
            groups: 1,
            layout: ImageLayout::Nchw,
            search: AlgoSearch::Heuristic,
        }
    }

    /// Sets how cuDNN's algorithm is chosen.
    pub fn search(mut self, search: AlgoSearch) -> Self {
        self.search = search;
        self
    }

    /// Sets the zero padding (height, width).
    pub fn padding(mut self, padding: (usize, usize)) -> Self {
        self.padding = padding;
        self
    }

    /// Sets the stride (height, width).
    pub fn stride(mut self, stride: (usize, usize)) -> Self {
        self.stride = stride;
        self
    }

    /// Sets the dilation (height, width).
    pub fn dilation(mut self, dilation: (usize, usize)) -> Self {
        self.dilation = dilation;
        self
    }

    /// Sets the number of channel groups.
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }

    /// Sets the memory layout.
    pub fn layout(mut self, layout: ImageLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The output's height and width: `(H + 2·pad − dilation·(R − 1) − 1) / stride + 1`
    /// each (0 where the padded input is smaller than the dilated filter).
    pub fn output(&self) -> (usize, usize) {
        (
            out_extent(self.input.0, self.kernel.0, self.padding.0, self.stride.0, self.dilation.0),
            out_extent(self.input.1, self.kernel.1, self.padding.1, self.stride.1, self.dilation.1),
        )
    }

    /// Elements of the input (`N·C·H·W`).
    pub fn input_len(&self) -> usize {
        self.batch * self.in_channels * self.input.0 * self.input.1
    }

    /// Elements of the filters (`K·C/groups·R·S`).
    pub fn filter_len(&self) -> usize {
        self.out_channels * (self.in_channels / self.groups.max(1)) * self.kernel.0 * self.kernel.1
    }

    /// Elements of the output (`N·K·P·Q`).
    pub fn output_len(&self) -> usize {
        let (p, q) = self.output();
        self.batch * self.out_channels * p * q
    }

    /// Checks the shape for `op`: every extent at least 1, the groups dividing both
    /// channel counts, an output of at least one pixel, and every extent and element
    /// count within cuDNN's 32-bit dimensions and strides.
    pub(crate) fn check(&self, op: &str) -> Result<(), GpuError> {
        let extents = [
            ("batch", self.batch),
            ("in_channels", self.in_channels),
            ("input height", self.input.0),
            ("input width", self.input.1),
            ("out_channels", self.out_channels),
            ("kernel height", self.kernel.0),
            ("kernel width", self.kernel.1),
            ("stride height", self.stride.0),
            ("stride width", self.stride.1),
            ("dilation height", self.dilation.0),
            ("dilation width", self.dilation.1),
            ("groups", self.groups),
        ];
        at_least_one(op, &extents)?;
        for (what, channels) in [("in_channels", self.in_channels), ("out_channels", self.out_channels)] {
            if channels % self.groups != 0 {
                return Err(GpuError::InvalidArgument(
                    Invalid::new(format!("{op}: {what} = {channels} is not a multiple of groups = {}", self.groups))
                        .arg("groups")
                        .mismatch(format_args!("a divisor of {what} ({channels})"), self.groups),
                ));
            }
        }
        let padded = (self.input.0 + 2 * self.padding.0, self.input.1 + 2 * self.padding.1);
        let reach = (
            self.dilation.0 * (self.kernel.0 - 1) + 1,
            self.dilation.1 * (self.kernel.1 - 1) + 1,
        );
        if padded.0 < reach.0 || padded.1 < reach.1 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{op}: the padded input ({} × {}) is smaller than the dilated filter ({} × {}): there is no output",
                    padded.0, padded.1, reach.0, reach.1
                ))
                .arg("kernel")
                .mismatch(format_args!("≤ {} × {}", padded.0, padded.1), format_args!("{} × {}", reach.0, reach.1)),
            ));
        }
        let (p, q) = self.output();
        let sizes = [
            ("the input", self.batch.checked_mul(self.in_channels).and_then(|v| v.checked_mul(self.input.0 * self.input.1))),
            ("the output", self.batch.checked_mul(self.out_channels).and_then(|v| v.checked_mul(p * q))),
            ("the filters", Some(self.filter_len())),
            ("the padding", Some(padded.0.max(padded.1))),
        ];
        within_int(op, &sizes)
    }
}

/// One output extent: `(size + 2·pad − dilation·(k − 1) − 1) / stride + 1`, 0 where the
/// dilated window does not fit the padded input.
pub(crate) fn out_extent(size: usize, k: usize, pad: usize, stride: usize, dilation: usize) -> usize {
    let reach = dilation * k.saturating_sub(1) + 1;
    let padded = size + 2 * pad;
    if padded < reach || stride == 0 {
        0
    } else {
        (padded - reach) / stride + 1
    }
}

/// The element `(n, c, h, w)` of images of `(channels, height, width)` in `layout`.
pub(crate) fn image_index(layout: ImageLayout, (cs, hs, ws): (usize, usize, usize), (n, c, h, w): (usize, usize, usize, usize)) -> usize {
    match layout {
        ImageLayout::Nchw => ((n * cs + c) * hs + h) * ws + w,
        ImageLayout::Nhwc => ((n * hs + h) * ws + w) * cs + c,
    }
}

/// Refuses an extent of 0 among `extents` (name, value).
pub(crate) fn at_least_one(op: &str, extents: &[(&str, usize)]) -> Result<(), GpuError> {
    match extents.iter().find(|(_, v)| *v == 0) {
        Some((what, _)) => Err(GpuError::InvalidArgument(
            Invalid::new(format!("{op}: {what} must be at least 1"))
                .arg(*what)
                .mismatch("≥ 1", 0),
        )),
        None => Ok(()),
    }
}

/// Refuses a size among `sizes` (name, value; `None` when it overflowed) beyond what a
/// 32-bit signed dimension or stride of cuDNN holds.
pub(crate) fn within_int(op: &str, sizes: &[(&str, Option<usize>)]) -> Result<(), GpuError> {
    const MAX: usize = i32::MAX as usize;
    match sizes.iter().find(|(_, v)| v.is_none_or(|v| v > MAX)) {
        Some((what, v)) => Err(GpuError::InvalidArgument(
            Invalid::new(format!(
                "{op}: {what} has {} elements, more than cuDNN's 32-bit sizes hold (2³¹ − 1); split the batch",
                v.map_or("too many".to_string(), |v| v.to_string())
            ))
            .arg(*what)
            .mismatch("≤ 2³¹ − 1 elements", "more"),
        )),
        None => Ok(()),
    }
}
