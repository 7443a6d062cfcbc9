//! `Rendezvous`: how the processes of one world find each other — the same four
//! variables `torchrun` sets (`MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`), so any
//! launcher that starts N processes on M hosts for PyTorch starts a world here too.
//!
//! Rank 0's process listens on the address's port (every interface) and admits every
//! other rank (a handshake: same world size, distinct ranks, all GPUs or all CPU
//! devices), and for a world of GPUs hands each the id of the NCCL clique it then joins. Nothing waits on a timer for
//! readiness: a rank is in once the coordinator said so; only a connection refused
//! because rank 0 is not listening yet is tried again, until the deadline.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::exchange::Exchange;
use super::remote::{read_frame, serve, write_frame, Client, Frame, Nonce, Proof};
use crate::error::GpuError;

/// How long one connection may take to say who it is before rank 0 drops it (or the
/// world's deadline, if shorter): a silent or slow peer holds up no one else.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Environment variable holding the world's shared secret (optional).
pub const TOKEN_ENV: &str = "ATOMR_WORLD_TOKEN";

/// Environment variable naming the address rank 0 listens on (optional; every interface
/// when unset).
pub const BIND_ENV: &str = "ATOMR_WORLD_BIND";

/// Where the processes of a world meet, and which rank this one is.
///
/// Trust: without a token, anyone who can reach rank 0's port can join the world (as
/// with `torchrun`): use it on trusted networks only. With a token
/// ([`Rendezvous::with_token`], or `ATOMR_WORLD_TOKEN`), each side proves it knows the
/// secret by a keyed BLAKE3 hash of the other side's random challenge; the secret itself
/// never crosses the wire. The token authenticates the handshake; the connection is not
/// encrypted.
#[derive(Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// `host:port` of rank 0's process as the others reach it.
    pub addr: String,
    /// This process's rank, from 0.
    pub rank: usize,
    /// The number of ranks (processes) of the world.
    pub size: usize,
    /// The key derived from the world's token, if it has one.
    key: Option<[u8; 32]>,
    /// The address rank 0 listens on (`None`: every interface).
    bind: Option<IpAddr>,
}

impl std::fmt::Debug for Rendezvous {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendezvous")
            .field("addr", &self.addr)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("token", &self.key.map(|_| "…"))
            .field("bind", &self.bind)
            .finish()
    }
}
/// How this process reaches the world's meetings once in.
pub(crate) enum Joined {
    /// Rank 0: the meetings are held here (other ranks' connections served into it).
    Coordinator(Arc<Exchange>),
    /// Any other rank: through its connection to rank 0.
    Member(Arc<Client>),
}

impl Rendezvous {
    /// Rank `rank` of `size`, meeting at rank 0's `addr` (`host:port`), with no token;
    /// rank 0 listens on every interface.
    pub fn new(addr: impl Into<String>, rank: usize, size: usize) -> Self {
        Rendezvous {
            addr: addr.into(),
            rank,
            size,
            key: None,
            bind: None,
        }
    }

    /// The world's shared secret: every rank must be given the same one, and rank 0
    /// admits only processes that prove they know it (and they admit only a rank 0 that
    /// does).
    pub fn with_token(mut self, token: impl AsRef<[u8]>) -> Self {
        self.key = Some(blake3::derive_key("atomr-accel-cuda world token v1", token.as_ref()));
        self
    }

    /// The address rank 0 listens on, instead of every interface (the interface of the
    /// cluster's private network, say).
    pub fn bind(mut self, addr: IpAddr) -> Self {
        self.bind = Some(addr);
        self
    }

    /// From `MASTER_ADDR`, `MASTER_PORT`, `RANK` and `WORLD_SIZE`, as `torchrun` (and
    /// Slurm or MPI launch scripts written for PyTorch) set them, plus the optional
    /// `ATOMR_WORLD_TOKEN` (the shared secret) and `ATOMR_WORLD_BIND` (rank 0's listening
    /// address); each missing or malformed variable is named in the error.
    pub fn from_env() -> Result<Self, GpuError> {
        fn var(name: &str) -> Result<String, GpuError> {
            std::env::var(name).map_err(|_| {
                GpuError::invalid(format!(
                    "{name} is not set: a process of a world needs MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (as torchrun sets them)"
                ))
            })
        }
        fn number(name: &str) -> Result<usize, GpuError> {
            let v = var(name)?;
            v.trim()
                .parse()
                .map_err(|_| GpuError::invalid(format!("{name}={v:?} is not a number")))
        }
        let mut rv = Rendezvous::new(
            format!("{}:{}", var("MASTER_ADDR")?, number("MASTER_PORT")?),
            number("RANK")?,
            number("WORLD_SIZE")?,
        );
        if let Some(token) = std::env::var_os(TOKEN_ENV) {
            if token.is_empty() {
                return Err(GpuError::invalid(format!("{TOKEN_ENV} is set but empty")));
            }
            rv = rv.with_token(token.as_encoded_bytes());
        }
        if let Ok(bind) = std::env::var(BIND_ENV) {
            let ip = bind
                .trim()
                .parse()
                .map_err(|_| GpuError::invalid(format!("{BIND_ENV}={bind:?} is not an IP address")))?;
            rv = rv.bind(ip);
        }
        rv.check()?;
        Ok(rv)
    }

    /// `LOCAL_RANK` (0 when unset): which GPU of its host this process opens when a
    /// launcher starts one process per GPU.
    pub fn local_rank() -> usize {
        std::env::var("LOCAL_RANK")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    fn check(&self) -> Result<(), GpuError> {
        if self.size == 0 || self.rank >= self.size {
            return Err(GpuError::invalid(format!(
                "rank {} of a world of {}: ranks run from 0 to the size less one",
                self.rank, self.size
            )));
        }
        Ok(())
    }

    /// Joins the world: rank 0 admits the others (and makes the NCCL id `nccl_id` gives,
    /// for a world of GPUs); any other rank connects to it. Returns how to meet, and the
    /// NCCL id every rank got. Fails at `deadline` if some rank never came — saying, on
    /// rank 0, which connections it turned away meanwhile.
    pub(crate) async fn join(
        &self,
        nccl: bool,
        nccl_id: impl FnOnce() -> Result<Vec<u8>, GpuError>,
        deadline: Duration,
    ) -> Result<(Joined, Option<Vec<u8>>), GpuError> {
        self.check()?;
        let refused = std::sync::Mutex::new(Vec::<String>::new());
        match tokio::time::timeout(deadline, self.gather(nccl, nccl_id, deadline, &refused)).await {
            Ok(r) => r,
            Err(_) => {
                let late = format!(
                    "rank {} of {}: the world did not gather at {} within {deadline:?}",
                    self.rank, self.size, self.addr
                );
                let refused = refused.into_inner().unwrap_or_else(|p| p.into_inner());
                Err(match refused.is_empty() {
                    true => GpuError::DeviceLost(late),
                    false => GpuError::invalid(format!("{late}; turned away meanwhile: {}", refused.join("; "))),
                })
            }
        }
    }

    async fn gather(
        &self,
        nccl: bool,
        nccl_id: impl FnOnce() -> Result<Vec<u8>, GpuError>,
        deadline: Duration,
        refused: &std::sync::Mutex<Vec<String>>,
    ) -> Result<(Joined, Option<Vec<u8>>), GpuError> {
        if self.rank != 0 {
            return self.enter(nccl, deadline).await;
        }
        let id = if nccl { Some(nccl_id()?) } else { None };
        let exchange = Arc::new(Exchange::new());
        if self.size == 1 {
            return Ok((Joined::Coordinator(exchange), id));
        }
        // Every interface unless told otherwise, as torchrun's store does: MASTER_ADDR
        // names this host as the others reach it, which may not be an address of an
        // interface here (a name that resolves to a loopback alias, a NAT).
        let port = self
            .addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .ok_or_else(|| GpuError::invalid(format!("{:?} is no host:port", self.addr)))?;
        let ip = self.bind.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let listener = TcpListener::bind((ip, port))
            .await
            .map_err(|e| GpuError::io(format!("rank 0 listening on {ip}:{port} (for {})", self.addr), e))?;
        let start = Instant::now();
        let mut admitted: Vec<Option<(TcpStream, Nonce)>> = (0..self.size).map(|_| None).collect();
        // Each connection's handshake runs in a task of its own, bounded in time, so a
        // silent or slow peer holds up no one; the claims come back here, where ranks are
        // admitted one at a time.
        let (claims, mut claimed) = mpsc::channel::<(TcpStream, Result<Hello, String>)>(self.size.max(4));
        while admitted.iter().skip(1).any(Option::is_none) {
            tokio::select! {
                accepted = listener.accept() => {
                    let (mut s, peer) = accepted
                        .map_err(|e| GpuError::io(format!("rank 0 accepting at {}", self.addr), e))?;
                    keep_alive(&s);
                    let limit = HANDSHAKE.min(deadline.saturating_sub(start.elapsed()));
                    let (claims, key) = (claims.clone(), self.key);
                    tokio::spawn(async move {
                        let hello = match tokio::time::timeout(limit, hear(&mut s, key.as_ref())).await {
                            Ok(r) => r.map_err(|why| format!("{peer}: {why}")),
                            Err(_) => Err(format!("{peer} said nothing within {limit:?}")),
                        };
                        let _ = claims.send((s, hello)).await;
                    });
                }
                Some((mut s, hello)) = claimed.recv() => {
                    match hello.and_then(|h| self.refusal(&h, nccl, &admitted).map_or(Ok(h), Err)) {
                        Ok(h) => admitted[h.rank] = Some((s, h.nonce)),
                        Err(why) => {
                            tracing::warn!(%why, "rank 0 turned a connection away");
                            let _ = write_frame(&mut s, &Frame::Refused { error: GpuError::invalid(why.clone()) }, &[]).await;
                            refused.lock().unwrap_or_else(|p| p.into_inner()).push(why);
                        }
                    }
                }
            }
        }
        for (rank, admitted) in admitted.into_iter().enumerate().skip(1) {
            let (mut s, nonce) = admitted.expect("admitted");
            let proof = self.key.as_ref().map(|k| prove(k, b"welcome", &nonce, rank, self.size));
            write_frame(
                &mut s,
                &Frame::Welcome {
                    nccl_id: id.clone(),
                    proof,
                },
                &[],
            )
            .await?;
            serve(exchange.clone(), rank, self.size, nccl, s);
        }
        Ok((Joined::Coordinator(exchange), id))
    }

    /// Why rank 0 turns `h` away, if it does: another world's size, a rank out of range
    /// or taken, or another kind of device plane.
    fn refusal(&self, h: &Hello, nccl: bool, admitted: &[Option<(TcpStream, Nonce)>]) -> Option<String> {
        let Hello {
            rank,
            size,
            nccl: theirs,
            ..
        } = *h;
        if size != self.size {
            Some(format!(
                "rank {rank} thinks the world has {size} ranks, rank 0 {}",
                self.size
            ))
        } else if rank == 0 || rank >= size {
            Some(format!("a process claiming rank {rank} of {size}"))
        } else if admitted[rank].is_some() {
            Some(format!("two processes claim rank {rank}"))
        } else if theirs != nccl {
            let kind = |g: bool| {
                if g {
                    "an in-process GPU (NCCL)"
                } else {
                    "a CPU or isolated device (collectives through the host)"
                }
            };
            Some(format!(
                "rank {rank} is on {}, rank 0 on {}: a world spread over processes is all in-process \
                 GPUs or all CPU and isolated devices",
                kind(theirs),
                kind(nccl)
            ))
        } else {
            None
        }
    }

    /// A rank other than 0: connects (again while rank 0 is not listening yet), answers
    /// rank 0's challenge with who it is, and waits to be admitted.
    async fn enter(&self, nccl: bool, deadline: Duration) -> Result<(Joined, Option<Vec<u8>>), GpuError> {
        let start = Instant::now();
        let mut s = loop {
            match TcpStream::connect(&self.addr).await {
                Ok(s) => break s,
                Err(e) if start.elapsed() < deadline && e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => {
                    return Err(GpuError::io(
                        format!("rank {} reaching rank 0 at {}", self.rank, self.addr),
                        e,
                    ))
                }
            }
        };
        let _ = s.set_nodelay(true);
        keep_alive(&s);
        let challenge = match read_frame(&mut s, |_| 0).await? {
            (Frame::Challenge { nonce }, _) => nonce,
            (Frame::Refused { error }, _) => return Err(error),
            (other, _) => return Err(GpuError::invalid(format!("rank 0 opened with {}", other.name()))),
        };
        let nonce: Nonce = rand::random();
        let hello = Frame::Hello {
            rank: self.rank,
            size: self.size,
            nccl,
            nonce,
            proof: self
                .key
                .as_ref()
                .map(|k| prove(k, b"hello", &challenge, self.rank, self.size)),
        };
        write_frame(&mut s, &hello, &[]).await?;
        match read_frame(&mut s, |_| 0).await? {
            (Frame::Welcome { nccl_id, proof }, _) => {
                if let Some(k) = &self.key {
                    if proof != Some(prove(k, b"welcome", &nonce, self.rank, self.size)) {
                        return Err(GpuError::invalid(format!(
                            "the process at {} does not know this world's token: not joined",
                            self.addr
                        )));
                    }
                }
                Ok((Joined::Member(Client::start(s)), nccl_id))
            }
            (Frame::Refused { error }, _) => Err(error),
            (other, _) => Err(GpuError::invalid(format!(
                "rank 0 answered a hello with {}",
                other.name()
            ))),
        }
    }
}

/// What a connecting process said of itself, once its proof (if the world has a token)
/// checked out.
#[derive(Debug, Clone, Copy)]
struct Hello {
    rank: usize,
    size: usize,
    nccl: bool,
    /// Its challenge to rank 0.
    nonce: Nonce,
}

/// Rank 0's side of one handshake: a fresh challenge, then the peer's hello, checked
/// against the world's key. Errors say why the peer is turned away.
async fn hear(s: &mut TcpStream, key: Option<&[u8; 32]>) -> Result<Hello, String> {
    let challenge: Nonce = rand::random();
    write_frame(s, &Frame::Challenge { nonce: challenge }, &[])
        .await
        .map_err(|e| e.to_string())?;
    // A hello has no payload: any length but 0 is refused before it is read.
    match read_frame(s, |_| 0).await.map_err(|e| e.to_string())? {
        (
            Frame::Hello {
                rank,
                size,
                nccl,
                nonce,
                proof,
            },
            _,
        ) => {
            match (key, proof) {
                (Some(k), Some(p)) if p == prove(k, b"hello", &challenge, rank, size) => {}
                (Some(_), _) => return Err("no proof of this world's token: not admitted".into()),
                (None, Some(_)) => {
                    return Err("it has a token and rank 0 none: every rank must be given the same token".into())
                }
                (None, None) => {}
            }
            Ok(Hello {
                rank,
                size,
                nccl,
                nonce,
            })
        }
        (other, _) => Err(format!("it opened with {} instead of a hello", other.name())),
    }
}

/// The keyed hash that proves knowledge of the world's token: over what is proved
/// (`hello` or `welcome`), the other side's challenge, and the rank and size claimed, so
/// a proof cannot be replayed for another connection, rank or world.
fn prove(key: &[u8; 32], what: &[u8], challenge: &Nonce, rank: usize, size: usize) -> Proof {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(what);
    h.update(challenge);
    h.update(&(rank as u64).to_le_bytes());
    h.update(&(size as u64).to_le_bytes());
    *h.finalize().as_bytes()
}

/// TCP keepalive on a world's connection, so a peer whose host vanished (a half-open
/// connection) is noticed by the operating system within about a minute and its rank
/// reported gone, instead of never.
fn keep_alive(s: &TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(30))
        .with_interval(Duration::from_secs(10));
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
    let ka = ka.with_retries(3);
    if let Err(e) = socket2::SockRef::from(s).set_tcp_keepalive(&ka) {
        tracing::warn!(%e, "TCP keepalive could not be set on a world's connection");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi_device::exchange::{Call, Key, Kind};
    use crate::multi_device::remote::Codec;
    use crate::multi_device::ReduceOp;
    use tokio::io::AsyncWriteExt;

    const QUICK: Duration = Duration::from_secs(8);

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn world(port: u16, rank: usize, size: usize) -> Rendezvous {
        Rendezvous::new(format!("127.0.0.1:{port}"), rank, size)
    }

    async fn join(rv: Rendezvous, deadline: Duration) -> Result<Joined, GpuError> {
        rv.join(false, || Ok(vec![]), deadline).await.map(|(j, _)| j)
    }

    /// Connects to rank 0, retrying while it is not listening yet.
    async fn connect(port: u16) -> TcpStream {
        for _ in 0..500 {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", port)).await {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("rank 0 never listened");
    }

    /// A hand-made rank: reads the challenge and sends `hello` built from it.
    async fn say_hello(port: u16, hello: impl FnOnce(Nonce) -> Frame) -> TcpStream {
        let mut s = connect(port).await;
        let (Frame::Challenge { nonce }, _) = read_frame(&mut s, |_| 0).await.unwrap() else {
            panic!("rank 0 opens with a challenge")
        };
        write_frame(&mut s, &hello(nonce), &[]).await.unwrap();
        s
    }

    fn hello(rank: usize, size: usize, key: Option<&[u8; 32]>) -> impl FnOnce(Nonce) -> Frame + use<'_> {
        move |challenge| Frame::Hello {
            rank,
            size,
            nccl: false,
            nonce: [7; 32],
            proof: key.map(|k| prove(k, b"hello", &challenge, rank, size)),
        }
    }

    async fn answer(s: &mut TcpStream) -> Frame {
        tokio::time::timeout(QUICK, read_frame(s, |_| 0))
            .await
            .expect("rank 0 answers")
            .unwrap()
            .0
    }

    /// A hand-made rank 0 on `port`: challenges one rank, welcomes it with `proof`,
    /// and holds the connection until the returned sender is dropped (its process
    /// leaving the world).
    async fn fake_coordinator(port: u16, proof: Option<Proof>) -> tokio::sync::oneshot::Sender<()> {
        let fake = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let (leave, left) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = fake.accept().await.unwrap();
            write_frame(&mut s, &Frame::Challenge { nonce: [1; 32] }, &[])
                .await
                .unwrap();
            let _ = read_frame(&mut s, |_| 0).await;
            let welcome = Frame::Welcome { nccl_id: None, proof };
            write_frame(&mut s, &welcome, &[]).await.unwrap();
            let _ = left.await;
        });
        leave
    }

    fn sum_call(len: usize) -> Call {
        Call {
            kind: Kind::AllReduce(ReduceOp::Sum),
            dtype: "f32".into(),
            len,
        }
    }

    /// Silent, garbage, oversized and bogus connections are each turned away on their
    /// own, while the real ranks gather — well before the handshake limit, so none of
    /// them held the others up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_connections_are_turned_away_while_the_world_gathers() {
        let port = free_port();
        let started = Instant::now();
        let rank0 = tokio::spawn(join(world(port, 0, 3), QUICK));
        let _silent = connect(port).await;
        let mut garbage = connect(port).await;
        let _ = read_frame(&mut garbage, |_| 0).await.unwrap();
        garbage.write_all(b"\x05\0\0\0hello, world").await.unwrap();
        let mut huge = connect(port).await;
        let _ = read_frame(&mut huge, |_| 0).await.unwrap();
        huge.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
        let mut out_of_range = say_hello(port, hello(7, 3, None)).await;
        let mut other_world = say_hello(port, hello(1, 4, None)).await;
        for (s, why) in [(&mut out_of_range, "rank 7 of 3"), (&mut other_world, "4 ranks")] {
            match answer(s).await {
                Frame::Refused { error } => assert!(error.to_string().contains(why), "{error}"),
                other => panic!("{other:?}"),
            }
        }
        let (r1, r2) = tokio::join!(join(world(port, 1, 3), QUICK), join(world(port, 2, 3), QUICK));
        assert!(r1.is_ok() && r2.is_ok(), "{:?} {:?}", r1.err(), r2.err());
        assert!(rank0.await.unwrap().is_ok());
        assert!(started.elapsed() < HANDSHAKE, "a silent peer held the world up");
    }

    /// A world with a token admits only processes that prove they know it, and its
    /// ranks admit only a rank 0 that does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_admits_only_who_knows_it() {
        let port = free_port();
        let rank0 = tokio::spawn(join(world(port, 0, 2).with_token("s3cret"), QUICK));
        // No token, then the wrong one: refused, and the world still forms.
        let e = join(world(port, 1, 2), QUICK).await.err().expect("refused");
        assert!(e.to_string().contains("not admitted"), "{e}");
        let e = join(world(port, 1, 2).with_token("guess"), QUICK)
            .await
            .err()
            .expect("refused");
        assert!(e.to_string().contains("not admitted"), "{e}");
        // A replayed proof of another challenge does not pass either.
        let key = blake3::derive_key("atomr-accel-cuda world token v1", b"s3cret");
        let mut replayed = say_hello(port, |_| Frame::Hello {
            rank: 1,
            size: 2,
            nccl: false,
            nonce: [0; 32],
            proof: Some(prove(&key, b"hello", &[9; 32], 1, 2)),
        })
        .await;
        assert!(matches!(answer(&mut replayed).await, Frame::Refused { .. }));
        assert!(join(world(port, 1, 2).with_token("s3cret"), QUICK).await.is_ok());
        assert!(rank0.await.unwrap().is_ok());

        // A rank with a token refuses a coordinator that cannot prove it knows it.
        let port = free_port();
        let _fake = fake_coordinator(port, Some([0; 32])).await;
        let e = join(world(port, 1, 2).with_token("s3cret"), QUICK)
            .await
            .err()
            .expect("refused");
        assert!(e.to_string().contains("does not know this world's token"), "{e}");
        // And the token never shows in a Rendezvous's Debug.
        assert!(!format!("{:?}", world(1, 0, 1).with_token("s3cret")).contains("s3cret"));
    }

    /// An admitted rank that sends a meeting it may not (another party, an impossible
    /// size, a payload beyond its call, a payload cut short) is reported gone at once:
    /// rank 0's own party of the meeting fails then, instead of at its deadline.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_a_rank_may_not_send_fail_that_rank_at_once() {
        let send = Kind::SendRecv { from: 0, to: 0 };
        let bad_frames = [
            (
                "another party",
                meet(Key::Collective(0), 5, 2, sum_call(4)),
                vec![0; 16],
                None,
            ),
            (
                "another size",
                meet(Key::Collective(0), 1, 9, sum_call(4)),
                vec![0; 16],
                None,
            ),
            (
                "a send it is not in",
                meet(
                    Key::PointToPoint { from: 0, to: 0, n: 0 },
                    1,
                    2,
                    Call {
                        kind: send,
                        dtype: "f32".into(),
                        len: 4,
                    },
                ),
                vec![0; 16],
                None,
            ),
            (
                "a payload of 2^62 bytes",
                meet(Key::Collective(0), 1, 2, sum_call(4)),
                vec![],
                Some(1 << 62),
            ),
            (
                "a payload cut short",
                meet(Key::Collective(0), 1, 2, sum_call(4)),
                vec![0; 3],
                Some(16),
            ),
        ];
        for (what, frame, payload, claimed) in bad_frames {
            let port = free_port();
            let rank0 = tokio::spawn(join(world(port, 0, 2), QUICK));
            let mut s = say_hello(port, hello(1, 2, None)).await;
            assert!(matches!(answer(&mut s).await, Frame::Welcome { .. }), "{what}");
            let Joined::Coordinator(exchange) = rank0.await.unwrap().unwrap() else {
                panic!("rank 0 coordinates")
            };
            let codec = Codec::host::<f32>();
            let mine = exchange.meet(
                Key::Collective(0),
                0,
                2,
                sum_call(4),
                Ok(Box::new(vec![1.0f32; 4])),
                (codec.compute)(),
            );
            send_raw(&mut s, &frame, &payload, claimed).await;
            if claimed.is_some() {
                s.shutdown().await.unwrap();
            }
            let got = tokio::time::timeout(QUICK, mine).await.expect(what).unwrap();
            match got {
                Err(GpuError::DeviceLost(m)) => assert!(m.contains("rank 1"), "{what}: {m}"),
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
        }
    }

    fn meet(key: Key, party: usize, parties: usize, call: Call) -> Frame {
        Frame::Meet {
            key,
            party,
            parties,
            call,
            error: None,
        }
    }

    /// Writes a frame whose payload length field may claim more than `payload` holds.
    async fn send_raw(s: &mut TcpStream, frame: &Frame, payload: &[u8], claimed: Option<u64>) {
        let header = serde_json::to_vec(frame).unwrap();
        let mut out = (header.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.extend_from_slice(&claimed.unwrap_or(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(payload);
        s.write_all(&out).await.unwrap();
    }

    /// A member whose coordinator goes away (rank 0's process died) fails its meetings
    /// at once, and a member's connection has TCP keepalive on (a half-open connection
    /// to a vanished host is noticed).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_hears_its_coordinator_leave() {
        let port = free_port();
        let gone_tx = fake_coordinator(port, None).await;
        let Joined::Member(client) = join(world(port, 1, 2), QUICK).await.unwrap() else {
            panic!("rank 1 is a member")
        };
        let codec = Codec::host::<f32>();
        let mine = client
            .meet(
                Key::Collective(0),
                1,
                2,
                sum_call(4),
                Ok(Box::new(vec![1.0f32; 4])),
                codec,
            )
            .await;
        drop(gone_tx);
        match tokio::time::timeout(QUICK, mine).await.unwrap().unwrap() {
            Err(GpuError::DeviceLost(m)) => assert!(m.contains("coordinator"), "{m}"),
            other => panic!("{:?}", other.map(|_| ())),
        }
        // What both sides of a world's connection set.
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let s = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        assert!(!socket2::SockRef::from(&s).keepalive().unwrap());
        keep_alive(&s);
        assert!(socket2::SockRef::from(&s).keepalive().unwrap());
    }

    /// A member that is admitted and then says nothing more (as a half-open connection
    /// to a host that vanished looks until keepalive gives up) holds no collective up
    /// past the device's deadline: rank 0's call ends in `Timeout`, and the meeting is
    /// abandoned for every party.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_member_times_collectives_out() {
        use crate::device::{Device, DeviceConfig};
        use crate::multi_device::World;
        let port = free_port();
        let system = crate::actor::ActorSystem::new("silent-member");
        let config = DeviceConfig {
            request_timeout: Duration::from_millis(500),
            ..DeviceConfig::cpu()
        };
        let dev = Device::open(&system, config).await.unwrap();
        let rank0 = {
            let dev = dev.clone();
            tokio::spawn(async move { World::join(&dev, &world(port, 0, 2)).await })
        };
        let mut silent = say_hello(port, hello(1, 2, None)).await;
        assert!(matches!(answer(&mut silent).await, Frame::Welcome { .. }));
        let rank = rank0.await.unwrap().unwrap();
        let x = dev.upload(vec![1.0f32; 4]).await.unwrap();
        let t0 = Instant::now();
        let e = rank.all_reduce(&x, &x, ReduceOp::Sum).await.unwrap_err();
        assert!(matches!(e, GpuError::Timeout(_)), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        drop(silent);
        system.shutdown().await;
    }
}
