//! The graph part of the `Device` client: capture through the device's `GraphActor`,
//! replay many times (see `crate::graph`).

use super::Device;
use crate::error::GpuError;
use crate::graph::{GraphActorMsg, GraphBuilder, GraphRef};

impl Device {
    /// Checks the builder's operations (shapes, buffers of this device and generation)
    /// and captures them into a graph: a CUDA graph on a GPU, the operation list on the
    /// CPU device. The first bad operation is an `InvalidArgument` naming its index.
    pub async fn capture_graph(&self, builder: GraphBuilder) -> Result<GraphRef, GpuError> {
        self.call(|reply| GraphActorMsg::Capture { builder, reply }).await
    }

    /// Replays `graph` `times` times back to back (one ask for all of them) and resolves
    /// when the last replay has finished. Its buffers are checked first (`Stale` after a
    /// rebuild); the replays are ordered after the buffers' last writers and before
    /// their next users.
    pub async fn replay(&self, graph: &GraphRef, times: u32) -> Result<(), GpuError> {
        let graph = graph.clone();
        self.call(|reply| GraphActorMsg::Replay { graph, times, reply }).await
    }
}
