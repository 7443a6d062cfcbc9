//! The test loop of the test binaries that run without libtest (`harness = false`): they
//! start this same executable again as worker or rank processes, which libtest's
//! threads and output capture would get in the way of. Each case runs on a fresh tokio
//! runtime; a panic fails it; the summary line and exit code are libtest's, so
//! `cargo test` and `.gpu/run.sh` read them alike. GPU cases run only with `--ignored`
//! (or `--include-ignored`); a non-flag argument filters cases by name.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// One case's body.
pub type Body = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>>>;

/// Runs the cases (name, whether it needs a GPU, body) this invocation selects and exits
/// with libtest's code.
pub fn run_cases(cases: Vec<(&'static str, bool, Body)>) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gpu_run = args.iter().any(|a| a == "--ignored" || a == "--include-ignored");
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    for (name, needs_gpu, body) in cases {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        if needs_gpu != gpu_run {
            ignored += 1;
            continue;
        }
        let t0 = Instant::now();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(body())));
        drop(rt);
        match r {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok ({:?})", t0.elapsed());
            }
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED");
            }
        }
    }
    let status = if failed == 0 { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {status}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; 0 filtered out"
    );
    std::process::exit(if failed == 0 { 0 } else { 101 });
}
