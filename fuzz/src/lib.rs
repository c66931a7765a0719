//! primd's index reader for the `index_open` target and the int8 model's ONNX reader for
//! the `onnx` target, compiled from primd's own sources.
//!
//! The dialect parsers are a crate of their own (`primd-input`), a plain dependency. The
//! index reader is not: it lives in the `primd` crate, which pulls in tract and
//! tokenizers, whose instrumented build would cost more CPU than the fuzzing itself on a
//! small shared machine. So this crate includes `src/index` (with its live, swappable
//! handle and `src/notify.rs`, which that uses), `src/lexical`, `src/scan`, `src/simd.rs`,
//! `src/hits.rs` and `src/words.rs` by path, and `src/embed/onnx.rs`: the same files
//! `cargo build` compiles. Each of them imports only from modules below it (the layer
//! order of `tools/layers.py`), so no stand-in module is needed. CI builds this
//! crate (`.ci/run`), so a change there that breaks it fails CI.
//!
//! Why not a `crates/primd-index` crate (index, lexical, scan, hits, words) used as a
//! plain dependency, as `primd-input` is: these files form a closed floor of their own
//! now (`tools/layers.py` checks it), so the path includes compile exactly what such a
//! crate would, with no stand-ins. A crate would add a public API boundary through
//! two dozen `pub(crate)` items the dense and hybrid searchers use (the lexical view's
//! norms and decoded postings, the score keys, the index's sections), and moving
//! `src/index` while its format changes would cost more than it buys today. It is the
//! next step if a second consumer of the reader appears (a Python binding, a tool that
//! must not link tract).
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

/// The word rules the lexical analyzer cuts text by (a ground-floor module: it uses
/// nothing else of primd).
#[path = "../../src/words.rs"]
pub mod words;
