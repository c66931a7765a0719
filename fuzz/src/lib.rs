//! primd's index reader for the `index_open` target and the int8 model's ONNX reader for
//! the `onnx` target, compiled from primd's own sources.
//!
//! The dialect parsers are a crate of their own (`primd-input`), a plain dependency. The
//! index reader is not: it lives in the `primd` crate, which pulls in tract and
//! tokenizers, whose instrumented build would cost more CPU than the fuzzing itself on a
//! small shared machine. So this crate includes `src/index` (with its live, swappable
//! handle and `src/notify.rs`, which that uses), `src/lexical`, `src/scan`, `src/simd.rs`
//! and `src/hits.rs` by path (with the one function of `src/stream` the lexical analyzer
//! uses), and `src/embed/onnx.rs`: the same files `cargo build` compiles. CI builds this
//! crate (`.ci/run`), so a change there that breaks it fails CI.
#![allow(dead_code, unused_imports)]

#[path = "../../src/index/mod.rs"]
pub mod index;

#[path = "../../src/lexical/mod.rs"]
pub mod lexical;

#[path = "../../src/scan/mod.rs"]
pub mod scan;

#[path = "../../src/hits.rs"]
pub mod hits;

/// The run-time choice of kernel sets, which `src/scan` and `src/lexical` use.
#[path = "../../src/simd.rs"]
mod simd;

/// The int8 model's ONNX reader (`src/embed/onnx.rs`, std only), alone: the rest of
/// `src/embed` needs tract and tokenizers.
#[path = "../../src/embed/onnx.rs"]
pub mod onnx;

#[path = "../../src/notify.rs"]
pub mod notify;

#[path = "../../src/stream/normalize.rs"]
#[doc(hidden)]
pub mod stream_normalize;

/// The lexical analyzer's word split (`stream::normalize::lower_words`), alone.
pub mod stream {
    pub use super::stream_normalize as normalize;
}

/// `search::{Hit, Hits}` as primd re-exports them (the real module needs the embedder).
pub mod search {
    pub use crate::hits::{Hit, Hits};
    pub(crate) use crate::hits::{key_score, score_key};
}
