//! How buffers cross to a GPU worker: a `GpuRef` crosses as the worker's buffer id and
//! its window (the buffer's length, the view's offset and length — a whole buffer is the
//! window over all of it). The worker keeps the buffer in its table while the user
//! process holds a handle (a [`RemoteBuf`]), and frees it when the last handle is
//! dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Exported, Reader, Side, Wire, WorkerCtx, Writer};
use crate::dtype::DTypeBase;
use crate::error::GpuError;
use crate::gpu_ref::{GpuRef, RemoteBuf};

/// Holds one more user handle to `value` (numbered `id`) in `table`.
fn hold<V: std::any::Any + Send + Sync + Clone>(table: &Mutex<HashMap<u64, Exported>>, id: u64, value: &V) {
    let mut m = table.lock().unwrap_or_else(|p| p.into_inner());
    m.entry(id).or_insert_with(|| (Box::new(value.clone()), 0)).1 += 1;
}

/// The user process dropped a handle to `id` of `table`: the last one frees it.
fn unhold(table: &Mutex<HashMap<u64, Exported>>, id: u64) {
    let mut m = table.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = m.get_mut(&id) {
        e.1 -= 1;
        if e.1 == 0 {
            m.remove(&id);
        }
    }
}

/// Object `id` of `table` (a `what`), as its type `V`.
fn look_up<V: std::any::Any + Clone>(
    table: &Mutex<HashMap<u64, Exported>>,
    id: u64,
    what: &str,
) -> Result<V, GpuError> {
    let m = table.lock().unwrap_or_else(|p| p.into_inner());
    let (any, _) = m
        .get(&id)
        .ok_or_else(|| GpuError::invalid(format!("no {what} #{id} in the worker (dropped, or never handed out)")))?;
    any.downcast_ref::<V>()
        .cloned()
        .ok_or_else(|| GpuError::Internal(format!("worker {what} #{id} is of another type")))
}

impl WorkerCtx {
    /// Holds one more user handle to `r`.
    pub(crate) fn export<T: DTypeBase>(&self, r: &GpuRef<T>) {
        hold(&self.buffers, r.id(), r);
    }

    /// The user process dropped a handle to buffer `id`.
    pub(crate) fn release(&self, id: u64) {
        unhold(&self.buffers, id);
    }

    /// Holds one more user handle to event `e` (numbered `id`).
    pub(crate) fn export_event<E: std::any::Any + Send + Sync + Clone>(&self, id: u64, e: &E) {
        hold(&self.events, id, e);
    }

    /// The user process dropped a handle to event `id`.
    pub(crate) fn release_event(&self, id: u64) {
        unhold(&self.events, id);
    }

    /// The worker's event `id`.
    pub(crate) fn lookup_event<E: std::any::Any + Clone>(&self, id: u64) -> Result<E, GpuError> {
        look_up(&self.events, id, "event")
    }

    /// Holds one more user handle to graph `g` (numbered `id`).
    pub(crate) fn export_graph<G: std::any::Any + Send + Sync + Clone>(&self, id: u64, g: &G) {
        hold(&self.graphs, id, g);
    }

    /// The user process dropped a handle to graph `id`.
    pub(crate) fn release_graph(&self, id: u64) {
        unhold(&self.graphs, id);
    }

    /// The worker's graph `id`.
    pub(crate) fn lookup_graph<G: std::any::Any + Clone>(&self, id: u64) -> Result<G, GpuError> {
        look_up(&self.graphs, id, "graph")
    }

    /// Hands out raw module `m` (numbered `id`): kept until the worker ends.
    pub(crate) fn export_module<M: std::any::Any + Send + Sync + Clone>(&self, id: u64, m: &M) {
        let mut table = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        table.entry(id).or_insert_with(|| (Box::new(m.clone()), 1));
    }

    /// The worker's raw module `id`.
    pub(crate) fn lookup_module<M: std::any::Any + Clone>(&self, id: u64) -> Result<M, GpuError> {
        look_up(&self.modules, id, "module")
    }

    pub(crate) fn lookup<T: DTypeBase>(&self, id: u64) -> Result<GpuRef<T>, GpuError> {
        let m = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        let (any, _) = m
            .get(&id)
            .ok_or_else(|| GpuError::invalid(format!("no buffer #{id} in the worker (freed, or never handed out)")))?;
        any.downcast_ref::<GpuRef<T>>()
            .cloned()
            .ok_or_else(|| GpuError::invalid(format!("worker buffer #{id} is not a {} buffer", T::NAME)))
    }
}

impl<T: DTypeBase> Wire for GpuRef<T> {
    fn put(&self, w: &mut Writer<'_>) -> Result<(), GpuError> {
        match w.side {
            Side::Client(c) => {
                let Some(remote) = self.remote() else {
                    return Err(GpuError::invalid(format!(
                        "buffer #{} belongs to an in-process device, not to isolated device {}",
                        self.id(),
                        c.device_id
                    )));
                };
                if remote.instance != c.instance {
                    return Err(GpuError::invalid(format!(
                        "buffer #{} lives on another device (device {}), not on this isolated device {}",
                        self.id(),
                        self.device_id(),
                        c.device_id
                    )));
                }
                if self.generation() != c.generation() {
                    return Err(GpuError::Stale {
                        buffer_generation: self.generation(),
                        device_generation: c.generation(),
                    });
                }
                let id = remote.id;
                w.keep.push(Box::new(self.clone()));
                w.put_u64(id);
            }
            Side::Worker(wc) => {
                wc.export(self);
                w.put_u64(self.id());
            }
            Side::Journal(j) => w.put_u64(j.name(self)?),
        }
        put_window(self, w);
        Ok(())
    }

    fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        let side = r.side;
        BufferOnWire::take(r)?.resolve(side)
    }
}

/// A buffer as the wire names it: the id the worker (or journal) knows it by, and the
/// handle's window — the buffer's length, the handle's offset and length in it.
pub(crate) struct BufferOnWire {
    id: u64,
    buffer_len: usize,
    offset: usize,
    len: usize,
}

impl BufferOnWire {
    /// Reads what [`GpuRef`]'s `put` wrote.
    pub(crate) fn take(r: &mut Reader<'_>) -> Result<Self, GpuError> {
        Ok(BufferOnWire {
            id: r.take_u64()?,
            buffer_len: r.take_usize()?,
            offset: r.take_usize()?,
            len: r.take_usize()?,
        })
    }

    /// The handle on this side: the worker's or journal's buffer, or (in the user
    /// process) a new handle to the worker's; then the window of it.
    pub(crate) fn resolve<T: DTypeBase>(self, side: Side<'_>) -> Result<GpuRef<T>, GpuError> {
        let BufferOnWire {
            id,
            buffer_len,
            offset,
            len,
        } = self;
        let found = match side {
            Side::Worker(wc) => wc.lookup(id)?,
            Side::Journal(j) => j.lookup(id)?,
            Side::Client(c) => GpuRef::new_remote(
                c.device_id,
                c.generation(),
                buffer_len,
                RemoteBuf {
                    id,
                    instance: c.instance,
                    link: c.link.clone(),
                },
            ),
        };
        if found.buffer_len() != buffer_len {
            return Err(GpuError::invalid(format!(
                "buffer #{id} has {} elements here, {buffer_len} on the other side",
                found.buffer_len()
            )));
        }
        let whole = found.whole();
        if offset == 0 && len == whole.len() {
            return Ok(whole);
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| GpuError::invalid("a buffer window past the end of memory"))?;
        whole.view(offset..end)
    }
}

/// Writes a handle's window: its buffer's length, its offset and length in it.
fn put_window<T: DTypeBase>(r: &GpuRef<T>, w: &mut Writer<'_>) {
    w.put_u64(r.buffer_len() as u64);
    w.put_u64(r.offset() as u64);
    w.put_u64(r.len() as u64);
}

/// A worker's object other than a buffer — an event, a graph — as the user process holds
/// it: the worker's number for it, the device it belongs to, and how to free it there
/// when the last handle goes.
pub(crate) struct RemoteObject {
    pub(crate) id: u64,
    instance: u64,
    link: std::sync::Weak<dyn crate::gpu_ref::BufferOwner>,
    free: fn(&dyn crate::gpu_ref::BufferOwner, u64),
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteObject(#{} of device instance {})", self.id, self.instance)
    }
}

impl RemoteObject {
    /// Object `id` of the worker behind `c`, freed there by `free` with the last handle.
    pub(crate) fn new(c: &super::ClientCtx, id: u64, free: fn(&dyn crate::gpu_ref::BufferOwner, u64)) -> Self {
        RemoteObject {
            id,
            instance: c.instance,
            link: c.link.clone(),
            free,
        }
    }
}

impl Drop for RemoteObject {
    fn drop(&mut self) {
        if let Some(link) = self.link.upgrade() {
            (self.free)(&*link, self.id);
        }
    }
}

/// Writes a handle to a worker's object for the worker (its number there), after the
/// checks every such handle gets: that it is `remote` of this device (`what` names it in
/// the error) and of the worker's generation; `keep` holds the handle until the reply.
pub(crate) fn put_remote_object(
    w: &mut Writer<'_>,
    c: &super::ClientCtx,
    (remote, generation): (Option<&RemoteObject>, u64),
    what: &dyn std::fmt::Display,
    keep: Box<dyn std::any::Any + Send>,
) -> Result<(), GpuError> {
    let Some(remote) = remote.filter(|r| r.instance == c.instance) else {
        return Err(GpuError::invalid(format!(
            "{what} belongs to another device, not to isolated device {}",
            c.device_id
        )));
    };
    if generation != c.generation() {
        return Err(GpuError::Stale {
            buffer_generation: generation,
            device_generation: c.generation(),
        });
    }
    w.keep.push(keep);
    w.put_u64(remote.id);
    Ok(())
}
