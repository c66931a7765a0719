//! The Wyoming framing and transcript state: `primd_input::fuzz::wyoming` (the same
//! function runs the saved corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| primd_input::fuzz::wyoming(data));
