//! [`Pipeline`] as a `futures::Stream` adapter: a stream of host batches in, a stream of
//! results out, in input order, with at most `depth` batches in flight (back-pressure on
//! the input: the next batch is pulled only when one finishes).

use futures::{Stream, StreamExt};

use crate::device::DType;
use crate::error::GpuError;
use crate::pipeline::Pipeline;

impl<T: DType, U: DType> Pipeline<T, U> {
    /// The results of `input`'s batches, in order; an error ends nothing by itself (the
    /// consumer decides whether to stop on it).
    pub fn stream<S>(&self, input: S) -> impl Stream<Item = Result<Vec<U>, GpuError>> + Send + 'static
    where
        S: Stream<Item = Vec<T>> + Send + 'static,
    {
        let this = self.clone();
        input
            .map(move |batch| {
                // A task per batch: its host-side copies (into and out of the pinned
                // buffers) run on the runtime's workers in parallel with the other
                // batches' instead of inside this stream's one task.
                let p = this.clone();
                let task = tokio::spawn(async move { p.process(batch).await });
                async move {
                    task.await
                        .unwrap_or_else(|e| Err(GpuError::Internal(format!("pipeline batch task failed: {e}"))))
                }
            })
            .buffered(self.depth)
    }
}
