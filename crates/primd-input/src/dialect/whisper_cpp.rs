//! `whisper-cpp`: the output of whisper.cpp's `stream` example.
//!
//! - Sliding-window mode (`--step N`, N > 0): each step redraws the terminal line with
//!   `ESC[2K` `\r` (100 spaces) `ESC[2K` `\r` and the new hypothesis, flushed without
//!   a newline; every `length/step` steps it prints a newline, committing the line,
//!   and starts a new window. A redraw is a partial, **a committed line is the
//!   utterance's final**: whisper.cpp's window (`--length`, e.g. 5–10 s) is the unit it
//!   commits, and its optional running context (`--keep-context`) only primes the next
//!   window, it never rewrites a committed line. Silence shorter than a window still
//!   ends an utterance through the daemon's `endpoint_ms`. For utterance-aligned
//!   finals use VAD mode.
//! - VAD mode (`--step 0`): one block per detected utterance,
//!   `### Transcription N START | t0 = .. | t1 = ..`, segment lines
//!   `[00:00:00.000 --> 00:00:03.480]  text` (or bare text with `-nt`),
//!   `### Transcription N END`. Each segment extends the partial; END is the final.
//!
//! Noise is dropped: `[Start speaking]`, `[BLANK_AUDIO]`, `[ Silence ]` and any other
//! `[...]` tag, and a hypothesis that is only `(music)` or `*laughs*`. Terminal escape
//! sequences are removed.

use super::{Ctx, Emit, End, Utterance};

#[derive(Default)]
pub struct WhisperCpp {
    u: Utterance,
    /// Inside a VAD block.
    block: bool,
    /// Text of the block so far.
    acc: String,
    /// Reused buffer for the cleaned segment.
    clean: String,
}

impl WhisperCpp {
    pub fn silence(&mut self) {
        self.u.reset();
        self.block = false;
        self.acc.clear();
    }

    pub fn parse(&mut self, text: &str, end: End, cx: &Ctx, out: &mut Emit) {
        let trimmed = text.trim();
        if end == End::Newline
            && let Some(rest) = trimmed.strip_prefix("### Transcription")
        {
            if rest.contains("START") {
                self.block = true;
                self.acc.clear();
            } else if rest.contains("END") && self.block {
                self.block = false;
                let text = (!self.acc.trim().is_empty()).then_some(self.acc.as_str());
                self.u.finish(text, None, cx, out);
                self.acc.clear();
            }
            return;
        }
        let body = strip_timestamp(trimmed);
        clean_into(body, &mut self.clean);
        if self.block {
            // VAD block: whole segment lines only.
            if end == End::Newline && !self.clean.is_empty() {
                join_into(&mut self.acc, &self.clean);
                self.u.partial(&self.acc, None, cx, out);
            }
            return;
        }
        match end {
            End::Rewrite | End::Pending => {
                if !self.clean.is_empty() {
                    self.u.partial(&self.clean, None, cx, out);
                }
            }
            End::Newline => {
                let text = (!self.clean.is_empty()).then_some(self.clean.as_str());
                self.u.finish(text, None, cx, out);
            }
        }
    }
}

/// `[00:00:00.000 --> 00:00:03.480]  text` → `text`; anything else unchanged.
fn strip_timestamp(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() >= 31 && b[0] == b'[' && &b[13..18] == b" --> " && b[30] == b']' {
        return &s[31..];
    }
    s
}

/// Appends `seg` to `acc` with one space between (whisper segments usually carry
/// their own leading space; bare ones get one).
pub(super) fn join_into(acc: &mut String, seg: &str) {
    let needs_space = !acc.is_empty()
        && !acc.ends_with(char::is_whitespace)
        && !seg.starts_with(char::is_whitespace);
    if needs_space {
        acc.push(' ');
    }
    acc.push_str(seg);
}

/// Removes escape sequences and noise tags from `s` into `out`, trimmed.
fn clean_into(s: &str, out: &mut String) {
    out.clear();
    let mut chars = s.chars().peekable();
    let mut depth = 0u32; // inside [...]
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte; other escapes: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth > 0 => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    let t = out.trim();
    let noise = t.is_empty()
        || (t.starts_with('(') && t.ends_with(')') && !t[1..].contains('('))
        || (t.len() >= 2 && t.starts_with('*') && t.ends_with('*'));
    if noise {
        out.clear();
        return;
    }
    // Trim in place, keeping the buffer.
    let (start, len) = (out.len() - out.trim_start().len(), t.len());
    out.drain(..start);
    out.truncate(len);
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind};
    use super::*;

    #[test]
    fn cleaning_drops_escapes_and_noise() {
        let mut s = String::new();
        clean_into("\x1b[2K\r what time\x1b[2K", &mut s);
        assert_eq!(s, "what time");
        for noise in [
            "[BLANK_AUDIO]",
            " [Start speaking]",
            "(music)",
            " *laughs*",
            "\x1b[2K",
            "   ",
        ] {
            clean_into(noise, &mut s);
            assert_eq!(s, "", "{noise:?}");
        }
        clean_into(" [ Silence ] turn it off", &mut s);
        assert_eq!(s, "turn it off");
        assert_eq!(
            strip_timestamp("[00:00:00.000 --> 00:00:03.480]  hi"),
            "  hi"
        );
        assert_eq!(strip_timestamp("[00:00"), "[00:00");
    }

    #[test]
    fn redraws_are_partials_and_a_commit_is_the_final() {
        let input = b"[Start speaking]\n\x1b[2K\r                    \x1b[2K\r What\x1b[2K\r                    \x1b[2K\r What is the capital\x1b[2K\r                    \x1b[2K\r What is the capital of France?\n\x1b[2K\r                    \x1b[2K\r [BLANK_AUDIO]\n";
        let (ev, err) = run(DialectKind::WhisperCpp, input);
        assert!(err.is_empty());
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "What".into()),
                (EventKind::Partial, "What is the capital".into()),
                // (read whole, the committed text arrives with its newline: no pause
                // in between to show it as a partial first)
                (EventKind::Final, "What is the capital of France?".into()),
            ],
            "a blank window commits nothing"
        );
    }

    #[test]
    fn sliding_window_fixture() {
        let (ev, err) = run(DialectKind::WhisperCpp, &fixture("whisper-cpp.txt"));
        assert!(err.is_empty());
        assert_eq!(
            finals(&ev),
            [
                "What is the tallest mountain in Africa?",
                "Turn off the kitchen lights."
            ]
        );
        assert!(ev.iter().filter(|e| e.0 == EventKind::Partial).count() >= 4);
    }

    #[test]
    fn vad_fixture() {
        let (ev, err) = run(DialectKind::WhisperCpp, &fixture("whisper-cpp-vad.txt"));
        assert!(err.is_empty());
        assert_eq!(
            finals(&ev),
            [
                "What is the tallest mountain in Africa?",
                "Turn off the kitchen lights. And the hallway too."
            ]
        );
        assert!(ev.contains(&(EventKind::Partial, "Turn off the kitchen lights.".into())));
    }
}
