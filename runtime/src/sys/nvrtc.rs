//! NVRTC: its version, the architectures it knows, and compiling CUDA C++ to a CUBIN or
//! PTX image.

use crate::error::GpuError;

/// Whether NVRTC's library can be loaded, asked before cudarc loads it (cudarc panics on
/// a missing library): a machine without it gets `Unsupported` saying how to install it.
/// Every NVRTC use passes here first, through [`nvrtc_version`].
fn nvrtc_installed() -> Result<(), GpuError> {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        cudarc::get_lib_name_candidates("nvrtc").iter().any(|name| {
            // SAFETY: loading NVRTC runs no initialisers with preconditions; cudarc
            // loads the same library the same way right after.
            unsafe { libloading::Library::new(name) }.is_ok()
        })
    });
    if found {
        Ok(())
    } else {
        Err(GpuError::Unsupported(
            "NVRTC's library (libnvrtc) is not installed: install the CUDA toolkit, or `pip install \
             nvidia-cuda-nvrtc` and put its `nvidia/cu13/lib` on LD_LIBRARY_PATH"
                .into(),
        ))
    }
}

/// NVRTC's (major, minor) version.
pub(crate) fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    // Asked once per process: it is part of every kernel cache key, looked up per load.
    static VERSION: std::sync::OnceLock<(i32, i32)> = std::sync::OnceLock::new();
    if let Some(v) = VERSION.get() {
        return Ok(*v);
    }
    nvrtc_installed()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers to c_int.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(nvrtc_error)?;
    Ok(*VERSION.get_or_init(|| (major, minor)))
}

fn nvrtc_error(e: cudarc::nvrtc::result::NvrtcError) -> GpuError {
    GpuError::Library {
        lib: crate::error::Lib::Nvrtc,
        code: e.0 as i32,
        msg: format!("{:?}", e.0),
    }
}

/// Environment variable naming the directory that holds `cuda_fp16.h` / `cuda_bf16.h`,
/// for machines where the CUDA toolkit is not in a usual place.
pub const CUDA_INCLUDE_ENV: &str = "ATOMR_ACCEL_CUDA_INCLUDE";

/// Where the CUDA toolkit's headers are (generated half-precision kernels include
/// `cuda_fp16.h`/`cuda_bf16.h`; NVRTC needs their directory unless it bundles them).
fn cuda_include_dir() -> Option<std::path::PathBuf> {
    let mut candidates: Vec<std::path::PathBuf> = vec![];
    if let Some(d) = std::env::var_os(CUDA_INCLUDE_ENV) {
        candidates.push(d.into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(d) = std::env::var_os(var) {
            candidates.push(std::path::PathBuf::from(d).join("include"));
        }
    }
    candidates.push("/usr/local/cuda/include".into());
    candidates.push("/usr/include".into());
    candidates.into_iter().find(|d| d.join("cuda_fp16.h").is_file())
}

/// What NVRTC is asked for: a CUBIN for a real architecture (`sm_90`), or PTX for a
/// virtual one (`compute_90`) that the driver compiles when the module is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Cubin(u32),
    Ptx(u32),
}

/// The target for a device of architecture `sm` given the architectures this NVRTC
/// supports: a CUBIN when it knows the device, else PTX for the newest architecture it
/// knows that is not newer than the device (a GPU newer than the NVRTC library).
pub(crate) fn target_for(sm: u32, supported: &[u32]) -> Option<Target> {
    if supported.contains(&sm) {
        return Some(Target::Cubin(sm));
    }
    supported.iter().copied().filter(|&a| a <= sm).max().map(Target::Ptx)
}

/// The architectures this NVRTC can compile for (`[75, 80, 86, 89, 90, …]`).
fn nvrtc_supported_archs() -> Result<Vec<u32>, GpuError> {
    let mut n: std::ffi::c_int = 0;
    // SAFETY: a valid out-pointer.
    unsafe { cudarc::nvrtc::sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(nvrtc_error)?;
    let mut archs = vec![0 as std::ffi::c_int; n.max(0) as usize];
    // SAFETY: `archs` holds the `n` entries NVRTC reported.
    unsafe { cudarc::nvrtc::sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(nvrtc_error)?;
    Ok(archs.into_iter().map(|a| a as u32).collect())
}

/// Compiles CUDA C++ for `arch` with NVRTC. `sm_XY`: a CUBIN, or PTX (NUL-terminated, as
/// the driver loads it) if this NVRTC does not know `sm_XY`; `compute_XY`: PTX. On failure
/// the error carries NVRTC's log (which points at the source's `#line` locations).
pub(crate) fn compile_image(source: &str, arch: &str, options: &[String]) -> Result<Vec<u8>, GpuError> {
    let bad = || GpuError::invalid(format!("`{arch}` is not an architecture like sm_90 or compute_90"));
    let target = if let Some(n) = arch.strip_prefix("compute_") {
        Target::Ptx(n.parse().map_err(|_| bad())?)
    } else {
        let sm = arch.strip_prefix("sm_").and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let supported = nvrtc_supported_archs()?;
        target_for(sm, &supported).ok_or_else(|| {
            GpuError::Unsupported(format!(
                "this NVRTC supports {supported:?}, nothing at or below the device's sm_{sm}"
            ))
        })?
    };
    nvrtc_compile(source, &target, options)
}

fn nvrtc_compile(source: &str, target: &Target, options: &[String]) -> Result<Vec<u8>, GpuError> {
    use cudarc::nvrtc::result as nr;
    use cudarc::nvrtc::sys as ns;
    let csrc = std::ffi::CString::new(source).map_err(|_| GpuError::invalid("kernel source contains a NUL byte"))?;
    let prog = nr::create_program(&csrc, None).map_err(nvrtc_error)?;
    let arch = match target {
        Target::Cubin(n) => format!("sm_{n}"),
        Target::Ptx(n) => format!("compute_{n}"),
    };
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    if source.contains("#include <cuda_") {
        if let Some(dir) = cuda_include_dir() {
            opts.push(format!("--include-path={}", dir.display()));
        }
    }
    opts.extend(options.iter().cloned());
    // SAFETY: `prog` is a live program created above; it is destroyed on every path below.
    let compiled = unsafe { nr::compile_program(prog, &opts) };
    let result = match compiled {
        Err(e) => {
            // SAFETY: as above.
            let log = unsafe { nr::get_program_log(prog) }.unwrap_or_default();
            let log: String = log.iter().map(|&c| c as u8 as char).collect();
            Err(GpuError::Library {
                lib: crate::error::Lib::Nvrtc,
                code: e.0 as i32,
                msg: format!("compilation failed:\n{}", log.trim_end_matches('\0').trim()),
            })
        }
        Ok(()) => {
            let mut size = 0usize;
            let cubin = matches!(target, Target::Cubin(_));
            // SAFETY: valid program and out-pointer.
            let sized = unsafe {
                if cubin {
                    ns::nvrtcGetCUBINSize(prog, &mut size)
                } else {
                    ns::nvrtcGetPTXSize(prog, &mut size)
                }
            };
            sized.result().map_err(nvrtc_error).and_then(|()| {
                let mut buf = vec![0u8; size];
                let out = buf.as_mut_ptr() as *mut std::ffi::c_char;
                // SAFETY: `buf` holds exactly the `size` bytes NVRTC reported (for PTX
                // including its terminating NUL, which the driver's loader needs).
                unsafe {
                    if cubin {
                        ns::nvrtcGetCUBIN(prog, out)
                    } else {
                        ns::nvrtcGetPTX(prog, out)
                    }
                }
                .result()
                .map_err(nvrtc_error)?;
                Ok(buf)
            })
        }
    };
    // SAFETY: `prog` is live and not used afterwards.
    let _ = unsafe { nr::destroy_program(prog) };
    result
}

#[cfg(test)]
mod target_tests {
    use super::{target_for, Target};

    #[test]
    fn known_arch_gets_a_cubin_newer_gets_ptx_for_the_newest_older() {
        let supported = [75, 80, 86, 89, 90];
        assert_eq!(target_for(90, &supported), Some(Target::Cubin(90)));
        assert_eq!(target_for(100, &supported), Some(Target::Ptx(90)));
        assert_eq!(target_for(87, &supported), Some(Target::Ptx(86)));
        assert_eq!(target_for(70, &supported), None);
    }
}
