//! primd: an on-device retriever that searches while the user is still speaking.
//!
//! The pipeline reads top to bottom in the module list: text → [`embed`] (unit vectors)
//! → [`index`] (the on-disk passages, 1-bit codes and int8 vectors) → … The command-line front end lives in `main.rs` and `cmd/`; everything here is a
//! library so that `tools/build-index` and the tests use the same code as the daemon.

pub mod config;
pub mod daemon;
pub mod embed;
pub mod index;
pub mod input;
pub mod output;
pub mod scan;
pub mod search;
pub mod stream;
