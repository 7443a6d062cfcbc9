//! Raw CUDA C++ modules: compile (through the disk cache), load once per context, launch
//! with typed, validated arguments.
//!
//! This is the layer `#[kernel]` will generate code for; it is also the escape hatch for
//! hand-written CUDA C++. Launches go through the context actor: arguments are checked
//! (generation, device, aliasing, launch limits) before anything reaches the driver.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::GpuError;
use crate::wire::{Reader, Side, Wire, Writer};

pub use crate::launch::{KernelArgs, LaunchConfig};

static NEXT_MODULE: AtomicU64 = AtomicU64::new(1);

/// CUDA C++ source and the entry points to load from it.
#[derive(Debug, Clone)]
pub struct KernelSource {
    /// The source (kernels declared `extern "C" __global__`).
    pub source: String,
    /// The kernel names to look up.
    pub kernels: Vec<String>,
    /// Extra NVRTC options (the architecture is added for the device).
    pub options: Vec<String>,
}

impl KernelSource {
    /// Source with the given `extern "C"` kernels.
    pub fn new(source: impl Into<String>, kernels: &[&str]) -> Self {
        KernelSource {
            source: source.into(),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            options: vec![],
        }
    }
}

/// Source crosses to an isolated device's worker as its text, kernel names and options.
impl Wire for KernelSource {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        refuse_journal(w)?;
        self.source.put(w)?;
        self.kernels.put(w)?;
        self.options.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(KernelSource {
            source: String::take(r)?,
            kernels: Vec::take(r)?,
            options: Vec::take(r)?,
        })
    }
}

/// A prebuilt module image: what `nvcc -cubin` / `nvcc -ptx` (or NVRTC) produced.
#[derive(Debug, Clone)]
pub enum ModuleImage {
    /// A CUBIN (an ELF file) for the device's architecture.
    Cubin(Vec<u8>),
    /// PTX text, compiled for the device by the driver when loaded.
    Ptx(String),
}

/// An image crosses to an isolated device's worker as its bytes (a large CUBIN through
/// shared memory) or its text.
impl Wire for ModuleImage {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        refuse_journal(w)?;
        match self {
            ModuleImage::Cubin(b) => {
                w.put_u8(0);
                b.put(w)
            }
            ModuleImage::Ptx(p) => {
                w.put_u8(1);
                p.put(w)
            }
        }
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        match r.take_u8()? {
            0 => Ok(ModuleImage::Cubin(Vec::take(r)?)),
            1 => Ok(ModuleImage::Ptx(String::take(r)?)),
            t => Err(GpuError::invalid(format!("{t} is not a module image kind"))),
        }
    }
}

impl ModuleImage {
    /// Reads an image file: an ELF file is a CUBIN, a text file starting like PTX is PTX;
    /// anything else is an `InvalidArgument` naming the file.
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<ModuleImage, GpuError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| GpuError::invalid(format!("cannot read module image {}: {e}", path.display())))?;
        if bytes.starts_with(b"\x7fELF") {
            return Ok(ModuleImage::Cubin(bytes));
        }
        match String::from_utf8(bytes) {
            Ok(text) if text.contains(".version") && text.contains(".target") => Ok(ModuleImage::Ptx(text)),
            _ => Err(GpuError::invalid(format!(
                "{} is neither a CUBIN (ELF) nor PTX (text with .version and .target)",
                path.display()
            ))),
        }
    }
}

/// A module loaded on one device generation. Cheap to clone. It stays loaded for the
/// generation (a context rebuild, or an isolated device's new worker, makes it `Stale`:
/// load it again).
#[derive(Debug, Clone)]
pub struct ModuleRef {
    /// The number the device that loaded it knows it by (an isolated device's: its
    /// worker's).
    pub(crate) id: u64,
    pub(crate) device_id: usize,
    /// The `Device` it was loaded on (two devices may share an ordinal and a
    /// generation, and their module numbers are their own).
    pub(crate) instance: u64,
    pub(crate) generation: u64,
    pub(crate) kernels: Arc<Vec<String>>,
    /// True if the image came from the disk cache (no NVRTC run).
    pub from_cache: bool,
}

impl ModuleRef {
    pub(crate) fn new(
        (device_id, instance): (usize, u64),
        generation: u64,
        kernels: Vec<String>,
        from_cache: bool,
    ) -> Self {
        ModuleRef {
            id: NEXT_MODULE.fetch_add(1, Ordering::Relaxed),
            device_id,
            instance,
            generation,
            kernels: Arc::new(kernels),
            from_cache,
        }
    }

    /// The kernels it holds.
    pub fn kernels(&self) -> &[String] {
        &self.kernels
    }
}

/// Modules are not journalled (a replay would have to map the recording's module
/// numbers to its own): a replay stops at a load or launch with `Unsupported`.
fn not_journalled() -> GpuError {
    GpuError::Unsupported("raw CUDA modules are not journalled".into())
}

/// Refuses to write a module's source, image or handle into a replay journal.
fn refuse_journal(w: &Writer<'_>) -> Result<(), GpuError> {
    match w.side {
        Side::Journal(_) => Err(not_journalled()),
        _ => Ok(()),
    }
}

/// A module crosses as the worker's number for it (and its kernel names); the worker
/// keeps its modules for its whole life, as an in-process context does.
impl Wire for ModuleRef {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match w.side {
            Side::Client(c) => {
                if self.instance != c.instance {
                    return Err(GpuError::invalid(format!(
                        "module #{} belongs to another device (device {}), not to isolated device {}",
                        self.id, self.device_id, c.device_id
                    )));
                }
                if self.generation != c.generation() {
                    return Err(GpuError::Stale {
                        buffer_generation: self.generation,
                        device_generation: c.generation(),
                    });
                }
            }
            Side::Worker(wc) => wc.export_module(self.id, self),
            Side::Journal(_) => return Err(not_journalled()),
        }
        w.put_u64(self.id);
        self.kernels.to_vec().put(w)?;
        self.from_cache.put(w)
    }
    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let id = r.take_u64()?;
        let kernels = Vec::<String>::take(r)?;
        let from_cache = bool::take(r)?;
        match r.side {
            Side::Worker(wc) => wc.lookup_module(id),
            Side::Client(c) => Ok(ModuleRef {
                id,
                device_id: c.device_id,
                instance: c.instance,
                generation: c.generation(),
                kernels: Arc::new(kernels),
                from_cache,
            }),
            Side::Journal(_) => Err(not_journalled()),
        }
    }
}
