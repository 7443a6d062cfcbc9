//! Frames on the socket between a user process and its GPU worker:
//! `[u64 length][u8 kind][u64 id][payload]`, little-endian, one `write` each.

use std::io::{Read, Write};

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// User → worker: a request (`id`: the request id).
    Request = 1,
    /// User → worker: the last handle to buffer `id` was dropped.
    Free = 2,
    /// User → worker: a reply-arena range was read (payload: offset, length).
    Release = 3,
    /// User → worker: the `ActorGpu` numbered `id` is gone (`device::origin`).
    OriginClosed = 4,
    /// User → worker: time operations (`id` 1) or stop (`id` 0), as the user process's
    /// `observability::enable_timeline` says.
    Timeline = 5,
    /// User → worker: send the operations timed so far (`id`: the asker's number).
    TimelineTake = 6,
    /// User → worker: the last handle to event `id` was dropped.
    FreeEvent = 7,
    /// User → worker: the last handle to graph `id` was dropped.
    FreeGraph = 8,
    /// User → worker: are you alive? (answered with a `Pong` of the same `id`).
    Ping = 9,
    /// Worker → user: the device is open (payload: `DeviceInfo` as JSON).
    Ready = 10,
    /// Worker → user: the device failed to open (payload: the `GpuError`).
    StartFailed = 11,
    /// Worker → user: the answer to request `id`.
    Reply = 12,
    /// Worker → user: a sticky fault; the worker exits (payload: the `GpuError`).
    Fault = 13,
    /// Worker → user: the answer to `TimelineTake` `id` (payload: the events as JSON,
    /// starts on the machine's monotonic clock).
    TimelineEvents = 14,
    /// Worker → user: the answer to `Ping` `id`, from the worker's runtime.
    Pong = 15,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Request,
            2 => Kind::Free,
            3 => Kind::Release,
            4 => Kind::OriginClosed,
            5 => Kind::Timeline,
            6 => Kind::TimelineTake,
            7 => Kind::FreeEvent,
            8 => Kind::FreeGraph,
            9 => Kind::Ping,
            10 => Kind::Ready,
            11 => Kind::StartFailed,
            12 => Kind::Reply,
            13 => Kind::Fault,
            14 => Kind::TimelineEvents,
            15 => Kind::Pong,
            _ => return None,
        })
    }
}

/// The largest frame accepted (bulk data beyond the arena goes inline).
const MAX_FRAME: u64 = 1 << 36;

/// One frame's bytes, ready for a single write.
pub(crate) fn encode(kind: Kind, id: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(17 + payload.len());
    buf.extend_from_slice(&(9 + payload.len() as u64).to_le_bytes());
    buf.push(kind as u8);
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(payload);
    buf
}

/// Writes one frame with a single `write_all` (callers hold the socket's lock).
pub(crate) fn write(out: &mut impl Write, kind: Kind, id: u64, payload: &[u8]) -> std::io::Result<()> {
    out.write_all(&encode(kind, id, payload))?;
    out.flush()
}

/// What a link's writer thread is handed.
pub(crate) enum Outgoing {
    /// An encoded frame ([`encode`]) to write.
    Frame(Vec<u8>),
    /// Answered once everything queued before it is written.
    Flush(std::sync::mpsc::Sender<()>),
}

/// A link's writer thread: writes each queued frame in turn, as the one writer of its
/// socket, so that no caller (a runtime thread, a reading thread) blocks on a socket
/// buffer the other side is not draining. Returns when the queue closes, or with the
/// error of a write that failed (the other side is gone).
pub(crate) fn write_loop(out: &mut impl Write, queue: std::sync::mpsc::Receiver<Outgoing>) -> std::io::Result<()> {
    for item in queue {
        match item {
            Outgoing::Frame(f) => {
                out.write_all(&f)?;
                out.flush()?;
            }
            Outgoing::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
    Ok(())
}

/// Reads one frame; an unknown kind or an oversized length is an `InvalidData` error.
pub(crate) fn read(input: &mut impl Read) -> std::io::Result<(Kind, u64, Vec<u8>)> {
    let mut head = [0u8; 17];
    input.read_exact(&mut head)?;
    let len = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    if !(9..=MAX_FRAME).contains(&len) {
        return Err(bad(format!("frame length {len}")));
    }
    let kind = Kind::from_u8(head[8]).ok_or_else(|| bad(format!("frame kind {}", head[8])))?;
    let id = u64::from_le_bytes(head[9..17].try_into().expect("8 bytes"));
    // Read as the bytes arrive: a length claimed but never sent reserves nothing.
    let want = len - 9;
    let mut payload = Vec::with_capacity(want.min(1 << 20) as usize);
    input.take(want).read_to_end(&mut payload)?;
    if payload.len() as u64 != want {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("a frame cut short: {} of {want} payload bytes", payload.len()),
        ));
    }
    Ok((kind, id, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_is_rejected() {
        let mut buf = vec![];
        write(&mut buf, Kind::Reply, 42, b"hello").unwrap();
        write(&mut buf, Kind::Free, 7, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(read(&mut r).unwrap(), (Kind::Reply, 42, b"hello".to_vec()));
        assert_eq!(read(&mut r).unwrap(), (Kind::Free, 7, vec![]));
        assert!(read(&mut r).is_err(), "end of input");
        let mut garbage = vec![];
        garbage.extend_from_slice(&u64::MAX.to_le_bytes());
        garbage.extend_from_slice(&[1; 9]);
        assert_eq!(
            read(&mut &garbage[..]).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
    }
}
