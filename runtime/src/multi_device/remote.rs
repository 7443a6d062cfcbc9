//! Ranks in other processes: they meet at the coordinator — the exchange of rank 0's
//! process — over one TCP connection each.
//!
//! The connection carries the control of every collective (which call, checked across
//! ranks like in one process; abandons; answers) and, for a world of CPU devices only,
//! the data. A world of GPUs moves its data on NCCL's own transport (NVLink, PCIe,
//! InfiniBand, sockets — NCCL picks): the coordinator only says "every rank called the
//! same thing, go", so a disagreement is a typed error instead of an NCCL hang.
//!
//! A rank's process that disconnects (it exited or died) fails every meeting in progress
//! and every later one at once, on every rank; a coordinator that disconnects fails its
//! ranks' meetings the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::exchange::{Answer, Call, Compute, Data, Exchange, Key};
use super::host;
use super::reduce::CollectiveScalar;
use crate::error::GpuError;

/// One message between a rank's process and the coordinator; a payload of bytes
/// follows each (empty but for a host world's data).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Frame {
    /// A rank's process introduces itself.
    Hello { rank: usize, size: usize, nccl: bool },
    /// The coordinator admits it, with the NCCL clique's id for a world of GPUs.
    Welcome { nccl_id: Option<Vec<u8>> },
    /// The coordinator refuses it.
    Refused { error: GpuError },
    /// A party arrives at a meeting (with its data as the payload, or why it has none).
    Meet {
        key: Key,
        party: usize,
        parties: usize,
        call: Call,
        error: Option<GpuError>,
    },
    /// A party gave up on a meeting.
    Abandon { key: Key, parties: usize, error: GpuError },
    /// A party's answer (its part as the payload, or the meeting's error).
    Answer {
        key: Key,
        party: usize,
        error: Option<GpuError>,
    },
}

/// The largest header a frame may have (its payload is bounded by the collective).
const MAX_HEADER: u32 = 1 << 20;

/// Writes `frame` and `payload`.
pub(crate) async fn write_frame(
    w: &mut (impl AsyncWrite + Unpin),
    frame: &Frame,
    payload: &[u8],
) -> Result<(), GpuError> {
    let header = serde_json::to_vec(frame).map_err(|e| GpuError::Internal(format!("encode {frame:?}: {e}")))?;
    let mut out = Vec::with_capacity(12 + header.len() + payload.len());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    w.write_all(&out)
        .await
        .map_err(|e| GpuError::io("send to the world", e))?;
    w.flush().await.map_err(|e| GpuError::io("send to the world", e))
}

/// Reads one frame and its payload.
pub(crate) async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> Result<(Frame, Vec<u8>), GpuError> {
    let io = |e| GpuError::io("receive from the world", e);
    let n = r.read_u32_le().await.map_err(io)?;
    if n > MAX_HEADER {
        return Err(GpuError::invalid(format!(
            "a frame header of {n} bytes: not a peer of this world"
        )));
    }
    let mut header = vec![0; n as usize];
    r.read_exact(&mut header).await.map_err(io)?;
    let frame =
        serde_json::from_slice(&header).map_err(|e| GpuError::invalid(format!("a frame that is not one: {e}")))?;
    let len = r.read_u64_le().await.map_err(io)?;
    let mut payload = vec![0; usize::try_from(len).map_err(|_| GpuError::invalid("payload too large"))?];
    r.read_exact(&mut payload).await.map_err(io)?;
    Ok((frame, payload))
}

/// Bytes from the wire back into a party's data.
type Decode = fn(&[u8]) -> Result<Data, GpuError>;

/// Where a party's answer goes, and how it decodes.
type Waiter = (oneshot::Sender<Result<Data, GpuError>>, Decode);

/// How a party's data crosses the wire, and what the meeting computes, for one call.
#[derive(Clone, Copy)]
pub(crate) struct Codec {
    pub(crate) encode: fn(&Data) -> Vec<u8>,
    pub(crate) decode: Decode,
    pub(crate) compute: fn() -> Compute,
}

impl Codec {
    /// A host world's call on `T`: the data is a `Vec<T>`, combined on the host.
    pub(crate) fn host<T: CollectiveScalar>() -> Codec {
        Codec {
            encode: encode::<T>,
            decode: decode::<T>,
            compute: host::compute::<T>,
        }
    }

    /// A world of GPUs: no data, every party told to go.
    pub(crate) fn control() -> Codec {
        Codec {
            encode: |_| Vec::new(),
            decode: |_| Ok(Box::new(())),
            compute: || Box::new(|_, parts| Ok(parts.iter().map(|_| Box::new(()) as Data).collect())),
        }
    }

    /// The codec of a call whose element type is named `dtype`.
    fn of(nccl: bool, dtype: &str) -> Result<Codec, GpuError> {
        use half::{bf16, f16};
        Ok(match (nccl, dtype) {
            (true, _) => Codec::control(),
            (false, "f32") => Codec::host::<f32>(),
            (false, "f64") => Codec::host::<f64>(),
            (false, "f16") => Codec::host::<f16>(),
            (false, "bf16") => Codec::host::<bf16>(),
            (false, other) => {
                return Err(GpuError::invalid(format!(
                    "a collective on {other}: not an element type of collectives"
                )))
            }
        })
    }
}

fn encode<T: CollectiveScalar>(d: &Data) -> Vec<u8> {
    let v = d.downcast_ref::<Vec<T>>().expect("a Vec of T");
    let mut out = Vec::with_capacity(v.len() * std::mem::size_of::<T>());
    for &x in v {
        x.write_le(&mut out);
    }
    out
}

fn decode<T: CollectiveScalar>(bytes: &[u8]) -> Result<Data, GpuError> {
    let size = std::mem::size_of::<T>();
    if bytes.len() % size != 0 {
        return Err(GpuError::invalid(format!(
            "{} bytes are no whole number of {}",
            bytes.len(),
            T::NAME
        )));
    }
    Ok(Box::new(bytes.chunks_exact(size).map(T::read_le).collect::<Vec<T>>()))
}

/// A rank's process's end of its connection to the coordinator.
pub(crate) struct Client {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Arc<Mutex<Pending>>,
}

/// The meetings this process's rank waits on, by key and party, each with how its answer
/// decodes — or why none will come.
#[derive(Default)]
struct Pending {
    waiting: HashMap<(Key, usize), Waiter>,
    failed: Option<GpuError>,
}

impl Client {
    /// Takes over a connection whose handshake is done; a task reads the answers.
    pub(crate) fn start(stream: TcpStream) -> Arc<Client> {
        let (mut reader, writer) = stream.into_split();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let p = pending.clone();
        tokio::spawn(async move {
            let why = loop {
                match read_frame(&mut reader).await {
                    Ok((Frame::Answer { key, party, error }, payload)) => {
                        let mut pend = p.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some((tx, decode)) = pend.waiting.remove(&(key, party)) {
                            let _ = tx.send(match error {
                                Some(e) => Err(e),
                                None => decode(&payload),
                            });
                        }
                    }
                    Ok((other, _)) => break GpuError::Internal(format!("the coordinator sent {other:?}")),
                    Err(e) => break e,
                }
            };
            let e = GpuError::DeviceLost(format!(
                "the world's coordinator (rank 0's process) is gone: {}",
                why.as_cause()
            ));
            let mut pend = p.lock().unwrap_or_else(|e| e.into_inner());
            pend.failed = Some(e.clone());
            for (_, (tx, _)) in pend.waiting.drain() {
                let _ = tx.send(Err(e.clone()));
            }
        });
        Arc::new(Client {
            writer: tokio::sync::Mutex::new(writer),
            pending,
        })
    }

    /// Arrives at a meeting held by the coordinator.
    pub(crate) async fn meet(
        &self,
        key: Key,
        party: usize,
        parties: usize,
        call: Call,
        data: Result<Data, GpuError>,
        codec: Codec,
    ) -> Answer {
        let (tx, rx) = oneshot::channel();
        {
            let mut pend = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = &pend.failed {
                let _ = tx.send(Err(e.clone()));
                return rx;
            }
            pend.waiting.insert((key, party), (tx, codec.decode));
        }
        let (payload, error) = match &data {
            Ok(d) => ((codec.encode)(d), None),
            Err(e) => (Vec::new(), Some(e.clone())),
        };
        let frame = Frame::Meet {
            key,
            party,
            parties,
            call,
            error,
        };
        if let Err(e) = write_frame(&mut *self.writer.lock().await, &frame, &payload).await {
            let mut pend = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((tx, _)) = pend.waiting.remove(&(key, party)) {
                let _ = tx.send(Err(e));
            }
        }
        rx
    }

    /// Gives up on a meeting: the coordinator fails it for every party.
    pub(crate) async fn abandon(&self, key: Key, parties: usize, error: GpuError) {
        let frame = Frame::Abandon { key, parties, error };
        // A coordinator already gone has failed the meeting itself.
        let _ = write_frame(&mut *self.writer.lock().await, &frame, &[]).await;
    }
}

/// Serves one rank's process at the coordinator: its meetings go to `exchange`, their
/// answers back; its disconnection fails the world.
pub(crate) fn serve(exchange: Arc<Exchange>, rank: usize, nccl: bool, stream: TcpStream) {
    let (mut reader, writer) = stream.into_split();
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    tokio::spawn(async move {
        let why = loop {
            match read_frame(&mut reader).await {
                Ok((
                    Frame::Meet {
                        key,
                        party,
                        parties,
                        call,
                        error,
                    },
                    payload,
                )) => {
                    let codec = Codec::of(nccl, &call.dtype);
                    let data = match (&codec, error) {
                        (_, Some(e)) => Err(e),
                        (Ok(c), None) => (c.decode)(&payload),
                        (Err(e), None) => Err(e.clone()),
                    };
                    let codec = codec.unwrap_or(Codec::control());
                    let (compute, encode) = ((codec.compute)(), codec.encode);
                    let answer = exchange.meet(key, party, parties, call, data, compute);
                    let writer = writer.clone();
                    tokio::spawn(async move {
                        let r = answer
                            .await
                            .unwrap_or_else(|_| Err(GpuError::Internal("a meeting was dropped".into())));
                        let (payload, error) = match r {
                            Ok(d) => (encode(&d), None),
                            Err(e) => (Vec::new(), Some(e)),
                        };
                        let frame = Frame::Answer { key, party, error };
                        // A rank gone is noticed by the reader.
                        let _ = write_frame(&mut *writer.lock().await, &frame, &payload).await;
                    });
                }
                Ok((Frame::Abandon { key, parties, error }, _)) => exchange.abandon(key, parties, error),
                Ok((other, _)) => break GpuError::Internal(format!("rank {rank} sent {other:?}")),
                Err(e) => break e,
            }
        };
        exchange.rank_left(
            rank,
            GpuError::DeviceLost(format!("rank {rank}'s process left the world: {}", why.as_cause())),
        );
    });
}
