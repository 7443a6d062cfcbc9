//! `Rendezvous`: how the processes of one world find each other — the same four
//! variables `torchrun` sets (`MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`), so any
//! launcher that starts N processes on M hosts for PyTorch starts a world here too.
//!
//! Rank 0's process listens on the address's port (every interface) and admits every
//! other rank (a handshake: same world size, distinct ranks, all GPUs or all CPU
//! devices), and for a world of GPUs hands each the id of the NCCL clique it then joins. Nothing waits on a timer for
//! readiness: a rank is in once the coordinator said so; only a connection refused
//! because rank 0 is not listening yet is tried again, until the deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};

use super::exchange::Exchange;
use super::remote::{read_frame, serve, write_frame, Client, Frame};
use crate::error::GpuError;

/// Where the processes of a world meet, and which rank this one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// `host:port` of rank 0's process as the others reach it (it listens on the port,
    /// every interface).
    pub addr: String,
    /// This process's rank, from 0.
    pub rank: usize,
    /// The number of ranks (processes) of the world.
    pub size: usize,
}

/// How this process reaches the world's meetings once in.
pub(crate) enum Joined {
    /// Rank 0: the meetings are held here (other ranks' connections served into it).
    Coordinator(Arc<Exchange>),
    /// Any other rank: through its connection to rank 0.
    Member(Arc<Client>),
}

impl Rendezvous {
    /// Rank `rank` of `size`, meeting at rank 0's `addr` (`host:port`).
    pub fn new(addr: impl Into<String>, rank: usize, size: usize) -> Self {
        Rendezvous {
            addr: addr.into(),
            rank,
            size,
        }
    }

    /// From `MASTER_ADDR`, `MASTER_PORT`, `RANK` and `WORLD_SIZE`, as `torchrun` (and
    /// Slurm or MPI launch scripts written for PyTorch) set them; each missing or
    /// malformed variable is named in the error.
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
        let rv = Rendezvous::new(
            format!("{}:{}", var("MASTER_ADDR")?, number("MASTER_PORT")?),
            number("RANK")?,
            number("WORLD_SIZE")?,
        );
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
    /// NCCL id every rank got. Fails at `deadline` if some rank never came.
    pub(crate) async fn join(
        &self,
        nccl: bool,
        nccl_id: impl FnOnce() -> Result<Vec<u8>, GpuError>,
        deadline: Duration,
    ) -> Result<(Joined, Option<Vec<u8>>), GpuError> {
        self.check()?;
        let late = || {
            GpuError::DeviceLost(format!(
                "rank {} of {}: the world did not gather at {} within {deadline:?}",
                self.rank, self.size, self.addr
            ))
        };
        match tokio::time::timeout(deadline, self.gather(nccl, nccl_id, deadline)).await {
            Ok(r) => r,
            Err(_) => Err(late()),
        }
    }

    async fn gather(
        &self,
        nccl: bool,
        nccl_id: impl FnOnce() -> Result<Vec<u8>, GpuError>,
        deadline: Duration,
    ) -> Result<(Joined, Option<Vec<u8>>), GpuError> {
        if self.rank != 0 {
            return self.enter(nccl, deadline).await;
        }
        let id = if nccl { Some(nccl_id()?) } else { None };
        let exchange = Arc::new(Exchange::new());
        if self.size == 1 {
            return Ok((Joined::Coordinator(exchange), id));
        }
        // Every interface, as torchrun's store does: MASTER_ADDR names this host as the
        // others reach it, which may not be an address of an interface here (a name that
        // resolves to a loopback alias on this very host, a NAT).
        let port = self
            .addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .ok_or_else(|| GpuError::invalid(format!("{:?} is no host:port", self.addr)))?;
        let listener = TcpListener::bind(("0.0.0.0", port))
            .await
            .map_err(|e| GpuError::io(format!("rank 0 listening on port {port} (for {})", self.addr), e))?;
        let mut admitted: Vec<Option<TcpStream>> = (0..self.size).map(|_| None).collect();
        while admitted.iter().skip(1).any(Option::is_none) {
            let (mut s, _) = listener
                .accept()
                .await
                .map_err(|e| GpuError::io(format!("rank 0 accepting at {}", self.addr), e))?;
            // Something else than a rank of this world knocking is turned away.
            let Ok((
                Frame::Hello {
                    rank,
                    size,
                    nccl: theirs,
                },
                _,
            )) = read_frame(&mut s).await
            else {
                continue;
            };
            let refusal = if size != self.size {
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
            };
            if let Some(why) = refusal {
                let error = GpuError::invalid(why);
                let _ = write_frame(&mut s, &Frame::Refused { error: error.clone() }, &[]).await;
                return Err(error);
            }
            admitted[rank] = Some(s);
        }
        for (rank, s) in admitted.into_iter().enumerate().skip(1) {
            let mut s = s.expect("admitted");
            write_frame(&mut s, &Frame::Welcome { nccl_id: id.clone() }, &[]).await?;
            serve(exchange.clone(), rank, nccl, s);
        }
        Ok((Joined::Coordinator(exchange), id))
    }

    /// A rank other than 0: connects (again while rank 0 is not listening yet), says who
    /// it is, and waits to be admitted.
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
        let hello = Frame::Hello {
            rank: self.rank,
            size: self.size,
            nccl,
        };
        write_frame(&mut s, &hello, &[]).await?;
        match read_frame(&mut s).await? {
            (Frame::Welcome { nccl_id }, _) => Ok((Joined::Member(Client::start(s)), nccl_id)),
            (Frame::Refused { error }, _) => Err(error),
            (other, _) => Err(GpuError::Internal(format!("rank 0 answered a hello with {other:?}"))),
        }
    }
}
