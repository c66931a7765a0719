//! The socket protocol's frame parser behind the real line reader:
//! `primd_input::fuzz::protocol` (the same function runs the saved corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| primd_input::fuzz::protocol(data));
