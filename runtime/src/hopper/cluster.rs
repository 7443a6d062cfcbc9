//! Cluster launches: blocks grouped into clusters that are co-scheduled on one GPC and
//! share distributed shared memory.

use cudarc::driver::{CudaFunction, CudaStream};

use crate::error::GpuError;
use crate::launch::{lock_args, param_addresses, param_pointers, HeldArgs, KernelArgs, LaunchConfig, LaunchLimits};
use crate::sys::hopper::{launch_cluster, ClusterDims};

/// The most blocks per cluster every cluster-capable GPU accepts. Larger clusters need
/// the non-portable opt-in per kernel, which this runtime does not expose yet.
pub const MAX_PORTABLE_CLUSTER_SIZE: u32 = 8;

/// A launch with thread-block clusters: the grid and block of `config`, grouped into
/// clusters of `cluster` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchSpec {
    /// Grid (in blocks), block and dynamic shared memory.
    pub config: LaunchConfig,
    /// Blocks per cluster (x, y, z); each divides the grid's dimension.
    pub cluster: (u32, u32, u32),
}

crate::wire::wire_struct!(LaunchSpec { config, cluster });

impl LaunchSpec {
    /// `config` in clusters of `cluster` blocks.
    pub fn new(config: LaunchConfig, cluster: (u32, u32, u32)) -> Self {
        LaunchSpec { config, cluster }
    }

    /// Checks the launch against the device: cluster support, the block and grid limits,
    /// a positive cluster that tiles the grid, and the portable cluster size.
    pub(crate) fn validate(&self, limits: &LaunchLimits) -> Result<(), GpuError> {
        if !limits.cluster_launch {
            return Err(GpuError::Unsupported(
                "cluster launches need a GPU of compute capability 9.0 or later".into(),
            ));
        }
        self.config.validate(limits)?;
        let (c, g) = (self.cluster, self.config.grid);
        let bad = |m: String| Err(GpuError::invalid(m));
        if [c.0, c.1, c.2].contains(&0) {
            return bad(format!("cluster dimensions must be positive, got {c:?}"));
        }
        if g.0 % c.0 != 0 || g.1 % c.1 != 0 || g.2 % c.2 != 0 {
            return bad(format!(
                "the grid {g:?} must be a whole number of clusters {c:?} in every dimension"
            ));
        }
        let size = c.0 as u64 * c.1 as u64 * c.2 as u64;
        if size > MAX_PORTABLE_CLUSTER_SIZE as u64 {
            return bad(format!(
                "a cluster of {size} blocks exceeds the portable maximum of {MAX_PORTABLE_CLUSTER_SIZE}"
            ));
        }
        Ok(())
    }
}

/// Enqueues `f` with `args` on `stream` as the cluster launch `spec`: every buffer is
/// locked, ordered after its last writer and recorded as used by this launch, as for
/// plain launches.
///
/// # Safety
/// `args` must match `f`'s parameter list in number, order and type and have been
/// validated (`KernelArgs::validate`), and `spec` checked (`LaunchSpec::validate`).
pub(crate) unsafe fn enqueue_cluster(
    stream: &CudaStream,
    f: &CudaFunction,
    spec: &LaunchSpec,
    args: &KernelArgs,
) -> Result<(), GpuError> {
    let HeldArgs { mut buffers, slots } = lock_args(args);
    // Each buffer ordered once, however many views of it the launch takes.
    let mut bases = Vec::with_capacity(buffers.len());
    let mut guards = Vec::with_capacity(buffers.len());
    for h in buffers.iter_mut() {
        let writes = h.writes();
        let (base, guard) = h.buffer_address(stream, writes)?;
        bases.push(base);
        guards.push(guard);
    }
    let addresses = param_addresses(&slots, &bases);
    let mut params = param_pointers(&slots, &addresses);
    let dims = ClusterDims {
        launch: spec.config.dims(),
        cluster: spec.cluster,
    };
    // SAFETY: one pointer per parameter, in order, to live values (the addresses above,
    // the scalars inside `args`), per the caller's contract; `spec` was validated.
    unsafe { launch_cluster(stream, f, &dims, &mut params) }?;
    drop(guards);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cluster_launch: bool) -> LaunchLimits {
        LaunchLimits {
            max_threads_per_block: 1024,
            max_block: (1024, 1024, 64),
            max_grid: (i32::MAX as u32, 65535, 65535),
            max_shared_mem: 48 * 1024,
            cluster_launch,
        }
    }

    fn spec(grid: (u32, u32, u32), cluster: (u32, u32, u32)) -> LaunchSpec {
        LaunchSpec::new(
            LaunchConfig {
                grid,
                block: (128, 1, 1),
                shared_mem_bytes: 0,
            },
            cluster,
        )
    }

    #[test]
    fn shapes_are_checked_before_the_driver_sees_them() {
        let l = limits(true);
        assert!(spec((16, 4, 1), (4, 2, 1)).validate(&l).is_ok());
        assert!(spec((8, 1, 1), (8, 1, 1)).validate(&l).is_ok());
        let refused = [
            spec((6, 1, 1), (4, 1, 1)),   // not a whole number of clusters
            spec((16, 2, 1), (4, 1, 2)),  // z: 1 is not a multiple of 2
            spec((16, 1, 1), (16, 1, 1)), // beyond the portable size
            spec((16, 4, 1), (4, 4, 1)),  // 16 blocks in two dimensions
            spec((16, 1, 1), (0, 1, 1)),  // zero
            spec((0, 1, 1), (1, 1, 1)),   // an empty grid
        ];
        for s in refused {
            assert!(matches!(s.validate(&l), Err(GpuError::InvalidArgument(_))), "{s:?}");
        }
    }

    #[test]
    fn a_gpu_without_clusters_is_unsupported() {
        let e = spec((8, 1, 1), (2, 1, 1)).validate(&limits(false)).unwrap_err();
        assert!(matches!(e, GpuError::Unsupported(_)), "{e}");
    }
}
