//! primd: an on-device retriever that searches while the user is still speaking.
//!
//! The pipeline, in the order data flows through it:
//! bytes from an STT process → [`input`] (bounded lines, dialects → partial-transcript
//! events) → [`stream`] (trigger, similarity gate, speculation, reflector, finalize) →
//! [`embed`] (text → unit vector) → [`dense`] search over an [`index`] (1-bit scan with the
//! [`scan`] kernels, int8 rerank), with [`lexical`] BM25 over the index's lexical
//! section, the two fused by [`retriever`] ([`fusion`] rules) → [`output`] (JSON lines). [`daemon`] wires these with
//! threads and channels around the [`scheduler`] (the order of work, which [`eval`]
//! drives too, on a virtual clock); [`config`] turns the TOML file and flags into checked settings.
//! [`eval`] replays queries and recorded streams through the same code to measure it;
//! [`bench`] measures the machine it runs on (`primd bench`).
//!
//! The command line lives in `main.rs` and `cmd/`; everything else is this library, so
//! `tools/build-index` and the tests run the same code as the daemon.
//!
//! The floor plan: every module imports only from its own layer and the layers below
//! (lowest first; `tools/layers.py` lists the imports and checks this order,
//! `docs/architecture.md` draws it); this file only declares the modules:
//! 0. [`words`], [`input`], `simd`, [`parallel`], [`notify`]: nothing of primd below them;
//! 1. kernels and the result type: [`scan`], [`qgemm`], [`hits`], `lexical::{kernels,bm25}`;
//! 2. [`lexical`]: the lexical section's format, analyzer, reader, searcher and writer;
//! 3. [`index`]: the index file, its dense part and its lexical section;
//! 4. [`embed`];
//! 5. results: [`fusion`], [`ranking`] (which retriever), [`confidence`];
//! 6. retrievers over an open index: [`dense`], [`retriever`] (all three behind one);
//! 7. what an answer carries beyond its passages: [`context`], [`conversation`];
//! 8. [`stream`], [`scheduler`];
//! 9. [`config`], [`flags`], [`output`], [`hub`], [`daemon`], [`wyoming`], [`announce`];
//! 10. [`eval`], [`bench`] (with [`bench::kernel_report`], which names every kernel set),
//!     [`testing`];
//! 11. the binary (`main.rs`, `cli.rs`, `cmd/`).

pub mod announce;
pub mod bench;
pub mod confidence;
pub mod config;
pub mod context;
pub mod conversation;
pub mod daemon;
pub mod dense;
pub mod embed;
pub mod eval;
pub mod flags;
pub mod fusion;
pub mod hits;
pub mod hub;
pub mod index;
pub mod input;
pub mod lexical;
pub mod notify;
pub mod output;
pub mod parallel;
pub mod qgemm;
pub mod ranking;
pub mod retriever;
pub mod scan;
pub mod scheduler;
mod simd;
pub mod stream;
#[doc(hidden)]
pub mod testing;
pub mod words;
pub mod wyoming;
