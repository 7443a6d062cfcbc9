//! Where an awaited call's time goes, read from the actors' own `tracing` spans: a tiny
//! subscriber that enables only the `message` and `completion` spans and stamps when the
//! call's handler started and ended (the first entry into and exit from its `message`
//! span: `tracing` enters a span again to drop its future) and when its reply left (the
//! last exit from its `completion` span), with the CPU each ran on.
//!
//! One call at a time: `Call::start` zeroes the stamps, `Call::end` reads them into
//! `OursPhases`. Install with `install()` before the device opens.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Nanoseconds since the bench's start.
pub fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The CPU the calling thread runs on now (-1 if unknown).
pub fn cpu() -> i64 {
    // SAFETY: `sched_getcpu` takes no arguments and only reads the calling thread's state.
    unsafe { libc::sched_getcpu() as i64 }
}

/// Context switches of the calling thread so far: (voluntary, involuntary).
pub fn switches() -> (i64, i64) {
    // SAFETY: `rusage` is plain integers, for which all zeros is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` writes one `rusage`, which we own; RUSAGE_THREAD is Linux's.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_THREAD)");
    (u.ru_nvcsw, u.ru_nivcsw)
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed `cpu_set_t` is empty; we set one bit and pass its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0,
            "pin to cpu {cpu}"
        );
    }
}

static HANDLER_IN: AtomicU64 = AtomicU64::new(0);
static HANDLER_OUT: AtomicU64 = AtomicU64::new(0);
static REPLIED: AtomicU64 = AtomicU64::new(0);
static HANDLER_CPU: AtomicI64 = AtomicI64::new(-1);
static REPLY_CPU: AtomicI64 = AtomicI64::new(-1);

const MESSAGE: u64 = 1;
const COMPLETION: u64 = 2;

/// The subscriber.
struct HandlerClock;

fn first(slot: &AtomicU64) -> bool {
    slot.compare_exchange(0, now_ns(), Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

impl Subscriber for HandlerClock {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.is_span() && matches!(m.name(), "message" | "completion")
    }
    fn new_span(&self, a: &Attributes<'_>) -> Id {
        Id::from_u64(if a.metadata().name() == "message" {
            MESSAGE
        } else {
            COMPLETION
        })
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, id: &Id) {
        if id.into_u64() == MESSAGE && first(&HANDLER_IN) {
            HANDLER_CPU.store(cpu(), Ordering::Release);
        }
    }
    fn exit(&self, id: &Id) {
        if id.into_u64() == MESSAGE {
            first(&HANDLER_OUT);
        } else {
            REPLIED.store(now_ns(), Ordering::Release);
            REPLY_CPU.store(cpu(), Ordering::Release);
        }
    }
}

/// Installs the subscriber for the whole process (call once, before the device opens).
pub fn install() {
    tracing::subscriber::set_global_default(HandlerClock).expect("no other subscriber");
    INSTALLED.store(true, Ordering::Release);
    now_ns();
}

/// Whether `install` ran: without it every stamp reads zero.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// One call being timed.
pub struct Call {
    t0: u64,
    caller_cpu: i64,
}

/// The phases of one of our calls, in µs, and the CPUs involved.
#[derive(Clone, Copy, Debug)]
pub struct OursPhases {
    /// Caller's clock before the call → handler starts (the hop in).
    pub to_handler: f64,
    /// The handler (the work enqueued, its completion set up).
    pub handler: f64,
    /// Handler done → reply sent (the GPU's work, seen done).
    pub to_reply: f64,
    /// Reply sent → caller's clock after the call (the hop back).
    pub to_caller: f64,
    /// The whole call.
    pub total: f64,
    /// CPU of the caller before the call, of the handler, of the reply, of the caller
    /// after the call.
    pub cpus: [i64; 4],
}

impl Call {
    /// Zeroes the stamps and reads the caller's clock: call right before the call.
    pub fn start() -> Call {
        for slot in [&HANDLER_IN, &HANDLER_OUT, &REPLIED] {
            slot.store(0, Ordering::Release);
        }
        HANDLER_CPU.store(-1, Ordering::Release);
        REPLY_CPU.store(-1, Ordering::Release);
        Call {
            caller_cpu: cpu(),
            t0: now_ns(),
        }
    }

    /// Reads the caller's clock and the stamps: call right after the call.
    pub fn end(self) -> OursPhases {
        let t3 = now_ns();
        let (e, l, r) = (
            HANDLER_IN.load(Ordering::Acquire),
            HANDLER_OUT.load(Ordering::Acquire),
            REPLIED.load(Ordering::Acquire),
        );
        let us = |a: u64, b: u64| (b as f64 - a as f64) / 1e3;
        OursPhases {
            to_handler: us(self.t0, e),
            handler: us(e, l),
            to_reply: us(l, r),
            to_caller: us(r, t3),
            total: us(self.t0, t3),
            cpus: [
                self.caller_cpu,
                HANDLER_CPU.load(Ordering::Acquire),
                REPLY_CPU.load(Ordering::Acquire),
                cpu(),
            ],
        }
    }
}
