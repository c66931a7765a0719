//! The `index_open` and `onnx` fuzz targets' saved corpora and crash regressions, as
//! ordinary tests: `fuzz/` is not built by `cargo test`, its targets' bodies are
//! (`primd::index::fuzz::open_bytes`, `primd::embed::fuzz_onnx_bytes`).

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

#[test]
fn onnx_corpus_and_regressions_pass() {
    for (path, bytes) in saved_inputs("onnx") {
        let run = std::panic::catch_unwind(|| primd::embed::fuzz_onnx_bytes(&bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the onnx target");
    }
}
