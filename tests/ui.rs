//! Macro diagnostics: every compile error the macros emit has a case in `ui-tests/` with
//! its expected `.stderr`; `pass/` cases must compile (and run).

#[test]
fn gpu_actor_ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui-tests/gpu_actor/pass/*.rs");
    t.compile_fail("ui-tests/gpu_actor/fail/*.rs");
}

#[test]
fn kernel_ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui-tests/kernel/pass/*.rs");
    t.compile_fail("ui-tests/kernel/fail/*.rs");
}

#[test]
fn gpu_main_ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui-tests/gpu_main/pass/*.rs");
    t.compile_fail("ui-tests/gpu_main/fail/*.rs");
}
