//! The persistent kernel cache: compiled GPU code on disk, keyed by everything that
//! changes the binary, checked before it is loaded.
//!
//! NVRTC takes 30–40 ms per kernel on the H200; loading a CUBIN takes ~20 µs (DESIGN.md).
//! Entries are keyed by a BLAKE3 hash of the source, the compile options, the target
//! architecture and the NVRTC version; written to a temporary file and renamed, so a
//! reader never sees half an entry; and carry a checksum, so a corrupt entry is
//! recompiled, never loaded.
//!
//! What is in the cache gets loaded onto the GPU, so a planted entry would run in the
//! victim's context. On Unix every use checks, without following links: the directory is
//! a real directory (not a symbolic link) owned by this process's effective user and
//! private (0700); an entry is a regular file owned by the same user, opened with
//! `O_NOFOLLOW`. Anything else is refused (an entry is treated as missing; a directory
//! makes `open` fail). Temporary files are created with `O_EXCL` under a name unique to
//! the writer, so two writers of one key (two contexts, two processes) never share one.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::GpuError;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "ATOMR_ACCEL_CUDA_KERNEL_CACHE";

const MAGIC: &[u8; 8] = b"ATOMRK01";

/// A directory of compiled kernels.
///
/// # Example
///
/// ```
/// # use atomr_accel_cuda_runtime::prelude::*;
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), GpuError> {
/// # let system = ActorSystem::new("doc");
/// use atomr_accel_cuda_runtime::nvrtc_cache::KernelCache;
/// let dir = std::env::temp_dir().join(format!("atomr-doc-cache-{}", std::process::id()));
/// let cache = KernelCache::open(&dir)?; // created private to this user
/// cache.put("0f1e2d3c", b"a compiled image")?;
/// assert_eq!(cache.get("0f1e2d3c").as_deref(), Some(&b"a compiled image"[..]));
/// assert_eq!(cache.get("not-there"), None);
/// # std::fs::remove_dir_all(&dir).ok();
/// # system.shutdown().await;
/// # Ok(())
/// # }
/// ```
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

/// True for a name that can only name a file inside the cache directory: hex digits from
/// [`KernelKey::hash`], or any other letters, digits, `-` and `_`.
fn valid_key(hash: &str) -> bool {
    !hash.is_empty()
        && hash.len() <= 128
        && hash
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Refuses `dir` unless it is a directory (not a link to one) owned by this process's
/// effective user and reachable by nobody else.
fn check_dir(dir: &Path) -> Result<(), GpuError> {
    let meta = fs::symlink_metadata(dir).map_err(|e| io("cannot inspect", dir, e))?;
    if !meta.file_type().is_dir() {
        return Err(GpuError::Io {
            what: format!(
                "kernel cache: {} is not a directory (a symbolic link is refused)",
                dir.display()
            ),
            message: "refused".into(),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = crate::sys::effective_uid();
        if meta.uid() != me {
            return Err(GpuError::Io {
                what: format!(
                    "kernel cache: {} belongs to user {}, not to this process's user {me}",
                    dir.display(),
                    meta.uid()
                ),
                message: "refused".into(),
            });
        }
        if meta.mode() & 0o077 != 0 {
            // Not made private here: the directory may be a shared one (`/tmp` named by
            // the environment variable), whose mode is not ours to change.
            return Err(GpuError::Io {
                what: format!(
                    "kernel cache: {} is open to other users (mode {:o}); make it private: chmod 700",
                    dir.display(),
                    meta.mode() & 0o777
                ),
                message: "refused".into(),
            });
        }
    }
    Ok(())
}

/// A name for a temporary file unique to this writer: process, counter and clock.
fn temp_name(hash: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        ".{hash}.{}.{}.{nanos:08x}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl KernelCache {
    /// The default directory: `$ATOMR_ACCEL_CUDA_KERNEL_CACHE`, else the user's cache
    /// directory (`~/.cache/atomr-accel-cuda/kernels` on Linux), else a folder of this
    /// user's own in the temp directory (`atomr-accel-cuda-<uid>/kernels`: a shared,
    /// predictable name could be made in advance by another user).
    pub fn default_dir() -> PathBuf {
        if let Some(d) = std::env::var_os(CACHE_DIR_ENV) {
            return PathBuf::from(d);
        }
        match dirs::cache_dir() {
            Some(d) => d.join("atomr-accel-cuda").join("kernels"),
            None => std::env::temp_dir()
                .join(Self::per_user("atomr-accel-cuda"))
                .join("kernels"),
        }
    }

    /// `name` made unique to this process's user.
    fn per_user(name: &str) -> String {
        #[cfg(unix)]
        return format!("{name}-{}", crate::sys::effective_uid());
        #[cfg(not(unix))]
        return name.to_string();
    }

    /// Opens the cache in `dir`, creating it private (0700) if it does not exist. A `dir`
    /// that is a symbolic link, belongs to another user or is open to other users is
    /// refused with `Io`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<KernelCache, GpuError> {
        let dir = dir.into();
        if fs::symlink_metadata(&dir).is_err() {
            let mut b = fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                b.mode(0o700);
            }
            b.create(&dir).map_err(|e| io("cannot create", &dir, e))?;
        }
        check_dir(&dir)?;
        Ok(KernelCache { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}.bin"))
    }

    /// The cached image for `hash`, if a valid entry of ours exists. A corrupt entry is
    /// treated as missing and removed; an entry that is not a regular file of ours (a
    /// link, another user's), or a directory that no longer passes [`KernelCache::open`]'s
    /// checks, is treated as missing and left alone.
    pub fn get(&self, hash: &str) -> Option<Vec<u8>> {
        if !valid_key(hash) {
            return None;
        }
        if let Err(e) = check_dir(&self.dir) {
            tracing::warn!(%e, "kernel cache directory refused");
            return None;
        }
        let path = self.path(hash);
        let mut options = fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = options.open(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.file_type().is_file() {
            tracing::warn!(path = %path.display(), "kernel cache entry is not a regular file: ignored");
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != crate::sys::effective_uid() {
                tracing::warn!(path = %path.display(), owner = meta.uid(), "kernel cache entry owned by another user: ignored");
                return None;
            }
        }
        let mut bytes = Vec::with_capacity(meta.len().min(1 << 30) as usize);
        file.read_to_end(&mut bytes).ok()?;
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

    /// Stores `image` under `hash` atomically: written to a temporary file of this writer's
    /// own (created exclusively, 0600), then renamed over the entry. `hash` must be letters,
    /// digits, `-` and `_` (what [`KernelKey::hash`] makes), else `InvalidArgument`.
    pub fn put(&self, hash: &str, image: &[u8]) -> Result<(), GpuError> {
        if !valid_key(hash) {
            return Err(GpuError::invalid(format!(
                "kernel cache key {hash:?}: letters, digits, '-' and '_' only (1 to 128)"
            )));
        }
        check_dir(&self.dir)?;
        let path = self.path(hash);
        let tmp = self.dir.join(temp_name(hash));
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let mut f = options.open(&tmp).map_err(|e| io("cannot write", &tmp, e))?;
        let written = f
            .write_all(MAGIC)
            .and_then(|_| f.write_all(blake3::hash(image).as_bytes()))
            .and_then(|_| f.write_all(image))
            .and_then(|_| f.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io("cannot write", &tmp, e));
        }
        fs::rename(&tmp, &path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io("cannot publish", &path, e)
        })
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

    #[test]
    fn keys_that_could_leave_the_directory_are_refused() {
        let c = temp_cache("keys");
        for bad in ["", "../x", "a/b", "a.b", "x\0y", &"a".repeat(129)] {
            assert!(
                matches!(c.put(bad, b"img"), Err(GpuError::InvalidArgument(_))),
                "{bad:?}"
            );
            assert_eq!(c.get(bad), None);
        }
    }

    #[test]
    fn two_writers_of_one_key_leave_one_valid_entry() {
        let c = temp_cache("writers");
        let h = key("shared");
        let images: Vec<Vec<u8>> = (0..8u8).map(|w| vec![w; 64 * 1024]).collect();
        let (h, images) = (&h, &images);
        std::thread::scope(|s| {
            for img in images {
                let c = c.clone();
                s.spawn(move || {
                    for _ in 0..20 {
                        c.put(h, img).unwrap();
                        let got = c.get(h).expect("an entry is always whole");
                        assert!(images.contains(&got), "a torn entry");
                    }
                });
            }
        });
        let left: Vec<_> = fs::read_dir(c.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, [format!("{h}.bin")], "no temporary file is left behind");
    }

    #[cfg(unix)]
    #[test]
    fn links_are_refused() {
        let c = temp_cache("links");
        let h = key("target");
        c.put(&h, b"image").unwrap();
        // An entry that is a symbolic link to a valid entry is not followed.
        let link = c.dir().join(format!("{}.bin", key("link")));
        std::os::unix::fs::symlink(c.dir().join(format!("{h}.bin")), &link).unwrap();
        assert_eq!(c.get(&key("link")), None);
        assert!(link.exists(), "a refused entry is left for its owner to look at");
        // A cache directory that is a symbolic link is refused on open, and after the
        // fact on use.
        let real = c.dir().to_path_buf();
        let alias = real.with_file_name(format!("{}-alias", real.file_name().unwrap().to_str().unwrap()));
        let _ = fs::remove_file(&alias);
        std::os::unix::fs::symlink(&real, &alias).unwrap();
        assert!(matches!(KernelCache::open(&alias), Err(GpuError::Io { .. })));
        let swapped = KernelCache { dir: alias.clone() };
        assert_eq!(swapped.get(&h), None);
        assert!(swapped.put(&h, b"x").is_err());
        fs::remove_file(&alias).unwrap();
    }

    /// Entries and directories of another user are refused. Changing a file's owner needs
    /// root (CI runs as root); elsewhere the test says it could not run its check.
    #[cfg(unix)]
    #[test]
    fn another_users_entries_and_directories_are_refused() {
        let c = temp_cache("owner");
        let h = key("theirs");
        c.put(&h, b"image").unwrap();
        let entry = c.dir().join(format!("{h}.bin"));
        let other = crate::sys::effective_uid().wrapping_add(4242);
        if let Err(e) = std::os::unix::fs::chown(&entry, Some(other), None) {
            eprintln!("skipped: chown needs root ({e})");
            return;
        }
        assert_eq!(c.get(&h), None, "another user's entry");
        let dir = c.dir().to_path_buf();
        std::os::unix::fs::chown(&dir, Some(other), None).unwrap();
        assert!(matches!(KernelCache::open(&dir), Err(GpuError::Io { .. })));
        assert!(c.put(&key("new"), b"x").is_err());
        std::os::unix::fs::chown(&dir, Some(crate::sys::effective_uid()), None).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let c = temp_cache("open");
        c.put(&key("k"), b"image").unwrap();
        let entry = fs::metadata(c.dir().join(format!("{}.bin", key("k")))).unwrap();
        assert_eq!(entry.permissions().mode() & 0o777, 0o600);
        fs::set_permissions(c.dir(), fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(c.get(&key("k")), None);
        match KernelCache::open(c.dir()) {
            Err(GpuError::Io { what, .. }) => assert!(what.contains("chmod 700"), "{what}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            fs::metadata(c.dir()).unwrap().permissions().mode() & 0o777,
            0o777,
            "left as it was"
        );
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
