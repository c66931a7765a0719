//! The int8 model's ONNX reader on arbitrary bytes, then every initializer it accepted
//! read back: `src/embed/onnx.rs`'s `fuzz_bytes` (the same function runs the saved
//! corpus in `cargo test`, as `primd::embed::fuzz_onnx_bytes`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| primd_fuzz::onnx::fuzz_bytes(data));
