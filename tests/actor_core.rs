//! The actor core's semantics, one test each, on the CPU (no GPU needed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atomr_accel_cuda::actor::{
    Actor, ActorRef, ActorSystem, Context, DeadLetterReason, Directive, Exhausted, Failure, Props, Reply, StopMode,
    StopReason, SupervisorStrategy, Terminated,
};
use atomr_accel_cuda::dispatcher::GpuDispatcher;
use atomr_accel_cuda::GpuError;
use tokio::sync::oneshot;

const T: Duration = Duration::from_secs(5);

/// Counters shared by every instance a factory builds, so a test sees across restarts.
#[derive(Default)]
struct Probe {
    starts: AtomicUsize,
    stops: AtomicUsize,
    pre_restarts: AtomicUsize,
    log: Mutex<Vec<u64>>,
    threads: Mutex<Vec<std::thread::ThreadId>>,
    seen_failures: Mutex<Vec<String>>,
}

enum Msg {
    Push(u64),
    Log(Reply<Vec<u64>>),
    Echo(u64, Reply<u64>),
    FailWith(GpuError),
    Panic(&'static str),
    /// Holds the actor until the gate opens (to fill its mailbox deterministically);
    /// signals when the actor has picked it up.
    Wait(oneshot::Receiver<()>, oneshot::Sender<()>),
    /// Ask that fails instead of replying.
    FailHolding(Reply<u64>),
    /// Instance-local counter: survives Resume, reset by Restart.
    Bump(Reply<u64>),
    SpawnChild(&'static str, Reply<Result<ActorRef<Msg>, GpuError>>),
    Child(&'static str, Reply<Option<ActorRef<Msg>>>),
    Died(Terminated),
    /// Replies from a task spawned on the actor's own dispatcher, after `delay` (none:
    /// after one yield).
    EchoLater(u64, Option<Duration>, Reply<u64>),
}

struct Worker {
    probe: Arc<Probe>,
    local: u64,
    fail_pre_start: bool,
    children: Vec<&'static str>,
    child_strategy: Option<SupervisorStrategy>,
    child_probe: Arc<Probe>,
}

impl Worker {
    fn props(probe: &Arc<Probe>) -> Props<Worker> {
        let probe = probe.clone();
        Props::new(move || Worker {
            probe: probe.clone(),
            local: 0,
            fail_pre_start: false,
            children: vec![],
            child_strategy: None,
            child_probe: probe.clone(),
        })
    }
}

impl Actor for Worker {
    type Msg = Msg;

    async fn pre_start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.probe.starts.fetch_add(1, Ordering::SeqCst);
        self.probe.threads.lock().unwrap().push(std::thread::current().id());
        for name in self.children.clone() {
            let mut props = Worker::props(&self.child_probe);
            if let Some(s) = &self.child_strategy {
                props = props.supervise_children(s.clone());
            }
            ctx.spawn_child(props, name)?;
        }
        if self.fail_pre_start {
            return Err(GpuError::Other("pre_start failed".into()));
        }
        Ok(())
    }

    async fn post_stop(&mut self, _ctx: &mut Context<Self>) -> Result<(), GpuError> {
        self.probe.stops.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn pre_restart(&mut self, _ctx: &mut Context<Self>, failure: &Failure) -> Result<(), GpuError> {
        self.probe.pre_restarts.fetch_add(1, Ordering::SeqCst);
        self.probe.seen_failures.lock().unwrap().push(failure.to_string());
        Ok(())
    }

    async fn handle(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Result<(), GpuError> {
        match msg {
            Msg::Push(v) => self.probe.log.lock().unwrap().push(v),
            Msg::Log(r) => {
                r.send(self.probe.log.lock().unwrap().clone());
            }
            Msg::Echo(v, r) => {
                self.probe.threads.lock().unwrap().push(std::thread::current().id());
                r.send(v);
            }
            Msg::FailWith(e) => return Err(e),
            Msg::Panic(text) => panic!("{text}"),
            Msg::Wait(gate, started) => {
                let _ = started.send(());
                let _ = gate.await;
            }
            Msg::FailHolding(_reply) => return Err(GpuError::Other("failed while holding a request".into())),
            Msg::Bump(r) => {
                self.local += 1;
                r.send(self.local);
            }
            Msg::SpawnChild(name, r) => {
                r.send(ctx.spawn_child(Worker::props(&self.child_probe), name));
            }
            Msg::Child(name, r) => {
                r.send(ctx.child::<Msg>(name));
            }
            Msg::EchoLater(v, delay, r) => {
                ctx.dispatcher().spawn(async move {
                    match delay {
                        Some(d) => tokio::time::sleep(d).await,
                        None => tokio::task::yield_now().await,
                    }
                    r.send(v);
                });
            }
            Msg::Died(t) => self
                .probe
                .seen_failures
                .lock()
                .unwrap()
                .push(format!("died {}", t.path)),
        }
        Ok(())
    }
}

/// Makes the actor busy until the returned gate is opened (or dropped).
async fn block(a: &ActorRef<Msg>) -> oneshot::Sender<()> {
    let (gate_tx, gate) = oneshot::channel();
    let (started_tx, started) = oneshot::channel();
    a.send(Msg::Wait(gate, started_tx)).await.unwrap();
    started.await.unwrap();
    gate_tx
}

async fn log_of(a: &ActorRef<Msg>) -> Vec<u64> {
    a.ask(Msg::Log, T).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_arrive_in_order() {
    let sys = ActorSystem::new("order");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe).mailbox(64), "w").unwrap();
    for i in 0..10_000u64 {
        a.send(Msg::Push(i)).await.unwrap();
    }
    assert_eq!(log_of(&a).await, (0..10_000).collect::<Vec<_>>());
}

#[tokio::test]
async fn restart_loses_only_the_failing_message() {
    let sys = ActorSystem::new("restart");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe), "w").unwrap();
    assert_eq!(a.ask(Msg::Bump, T).await.unwrap(), 1);
    let gate_tx = block(&a).await;
    a.tell(Msg::Push(1)).unwrap();
    a.tell(Msg::Panic("boom")).unwrap();
    a.tell(Msg::Push(2)).unwrap();
    a.tell(Msg::Push(3)).unwrap();
    gate_tx.send(()).unwrap();
    assert_eq!(log_of(&a).await, vec![1, 2, 3]);
    // A fresh instance: instance-local state was reset, queued messages survived.
    assert_eq!(a.ask(Msg::Bump, T).await.unwrap(), 1);
    assert_eq!(probe.starts.load(Ordering::SeqCst), 2);
    assert_eq!(probe.pre_restarts.load(Ordering::SeqCst), 1);
    assert!(probe.seen_failures.lock().unwrap()[0].contains("boom"));
}

#[tokio::test]
async fn resume_keeps_state() {
    let sys = ActorSystem::new("resume");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe), "w").unwrap();
    assert_eq!(a.ask(Msg::Bump, T).await.unwrap(), 1);
    // InvalidArgument resumes under the default decider.
    a.tell(Msg::FailWith(GpuError::InvalidArgument("bad".into()))).unwrap();
    assert_eq!(a.ask(Msg::Bump, T).await.unwrap(), 2);
    assert_eq!(probe.starts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn restart_budget_exhaustion_stops_the_child() {
    let strategy = SupervisorStrategy::one_for_one().with_budget(3, Duration::from_secs(60), Exhausted::Stop);
    let sys = ActorSystem::with_guardian_strategy("budget", strategy);
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe), "w").unwrap();
    for _ in 0..4 {
        a.tell(Msg::Panic("again")).unwrap();
    }
    let t = tokio::time::timeout(T, a.terminated()).await.unwrap();
    assert!(matches!(t.reason, StopReason::Failed(Failure::Panic(ref p)) if p == "again"));
    assert_eq!(probe.starts.load(Ordering::SeqCst), 4, "1 start + 3 restarts");
    assert_eq!(probe.stops.load(Ordering::SeqCst), 1);
    assert!(matches!(a.tell(Msg::Push(0)), Err(GpuError::Stopped(_))));
}

#[tokio::test]
async fn escalation_reaches_the_grandparent_through_three_levels() {
    // top (guardian: restart, records) -> mid (escalates) -> leaf (its failure).
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let guardian = SupervisorStrategy::one_for_one().with_decider(move |f| {
        seen2.lock().unwrap().push(format!("{}|root={}", f, f.root_cause()));
        Directive::Restart
    });
    let escalate = SupervisorStrategy::one_for_one().with_decider(|_| Directive::Escalate);
    let sys = ActorSystem::with_guardian_strategy("escalate", guardian);
    let top_probe = Arc::new(Probe::default());
    let mid_probe = Arc::new(Probe::default());
    let leaf_probe = Arc::new(Probe::default());
    let (mp, lp, esc) = (mid_probe.clone(), leaf_probe.clone(), escalate.clone());
    let top_props = Props::new(move || Worker {
        probe: top_probe.clone(),
        local: 0,
        fail_pre_start: false,
        children: vec!["mid"],
        child_strategy: Some(esc.clone()),
        child_probe: mp.clone(),
    })
    .supervise_children(escalate.clone());
    let top = sys.spawn(top_props, "top").unwrap();
    // mid is spawned with Worker::props(child_probe) and spawns no children itself:
    // give it a leaf by message.
    let mid: ActorRef<Msg> = top.ask(|r| Msg::Child("mid", r), T).await.unwrap().unwrap();
    // Re-point mid's children at the leaf probe: mid's child_probe is mid_probe, fine —
    // the leaf's starts are counted on mid_probe too.
    let leaf = mid.ask(|r| Msg::SpawnChild("leaf", r), T).await.unwrap().unwrap();
    let _ = lp;
    leaf.tell(Msg::Panic("leaf exploded")).unwrap();
    // The leaf is stopped as part of mid's stop when top restarts.
    tokio::time::timeout(T, leaf.terminated()).await.unwrap();
    tokio::time::timeout(T, mid.terminated()).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("escalated from /user/top/mid"), "{seen:?}");
    assert!(seen[0].contains("root=panic: leaf exploded"), "{seen:?}");
    // top was restarted: it re-created a fresh `mid` under the same name without a clash.
    let mid2: ActorRef<Msg> = top.ask(|r| Msg::Child("mid", r), T).await.unwrap().unwrap();
    assert!(mid2.is_alive());
    assert_eq!(mid2.ask(|r| Msg::Echo(7, r), T).await.unwrap(), 7);
    assert_eq!(mid_probe.starts.load(Ordering::SeqCst), 3, "mid twice, leaf once");
}

#[tokio::test]
async fn failure_in_pre_start_is_supervised() {
    let sys = ActorSystem::with_guardian_strategy(
        "hook",
        SupervisorStrategy::one_for_one().with_budget(2, Duration::from_secs(60), Exhausted::Stop),
    );
    let probe = Arc::new(Probe::default());
    let p = probe.clone();
    let a = sys
        .spawn(
            Props::new(move || Worker {
                probe: p.clone(),
                local: 0,
                fail_pre_start: true,
                children: vec![],
                child_strategy: None,
                child_probe: p.clone(),
            }),
            "w",
        )
        .unwrap();
    let t = tokio::time::timeout(T, a.terminated()).await.unwrap();
    assert!(matches!(t.reason, StopReason::Failed(Failure::Error(GpuError::Other(ref m))) if m == "pre_start failed"));
    assert_eq!(
        probe.starts.load(Ordering::SeqCst),
        3,
        "start + 2 restarts, then the budget stops it"
    );
}

#[tokio::test]
async fn an_asker_learns_at_once_when_the_actor_fails_holding_its_request() {
    let sys = ActorSystem::new("noreply");
    let a = sys.spawn(Worker::props(&Arc::new(Probe::default())), "w").unwrap();
    let t0 = std::time::Instant::now();
    let r = a.ask(Msg::FailHolding, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(GpuError::NoReply(_))), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "not a timeout");
    // And the actor serves again after its restart.
    assert_eq!(a.ask(|r| Msg::Echo(5, r), T).await.unwrap(), 5);
}

#[tokio::test]
async fn ask_times_out_with_a_typed_error() {
    let sys = ActorSystem::new("timeout");
    let a = sys.spawn(Worker::props(&Arc::new(Probe::default())), "w").unwrap();
    let _gate_tx = block(&a).await;
    let r = a.ask(|r| Msg::Echo(1, r), Duration::from_millis(50)).await;
    assert_eq!(r, Err(GpuError::Timeout(Duration::from_millis(50))));
}

#[tokio::test]
async fn stop_with_queued_asks_answers_every_asker_with_an_error() {
    let sys = ActorSystem::new("stopq");
    let a = sys.spawn(Worker::props(&Arc::new(Probe::default())), "w").unwrap();
    let gate_tx = block(&a).await;
    let askers: Vec<_> = (0..20)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move { a.ask(|r| Msg::Echo(i, r), Duration::from_secs(30)).await })
        })
        .collect();
    // Let every ask reach the mailbox, then stop and open the gate.
    tokio::time::sleep(Duration::from_millis(50)).await;
    a.stop();
    gate_tx.send(()).unwrap();
    for h in askers {
        let r = h.await.unwrap();
        assert!(matches!(r, Err(GpuError::Stopped(_))), "{r:?}");
    }
    assert_eq!(sys.dead_letters().count(), 20);
}

#[tokio::test]
async fn stop_with_drain_handles_queued_messages_first() {
    let sys = ActorSystem::new("drain");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe), "w").unwrap();
    let gate_tx = block(&a).await;
    for i in 0..5 {
        a.tell(Msg::Push(i)).unwrap();
    }
    a.stop_with(StopMode::Drain);
    gate_tx.send(()).unwrap();
    tokio::time::timeout(T, a.terminated()).await.unwrap();
    assert_eq!(*probe.log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(sys.dead_letters().count(), 0);
}

#[tokio::test]
async fn send_waits_for_room_and_try_tell_hands_the_message_back() {
    let sys = ActorSystem::new("backpressure");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe).mailbox(4), "w").unwrap();
    let gate_tx = block(&a).await;
    for i in 0..4 {
        a.try_tell(Msg::Push(i)).map_err(|r| r.error).unwrap();
    }
    let rejected = a.try_tell(Msg::Push(99)).unwrap_err();
    assert!(matches!(rejected.error, GpuError::MailboxFull(_)));
    assert!(matches!(rejected.msg, Msg::Push(99)));
    assert!(matches!(a.tell(Msg::Push(100)), Err(GpuError::MailboxFull(_))));
    assert_eq!(
        sys.dead_letters().count(),
        1,
        "tell on a full mailbox is a dead letter; try_tell is not"
    );
    // `send` waits: it cannot finish until the gate opens.
    let a2 = a.clone();
    let sender = tokio::spawn(async move { a2.send(Msg::Push(4)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!sender.is_finished(), "send must wait for room");
    gate_tx.send(()).unwrap();
    sender.await.unwrap().unwrap();
    assert_eq!(log_of(&a).await, vec![0, 1, 2, 3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_dispatcher_thread_is_constant_across_100_restarts() {
    let d = GpuDispatcher::new("gpu-test").unwrap();
    let sys = ActorSystem::with_guardian_strategy(
        "dispatcher-100",
        SupervisorStrategy::one_for_one().with_budget(1000, Duration::from_secs(60), Exhausted::Stop),
    );
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe).dispatcher(d.clone()), "w").unwrap();
    for i in 0..100 {
        a.tell(Msg::Panic("restart me")).unwrap();
        assert_eq!(a.ask(|r| Msg::Echo(i, r), T).await.unwrap(), i);
    }
    assert_eq!(probe.starts.load(Ordering::SeqCst), 101);
    let threads = probe.threads.lock().unwrap();
    assert_eq!(threads.len(), 201);
    assert!(threads.iter().all(|t| *t == d.thread_id()));
    assert_ne!(d.thread_id(), std::thread::current().id());
}

/// Two actors on one GPU thread that spins for mail the whole time (a 60 s idle spin):
/// every ask to either is answered, tasks spawned on the thread (replying after a yield or
/// after a timer) still run, and a stop still ends an actor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actors_spinning_for_mail_serve_asks_local_tasks_timers_and_stops() {
    let d = GpuDispatcher::new("gpu-spin").unwrap();
    d.set_idle_spin(Duration::from_secs(60));
    let sys = ActorSystem::new("spin-for-mail");
    let probe = Arc::new(Probe::default());
    let a = sys.spawn(Worker::props(&probe).dispatcher(d.clone()), "a").unwrap();
    let b = sys.spawn(Worker::props(&probe).dispatcher(d.clone()), "b").unwrap();
    for i in 0..2000u64 {
        let to = if i % 2 == 0 { &a } else { &b };
        let v = match i % 5 {
            0 => to.ask(|r| Msg::EchoLater(i, None, r), T).await,
            1 if i % 50 == 1 => {
                to.ask(|r| Msg::EchoLater(i, Some(Duration::from_millis(2)), r), T)
                    .await
            }
            _ => to.ask(|r| Msg::Echo(i, r), T).await,
        };
        assert_eq!(v.unwrap(), i);
    }
    // Asks in flight to both at once.
    let asks = (0..200u64).map(|i| {
        let to = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move { to.ask(|r| Msg::EchoLater(i, None, r), T).await }
    });
    let got: Vec<u64> = futures::future::join_all(asks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    assert!(probe.threads.lock().unwrap().iter().all(|t| *t == d.thread_id()));
    a.stop();
    tokio::time::timeout(T, a.terminated())
        .await
        .expect("a spinning actor stops");
    assert_eq!(b.ask(|r| Msg::Echo(7, r), T).await.unwrap(), 7);
    sys.shutdown().await;
}

#[tokio::test]
async fn children_on_parent_dispatcher_share_its_thread() {
    let sys = ActorSystem::new("child-dispatcher");
    let d = GpuDispatcher::new("gpu-parent").unwrap();
    let probe = Arc::new(Probe::default());
    let child_probe = Arc::new(Probe::default());

    struct Parent {
        child_probe: Arc<Probe>,
    }
    impl Actor for Parent {
        type Msg = Reply<ActorRef<Msg>>;
        async fn handle(&mut self, ctx: &mut Context<Self>, r: Self::Msg) -> Result<(), GpuError> {
            let c = ctx.spawn_child(Worker::props(&self.child_probe).on_parent_dispatcher(), "c")?;
            r.send(c);
            Ok(())
        }
    }
    let cp = child_probe.clone();
    let p = sys
        .spawn(
            Props::new(move || Parent {
                child_probe: cp.clone(),
            })
            .dispatcher(d.clone()),
            "p",
        )
        .unwrap();
    let c = p.ask(|r| r, T).await.unwrap();
    c.ask(|r| Msg::Echo(1, r), T).await.unwrap();
    let _ = probe;
    assert!(child_probe.threads.lock().unwrap().iter().all(|t| *t == d.thread_id()));
}

#[tokio::test]
async fn dead_letters_are_counted_exactly() {
    let sys = ActorSystem::new("dead");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    sys.dead_letters()
        .subscribe(move |d| s2.lock().unwrap().push((d.recipient.to_string(), d.reason)));
    let a = sys.spawn(Worker::props(&Arc::new(Probe::default())), "w").unwrap();
    let gate_tx = block(&a).await;
    for i in 0..7 {
        a.tell(Msg::Push(i)).unwrap();
    }
    a.stop();
    gate_tx.send(()).unwrap();
    a.terminated().await;
    for i in 0..5 {
        assert!(matches!(a.tell(Msg::Push(i)), Err(GpuError::Stopped(_))));
    }
    assert!(a.send(Msg::Push(9)).await.is_err());
    assert_eq!(sys.dead_letters().count(), 13);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 13);
    assert_eq!(
        seen.iter()
            .filter(|(_, r)| *r == DeadLetterReason::DroppedAtStop)
            .count(),
        7
    );
    assert_eq!(
        seen.iter()
            .filter(|(_, r)| *r == DeadLetterReason::RecipientStopped)
            .count(),
        6
    );
    assert!(seen.iter().all(|(p, _)| p == "/user/w"));
}

#[tokio::test]
async fn watch_delivers_terminated_also_for_an_already_dead_actor() {
    let sys = ActorSystem::new("watch");
    let watcher_probe = Arc::new(Probe::default());
    let watcher = sys.spawn(Worker::props(&watcher_probe), "watcher").unwrap();
    let target = sys.spawn(Worker::props(&Arc::new(Probe::default())), "target").unwrap();
    target.stop();
    let t = tokio::time::timeout(T, target.terminated()).await.unwrap();
    assert_eq!(t.path.as_str(), "/user/target");
    // Watch after death, from inside an actor.
    struct Watcher {
        target: ActorRef<Msg>,
        out: Arc<Probe>,
    }
    impl Actor for Watcher {
        type Msg = Msg;
        async fn pre_start(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError> {
            ctx.watch(&self.target, Msg::Died);
            Ok(())
        }
        async fn handle(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Result<(), GpuError> {
            if let Msg::Died(t) = msg {
                self.out.seen_failures.lock().unwrap().push(format!("died {}", t.path));
            }
            Ok(())
        }
    }
    let out = Arc::new(Probe::default());
    let (tg, o) = (target.clone(), out.clone());
    let _w = sys
        .spawn(
            Props::new(move || Watcher {
                target: tg.clone(),
                out: o.clone(),
            }),
            "w2",
        )
        .unwrap();
    for _ in 0..100 {
        if !out.seen_failures.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *out.seen_failures.lock().unwrap(),
        vec!["died /user/target".to_string()]
    );
    let _ = watcher;
}

#[tokio::test]
async fn duplicate_names_are_a_typed_error() {
    let sys = ActorSystem::new("names");
    let probe = Arc::new(Probe::default());
    let _a = sys.spawn(Worker::props(&probe), "same").unwrap();
    assert!(matches!(sys.spawn(Worker::props(&probe), "same"), Err(GpuError::NameTaken(p)) if p == "/user/same"));
    let parent = sys.spawn(Worker::props(&probe), "parent").unwrap();
    parent.ask(|r| Msg::SpawnChild("c", r), T).await.unwrap().unwrap();
    let again = parent.ask(|r| Msg::SpawnChild("c", r), T).await.unwrap();
    assert!(matches!(again, Err(GpuError::NameTaken(p)) if p == "/user/parent/c"));
    assert!(matches!(
        sys.spawn(Worker::props(&probe), "a/b"),
        Err(GpuError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn all_for_one_restarts_every_sibling() {
    let sys = ActorSystem::new("afo");
    let parent_probe = Arc::new(Probe::default());
    let kids = Arc::new(Probe::default());
    let (pp, k) = (parent_probe.clone(), kids.clone());
    let parent = sys
        .spawn(
            Props::new(move || Worker {
                probe: pp.clone(),
                local: 0,
                fail_pre_start: false,
                children: vec!["a", "b", "c"],
                child_strategy: None,
                child_probe: k.clone(),
            })
            .supervise_children(SupervisorStrategy::all_for_one()),
            "parent",
        )
        .unwrap();
    let a: ActorRef<Msg> = parent.ask(|r| Msg::Child("a", r), T).await.unwrap().unwrap();
    let b: ActorRef<Msg> = parent.ask(|r| Msg::Child("b", r), T).await.unwrap().unwrap();
    assert_eq!(b.ask(Msg::Bump, T).await.unwrap(), 1);
    a.tell(Msg::Panic("a failed")).unwrap();
    // b was restarted although it did not fail: its instance counter starts again.
    for _ in 0..200 {
        if kids.starts.load(Ordering::SeqCst) == 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        kids.starts.load(Ordering::SeqCst),
        6,
        "three children, each started twice"
    );
    assert_eq!(b.ask(Msg::Bump, T).await.unwrap(), 1);
}

#[tokio::test]
async fn shutdown_stops_the_whole_tree() {
    let sys = ActorSystem::new("shutdown");
    let probe = Arc::new(Probe::default());
    let p = probe.clone();
    let _top = sys
        .spawn(
            Props::new(move || Worker {
                probe: p.clone(),
                local: 0,
                fail_pre_start: false,
                children: vec!["x", "y"],
                child_strategy: None,
                child_probe: p.clone(),
            }),
            "top",
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let done = tokio::time::timeout(T, sys.shutdown()).await.unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(probe.stops.load(Ordering::SeqCst), 3);
}
