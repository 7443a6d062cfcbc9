//! Raw CUDA C++ modules: compile (through the disk cache), load once per context, launch
//! with typed, validated arguments.
//!
//! This is the layer `#[kernel]` will generate code for; it is also the escape hatch for
//! hand-written CUDA C++. Launches go through the context actor: arguments are checked
//! (generation, device, aliasing, launch limits) before anything reaches the driver.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::GpuError;

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

/// A prebuilt module image: what `nvcc -cubin` / `nvcc -ptx` (or NVRTC) produced.
#[derive(Debug, Clone)]
pub enum ModuleImage {
    /// A CUBIN (an ELF file) for the device's architecture.
    Cubin(Vec<u8>),
    /// PTX text, compiled for the device by the driver when loaded.
    Ptx(String),
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

/// A module loaded on one device generation. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ModuleRef {
    pub(crate) id: u64,
    pub(crate) device_id: usize,
    pub(crate) generation: u64,
    pub(crate) kernels: Arc<Vec<String>>,
    /// True if the image came from the disk cache (no NVRTC run).
    pub from_cache: bool,
}

impl ModuleRef {
    pub(crate) fn new(device_id: usize, generation: u64, kernels: Vec<String>, from_cache: bool) -> Self {
        ModuleRef {
            id: NEXT_MODULE.fetch_add(1, Ordering::Relaxed),
            device_id,
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
