//! Where a world's ranks meet: the k-th collective call of each rank meets the k-th of
//! every other (the k-th send from one rank to another, the k-th receive there).
//!
//! Each party brings its call (what, lengths, element type, op, root: checked equal
//! across parties) and its data, or the error that kept it from having any. When the
//! last party arrives, the collective is computed once and every party gets its part; if
//! any party brought an error or a different call, every party gets that error. A party
//! that gives up (its deadline, a member lost) marks the meeting failed, so later
//! arrivals fail at once instead of waiting for it. Typed data travels as `Box<dyn Any>`
//! (the `Vec<T>` of the call's element type) and is computed by the typed function the
//! call came with.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::error::GpuError;

/// One party's data (a `Vec<T>`).
pub(crate) type Data = Box<dyn Any + Send>;

/// What every party's data becomes: the parts in party order, to one output each — or
/// the error every party gets. Run once, by the last arrival, under the exchange's lock
/// (host arithmetic, or enqueueing an NCCL group: short either way).
pub(crate) type Compute = Box<dyn FnOnce(&Call, Vec<Data>) -> Result<Vec<Data>, GpuError> + Send>;

/// What a party is waiting for.
pub(crate) type Answer = oneshot::Receiver<Result<Data, GpuError>>;

/// Which meeting: a collective by its number on every rank, or a send/receive pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) enum Key {
    /// The `n`-th collective of the world.
    Collective(u64),
    /// The `n`-th message from rank `from` to rank `to`.
    PointToPoint { from: usize, to: usize, n: u64 },
}

/// A call as every party must agree on it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Call {
    pub(crate) kind: Kind,
    pub(crate) dtype: String,
    /// Elements each party contributes.
    pub(crate) len: usize,
}

/// Which collective, with what every rank must pass alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Kind {
    AllReduce(super::ReduceOp),
    Broadcast {
        root: usize,
    },
    AllGather,
    ReduceScatter(super::ReduceOp),
    /// Party 0 is rank `from`, sending; party 1 rank `to`, receiving.
    SendRecv {
        from: usize,
        to: usize,
    },
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (len, dtype) = (self.len, &self.dtype);
        match self.kind {
            Kind::AllReduce(op) => write!(f, "all_reduce of {len} × {dtype} ({op:?})"),
            Kind::Broadcast { root } => write!(f, "broadcast of {len} × {dtype} from root {root}"),
            Kind::AllGather => write!(f, "all_gather of {len} × {dtype}"),
            Kind::ReduceScatter(op) => write!(f, "reduce_scatter of {len} × {dtype} ({op:?})"),
            Kind::SendRecv { from, to } => write!(f, "send/recv of {len} × {dtype} from rank {from} to {to}"),
        }
    }
}

struct Meeting {
    call: Call,
    compute: Option<Compute>,
    parts: Vec<Option<Data>>,
    waiting: Vec<Option<oneshot::Sender<Result<Data, GpuError>>>>,
    arrived: usize,
    failed: Option<GpuError>,
}

/// The meetings in progress of one world.
pub(crate) struct Exchange {
    meetings: Mutex<Meetings>,
}

#[derive(Default)]
struct Meetings {
    open: HashMap<Key, Meeting>,
    /// Ranks whose process left the world, and how: every meeting that needs them fails.
    gone: HashMap<usize, GpuError>,
}

impl Kind {
    /// The party rank `rank` is at a meeting of this kind with `parties` parties, if it
    /// takes part (a send/recv has two: the sender and the receiver).
    pub(crate) fn party_of(&self, rank: usize, parties: usize) -> Option<usize> {
        match *self {
            Kind::SendRecv { from, to } => [from, to].iter().position(|&r| r == rank),
            _ => (rank < parties).then_some(rank),
        }
    }
}

impl Exchange {
    pub(crate) fn new() -> Self {
        Exchange {
            meetings: Mutex::new(Meetings::default()),
        }
    }

    /// Rank `rank`'s process left the world (`e` says how): every meeting that still
    /// waits for it fails with `e`, and so does every later one that would; meetings
    /// among the other ranks go on — a rank that finished its part and exited ends no
    /// one else's work (its meetings were all complete: each answers only when every
    /// party has come).
    pub(crate) fn rank_left(&self, rank: usize, e: GpuError) {
        let mut all = self.meetings.lock().unwrap_or_else(|p| p.into_inner());
        all.gone.insert(rank, e.clone());
        let waiting: Vec<Key> = all
            .open
            .iter()
            .filter(|(_, m)| {
                m.call
                    .kind
                    .party_of(rank, m.waiting.len())
                    .is_some_and(|p| m.waiting[p].is_none())
            })
            .map(|(k, _)| *k)
            .collect();
        for key in waiting {
            if let Some(mut m) = all.open.remove(&key) {
                m.failed.get_or_insert(e.clone());
                answer_all(&mut m, &e);
            }
        }
    }

    /// Party `party` of `parties` arrives at `key` with `call` and its data; the answer
    /// comes once every party has arrived (or at once, when the meeting already failed).
    pub(crate) fn meet(
        &self,
        key: Key,
        party: usize,
        parties: usize,
        call: Call,
        data: Result<Data, GpuError>,
        compute: Compute,
    ) -> Answer {
        let (tx, rx) = oneshot::channel();
        let mut all = self.meetings.lock().unwrap_or_else(|p| p.into_inner());
        let gone = all
            .gone
            .iter()
            .find(|(&r, _)| call.kind.party_of(r, parties).is_some_and(|p| p != party))
            .map(|(_, e)| e);
        if let Some(e) = gone {
            let _ = tx.send(Err(e.clone()));
            return rx;
        }
        if party >= parties {
            let _ = tx.send(Err(GpuError::invalid(format!(
                "party {party} of a meeting of {parties}"
            ))));
            return rx;
        }
        let m = all.open.entry(key).or_insert_with(|| Meeting {
            call: call.clone(),
            compute: Some(compute),
            parts: (0..parties).map(|_| None).collect(),
            waiting: (0..parties).map(|_| None).collect(),
            arrived: 0,
            failed: None,
        });
        if m.parts.len() != parties {
            // Another size of meeting under the same key: its slot is not its own, so it
            // alone is told; the meeting goes on for its parties.
            let _ = tx.send(Err(GpuError::invalid(format!(
                "party {party} of {parties} at a meeting of {} ({key:?})",
                m.parts.len()
            ))));
            return rx;
        }
        m.arrived += 1;
        if m.failed.is_none() {
            if call != m.call {
                m.failed = Some(mismatch(&m.call, &call, party));
            } else if m.parts[party].is_some() || m.waiting[party].is_some() {
                m.failed = Some(GpuError::Internal(format!("party {party} arrived twice at {key:?}")));
            }
        }
        match data {
            Ok(d) if m.failed.is_none() => m.parts[party] = Some(d),
            Ok(_) => {}
            Err(e) => {
                m.failed.get_or_insert(e);
            }
        }
        m.waiting[party] = Some(tx);
        if let Some(e) = m.failed.clone() {
            answer_all(m, &e);
        } else if m.arrived == parties {
            let parts: Vec<Data> = m
                .parts
                .iter_mut()
                .map(|p| p.take().expect("every party arrived"))
                .collect();
            let compute = m.compute.take().expect("computed once");
            match compute(&m.call, parts) {
                Ok(outs) => {
                    for (w, out) in m.waiting.iter_mut().zip(outs) {
                        if let Some(tx) = w.take() {
                            let _ = tx.send(Ok(out));
                        }
                    }
                }
                Err(e) => answer_all(m, &e),
            }
        }
        if m.arrived == parties {
            all.open.remove(&key);
        }
        rx
    }

    /// A party gave up on `key` with `e`: every party waiting there, and every later
    /// arrival, gets `e`.
    pub(crate) fn abandon(&self, key: Key, parties: usize, e: GpuError) {
        let mut all = self.meetings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = all.open.get_mut(&key) {
            m.failed.get_or_insert(e);
            let e = m.failed.clone().expect("just set");
            answer_all(m, &e);
            if m.arrived == parties {
                all.open.remove(&key);
            }
        }
    }

    /// Meetings not yet complete (for tests).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.meetings.lock().unwrap().open.len()
    }
}

/// Answers every party waiting at `m` with `e` and drops the data brought.
fn answer_all(m: &mut Meeting, e: &GpuError) {
    for w in m.waiting.iter_mut() {
        if let Some(tx) = w.take() {
            let _ = tx.send(Err(e.clone()));
        }
    }
    m.parts.iter_mut().for_each(|p| *p = None);
}

/// The error every party gets when one called something else than the first arrival.
fn mismatch(first: &Call, this: &Call, party: usize) -> GpuError {
    GpuError::InvalidArgument(
        crate::error::Invalid::new(format!(
            "ranks disagree on a collective: rank {party} called {this}, another rank {first}; every rank must call the same collectives, in the same order, with the same lengths and element type"
        ))
        .mismatch(format_args!("{first}"), format_args!("{this}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(len: usize) -> Call {
        Call {
            kind: Kind::AllReduce(crate::multi_device::ReduceOp::Sum),
            dtype: "f64".into(),
            len,
        }
    }

    fn sum() -> Compute {
        Box::new(|_, parts| {
            let total: f64 = parts.iter().map(|p| p.downcast_ref::<f64>().unwrap()).sum();
            Ok(parts.iter().map(|_| Box::new(total) as Data).collect())
        })
    }

    fn got(rx: &mut Answer) -> Option<Result<f64, GpuError>> {
        rx.try_recv().ok().map(|r| r.map(|d| *d.downcast::<f64>().unwrap()))
    }

    #[test]
    fn the_last_arrival_computes_for_all() {
        let x = Exchange::new();
        let k = Key::Collective(0);
        let mut a = x.meet(k, 1, 3, call(1), Ok(Box::new(2.0f64)), sum());
        let mut b = x.meet(k, 0, 3, call(1), Ok(Box::new(3.0f64)), sum());
        assert!(got(&mut a).is_none() && got(&mut b).is_none(), "waits for the third");
        let mut c = x.meet(k, 2, 3, call(1), Ok(Box::new(4.0f64)), sum());
        for rx in [&mut a, &mut b, &mut c] {
            assert_eq!(got(rx).unwrap().unwrap(), 9.0);
        }
        assert_eq!(x.pending(), 0);
    }

    #[test]
    fn a_mismatch_or_an_error_fails_every_party() {
        let x = Exchange::new();
        let k = Key::Collective(0);
        let mut a = x.meet(k, 0, 2, call(4), Ok(Box::new(1.0f64)), sum());
        let mut b = x.meet(k, 1, 2, call(5), Ok(Box::new(1.0f64)), sum());
        for rx in [&mut a, &mut b] {
            let e = got(rx).unwrap().unwrap_err();
            assert!(matches!(e, GpuError::InvalidArgument(_)), "{e:?}");
            assert!(e.to_string().contains("rank 1"), "{e}");
        }
        let k = Key::Collective(1);
        let mut a = x.meet(k, 0, 2, call(1), Err(GpuError::DeviceLost("gone".into())), sum());
        assert!(
            matches!(got(&mut a).unwrap(), Err(GpuError::DeviceLost(_))),
            "fails at once"
        );
        let mut b = x.meet(k, 1, 2, call(1), Ok(Box::new(1.0f64)), sum());
        assert!(matches!(got(&mut b).unwrap(), Err(GpuError::DeviceLost(_))));
        assert_eq!(x.pending(), 0);
    }

    #[test]
    fn a_failed_computation_or_a_rank_gone_fails_every_party() {
        let x = Exchange::new();
        let k = Key::Collective(0);
        let broken: Compute = Box::new(|_, _| Err(GpuError::Internal("broken".into())));
        let mut a = x.meet(k, 0, 2, call(1), Ok(Box::new(1.0f64)), broken);
        let mut b = x.meet(k, 1, 2, call(1), Ok(Box::new(1.0f64)), sum());
        for rx in [&mut a, &mut b] {
            assert!(
                matches!(got(rx).unwrap(), Err(GpuError::Internal(_))),
                "the first arrival's computation runs"
            );
        }
        let k = Key::Collective(1);
        let mut a = x.meet(k, 0, 2, call(1), Ok(Box::new(1.0f64)), sum());
        x.rank_left(1, GpuError::DeviceLost("rank 1 left".into()));
        assert!(
            matches!(got(&mut a).unwrap(), Err(GpuError::DeviceLost(_))),
            "in progress"
        );
        let mut b = x.meet(Key::Collective(2), 0, 2, call(1), Ok(Box::new(1.0f64)), sum());
        assert!(
            matches!(got(&mut b).unwrap(), Err(GpuError::DeviceLost(_))),
            "later, at once"
        );
        assert_eq!(x.pending(), 0);
    }

    #[test]
    fn a_rank_that_left_fails_only_the_meetings_that_need_it() {
        let x = Exchange::new();
        let p2p = |from, to| Call {
            kind: Kind::SendRecv { from, to },
            dtype: "f64".into(),
            len: 1,
        };
        // Rank 0 waits for rank 2 (a send 2 → 0) and for rank 1 (1 → 0).
        let k20 = Key::PointToPoint { from: 2, to: 0, n: 0 };
        let k10 = Key::PointToPoint { from: 1, to: 0, n: 0 };
        let mut a = x.meet(k20, 1, 2, p2p(2, 0), Ok(Box::new(0.0f64)), sum());
        let mut b = x.meet(k10, 1, 2, p2p(1, 0), Ok(Box::new(0.0f64)), sum());
        x.rank_left(1, GpuError::DeviceLost("rank 1 left".into()));
        assert!(
            matches!(got(&mut b).unwrap(), Err(GpuError::DeviceLost(_))),
            "needs rank 1"
        );
        assert!(got(&mut a).is_none(), "rank 2's send still comes");
        let mut c = x.meet(k20, 0, 2, p2p(2, 0), Ok(Box::new(5.0f64)), sum());
        assert!(got(&mut a).unwrap().is_ok() && got(&mut c).unwrap().is_ok());
        // Later meetings that need rank 1 fail at once; others go on.
        let mut d = x.meet(Key::Collective(9), 0, 3, call(1), Ok(Box::new(1.0f64)), sum());
        assert!(matches!(got(&mut d).unwrap(), Err(GpuError::DeviceLost(_))));
        let k02 = Key::PointToPoint { from: 0, to: 2, n: 0 };
        let mut e = x.meet(k02, 0, 2, p2p(0, 2), Ok(Box::new(1.0f64)), sum());
        assert!(got(&mut e).is_none(), "0 → 2 waits for rank 2");
    }

    #[test]
    fn a_party_giving_up_fails_the_others_and_later_arrivals() {
        let x = Exchange::new();
        let k = Key::PointToPoint { from: 0, to: 1, n: 0 };
        let mut a = x.meet(k, 0, 3, call(1), Ok(Box::new(1.0f64)), sum());
        x.abandon(k, 3, GpuError::Timeout(std::time::Duration::from_secs(1)));
        assert!(matches!(got(&mut a).unwrap(), Err(GpuError::Timeout(_))));
        let mut b = x.meet(k, 1, 3, call(1), Ok(Box::new(1.0f64)), sum());
        assert!(
            matches!(got(&mut b).unwrap(), Err(GpuError::Timeout(_))),
            "a later arrival fails at once"
        );
        let mut c = x.meet(k, 2, 3, call(1), Ok(Box::new(1.0f64)), sum());
        assert!(got(&mut c).unwrap().is_err());
        assert_eq!(x.pending(), 0, "gone once every party came");
    }
}
