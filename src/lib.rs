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
//! (lowest first; `tools/layers.py` lists the imports and checks this order):
//! 0. [`words`], [`input`], `simd`, [`parallel`], [`notify`]: nothing of primd below them;
//! 1. kernels and the result type: [`scan`], [`qgemm`], [`hits`], `lexical::{kernels,bm25}`;
//! 2. [`lexical`]: the lexical section's format, analyzer, reader, searcher and writer;
//! 3. [`index`]: the index file, its dense part and its lexical section;
//! 4. [`embed`];
//! 5. results: [`fusion`], [`ranking`] (which retriever), [`confidence`];
//! 6. retrievers over an open index: [`dense`], [`retriever`] (all three behind one);
//! 7. [`stream`], [`scheduler`];
//! 8. [`config`], [`flags`], [`output`], [`hub`], [`daemon`], [`wyoming`], [`announce`];
//! 9. [`eval`], [`bench`], [`testing`];
//! 10. the binary (`main.rs`, `cli.rs`, `cmd/`).

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

/// The kernels this machine runs, for logs and failure reports: primd's 1-bit scan and
/// int8 rerank kernels, primd's int8 matmul kernels (the default embedder's linears),
/// primd's posting decoding and BM25 scoring kernels, and the instruction sets tract picks its f32 kernels from (attention, LayerNorm,
/// GELU, and every matmul of the fp32 model). Two machines that differ here may round
/// differently in the last bits, which is why rankings recorded on one are compared
/// with tolerances on another.
pub fn kernel_report() -> String {
    format!(
        "scan/rerank {}, int8 matmul {}, BM25 postings {}, tract f32 {:?} ({})",
        scan::kernel_name(),
        qgemm::kernel_name(),
        lexical::kernel_name(),
        tract_linalg::isa::native(),
        tract_linalg::isa::native().nickname()
    )
}
