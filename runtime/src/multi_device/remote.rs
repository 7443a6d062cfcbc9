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

use super::exchange::{Answer, Call, Compute, Data, Exchange, Key, Kind};
use super::host;
use super::reduce::CollectiveScalar;
use crate::error::GpuError;

/// A random challenge of one side of a handshake.
pub(crate) type Nonce = [u8; 32];

/// A keyed hash proving knowledge of the world's token (see `rendezvous::prove`).
pub(crate) type Proof = [u8; 32];

/// One message between a rank's process and the coordinator; a payload of bytes
/// follows each (empty but for a host world's data).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Frame {
    /// The coordinator's first word on a new connection: a challenge to answer.
    Challenge { nonce: Nonce },
    /// A rank's process introduces itself, with its own challenge to the coordinator and,
    /// in a world with a token, its proof.
    Hello {
        rank: usize,
        size: usize,
        nccl: bool,
        nonce: Nonce,
        proof: Option<Proof>,
    },
    /// The coordinator admits it, with the NCCL clique's id for a world of GPUs and, in a
    /// world with a token, its own proof.
    Welcome {
        nccl_id: Option<Vec<u8>>,
        proof: Option<Proof>,
    },
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

impl Frame {
    /// The frame's kind, for errors (never its contents: they came from a peer).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Frame::Challenge { .. } => "a challenge",
            Frame::Hello { .. } => "a hello",
            Frame::Welcome { .. } => "a welcome",
            Frame::Refused { .. } => "a refusal",
            Frame::Meet { .. } => "a meeting",
            Frame::Abandon { .. } => "an abandon",
            Frame::Answer { .. } => "an answer",
        }
    }
}

/// The largest header a frame may have (its payload is bounded by the collective).
const MAX_HEADER: u32 = 1 << 20;

/// Writes `frame` and `payload`.
pub(crate) async fn write_frame(
    w: &mut (impl AsyncWrite + Unpin),
    frame: &Frame,
    payload: &[u8],
) -> Result<(), GpuError> {
    let header = serde_json::to_vec(frame).map_err(|e| GpuError::Internal(format!("encode {}: {e}", frame.name())))?;
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

/// Reads one frame and its payload. `limit` says, from the header, how many payload
/// bytes that frame may carry: a longer payload is refused before anything is allocated
/// for it, and the payload is read as it arrives (a peer that claims more than it sends
/// costs nothing but its connection).
pub(crate) async fn read_frame(
    r: &mut (impl AsyncRead + Unpin),
    limit: impl FnOnce(&Frame) -> u64,
) -> Result<(Frame, Vec<u8>), GpuError> {
    let io = |e| GpuError::io("receive from the world", e);
    let n = r.read_u32_le().await.map_err(io)?;
    if n > MAX_HEADER {
        return Err(GpuError::invalid(format!(
            "a frame header of {n} bytes (at most {MAX_HEADER}): not a peer of this world"
        )));
    }
    let mut header = Vec::new();
    (&mut *r).take(n as u64).read_to_end(&mut header).await.map_err(io)?;
    if header.len() != n as usize {
        return Err(GpuError::invalid(format!(
            "a frame header cut short: {} of {n} bytes",
            header.len()
        )));
    }
    let frame: Frame =
        serde_json::from_slice(&header).map_err(|e| GpuError::invalid(format!("a frame that is not one: {e}")))?;
    let len = r.read_u64_le().await.map_err(io)?;
    let max = limit(&frame);
    if len > max {
        return Err(GpuError::invalid(format!(
            "{} with a payload of {len} bytes, where at most {max} may follow it",
            frame.name()
        )));
    }
    let mut payload = Vec::new();
    (&mut *r).take(len).read_to_end(&mut payload).await.map_err(io)?;
    if payload.len() as u64 != len {
        return Err(GpuError::invalid(format!(
            "{} whose payload was cut short: {} of {len} bytes",
            frame.name(),
            payload.len()
        )));
    }
    Ok((frame, payload))
}

/// Bytes from the wire back into a party's data.
type Decode = fn(&[u8]) -> Result<Data, GpuError>;

/// Where a party's answer goes, how it decodes, and the most bytes it can have.
type Waiter = (oneshot::Sender<Result<Data, GpuError>>, Decode, u64);

/// How a party's data crosses the wire, and what the meeting computes, for one call.
#[derive(Clone, Copy)]
pub(crate) struct Codec {
    /// Bytes per element on the wire (0: no data crosses).
    pub(crate) elem_bytes: usize,
    pub(crate) encode: fn(&Data) -> Vec<u8>,
    pub(crate) decode: Decode,
    pub(crate) compute: fn() -> Compute,
}

impl Codec {
    /// A host world's call on `T`: the data is a `Vec<T>`, combined on the host.
    pub(crate) fn host<T: CollectiveScalar>() -> Codec {
        Codec {
            elem_bytes: std::mem::size_of::<T>(),
            encode: encode::<T>,
            decode: decode::<T>,
            compute: host::compute::<T>,
        }
    }

    /// A world of GPUs: no data, every party told to go.
    pub(crate) fn control() -> Codec {
        Codec {
            elem_bytes: 0,
            encode: |_| Vec::new(),
            decode: |_| Ok(Box::new(())),
            compute: || Box::new(|_, parts| Ok(parts.iter().map(|_| Box::new(()) as Data).collect())),
        }
    }

    /// The most payload bytes `parts` parts of `len` elements each can take.
    fn bytes(&self, len: usize, parts: usize) -> u64 {
        (self.elem_bytes as u64)
            .saturating_mul(len as u64)
            .saturating_mul(parts as u64)
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
                // An answer's payload is at most what the meeting waited for can hold.
                let limit = |f: &Frame| match f {
                    Frame::Answer {
                        key,
                        party,
                        error: None,
                    } => {
                        let pend = p.lock().unwrap_or_else(|e| e.into_inner());
                        pend.waiting.get(&(*key, *party)).map_or(0, |w| w.2)
                    }
                    _ => 0,
                };
                match read_frame(&mut reader, limit).await {
                    Ok((Frame::Answer { key, party, error }, payload)) => {
                        let mut pend = p.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some((tx, decode, _)) = pend.waiting.remove(&(key, party)) {
                            let _ = tx.send(match error {
                                Some(e) => Err(e),
                                None => decode(&payload),
                            });
                        }
                    }
                    Ok((other, _)) => {
                        break GpuError::invalid(format!("the coordinator sent {} where answers come", other.name()))
                    }
                    Err(e) => break e,
                }
            };
            let e = GpuError::DeviceLost(format!(
                "the world's coordinator (rank 0's process) is gone: {}",
                why.as_cause()
            ));
            let mut pend = p.lock().unwrap_or_else(|e| e.into_inner());
            pend.failed = Some(e.clone());
            for (_, (tx, _, _)) in pend.waiting.drain() {
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
            pend.waiting
                .insert((key, party), (tx, codec.decode, codec.bytes(call.len, parties)));
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
            if let Some((tx, _, _)) = pend.waiting.remove(&(key, party)) {
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

/// Reports a served rank gone when its task ends, however it ends (a disconnection, a
/// frame refused, a panic): the other ranks' meetings then fail at once instead of at
/// their deadline.
struct Departure {
    exchange: Arc<Exchange>,
    rank: usize,
    why: Option<GpuError>,
}

impl Drop for Departure {
    fn drop(&mut self) {
        let why = self
            .why
            .take()
            .unwrap_or_else(|| GpuError::Internal("its connection's task ended unexpectedly".into()));
        self.exchange.rank_left(
            self.rank,
            GpuError::DeviceLost(format!(
                "rank {}'s process left the world: {}",
                self.rank,
                why.as_cause()
            )),
        );
    }
}

/// Checks a meeting frame from rank `rank` of a world of `size` against what that rank
/// may say: its own party of a meeting of the right size, a send or receive it takes
/// part in, a root in the world.
fn check_meet(rank: usize, size: usize, key: &Key, party: usize, parties: usize, call: &Call) -> Result<(), GpuError> {
    let refuse = |why: String| Err(GpuError::invalid(format!("rank {rank} sent a meeting {why}")));
    match (call.kind, key) {
        (Kind::SendRecv { from, to }, Key::PointToPoint { from: kf, to: kt, .. }) => {
            if (from, to) != (*kf, *kt) || from >= size || to >= size || from == to {
                return refuse(format!(
                    "for a send from {from} to {to} (key {kf} to {kt}) in a world of {size}"
                ));
            }
            if parties != 2 || call.kind.party_of(rank, 2) != Some(party) {
                return refuse(format!("as party {party} of {parties} of a send from {from} to {to}"));
            }
        }
        (Kind::SendRecv { .. }, _) | (_, Key::PointToPoint { .. }) => {
            return refuse("whose key and kind disagree".into());
        }
        (kind, Key::Collective(_)) => {
            if parties != size || party != rank {
                return refuse(format!("as party {party} of {parties} in a world of {size}"));
            }
            if let Kind::Broadcast { root } = kind {
                if root >= size {
                    return refuse(format!("rooted at rank {root} of {size}"));
                }
            }
        }
    }
    Ok(())
}

/// Serves one rank's process at the coordinator: its meetings go to `exchange`, their
/// answers back; its disconnection — or any frame it may not send — fails the world.
pub(crate) fn serve(exchange: Arc<Exchange>, rank: usize, size: usize, nccl: bool, stream: TcpStream) {
    let (mut reader, writer) = stream.into_split();
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    tokio::spawn(async move {
        let mut departure = Departure {
            exchange: exchange.clone(),
            rank,
            why: None,
        };
        let why = loop {
            // A meeting's payload is its party's data: the call's length of its element
            // type (nothing on NCCL, whose data moves on its own transport).
            let limit = |f: &Frame| match f {
                Frame::Meet { call, error: None, .. } => match Codec::of(nccl, &call.dtype) {
                    Ok(c) => c.bytes(call.len, 1),
                    Err(_) => 0,
                },
                _ => 0,
            };
            match read_frame(&mut reader, limit).await {
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
                    // A frame the rank may not send fails the rank; a dtype collectives
                    // do not have fails the meeting (every party hears why).
                    if let Err(e) = check_meet(rank, size, &key, party, parties, &call) {
                        break e;
                    }
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
                Ok((Frame::Abandon { key, parties, error }, _)) => {
                    let expected = match key {
                        Key::PointToPoint { .. } => 2,
                        Key::Collective(_) => size,
                    };
                    if parties != expected {
                        break GpuError::invalid(format!(
                            "rank {rank} abandoned a meeting of {parties} parties, where it has {expected}"
                        ));
                    }
                    exchange.abandon(key, parties, error)
                }
                Ok((other, _)) => break GpuError::invalid(format!("rank {rank} sent {}", other.name())),
                Err(e) => break e,
            }
        };
        departure.why = Some(why);
    });
}
