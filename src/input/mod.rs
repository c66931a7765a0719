//! Where partial transcripts come from, and what they say.
//!
//! The parsers (line reader, dialects, auto-detection) live in the `primd-input` crate,
//! re-exported here so that `primd::input::...` names them: they read untrusted bytes
//! and are fuzzed alone. This module adds the one byte source that needs a device, the
//! serial line ([`SerialReader`]).

mod serial;

pub use primd_input::*;
pub use serial::{DEFAULT_BAUD, SerialReader, SerialSpec};
