//! The parts of primd that read untrusted bytes, compiled from primd's own sources.
//!
//! The targets include `src/input` and `src/index` by path instead of depending on the
//! `primd` crate: those modules need only serde, heapless, memmap2 and crc32fast, while
//! the crate as a whole pulls in tract and tokenizers, whose instrumented build would
//! cost more CPU than the fuzzing itself on a small shared machine. The code under test
//! is the same files `cargo build` compiles.
#![allow(dead_code, unused_imports)]

#[path = "../../src/input/mod.rs"]
pub mod input;

#[path = "../../src/index/mod.rs"]
pub mod index;
