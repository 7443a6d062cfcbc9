//! The collectives of a world of CPU devices: each rank brings its send buffer's
//! contents, the last arrival computes every rank's part on the host.

use super::exchange::{Compute, Data, Kind};
use super::reduce::{reduce, CollectiveScalar};

/// The host computation of a call on `T`.
pub(crate) fn compute<T: CollectiveScalar>() -> Compute {
    Box::new(|call, parts| Ok(outputs::<T>(call.kind, &parts)))
}

/// Every party's part of `kind` over `parts` (each a `Vec<T>`, in party order).
fn outputs<T: CollectiveScalar>(kind: Kind, parts: &[Data]) -> Vec<Data> {
    let ins: Vec<&[T]> = parts
        .iter()
        .map(|p| p.downcast_ref::<Vec<T>>().expect("a Vec of T").as_slice())
        .collect();
    let each = |v: Vec<T>| ins.iter().map(|_| Box::new(v.clone()) as Data).collect();
    match kind {
        Kind::AllReduce(op) => each(reduce(op, &ins)),
        Kind::Broadcast { root } => each(ins[root].to_vec()),
        Kind::AllGather => each(ins.concat()),
        Kind::ReduceScatter(op) => {
            let out = reduce(op, &ins);
            let block = out.len() / ins.len();
            (0..ins.len())
                .map(|r| Box::new(out[r * block..(r + 1) * block].to_vec()) as Data)
                .collect()
        }
        // The receiver (party 1) gets the sender's data.
        Kind::SendRecv { .. } => vec![Box::new(Vec::<T>::new()) as Data, Box::new(ins[0].to_vec())],
    }
}
