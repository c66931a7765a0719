//! The `index_open` fuzz target's saved corpus and crash regressions, as ordinary tests:
//! `fuzz/` is not built by `cargo test`, its target body is
//! (`primd::index::fuzz::open_bytes`).

use primd::index::fuzz::open_bytes;
use primd::input::fuzz::saved_inputs;

#[test]
fn index_open_corpus_and_regressions_pass() {
    for (path, bytes) in saved_inputs("index_open") {
        let run = std::panic::catch_unwind(|| open_bytes(&bytes));
        assert!(
            run.is_ok(),
            "fuzz input {path:?} fails the index_open target"
        );
    }
}
