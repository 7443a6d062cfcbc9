//! 2-D pooling's shape ([`Pool2d`]) and what each window computes ([`PoolMode`]).

use super::conv::{at_least_one, image_index, out_extent, within_int, ImageLayout};
use crate::error::{GpuError, Invalid};

/// What a pooling window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PoolMode {
    /// The largest element of the window (padding never wins; a NaN in the window
    /// gives NaN, as PyTorch's `max_pool2d`).
    #[default]
    Max,
    /// The mean over the whole window, padding counted as zeros (PyTorch's `avg_pool2d`
    /// default, `count_include_pad=True`).
    Average,
    /// The mean over the window's elements inside the input (`count_include_pad=False`).
    AverageOfValid,
}

crate::wire::wire_enum!(PoolMode {
    PoolMode::Max,
    PoolMode::Average,
    PoolMode::AverageOfValid
});

/// 2-D pooling: `batch` images of `channels` × `input`, windows of `window` every
/// `stride`, with zero padding, in one [`ImageLayout`]; the output is `channels` ×
/// [`Pool2d::output`] per image (floor mode, as PyTorch's default).
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// # let dev = Device::open(&system, DeviceConfig::cpu()).await?;
/// // 2×2 max pooling of one 4×4 image.
/// let pool = Pool2d::new(1, 1, (4, 4), (2, 2), PoolMode::Max);
/// let x = dev.upload((0..16).map(|v| v as f32).collect::<Vec<_>>()).await?;
/// let y = dev.alloc::<f32>(pool.output_len()).await?;
/// dev.pool2d(pool, &x, &y).await?;
/// assert_eq!(dev.download(&y).await?, vec![5.0, 7.0, 13.0, 15.0]);
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pool2d {
    /// Images in the batch (N).
    pub batch: usize,
    /// Channels of each image (C), pooled each on its own.
    pub channels: usize,
    /// Input height and width.
    pub input: (usize, usize),
    /// Window height and width.
    pub window: (usize, usize),
    /// Steps between windows, down and across.
    pub stride: (usize, usize),
    /// Padding on both sides of the height and the width; at most half the window.
    pub padding: (usize, usize),
    /// What a window computes.
    pub mode: PoolMode,
    /// How the input and output lie in memory.
    pub layout: ImageLayout,
}

crate::wire::wire_struct!(Pool2d {
    batch,
    channels,
    input,
    window,
    stride,
    padding,
    mode,
    layout
});

impl Pool2d {
    /// Windows of `window` with the stride equal to the window (PyTorch's default), no
    /// padding, NCHW.
    pub fn new(batch: usize, channels: usize, input: (usize, usize), window: (usize, usize), mode: PoolMode) -> Self {
        Pool2d {
            batch,
            channels,
            input,
            window,
            stride: window,
            padding: (0, 0),
            mode,
            layout: ImageLayout::Nchw,
        }
    }

    /// Sets the stride (height, width).
    pub fn stride(mut self, stride: (usize, usize)) -> Self {
        self.stride = stride;
        self
    }

    /// Sets the padding (height, width).
    pub fn padding(mut self, padding: (usize, usize)) -> Self {
        self.padding = padding;
        self
    }

    /// Sets the memory layout.
    pub fn layout(mut self, layout: ImageLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The output's height and width: `(H + 2·pad − window) / stride + 1` each.
    pub fn output(&self) -> (usize, usize) {
        (
            out_extent(self.input.0, self.window.0, self.padding.0, self.stride.0, 1),
            out_extent(self.input.1, self.window.1, self.padding.1, self.stride.1, 1),
        )
    }

    /// Elements of the input (`N·C·H·W`).
    pub fn input_len(&self) -> usize {
        self.batch * self.channels * self.input.0 * self.input.1
    }

    /// Elements of the output (`N·C·P·Q`).
    pub fn output_len(&self) -> usize {
        let (p, q) = self.output();
        self.batch * self.channels * p * q
    }

    /// Checks the shape for `op`: every extent at least 1, the padding at most half
    /// the window (so every window holds an input element), an output of at least one
    /// pixel, sizes within cuDNN's 32-bit ones.
    pub(crate) fn check(&self, op: &str) -> Result<(), GpuError> {
        at_least_one(
            op,
            &[
                ("batch", self.batch),
                ("channels", self.channels),
                ("input height", self.input.0),
                ("input width", self.input.1),
                ("window height", self.window.0),
                ("window width", self.window.1),
                ("stride height", self.stride.0),
                ("stride width", self.stride.1),
            ],
        )?;
        if 2 * self.padding.0 > self.window.0 || 2 * self.padding.1 > self.window.1 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!(
                    "{op}: padding {:?} is more than half the window {:?}: a window could hold padding only",
                    self.padding, self.window
                ))
                .arg("padding")
                .mismatch(format_args!("≤ ({}, {})", self.window.0 / 2, self.window.1 / 2), format_args!("{:?}", self.padding)),
            ));
        }
        let (p, q) = self.output();
        if p == 0 || q == 0 {
            return Err(GpuError::InvalidArgument(
                Invalid::new(format!("{op}: the window {:?} is larger than the padded input: there is no output", self.window))
                    .arg("window")
                    .mismatch(
                        format_args!("≤ ({}, {})", self.input.0 + 2 * self.padding.0, self.input.1 + 2 * self.padding.1),
                        format_args!("{:?}", self.window),
                    ),
            ));
        }
        within_int(
            op,
            &[(
                "the input",
                self.batch.checked_mul(self.channels).and_then(|v| v.checked_mul(self.input.0 * self.input.1)),
            )],
        )
    }

    /// The element of the input at image `n`, channel `c`, row `h`, column `w`.
    pub(crate) fn x_at(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        image_index(self.layout, (self.channels, self.input.0, self.input.1), (n, c, h, w))
    }

    /// The element of the output at image `n`, channel `c`, row `p`, column `q`.
    pub(crate) fn y_at(&self, n: usize, c: usize, p: usize, q: usize) -> usize {
        let (ph, qw) = self.output();
        image_index(self.layout, (self.channels, ph, qw), (n, c, p, q))
    }
}
