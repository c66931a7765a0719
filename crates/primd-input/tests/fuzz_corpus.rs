//! The `dialects` fuzz target's saved corpus and crash regressions, as ordinary tests:
//! `fuzz/` is not built by `cargo test`, its target body is (`primd_input::fuzz`).

use primd_input::fuzz::{dialects, protocol, saved_inputs};

#[test]
fn dialects_corpus_and_regressions_pass() {
    let inputs = saved_inputs("dialects");
    for (path, bytes) in &inputs {
        let run = std::panic::catch_unwind(|| dialects(bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the dialects target");
    }
    assert!(
        inputs
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("regressions")),
        "the known crash regressions are run"
    );
}

#[test]
fn protocol_corpus_passes() {
    for (path, bytes) in &saved_inputs("protocol") {
        let run = std::panic::catch_unwind(|| protocol(bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the protocol target");
    }
}
