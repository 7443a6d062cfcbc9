//! [`Pipeline`] as a `futures::Stream` adapter: a stream of host batches in, a stream of
//! results out, in input order, with at most `depth` batches in flight (back-pressure on
//! the input: the next batch is pulled only when one finishes).

use futures::{Stream, StreamExt};

use crate::dtype::DType;
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
                let p = this.clone();
                async move { p.process(batch).await }
            })
            .buffered(self.depth)
    }
}
