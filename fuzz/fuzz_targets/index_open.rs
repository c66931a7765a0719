//! `Index::open` on arbitrary bytes, then every accessor and lexical searches:
//! `primd::index::fuzz::open_bytes` (the same function runs the saved corpus in
//! `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| primd_fuzz::index::fuzz::open_bytes(data));
