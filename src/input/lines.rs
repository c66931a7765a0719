//! Bounded line reading: a recognizer (or a noisy serial line) may send a line that
//! never ends. Lines longer than [`MAX_LINE_BYTES`] are discarded up to the next
//! newline, with a warning, and reading resynchronises there; nothing grows unbounded.

use std::io::{self, BufRead};

/// Longest accepted line, in bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What `next_line` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line (without its newline; a trailing `\r` removed), invalid UTF-8
    /// replaced by U+FFFD.
    Text(std::borrow::Cow<'a, str>),
    /// A line longer than the limit was skipped; holds its length in bytes.
    TooLong(usize),
}

pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    max: usize,
    line_no: u64,
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
        }
    }

    /// The next line with its 1-based number, or `None` at end of input. A final line
    /// without a newline counts.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Line<'_>)>> {
        self.buf.clear();
        let mut skipped = 0usize;
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
            let (chunk, found) = match memchr_newline(available) {
                Some(i) => (&available[..i], Some(i)),
                None => (available, None),
            };
            if skipped > 0 || self.buf.len() + chunk.len() > self.max {
                skipped += self.buf.len() + chunk.len();
                self.buf.clear();
            } else {
                self.buf.extend_from_slice(chunk);
            }
            let consumed = found.map_or(available.len(), |i| i + 1);
            self.inner.consume(consumed);
            if found.is_some() {
                self.line_no += 1;
                if skipped > 0 {
                    return Ok(Some((self.line_no, Line::TooLong(skipped))));
                }
                return Ok(Some((self.line_no, Line::Text(self.text()))));
            }
        }
    }

    fn text(&self) -> std::borrow::Cow<'_, str> {
        let line = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
        String::from_utf8_lossy(line)
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Vec<String> {
        // A tiny BufReader capacity exercises lines that span many fills.
        let mut r = LineReader::with_limit(io::BufReader::with_capacity(3, input), max);
        let mut out = Vec::new();
        while let Some((_, l)) = r.next_line().unwrap() {
            out.push(match l {
                Line::Text(t) => t.into_owned(),
                Line::TooLong(n) => format!("<{n} bytes skipped>"),
            });
        }
        out
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
}
