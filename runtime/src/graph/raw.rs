//! Untracked device views for stream capture.
//!
//! cudarc orders every use of a slice with events (wait on the last writer, record this
//! use). Inside a capture that breaks: waiting on an event recorded outside the capture
//! is an isolation error, and an event recorded inside one cannot be waited on after it.
//! A graph therefore orders its buffers itself around capture and replay
//! (`module::order_on`) and captures on these views, which carry only an address.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

/// `len` elements of `T` at a device address, with no event tracking.
pub(crate) struct RawDevice<T> {
    ptr: CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<T> RawDevice<T> {
    /// A view of `len` elements at `ptr` (the address of a live buffer of at least that
    /// many elements, kept alive by the graph that captures on it).
    pub(crate) fn new(ptr: CUdeviceptr, len: usize, stream: &Arc<CudaStream>) -> Self {
        RawDevice {
            ptr,
            len,
            stream: stream.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> DeviceSlice<T> for RawDevice<T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for RawDevice<T> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Record(None))
    }
}

impl<T> DevicePtrMut<T> for RawDevice<T> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Record(None))
    }
}
