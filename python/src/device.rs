//! `Device`: a GPU or the CPU device, opened from Python, and the operations on its
//! buffers.

use std::sync::Arc;

use atomr_accel_cuda::actor::ActorSystem;
use atomr_accel_cuda::dtype::DTypeBase;
use atomr_accel_cuda::interop::dlpack::{host_tensor, ManagedTensor};
use atomr_accel_cuda::interop::Interop;
use atomr_accel_cuda::prelude::{Attention, Conv2d, Pool2d, PoolMode};
use atomr_accel_cuda::{Device as RustDevice, DeviceConfig, FftShape, Gemm, GpuRef};
use pyo3::prelude::*;

use crate::buffer::{Buffer, HostArray, MakeTensor};
use crate::capsule::{request, take, Taken};
use crate::dtype::{any_type, name_of, on_types, real_type, scalar, with_dtype, AnyRef};
use crate::errors::{invalid, to_py};
use crate::runtime::block;

/// What every buffer of a device keeps: the device, its interop handle, its actor system.
pub struct Shared {
    pub(crate) dev: RustDevice,
    pub(crate) iop: Interop,
    system: ActorSystem,
    name: String,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let system = self.system.clone();
        crate::runtime::runtime().block_on(system.shutdown());
    }
}

impl Shared {
    pub(crate) fn dlpack_device(&self) -> (i32, i32) {
        if self.iop.is_cuda() {
            (2, self.iop.device_id() as i32)
        } else {
            (1, 0)
        }
    }

    pub(crate) fn describe(&self) -> String {
        if self.iop.is_cuda() {
            format!("cuda:{}", self.iop.device_id())
        } else {
            "cpu".into()
        }
    }

    /// A host copy of `b` as a NumPy array of its shape.
    pub(crate) fn download(&self, py: Python<'_>, b: &Buffer) -> PyResult<Py<PyAny>> {
        let shape = b.shape.clone();
        let shape = if shape.is_empty() { vec![1] } else { shape };
        fn maker<T: DTypeBase>(v: Vec<T>, shape: Vec<usize>) -> MakeTensor {
            Box::new(move |versioned| {
                Ok(if versioned {
                    Taken::Versioned(host_tensor(v, &shape)?)
                } else {
                    Taken::Legacy(host_tensor(v, &shape)?)
                })
            })
        }
        let make: MakeTensor = any_type!(&b.r, "numpy", x => {
            let v = block(py, self.dev.download(x))?;
            Ok::<_, PyErr>(maker(v, shape))
        })?;
        let host = Py::new(py, HostArray { make: Some(make) })?;
        Ok(py.import("numpy")?.call_method1("from_dlpack", (host,))?.unbind())
    }
}

/// A device: `Device("auto")` (a GPU when one is usable, else the CPU device),
/// `Device("cpu")`, `Device("cuda")` or `Device("cuda:N")`.
#[pyclass(module = "atomr_accel_cuda", frozen)]
pub struct Device {
    shared: Arc<Shared>,
}

impl Device {
    fn wrap(&self, r: impl Into<AnyRef>, shape: Vec<usize>) -> Buffer {
        Buffer {
            dev: self.shared.clone(),
            r: r.into(),
            shape,
        }
    }

    fn check_own(&self, b: &Buffer) -> PyResult<()> {
        if Arc::ptr_eq(&self.shared, &b.dev) {
            Ok(())
        } else {
            Err(invalid(format!(
                "{} is a buffer of another device than {}",
                b.__repr_text(),
                self.shared.describe()
            )))
        }
    }
}

impl Buffer {
    fn __repr_text(&self) -> String {
        format!("Buffer(shape={:?}, dtype={})", self.shape, self.r.dtype())
    }
}

#[pymethods]
impl Device {
    #[new]
    #[pyo3(signature = (kind="auto"))]
    fn new(py: Python<'_>, kind: &str) -> PyResult<Device> {
        let config = match kind {
            "auto" => DeviceConfig::auto(),
            "cpu" => DeviceConfig::cpu(),
            "cuda" => DeviceConfig::cuda(0),
            k => match k.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
                Some(n) => DeviceConfig::cuda(n),
                None => {
                    return Err(invalid(format!(
                        "device {k:?}: say \"auto\", \"cpu\", \"cuda\" or \"cuda:N\""
                    )))
                }
            },
        };
        let (system, dev, iop, name) = block(py, async move {
            let system = ActorSystem::new("python");
            let dev = RustDevice::open(&system, config).await?;
            let name = dev.ready().await?.name;
            let iop = dev.interop().await?;
            Ok((system, dev, iop, name))
        })?;
        Ok(Device {
            shared: Arc::new(Shared { dev, iop, system, name }),
        })
    }

    /// `"cuda"` or `"cpu"`.
    #[getter]
    fn backend(&self) -> &'static str {
        if self.shared.iop.is_cuda() {
            "cuda"
        } else {
            "cpu"
        }
    }

    /// The device's name (the GPU's, or "CPU device").
    #[getter]
    fn name(&self) -> String {
        self.shared.name.clone()
    }

    /// A zero-filled buffer of `shape` and `dtype` (a NumPy name).
    #[pyo3(signature = (shape, dtype="float32"))]
    fn zeros(&self, py: Python<'_>, shape: Vec<usize>, dtype: &str) -> PyResult<Buffer> {
        let n: usize = shape.iter().product();
        let dev = &self.shared.dev;
        with_dtype!(dtype, T => {
            let r = block(py, dev.alloc::<T>(n))?;
            Ok(self.wrap(r, shape))
        }, else Err(invalid(format!("dtype {dtype:?} is not one of this package's element types"))))
    }

    /// A device copy of `array` (a NumPy array or anything `numpy.asarray` takes), with
    /// its shape and element type.
    fn upload(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let np = py.import("numpy")?;
        let a = np.call_method1("ascontiguousarray", (array,))?;
        let shape: Vec<usize> = a.getattr("shape")?.extract()?;
        match take(&request(&a, None)?)? {
            Taken::Versioned(t) => self.upload_tensor(py, t, shape),
            Taken::Legacy(t) => self.upload_tensor(py, t, shape),
        }
    }

    /// A host copy of `buffer` as a NumPy array of its shape.
    fn download(&self, py: Python<'_>, buffer: &Buffer) -> PyResult<Py<PyAny>> {
        self.check_own(buffer)?;
        self.shared.download(py, buffer)
    }

    /// Another library's array on this device (a PyTorch tensor, a CuPy array, a NumPy
    /// array on the CPU device: anything with `__dlpack__`) as a `Buffer` sharing its
    /// memory — no copy. It must be contiguous, of this device and of a supported type.
    /// (A method, not a constructor: the array becomes a buffer of this device.)
    #[allow(clippy::wrong_self_convention)]
    fn from_dlpack(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        // Asked first, so that an array of another device is refused before its producer
        // is asked for a capsule (a host array would refuse a CUDA stream anyway).
        let (kind, id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
        let ours = self.shared.dlpack_device();
        let host_on_cpu = ours.0 == 1 && matches!(kind, 1 | 3);
        let managed_on_gpu = ours.0 == 2 && kind == 13;
        if (kind, id) != ours && !host_on_cpu && !managed_on_gpu {
            return Err(invalid(format!(
                "an array of DLPack device ({kind}, {id}), not of this device {ours:?}: upload() copies a host array; \
                 move a device array to this device first"
            )));
        }
        let stream = match self.shared.iop.stream() {
            Ok(s) => Some(s.cu_stream() as usize),
            Err(_) => None,
        };
        match take(&request(obj, stream)?)? {
            Taken::Versioned(t) => self.import(py, t),
            Taken::Legacy(t) => self.import(py, t),
        }
    }

    /// `a @ b` for 2-D buffers (row-major, float32/float64/float16/bfloat16): cuBLAS on
    /// a GPU.
    fn matmul(&self, py: Python<'_>, a: &Buffer, b: &Buffer) -> PyResult<Buffer> {
        self.check_own(a)?;
        self.check_own(b)?;
        let (&[m, k], &[k2, n]) = (&a.shape[..], &b.shape[..]) else {
            return Err(invalid(format!(
                "matmul takes two 2-D buffers, not {:?} and {:?}",
                a.shape, b.shape
            )));
        };
        if k != k2 {
            return Err(invalid(format!("matmul of {m}×{k} and {k2}×{n}: inner extents differ")));
        }
        let c = on_types!(&a.r, "matmul", x => matmul(py, &self.shared.dev, x, &b.r, m, n, k), [F32, F64, F16, BF16])?;
        Ok(self.wrap(c, vec![m, n]))
    }

    /// The 2-D convolution (cross-correlation) of `x` `[N, C, H, W]` with the filters `w`
    /// `[K, C/groups, R, S]`, as `torch.nn.functional.conv2d` (no bias): `stride`,
    /// `padding` and `dilation` an int or an (height, width) pair. cuDNN on a GPU.
    #[pyo3(signature = (x, w, stride=None, padding=None, dilation=None, groups=1))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        py: Python<'_>,
        x: &Buffer,
        w: &Buffer,
        stride: Option<&Bound<'_, PyAny>>,
        padding: Option<&Bound<'_, PyAny>>,
        dilation: Option<&Bound<'_, PyAny>>,
        groups: usize,
    ) -> PyResult<Buffer> {
        self.check_own(x)?;
        self.check_own(w)?;
        let (&[n, c, h, wd], &[k, _, r, s]) = (&x.shape[..], &w.shape[..]) else {
            return Err(invalid(format!(
                "conv2d takes x of [N, C, H, W] and w of [K, C/groups, R, S], not {:?} and {:?}",
                x.shape, w.shape
            )));
        };
        let g = Conv2d::new(n, c, (h, wd), k, (r, s))
            .stride(pair(stride, 1)?)
            .padding(pair(padding, 0)?)
            .dilation(pair(dilation, 1)?)
            .groups(groups);
        let (p, q) = g.output();
        let dev = &self.shared.dev;
        let y: AnyRef = on_types!(&x.r, "conv2d", xv => {
            let wv = same_type(xv, &w.r, "conv2d")?;
            block(py, async {
                let y = dev.alloc(g.output_len()).await?;
                dev.conv2d(g, xv, wv, &y).await?;
                Ok(y)
            }).map(AnyRef::from)
        }, [F32, F64, F16, BF16])?;
        Ok(self.wrap(y, vec![n, k, p, q]))
    }

    /// Max pooling of `x` `[N, C, H, W]`, as `torch.nn.functional.max_pool2d`
    /// (`stride` defaults to the window).
    #[pyo3(signature = (x, kernel_size, stride=None, padding=None))]
    fn max_pool2d(
        &self,
        py: Python<'_>,
        x: &Buffer,
        kernel_size: &Bound<'_, PyAny>,
        stride: Option<&Bound<'_, PyAny>>,
        padding: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Buffer> {
        self.pool(py, x, PoolMode::Max, (kernel_size, stride, padding))
    }

    /// Average pooling of `x` `[N, C, H, W]`, as `torch.nn.functional.avg_pool2d`
    /// (`count_include_pad` counts the padding as zeros, PyTorch's default).
    #[pyo3(signature = (x, kernel_size, stride=None, padding=None, count_include_pad=true))]
    fn avg_pool2d(
        &self,
        py: Python<'_>,
        x: &Buffer,
        kernel_size: &Bound<'_, PyAny>,
        stride: Option<&Bound<'_, PyAny>>,
        padding: Option<&Bound<'_, PyAny>>,
        count_include_pad: bool,
    ) -> PyResult<Buffer> {
        let mode = if count_include_pad {
            PoolMode::Average
        } else {
            PoolMode::AverageOfValid
        };
        self.pool(py, x, mode, (kernel_size, stride, padding))
    }

    /// Scaled-dot-product attention of `q` `[B, H, Lq, D]` over `k`, `v` `[B, H, Lk,
    /// D]`, as `torch.nn.functional.scaled_dot_product_attention` (no mask beyond
    /// `is_causal`; `scale` defaults to 1/√D).
    #[pyo3(signature = (q, k, v, is_causal=false, scale=None))]
    fn scaled_dot_product_attention(
        &self,
        py: Python<'_>,
        q: &Buffer,
        k: &Buffer,
        v: &Buffer,
        is_causal: bool,
        scale: Option<f64>,
    ) -> PyResult<Buffer> {
        for b in [q, k, v] {
            self.check_own(b)?;
        }
        let (&[b, h, lq, d], &[b2, h2, lk, d2]) = (&q.shape[..], &k.shape[..]) else {
            return Err(invalid(format!(
                "attention takes q of [B, H, Lq, D] and k, v of [B, H, Lk, D], not {:?} and {:?}",
                q.shape, k.shape
            )));
        };
        if (b, h, d) != (b2, h2, d2) || v.shape != k.shape {
            return Err(invalid(format!(
                "attention of q {:?}, k {:?} and v {:?}: batch, heads and head dimension must agree, and v be like k",
                q.shape, k.shape, v.shape
            )));
        }
        let mut a = Attention::new(b, h, lq, lk, d).causal(is_causal);
        if let Some(s) = scale {
            a = a.scale(s);
        }
        let dev = &self.shared.dev;
        let o: AnyRef = on_types!(&q.r, "scaled_dot_product_attention", qv => {
            let kv = same_type(qv, &k.r, "scaled_dot_product_attention")?;
            let vv = same_type(qv, &v.r, "scaled_dot_product_attention")?;
            block(py, async {
                let o = dev.alloc(a.query_len()).await?;
                dev.attention(a, qv, kv, vv, &o).await?;
                Ok(o)
            }).map(AnyRef::from)
        }, [F32, F64, F16, BF16])?;
        Ok(self.wrap(o, q.shape.clone()))
    }

    /// The discrete Fourier transform along the last axis (complex64/complex128; every
    /// leading index a transform of its own), or its inverse (unnormalised, as cuFFT).
    #[pyo3(signature = (x, inverse=false))]
    fn fft(&self, py: Python<'_>, x: &Buffer, inverse: bool) -> PyResult<Buffer> {
        self.check_own(x)?;
        let n = x.shape.last().copied().unwrap_or(1);
        let shape = FftShape::new(&[n], x.size() / n.max(1));
        let dev = &self.shared.dev;
        let y: AnyRef = on_types!(&x.r, "fft", v => block(py, async {
            let y = dev.alloc(v.len()).await?;
            dev.fft_c2c(v, &y, &shape, inverse).await?;
            Ok(y)
        }).map(AnyRef::from), [C64, C128])?;
        Ok(self.wrap(y, x.shape.clone()))
    }

    /// The sum of every element (a float, or an int for integer buffers).
    fn sum(&self, py: Python<'_>, x: &Buffer) -> PyResult<Py<PyAny>> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "sum", v => scalar(py, block(py, dev.sum(v))?))
    }

    /// The smallest element.
    fn min(&self, py: Python<'_>, x: &Buffer) -> PyResult<Py<PyAny>> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "min", v => scalar(py, block(py, dev.min(v))?))
    }

    /// The largest element.
    fn max(&self, py: Python<'_>, x: &Buffer) -> PyResult<Py<PyAny>> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "max", v => scalar(py, block(py, dev.max(v))?))
    }

    /// The flat index of the smallest element (the first of equals; `None` if all are NaN).
    fn argmin(&self, py: Python<'_>, x: &Buffer) -> PyResult<Option<usize>> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "argmin", v => block(py, dev.argmin(v)))
    }

    /// The flat index of the largest element (the first of equals; `None` if all are NaN).
    fn argmax(&self, py: Python<'_>, x: &Buffer) -> PyResult<Option<usize>> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "argmax", v => block(py, dev.argmax(v)))
    }

    /// Sorts the buffer's elements in place, ascending (NaNs last), as one flat array.
    fn sort(&self, py: Python<'_>, x: &Buffer) -> PyResult<()> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        real_type!(&x.r, "sort", v => block(py, dev.sort(v)))
    }

    /// Seeds the device's random number generator.
    fn seed(&self, py: Python<'_>, seed: u64) -> PyResult<()> {
        block(py, self.shared.dev.seed_rng(seed))
    }

    /// Fills `x` with uniform numbers in (0, 1] (float32/float64; cuRAND on a GPU).
    fn uniform(&self, py: Python<'_>, x: &Buffer) -> PyResult<()> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        on_types!(&x.r, "uniform", v => block(py, dev.fill_uniform(v)), [F32, F64])
    }

    /// Fills `x` with normal numbers of `mean` and `std` (float32/float64).
    #[pyo3(signature = (x, mean=0.0, std=1.0))]
    fn normal(&self, py: Python<'_>, x: &Buffer, mean: f64, std: f64) -> PyResult<()> {
        self.check_own(x)?;
        let dev = &self.shared.dev;
        on_types!(&x.r, "normal", v => block(py, dev.fill_normal(v, DTypeBase::from_f64(mean), DTypeBase::from_f64(std))), [F32, F64])
    }

    /// Launches the `#[kernel]` named `name` (its instantiation for `dtypes`, e.g.
    /// `"f32"`) with `args` in its parameter order: buffers, and scalars as NumPy scalars
    /// of the parameter's type (`np.float32(2.0)`; a Python float is 8 bytes, an int an
    /// `int64`). The grid covers `elements` threads in blocks of `block`, or is `grid`
    /// blocks; returns when the kernel has finished.
    #[pyo3(signature = (name, *args, elements=None, grid=None, block=256, dtypes="", shared_mem=0))]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        name: &str,
        args: &Bound<'_, pyo3::types::PyTuple>,
        elements: Option<usize>,
        grid: Option<(u32, u32, u32)>,
        block: u32,
        dtypes: &str,
        shared_mem: u32,
    ) -> PyResult<()> {
        use atomr_accel_cuda::launch::LaunchConfig;
        let mut cfg = match (elements, grid) {
            (Some(n), None) => LaunchConfig::for_elements(n, block),
            (None, Some(g)) => LaunchConfig {
                grid: g,
                block: (block, 1, 1),
                shared_mem_bytes: 0,
            },
            _ => return Err(invalid("launch takes elements=N or grid=(x, y, z), one of them")),
        };
        cfg.shared_mem_bytes = shared_mem;
        let mut dyn_args = atomr_accel_cuda::wire::DynArgs::new();
        for a in args.iter() {
            if let Ok(b) = a.cast::<Buffer>() {
                let b = b.get();
                self.check_own(b)?;
                any_type!(&b.r, "launch", x => {
                    dyn_args.buffer(x);
                    Ok::<(), PyErr>(())
                })?;
            } else if a.hasattr("dtype")? && a.hasattr("tobytes")? {
                let bytes: Vec<u8> = a.call_method0("tobytes")?.extract()?;
                dyn_args.scalar(&bytes);
            } else if let Ok(v) = a.extract::<bool>() {
                dyn_args.scalar(&[v as u8]);
            } else if let Ok(v) = a.extract::<i64>() {
                dyn_args.scalar(&v.to_le_bytes());
            } else if let Ok(v) = a.extract::<f64>() {
                dyn_args.scalar(&v.to_le_bytes());
            } else {
                return Err(invalid(format!(
                    "launch argument {a}: pass a Buffer or a (NumPy) number"
                )));
            }
        }
        let call =
            atomr_accel_cuda::kernel::dsl::registry::launch_by_name(name, dtypes, cfg, dyn_args).map_err(to_py)?;
        crate::runtime::block(py, self.shared.dev.launch_kernel(call))
    }

    /// The `#[kernel]`s this extension can launch: `(name, [dtype bindings])`.
    fn kernels(&self) -> Vec<(String, Vec<String>)> {
        let mut v: Vec<(String, Vec<String>)> = atomr_accel_cuda::kernel::dsl::registry::registered()
            .map(|k| {
                (
                    k.name.to_string(),
                    k.instances.iter().map(|i| i.dtypes.to_string()).collect(),
                )
            })
            .collect();
        v.sort();
        v
    }

    fn __repr__(&self) -> String {
        format!("Device({:?}, name={:?})", self.shared.describe(), self.shared.name)
    }
}

impl Device {
    /// Copies a host tensor (from NumPy) into a new buffer of `shape`.
    fn upload_tensor<M: ManagedTensor>(
        &self,
        py: Python<'_>,
        t: atomr_accel_cuda::interop::dlpack::DlpackTensor<M>,
        shape: Vec<usize>,
    ) -> PyResult<Buffer> {
        let dl = t.tensor();
        if dl.device.device_type != 1 {
            return Err(invalid(
                "upload takes host memory: use from_dlpack for another library's device array",
            ));
        }
        let name = name_of(dl.dtype).ok_or_else(|| {
            invalid(format!(
                "an array of an element type this package lacks: {:?}",
                dl.dtype
            ))
        })?;
        let n: usize = shape.iter().product();
        let dev = &self.shared.dev;
        with_dtype!(name, T => {
            // SAFETY: NumPy's contiguous array of `n` elements of `T` (its dtype checked
            // above), alive until `t` drops after the copy.
            let host: &[T] = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const T, n) };
            let r = block(py, dev.upload_slice(host))?;
            drop(t);
            Ok(self.wrap(r, shape))
        }, else unreachable!("name_of names an element type"))
    }

    /// Makes a producer's tensor a buffer of this device, sharing its memory.
    fn import<M: ManagedTensor>(
        &self,
        _py: Python<'_>,
        t: atomr_accel_cuda::interop::dlpack::DlpackTensor<M>,
    ) -> PyResult<Buffer> {
        let shape: Vec<usize> = t.shape().iter().map(|&d| d.max(0) as usize).collect();
        let name = name_of(t.tensor().dtype).ok_or_else(|| {
            invalid(format!(
                "an array of an element type this package lacks: {:?}",
                t.tensor().dtype
            ))
        })?;
        let iop = &self.shared.iop;
        with_dtype!(name, T => {
            let r: GpuRef<T> = iop.from_dlpack(t).map_err(to_py)?;
            Ok(self.wrap(r, shape))
        }, else unreachable!("name_of names an element type"))
    }
}

impl Device {
    /// Pooling of `x` `[N, C, H, W]` in `mode`: the window, the stride (the window when
    /// absent) and the padding.
    fn pool(
        &self,
        py: Python<'_>,
        x: &Buffer,
        mode: PoolMode,
        (window, stride, padding): (&Bound<'_, PyAny>, Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
    ) -> PyResult<Buffer> {
        self.check_own(x)?;
        let &[n, c, h, w] = &x.shape[..] else {
            return Err(invalid(format!("pooling takes x of [N, C, H, W], not {:?}", x.shape)));
        };
        let window = pair(Some(window), 1)?;
        let g = Pool2d::new(n, c, (h, w), window, mode)
            .stride(match stride {
                Some(s) => pair(Some(s), 1)?,
                None => window,
            })
            .padding(pair(padding, 0)?);
        let (p, q) = g.output();
        let dev = &self.shared.dev;
        let y: AnyRef = on_types!(&x.r, "pooling", xv => block(py, async {
            let y = dev.alloc(g.output_len()).await?;
            dev.pool2d(g, xv, &y).await?;
            Ok(y)
        }).map(AnyRef::from), [F32, F64, F16, BF16])?;
        Ok(self.wrap(y, vec![n, c, p, q]))
    }
}

/// An int or an (height, width) pair, `default` for both when absent.
fn pair(v: Option<&Bound<'_, PyAny>>, default: usize) -> PyResult<(usize, usize)> {
    match v {
        None => Ok((default, default)),
        Some(v) => match v.extract::<usize>() {
            Ok(n) => Ok((n, n)),
            Err(_) => v
                .extract::<(usize, usize)>()
                .map_err(|_| invalid(format!("{v} is neither an int nor an (int, int) pair"))),
        },
    }
}

/// `other` as a buffer of `x`'s element type: `InvalidArgument` naming `op` if not.
fn same_type<'a, T: crate::dtype::Typed>(x: &GpuRef<T>, other: &'a AnyRef, op: &str) -> PyResult<&'a GpuRef<T>> {
    let _ = x;
    T::of(other).ok_or_else(|| invalid(format!("{op} of {} and {} buffers", T::NAME, other.dtype())))
}

/// Row-major `a (m×k) · b (k×n)` as column-major `Bᵀ·Aᵀ`: the same memory, operands
/// swapped, no transpose.
fn matmul<T: crate::dtype::Typed + atomr_accel_cuda::device::BlasScalar>(
    py: Python<'_>,
    dev: &RustDevice,
    a: &GpuRef<T>,
    b: &AnyRef,
    m: usize,
    n: usize,
    k: usize,
) -> PyResult<AnyRef>
where
    AnyRef: From<GpuRef<T>>,
{
    let b = T::of(b).ok_or_else(|| invalid(format!("matmul of {} and {} buffers", T::NAME, b.dtype())))?;
    let c = block(py, async {
        let c = dev.alloc::<T>(m * n).await?;
        dev.gemm(Gemm::<T>::new(n, m, k), b, a, &c).await?;
        Ok(c)
    })?;
    Ok(c.into())
}
