//! Bounded line reading: a recognizer (or a noisy serial line) may send a line that
//! never ends. Lines longer than [`MAX_LINE_BYTES`] are discarded up to the next
//! newline, with a warning, and reading resynchronises there; nothing grows unbounded.
//!
//! [`Mode::Rewrites`] is for recognizers that redraw one terminal line (whisper.cpp's
//! `stream` prints `ESC[2K` + `\r` + the new hypothesis, with no newline until it
//! commits): a `\r` also ends a segment, and text that arrived without any terminator
//! is handed out as soon as the input has nothing more buffered ([`Line::Pending`]),
//! because the recognizer flushed it and will not terminate it until its next step.
//! The buffer is reused: no allocation per line once it reached its working size
//! (except the replacement copy of a line holding invalid UTF-8).

use std::borrow::Cow;
use std::io::{self, BufRead};

/// Longest accepted line, in bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Where segments end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// At `\n` only (a trailing `\r` is removed).
    Lines,
    /// At `\n` and at `\r`; unterminated text is delivered when the input pauses.
    Rewrites,
}

/// What `next_line` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line (without its newline; a trailing `\r` removed), invalid UTF-8
    /// replaced by U+FFFD. Also the last bytes of the input without a newline.
    Text(Cow<'a, str>),
    /// ([`Mode::Rewrites`]) a segment ended by `\r`: the line is about to be redrawn.
    Rewrite(Cow<'a, str>),
    /// ([`Mode::Rewrites`]) the text of the current segment so far, delivered because
    /// the input has nothing more waiting; it stays buffered and will be continued.
    Pending(Cow<'a, str>),
    /// A line longer than the limit was skipped; holds its length in bytes.
    TooLong(usize),
}

/// How a segment of input ended (see [`Line`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// A newline (or the end of input).
    Newline,
    /// A carriage return: the terminal line is about to be redrawn.
    Rewrite,
    /// Not ended yet: the text so far, delivered while the input pauses.
    Pending,
}

impl Line<'_> {
    /// The text and how it ended, what a dialect parses; `Err(bytes)` for a line that
    /// was skipped as too long.
    pub fn text(&self) -> Result<(&str, End), usize> {
        match self {
            Line::Text(t) => Ok((t, End::Newline)),
            Line::Rewrite(t) => Ok((t, End::Rewrite)),
            Line::Pending(t) => Ok((t, End::Pending)),
            Line::TooLong(n) => Err(*n),
        }
    }
}

pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    max: usize,
    line_no: u64,
    mode: Mode,
    /// `buf` holds the start of a segment already delivered as `Pending`.
    carry: bool,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    pub fn with_limit(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(1024),
            max,
            line_no: 0,
            mode: Mode::Lines,
            carry: false,
        }
    }

    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The next line with its 1-based number, or `None` at end of input. A final line
    /// without a newline counts. `Rewrite` and `Pending` segments carry the number of
    /// the line they belong to (the next newline ends it).
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Line<'_>)>> {
        if !self.carry {
            self.buf.clear();
        }
        self.carry = false;
        let mut skipped = 0usize;
        let rewrites = self.mode == Mode::Rewrites;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                // End of input.
                if skipped > 0 {
                    self.line_no += 1;
                    return Ok(Some((self.line_no, Line::TooLong(skipped))));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                self.line_no += 1;
                return Ok(Some((self.line_no, Line::Text(self.text()))));
            }
            let found = if rewrites {
                available.iter().position(|&c| c == b'\n' || c == b'\r')
            } else {
                available.iter().position(|&c| c == b'\n')
            };
            let chunk = &available[..found.unwrap_or(available.len())];
            let terminator = found.map(|i| available[i]);
            if skipped > 0 || self.buf.len() + chunk.len() > self.max {
                skipped += self.buf.len() + chunk.len();
                self.buf.clear();
            } else {
                self.buf.extend_from_slice(chunk);
            }
            let consumed = found.map_or(available.len(), |i| i + 1);
            self.inner.consume(consumed);
            match terminator {
                Some(b'\n') => {
                    self.line_no += 1;
                    if skipped > 0 {
                        return Ok(Some((self.line_no, Line::TooLong(skipped))));
                    }
                    return Ok(Some((self.line_no, Line::Text(self.text()))));
                }
                Some(_) => {
                    // '\r' in rewrite mode: the next redraw starts clean, so it also
                    // resynchronises after a too-long segment.
                    if skipped > 0 {
                        return Ok(Some((self.line_no + 1, Line::TooLong(skipped))));
                    }
                    return Ok(Some((self.line_no + 1, Line::Rewrite(self.text()))));
                }
                None => {
                    if rewrites && skipped == 0 && !self.buf.is_empty() {
                        // Nothing terminated what arrived: hand it out now, keep it.
                        self.carry = true;
                        return Ok(Some((self.line_no + 1, Line::Pending(self.text()))));
                    }
                }
            }
        }
    }

    fn text(&self) -> Cow<'_, str> {
        let line = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
        String::from_utf8_lossy(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_in(input: &[u8], max: usize, mode: Mode, cap: usize) -> Vec<String> {
        // A tiny BufReader capacity exercises lines that span many fills.
        let mut r = LineReader::with_limit(io::BufReader::with_capacity(cap, input), max);
        r.set_mode(mode);
        let mut out = Vec::new();
        while let Some((n, l)) = r.next_line().unwrap() {
            out.push(match l {
                Line::Text(t) => t.into_owned(),
                Line::Rewrite(t) => format!("{n}r:{t}"),
                Line::Pending(t) => format!("{n}p:{t}"),
                Line::TooLong(n) => format!("<{n} bytes skipped>"),
            });
        }
        out
    }

    fn all(input: &[u8], max: usize) -> Vec<String> {
        all_in(input, max, Mode::Lines, 3)
    }

    #[test]
    fn splits_lines_and_keeps_a_last_line_without_newline() {
        assert_eq!(all(b"a\nbb\r\n\nccc", 100), ["a", "bb", "", "ccc"]);
        assert!(all(b"", 100).is_empty());
    }

    #[test]
    fn an_endless_line_is_skipped_and_reading_resynchronises() {
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"\nafter\n");
        input.extend(std::iter::repeat_n(b'y', 20)); // too long, then EOF
        assert_eq!(
            all(&input, 10),
            ["ok", "<50 bytes skipped>", "after", "<20 bytes skipped>"]
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            all(b"caf\xc3\xa9 \xff\xfe ok\n", 100),
            ["café \u{fffd}\u{fffd} ok"]
        );
    }

    #[test]
    fn rewrite_mode_ends_segments_at_carriage_returns() {
        // Whole input in one fill: no pauses, so no pending snapshots.
        let got = all_in(
            b"\x1b[2K\r one\x1b[2K\r one two\ncommitted\n",
            100,
            Mode::Rewrites,
            64,
        );
        assert_eq!(
            got,
            ["1r:\x1b[2K", "1r: one\x1b[2K", " one two", "committed"]
        );
    }

    #[test]
    fn rewrite_mode_hands_out_unterminated_text_when_the_input_pauses() {
        // Capacity 4: every fill is a "pause"; the pending text grows and is kept.
        let got = all_in(b"hello wo\rx\n", 100, Mode::Rewrites, 4);
        assert_eq!(got, ["1p:hell", "1p:hello wo", "1r:hello wo", "x"]);
    }

    #[test]
    fn rewrite_mode_is_bounded_too() {
        let mut input = std::iter::repeat_n(b'z', 30).collect::<Vec<_>>();
        input.extend(b"\r\rok\n");
        let got = all_in(&input, 10, Mode::Rewrites, 4);
        assert!(got.contains(&"<30 bytes skipped>".to_string()), "{got:?}");
        assert_eq!(got.last().unwrap(), "ok", "resynchronised at the next \\r");
        assert!(
            got.iter().all(|s| s.len() <= 14 + 4),
            "nothing longer than the limit is delivered: {got:?}"
        );
    }
}
