//! `replay`: a deterministic-replay harness. A [`Recorder`] wraps a [`Device`] and writes
//! every request it forwards to a journal — one JSON object per line, buffer contents
//! exact (base64 of their little-endian bytes) — and every download as a BLAKE3 hash of
//! what came back. [`replay`] reads the journal into a fresh device, re-issues the
//! requests in order and checks each download against its hash: a bit-identical run, or
//! the first place it diverged.
//!
//! Journalled: `alloc`, `upload`, `write`, `copy`, `gemm` (incl. strided-batched; f16,
//! bf16, f32, f64), the RNG (`seed_rng`, `fill_uniform`, `fill_normal`; f32, f64) and
//! `download`, for all 14 dtypes where they apply. Results are bit-identical on the
//! same backend and GPU model with the same library versions (cuBLAS picks its kernels
//! per GPU; the CPU device's GEMM is deterministic per thread count); the RNG replays
//! exactly because the journal records the seeds.
//!
//! Each line is flushed as it is written, so a journal cut short by a crash replays up
//! to the crash.

use std::any::Any;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::device::Device;
use crate::device::{BlasScalar, DType, RandomScalar};
use crate::dtype::{c32, c64, DTypeBase};
use crate::error::GpuError;
use crate::gpu_ref::GpuRef;
use crate::library::blas::{Batch, Gemm};
use half::{bf16, f16};

/// The journal's format name, on its first line.
pub const FORMAT: &str = "atomr-accel-cuda journal";

/// A GEMM's parameters (alpha and beta as f64, exact for every GEMM dtype).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct GemmRecord {
    transa: bool,
    transb: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    beta: f64,
    lda: usize,
    ldb: usize,
    ldc: usize,
    batch: usize,
    stride_a: usize,
    stride_b: usize,
    stride_c: usize,
}

/// One line of a journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Entry {
    Begin {
        format: String,
        version: u32,
        backend: String,
    },
    Alloc {
        id: u64,
        dtype: String,
        len: usize,
    },
    Upload {
        id: u64,
        dtype: String,
        data: String,
    },
    Write {
        id: u64,
        dtype: String,
        data: String,
    },
    Copy {
        dtype: String,
        src: u64,
        dst: u64,
    },
    Gemm {
        dtype: String,
        gemm: GemmRecord,
        a: u64,
        b: u64,
        c: u64,
    },
    Reseed {
        seed: u64,
    },
    Uniform {
        dtype: String,
        id: u64,
    },
    Normal {
        dtype: String,
        id: u64,
        mean: f64,
        std: f64,
    },
    Download {
        dtype: String,
        id: u64,
        blake3: String,
    },
}

fn io(e: impl std::fmt::Display) -> GpuError {
    GpuError::Other(format!("journal: {e}"))
}

fn encode<T: DTypeBase>(v: &[T]) -> String {
    let mut bytes = Vec::with_capacity(std::mem::size_of_val(v));
    v.iter().for_each(|x| x.write_le(&mut bytes));
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode<T: DTypeBase>(s: &str) -> Result<Vec<T>, GpuError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| GpuError::invalid(format!("journal: bad data: {e}")))?;
    crate::dtype::whole_elements::<T>(bytes.len(), "journal")?;
    Ok(bytes.chunks_exact(std::mem::size_of::<T>()).map(T::read_le).collect())
}

fn digest<T: DTypeBase>(v: &[T]) -> String {
    let mut bytes = Vec::with_capacity(std::mem::size_of_val(v));
    v.iter().for_each(|x| x.write_le(&mut bytes));
    blake3::hash(&bytes).to_hex().to_string()
}

/// Records the requests sent to a device. Buffers must be created through it (its
/// `alloc`/`upload`), so the journal can name them.
pub struct Recorder {
    device: Device,
    out: Mutex<std::io::BufWriter<std::fs::File>>,
    /// Buffer id → journal id.
    ids: Mutex<HashMap<u64, u64>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recorder({:?})", self.device.state().info.map(|i| i.name))
    }
}

impl Recorder {
    /// Starts a journal at `path` (truncating it) for requests to `device`.
    pub async fn create(device: &Device, path: impl AsRef<Path>) -> Result<Recorder, GpuError> {
        let info = device.ready().await?;
        let file = std::fs::File::create(path.as_ref()).map_err(io)?;
        let r = Recorder {
            device: device.clone(),
            out: Mutex::new(std::io::BufWriter::new(file)),
            ids: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        };
        r.log(&Entry::Begin {
            format: FORMAT.into(),
            version: 1,
            backend: format!("{:?}", info.backend),
        })?;
        Ok(r)
    }

    /// The device requests go to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn log(&self, e: &Entry) -> Result<(), GpuError> {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        serde_json::to_writer(&mut *out, e).map_err(io)?;
        out.write_all(b"\n").map_err(io)?;
        out.flush().map_err(io)
    }

    fn name<T: DTypeBase>(&self, r: &GpuRef<T>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.ids.lock().unwrap_or_else(|p| p.into_inner()).insert(r.id(), id);
        id
    }

    fn id_of<T: DTypeBase>(&self, r: &GpuRef<T>) -> Result<u64, GpuError> {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&r.id())
            .copied()
            .ok_or_else(|| {
                GpuError::invalid(format!(
                    "buffer #{} was not created through this recorder, so the journal cannot name it",
                    r.id()
                ))
            })
    }

    /// `Device::alloc`, journalled.
    pub async fn alloc<T: DType>(&self, len: usize) -> Result<GpuRef<T>, GpuError> {
        let r = self.device.alloc::<T>(len).await?;
        let id = self.name(&r);
        self.log(&Entry::Alloc {
            id,
            dtype: T::NAME.into(),
            len,
        })?;
        Ok(r)
    }

    /// `Device::upload`, journalled with the data.
    pub async fn upload<T: DType>(&self, data: Vec<T>) -> Result<GpuRef<T>, GpuError> {
        let encoded = encode(&data);
        let r = self.device.upload(data).await?;
        let id = self.name(&r);
        self.log(&Entry::Upload {
            id,
            dtype: T::NAME.into(),
            data: encoded,
        })?;
        Ok(r)
    }

    /// `Device::write`, journalled with the data.
    pub async fn write<T: DType>(&self, dst: &GpuRef<T>, data: Vec<T>) -> Result<(), GpuError> {
        let id = self.id_of(dst)?;
        let encoded = encode(&data);
        self.device.write(dst, data).await?;
        self.log(&Entry::Write {
            id,
            dtype: T::NAME.into(),
            data: encoded,
        })
    }

    /// `Device::copy`, journalled.
    pub async fn copy<T: DType>(&self, src: &GpuRef<T>, dst: &GpuRef<T>) -> Result<(), GpuError> {
        let (s, d) = (self.id_of(src)?, self.id_of(dst)?);
        self.device.copy(src, dst).await?;
        self.log(&Entry::Copy {
            dtype: T::NAME.into(),
            src: s,
            dst: d,
        })
    }

    /// `Device::gemm`, journalled.
    pub async fn gemm<T: BlasScalar>(
        &self,
        g: Gemm<T>,
        a: &GpuRef<T>,
        b: &GpuRef<T>,
        c: &GpuRef<T>,
    ) -> Result<(), GpuError> {
        self.gemm_strided_batched(g, Batch::one(), a, b, c).await
    }

    /// `Device::gemm_strided_batched`, journalled.
    pub async fn gemm_strided_batched<T: BlasScalar>(
        &self,
        g: Gemm<T>,
        batch: Batch,
        a: &GpuRef<T>,
        b: &GpuRef<T>,
        c: &GpuRef<T>,
    ) -> Result<(), GpuError> {
        let (ia, ib, ic) = (self.id_of(a)?, self.id_of(b)?, self.id_of(c)?);
        self.device.gemm_strided_batched(g, batch, a, b, c).await?;
        self.log(&Entry::Gemm {
            dtype: T::NAME.into(),
            gemm: GemmRecord {
                transa: g.transa,
                transb: g.transb,
                m: g.m,
                n: g.n,
                k: g.k,
                alpha: g.alpha.to_f64(),
                beta: g.beta.to_f64(),
                lda: g.lda,
                ldb: g.ldb,
                ldc: g.ldc,
                batch: batch.count,
                stride_a: batch.stride_a,
                stride_b: batch.stride_b,
                stride_c: batch.stride_c,
            },
            a: ia,
            b: ib,
            c: ic,
        })
    }

    /// `Device::seed_rng`, journalled.
    pub async fn seed_rng(&self, seed: u64) -> Result<(), GpuError> {
        self.device.seed_rng(seed).await?;
        self.log(&Entry::Reseed { seed })
    }

    /// `Device::fill_uniform`, journalled.
    pub async fn fill_uniform<T: RandomScalar>(&self, dst: &GpuRef<T>) -> Result<(), GpuError> {
        let id = self.id_of(dst)?;
        self.device.fill_uniform(dst).await?;
        self.log(&Entry::Uniform {
            dtype: T::NAME.into(),
            id,
        })
    }

    /// `Device::fill_normal`, journalled.
    pub async fn fill_normal<T: RandomScalar>(&self, dst: &GpuRef<T>, mean: T, std: T) -> Result<(), GpuError> {
        let id = self.id_of(dst)?;
        self.device.fill_normal(dst, mean, std).await?;
        self.log(&Entry::Normal {
            dtype: T::NAME.into(),
            id,
            mean: mean.to_f64(),
            std: std.to_f64(),
        })
    }

    /// `Device::download`, journalled as a hash of the result: the checkpoint a replay
    /// compares against.
    pub async fn download<T: DType>(&self, src: &GpuRef<T>) -> Result<Vec<T>, GpuError> {
        let id = self.id_of(src)?;
        let v = self.device.download(src).await?;
        self.log(&Entry::Download {
            dtype: T::NAME.into(),
            id,
            blake3: digest(&v),
        })?;
        Ok(v)
    }
}

/// Where a replay first produced different bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The journal line (1-based) of the download that differed.
    pub line: usize,
    /// The journal's name of the buffer.
    pub buffer: u64,
    /// The hash the journal recorded.
    pub recorded: String,
    /// The hash of this replay's download.
    pub replayed: String,
}

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayReport {
    /// Requests re-issued (journal lines after the first).
    pub operations: usize,
    /// Downloads compared with their recorded hash.
    pub downloads_checked: usize,
    /// The first download that differed (the replay stops there).
    pub divergence: Option<Divergence>,
}

impl ReplayReport {
    /// True if every download matched the journal bit for bit.
    pub fn is_bit_identical(&self) -> bool {
        self.divergence.is_none()
    }
}

/// Buffers of a replay, by journal id (each a `GpuRef<T>` of its dtype).
type Buffers = HashMap<u64, Box<dyn Any + Send + Sync>>;

fn buffer<T: DTypeBase>(bufs: &Buffers, id: u64, line: usize) -> Result<&GpuRef<T>, GpuError> {
    bufs.get(&id)
        .and_then(|b| b.downcast_ref::<GpuRef<T>>())
        .ok_or_else(|| GpuError::invalid(format!("journal line {line}: no {} buffer {id}", T::NAME)))
}

/// Runs `$body` with `$T` bound to the dtype named `$name`, among `[$t, …]`.
macro_rules! with_dtype {
    ($name:expr, $line:expr, [$($t:ty),*], $T:ident => $body:expr) => {
        match $name {
            $(n if n == <$t as DTypeBase>::NAME => {
                type $T = $t;
                $body
            })*
            other => Err(GpuError::invalid(format!(
                "journal line {}: dtype `{other}` is not one this operation takes",
                $line
            ))),
        }
    };
}

/// Replays the journal at `path` into `device` (a fresh one: the journal's buffers are
/// created anew) and checks every recorded download.
pub async fn replay(path: impl AsRef<Path>, device: &Device) -> Result<ReplayReport, GpuError> {
    let file = std::fs::File::open(path.as_ref()).map_err(io)?;
    let mut bufs: Buffers = HashMap::new();
    let mut report = ReplayReport {
        operations: 0,
        downloads_checked: 0,
        divergence: None,
    };
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry =
            serde_json::from_str(&line).map_err(|e| GpuError::invalid(format!("journal line {n}: {e}")))?;
        if n == 1 {
            match &entry {
                Entry::Begin { format, version: 1, .. } if format == FORMAT => continue,
                _ => {
                    return Err(GpuError::invalid(format!(
                        "not a version-1 {FORMAT} (first line: {line})"
                    )))
                }
            }
        }
        report.operations += 1;
        if let Some(d) = step(device, &mut bufs, entry, n).await? {
            report.downloads_checked += 1;
            if d.recorded != d.replayed {
                report.divergence = Some(d);
                break;
            }
        }
    }
    Ok(report)
}

/// Re-issues one entry; a download returns its comparison.
async fn step(device: &Device, bufs: &mut Buffers, entry: Entry, n: usize) -> Result<Option<Divergence>, GpuError> {
    macro_rules! all {
        ($name:expr, $T:ident => $body:expr) => {
            with_dtype!($name, n, [f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, c32, c64], $T => $body)
        };
    }
    match entry {
        Entry::Begin { .. } => Err(GpuError::invalid(format!("journal line {n}: a second begin"))),
        Entry::Alloc { id, dtype, len } => all!(dtype.as_str(), T => {
            bufs.insert(id, Box::new(device.alloc::<T>(len).await?));
            Ok(None)
        }),
        Entry::Upload { id, dtype, data } => all!(dtype.as_str(), T => {
            bufs.insert(id, Box::new(device.upload(decode::<T>(&data)?).await?));
            Ok(None)
        }),
        Entry::Write { id, dtype, data } => all!(dtype.as_str(), T => {
            device.write(buffer::<T>(bufs, id, n)?, decode::<T>(&data)?).await?;
            Ok(None)
        }),
        Entry::Copy { dtype, src, dst } => all!(dtype.as_str(), T => {
            device.copy(buffer::<T>(bufs, src, n)?, buffer::<T>(bufs, dst, n)?).await?;
            Ok(None)
        }),
        Entry::Gemm {
            dtype,
            gemm: g,
            a,
            b,
            c,
        } => {
            with_dtype!(dtype.as_str(), n, [f16, bf16, f32, f64], T => {
                let gemm = Gemm::<T> {
                    transa: g.transa,
                    transb: g.transb,
                    m: g.m,
                    n: g.n,
                    k: g.k,
                    alpha: T::from_f64(g.alpha),
                    beta: T::from_f64(g.beta),
                    lda: g.lda,
                    ldb: g.ldb,
                    ldc: g.ldc,
                };
                let batch = Batch {
                    count: g.batch,
                    stride_a: g.stride_a,
                    stride_b: g.stride_b,
                    stride_c: g.stride_c,
                };
                let (a, b, c) = (buffer::<T>(bufs, a, n)?, buffer::<T>(bufs, b, n)?, buffer::<T>(bufs, c, n)?);
                device.gemm_strided_batched(gemm, batch, a, b, c).await?;
                Ok(None)
            })
        }
        Entry::Reseed { seed } => {
            device.seed_rng(seed).await?;
            Ok(None)
        }
        Entry::Uniform { dtype, id } => with_dtype!(dtype.as_str(), n, [f32, f64], T => {
            device.fill_uniform(buffer::<T>(bufs, id, n)?).await?;
            Ok(None)
        }),
        Entry::Normal { dtype, id, mean, std } => with_dtype!(dtype.as_str(), n, [f32, f64], T => {
            device.fill_normal(buffer::<T>(bufs, id, n)?, T::from_f64(mean), T::from_f64(std)).await?;
            Ok(None)
        }),
        Entry::Download { dtype, id, blake3 } => all!(dtype.as_str(), T => {
            let v = device.download(buffer::<T>(bufs, id, n)?).await?;
            Ok(Some(Divergence {
                line: n,
                buffer: id,
                recorded: blake3,
                replayed: digest(&v),
            }))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_bit_for_bit() {
        let v = vec![f32::NAN, -0.0, 1.5e-42, f32::INFINITY];
        let back = decode::<f32>(&encode(&v)).unwrap();
        assert!(v.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
        let w = vec![u64::MAX, 1 << 60, 3];
        assert_eq!(decode::<u64>(&encode(&w)).unwrap(), w);
        let c = vec![c64::new(1.0, -2.0), c64::new(f64::MIN_POSITIVE, 0.5)];
        assert_eq!(decode::<c64>(&encode(&c)).unwrap(), c);
        let h = vec![bf16::from_f32(3.25), bf16::from_bits(0x7fc1)];
        assert!(decode::<bf16>(&encode(&h))
            .unwrap()
            .iter()
            .zip(&h)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(decode::<f64>(&encode(&[1u8, 2, 3])).is_err(), "3 bytes are not an f64");
    }
}
