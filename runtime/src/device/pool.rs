//! A pool of one library's actors, each on its own thread and stream, serving callers
//! outside any actor: independent tasks calling `Device` methods at once overlap on the
//! GPU instead of queueing behind one actor. A request goes to the least busy member,
//! the first of equals, so a lone caller always meets the same (warm) member and its
//! stream order, and a second concurrent caller a second member.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The members (clients of one library actor each) and their requests in flight.
#[derive(Clone)]
pub(crate) struct Pool<C> {
    members: Arc<[C]>,
    loads: Arc<[AtomicUsize]>,
}

/// One request in flight at a member: counted until dropped (when its reply is in).
pub(crate) struct Busy {
    loads: Arc<[AtomicUsize]>,
    at: usize,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.loads[self.at].fetch_sub(1, Ordering::Relaxed);
    }
}

impl<C> Pool<C> {
    /// A pool of `members` (at least one).
    pub(crate) fn new(members: Vec<C>) -> Self {
        assert!(!members.is_empty(), "a pool needs a member");
        Pool {
            loads: members.iter().map(|_| AtomicUsize::new(0)).collect(),
            members: members.into(),
        }
    }

    /// The least busy member (the first of equals), counted busy until the guard drops.
    pub(crate) fn pick(&self) -> (&C, Busy) {
        let mut at = 0;
        let mut least = usize::MAX;
        for (i, load) in self.loads.iter().enumerate() {
            let l = load.load(Ordering::Relaxed);
            if l < least {
                (at, least) = (i, l);
                if l == 0 {
                    break;
                }
            }
        }
        self.loads[at].fetch_add(1, Ordering::Relaxed);
        (
            &self.members[at],
            Busy {
                loads: self.loads.clone(),
                at,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_caller_stays_on_the_first_member_and_concurrent_ones_spread() {
        let pool = Pool::new(vec!["a", "b", "c"]);
        for _ in 0..5 {
            let (m, busy) = pool.pick();
            assert_eq!(*m, "a");
            drop(busy);
        }
        let (m1, b1) = pool.pick();
        let (m2, b2) = pool.pick();
        let (m3, b3) = pool.pick();
        let (m4, b4) = pool.pick();
        assert_eq!([*m1, *m2, *m3, *m4], ["a", "b", "c", "a"]);
        drop(b2);
        let (m5, _b5) = pool.pick();
        assert_eq!(*m5, "b", "the freed member is the least busy");
        drop((b1, b3, b4));
    }
}
