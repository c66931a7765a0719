//! The parts of primd that read untrusted bytes, compiled from primd's own sources.
//!
//! The targets include `src/input`, `src/index` and `src/lexical` (with the one function
//! of `src/stream` it uses) by path instead of depending on the `primd` crate: those
//! modules need only serde, heapless, memmap2, crc32fast and fst, while
//! the crate as a whole pulls in tract and tokenizers, whose instrumented build would
//! cost more CPU than the fuzzing itself on a small shared machine. The code under test
//! is the same files `cargo build` compiles.
#![allow(dead_code, unused_imports)]

#[path = "../../src/input/mod.rs"]
pub mod input;

#[path = "../../src/index/mod.rs"]
pub mod index;

#[path = "../../src/lexical/mod.rs"]
pub mod lexical;

#[path = "../../src/stream/normalize.rs"]
#[doc(hidden)]
pub mod stream_normalize;

/// The lexical analyzer's word split (`stream::normalize::lower_words`), alone.
pub mod stream {
    pub use super::stream_normalize as normalize;
}

/// `search::Hit` / `Hits` as primd defines them (the real module needs the embedder).
pub mod search {
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Hit {
        pub index: u32,
        pub score: f32,
    }
    pub type Hits = heapless::Vec<Hit, 1024>;
}
