//! Bytes from a speech-to-text process → partial-transcript events.
//!
//! A [`LineReader`] cuts any byte source into bounded lines (an endless line is dropped
//! with a warning, never buffered whole; invalid UTF-8 is replaced; carriage-return
//! redraws are cut too, for recognizers that rewrite a terminal line); a [`Dialect`]
//! turns them into [`Event`]s, whatever the recognizer's format. Events carry their
//! text in a fixed-capacity string, so the channel between the reader and the retriever
//! never allocates per partial.
//!
//! A crate of its own because these are the parsers of untrusted bytes: they depend on
//! nothing but serde/serde_json, heapless, thiserror and log (no command line, no device,
//! no model), so the fuzz targets (`fuzz/`) build them alone, and CI builds those targets.
//! Where the bytes come from (stdin, a file, a serial line) is primd's business: anything
//! that implements [`std::io::BufRead`] feeds a [`LineReader`]. The socket protocol's
//! client frames ([`protocol`]) are parsed here too, for the same reason, and so is
//! Home Assistant's Wyoming protocol ([`wyoming`]: framed events with binary payloads),
//! for primd's Wyoming server and proxy.

mod dialect;
#[doc(hidden)]
pub mod fuzz;
mod lines;
pub mod protocol;
pub mod testing;
pub mod wyoming;

pub use dialect::{Ctx, Dialect, DialectKind, Emit, End, ParseError, detect};
pub use lines::{Line, LineReader, MAX_LINE_BYTES, Mode};

use std::time::Instant;

/// Longest transcript text carried by an event, in bytes. The model reads at most 256
/// word pieces (~1,500 characters); longer texts are cut at a character boundary.
pub const MAX_TEXT_BYTES: usize = 2048;

pub type Text = heapless::String<MAX_TEXT_BYTES>;

/// What an STT process told us.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventKind,
    /// The whole hypothesis of the current utterance (not an increment).
    pub text: Text,
    /// Audio time in seconds, when the dialect carries one.
    pub t: Option<f64>,
    /// When the reader received it: end-of-utterance latency is measured from here.
    pub received: Instant,
    /// 1-based input line number, for messages.
    pub line: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Partial,
    /// End of utterance, with the final transcript.
    Final,
}

/// Copies `s` into a fixed-capacity text, cutting at a character boundary if needed.
/// Returns the text and whether it was cut.
pub fn to_text(s: &str) -> (Text, bool) {
    let mut end = s.len().min(MAX_TEXT_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut t = Text::new();
    // Cannot fail: `end` ≤ capacity.
    let _ = t.push_str(&s[..end]);
    (t, end < s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let (t, cut) = to_text("short");
        assert_eq!((t.as_str(), cut), ("short", false));
        let long = "é".repeat(MAX_TEXT_BYTES); // 2 bytes each
        let (t, cut) = to_text(&long);
        assert!(cut && t.len() <= MAX_TEXT_BYTES && t.chars().all(|c| c == 'é'));
    }
}
