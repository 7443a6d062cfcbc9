//! `Topology`: which GPU pairs have peer access.

use crate::error::GpuError;

/// Which GPUs of this machine can address which others' memory directly (NVLink or PCIe
/// peer-to-peer), as the driver reports it: what decides whether a copy between two GPUs
/// is one DMA or staged by the driver through host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    gpus: usize,
    /// `peer[from * gpus + to]`.
    peer: Vec<bool>,
}

impl Topology {
    /// Asks the driver about every pair of GPUs; no GPU (and no error) on a machine
    /// without a CUDA driver.
    pub fn probe() -> Result<Topology, GpuError> {
        let gpus = crate::sys::peer::gpu_count()?;
        let mut peer = vec![false; gpus * gpus];
        for from in 0..gpus {
            for to in 0..gpus {
                peer[from * gpus + to] = from == to || crate::sys::peer::can_access_peer(from, to)?;
            }
        }
        Ok(Topology { gpus, peer })
    }

    /// The number of GPUs seen.
    pub fn gpus(&self) -> usize {
        self.gpus
    }

    /// Whether GPU `from` can address GPU `to`'s memory directly (always for a GPU and
    /// itself; never for a GPU this machine does not have).
    pub fn can_access(&self, from: usize, to: usize) -> bool {
        from < self.gpus && to < self.gpus && self.peer[from * self.gpus + to]
    }

    /// The ordered pairs of distinct GPUs with peer access.
    pub fn peer_pairs(&self) -> Vec<(usize, usize)> {
        (0..self.gpus)
            .flat_map(|a| (0..self.gpus).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && self.can_access(a, b))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topology_answers_for_gpus_it_has_only() {
        let t = Topology {
            gpus: 2,
            peer: vec![true, true, false, true],
        };
        assert!(t.can_access(0, 1));
        assert!(!t.can_access(1, 0));
        assert!(!t.can_access(0, 2), "no GPU 2");
        assert_eq!(t.peer_pairs(), vec![(0, 1)]);
    }
}
