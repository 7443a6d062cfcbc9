//! The persistent kernel cache: compiled GPU code on disk, keyed by everything that
//! changes the binary, checked before it is loaded.
//!
//! NVRTC takes 30–40 ms per kernel on the H200; loading a CUBIN takes ~20 µs (DESIGN.md).
//! Entries are keyed by a BLAKE3 hash of the source, the compile options, the target
//! architecture and the NVRTC version; written to a temporary file and renamed, so a
//! reader never sees half an entry; and carry a checksum, so a corrupt entry is
//! recompiled, never loaded. The directory is private (0700) and entries owned by another
//! user are ignored: what is in it gets loaded onto the GPU.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::GpuError;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "ATOMR_ACCEL_CUDA_KERNEL_CACHE";

const MAGIC: &[u8; 8] = b"ATOMRK01";

/// A directory of compiled kernels.
#[derive(Debug, Clone)]
pub struct KernelCache {
    dir: PathBuf,
}

/// What was compiled, and for what: the inputs of a cache key.
#[derive(Debug, Clone, Copy)]
pub struct KernelKey<'a> {
    /// CUDA C++ source.
    pub source: &'a str,
    /// NVRTC options.
    pub options: &'a [String],
    /// Target, e.g. `sm_90`.
    pub arch: &'a str,
    /// NVRTC (major, minor).
    pub nvrtc_version: (i32, i32),
}

impl KernelKey<'_> {
    /// The hex BLAKE3 hash naming the entry.
    pub fn hash(&self) -> String {
        let mut h = blake3::Hasher::new();
        for part in [self.source.as_bytes(), self.arch.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&(self.options.len() as u64).to_le_bytes());
        for o in self.options {
            h.update(&(o.len() as u64).to_le_bytes());
            h.update(o.as_bytes());
        }
        h.update(&self.nvrtc_version.0.to_le_bytes());
        h.update(&self.nvrtc_version.1.to_le_bytes());
        h.finalize().to_hex().to_string()
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> GpuError {
    GpuError::io(format!("kernel cache: {what} {}", path.display()), e)
}

impl KernelCache {
    /// The default directory: `$ATOMR_ACCEL_CUDA_KERNEL_CACHE`, else the user's cache
    /// directory (`~/.cache/atomr-accel-cuda/kernels` on Linux), else a temp folder.
    pub fn default_dir() -> PathBuf {
        if let Some(d) = std::env::var_os(CACHE_DIR_ENV) {
            return PathBuf::from(d);
        }
        dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("atomr-accel-cuda")
            .join("kernels")
    }

    /// Opens (creating, private) the cache in `dir`.
    /// Creating and restricting the directory happens once per directory and process:
    /// a cache hit then costs no directory syscalls.
    pub fn open(dir: impl Into<PathBuf>) -> Result<KernelCache, GpuError> {
        static PREPARED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        let dir = dir.into();
        let mut prepared = PREPARED.lock().unwrap_or_else(|p| p.into_inner());
        if !prepared.contains(&dir) {
            fs::create_dir_all(&dir).map_err(|e| io("cannot create", &dir, e))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| io("cannot restrict", &dir, e))?;
            }
            prepared.push(dir.clone());
        }
        Ok(KernelCache { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}.bin"))
    }

    /// The cached image for `hash`, if a valid entry of ours exists. A corrupt or foreign
    /// entry is treated as missing (and a corrupt one removed).
    pub fn get(&self, hash: &str) -> Option<Vec<u8>> {
        let path = self.path(hash);
        let meta = fs::metadata(&path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // The entry must belong to whoever owns the directory we opened (us).
            let ours = fs::metadata(&self.dir).map(|m| m.uid()).ok()?;
            if meta.uid() != ours {
                tracing::warn!(path = %path.display(), "kernel cache entry owned by another user: ignored");
                return None;
            }
        }
        let _ = meta;
        let bytes = fs::read(&path).ok()?;
        let valid = bytes.len() > MAGIC.len() + 32
            && &bytes[..MAGIC.len()] == MAGIC
            && blake3::hash(&bytes[MAGIC.len() + 32..]).as_bytes() == &bytes[MAGIC.len()..MAGIC.len() + 32];
        if !valid {
            tracing::warn!(path = %path.display(), "corrupt kernel cache entry: recompiling");
            let _ = fs::remove_file(&path);
            return None;
        }
        Some(bytes[MAGIC.len() + 32..].to_vec())
    }

    /// Stores `image` under `hash` atomically (temp file + rename).
    pub fn put(&self, hash: &str, image: &[u8]) -> Result<(), GpuError> {
        let path = self.path(hash);
        let tmp = self.dir.join(format!(".{hash}.{}.tmp", std::process::id()));
        let mut f = fs::File::create(&tmp).map_err(|e| io("cannot write", &tmp, e))?;
        f.write_all(MAGIC)
            .and_then(|_| f.write_all(blake3::hash(image).as_bytes()))
            .and_then(|_| f.write_all(image))
            .and_then(|_| f.sync_all())
            .map_err(|e| io("cannot write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| io("cannot publish", &path, e))
    }
}

/// The NVRTC target for a compute capability: `(9, 0)` → `"sm_90"`.
pub fn sm_arch((major, minor): (i32, i32)) -> String {
    format!("sm_{major}{minor}")
}

/// The compiled image of `source` for `arch` (`sm_XY`: a CUBIN, or PTX when NVRTC does
/// not know the device; `compute_XY`: PTX): from the disk cache in `dir` (the default
/// directory if `None`), else compiled by NVRTC and stored there. `true` if it came from
/// the cache. A cache that cannot be opened only costs the caching, never the compile.
pub fn compile_cached(
    source: &str,
    arch: &str,
    options: &[String],
    dir: Option<&Path>,
) -> Result<(Vec<u8>, bool), GpuError> {
    let key = KernelKey {
        source,
        options,
        arch,
        nvrtc_version: crate::sys::nvrtc_version()?,
    }
    .hash();
    let cache = match dir {
        Some(d) => Some(KernelCache::open(d)?),
        None => KernelCache::open(KernelCache::default_dir()).ok(),
    };
    if let Some(image) = cache.as_ref().and_then(|c| c.get(&key)) {
        return Ok((image, true));
    }
    let image = crate::sys::compile_image(source, arch, options)?;
    if let Some(c) = &cache {
        if let Err(e) = c.put(&key, &image) {
            tracing::warn!(%e, "could not store a compiled kernel");
        }
    }
    Ok((image, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_cache(tag: &str) -> KernelCache {
        let dir = std::env::temp_dir().join(format!("atomr-kcache-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        KernelCache::open(dir).unwrap()
    }

    fn key(src: &str) -> String {
        KernelKey {
            source: src,
            options: &["-O3".to_string()],
            arch: "sm_90",
            nvrtc_version: (13, 0),
        }
        .hash()
    }

    #[test]
    fn keys_cover_every_input() {
        let base = key("a");
        assert_ne!(base, key("b"));
        let opts = ["-O2".to_string()];
        let k = |arch, v, options: &[String]| {
            KernelKey {
                source: "a",
                options,
                arch,
                nvrtc_version: v,
            }
            .hash()
        };
        let o3 = ["-O3".to_string()];
        assert_eq!(base, k("sm_90", (13, 0), &o3));
        assert_ne!(base, k("sm_80", (13, 0), &o3));
        assert_ne!(base, k("sm_90", (12, 9), &o3));
        assert_ne!(base, k("sm_90", (13, 0), &opts));
    }

    #[test]
    fn round_trip_and_corruption_is_a_miss() {
        let c = temp_cache("rt");
        let h = key("kernel");
        assert_eq!(c.get(&h), None);
        let image: Vec<u8> = (0..4000u32).map(|i| (i * 7 % 251) as u8).collect();
        c.put(&h, &image).unwrap();
        assert_eq!(c.get(&h).as_deref(), Some(&image[..]));
        // Flip one byte of the image: the checksum catches it and the entry goes.
        let path = c.dir().join(format!("{h}.bin"));
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xFF;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(c.get(&h), None);
        assert!(!path.exists());
        // A truncated entry too.
        c.put(&h, &image).unwrap();
        fs::write(&path, &fs::read(&path).unwrap()[..20]).unwrap();
        assert_eq!(c.get(&h), None);
    }

    #[cfg(unix)]
    #[test]
    fn directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let c = temp_cache("perm");
        let mode = fs::metadata(c.dir()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
