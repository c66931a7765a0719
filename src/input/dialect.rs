//! STT output formats ("dialects") → [`Event`]s.
//!
//! - `plain`: each line is the whole current hypothesis; an empty line ends the
//!   utterance (its final is the last partial).
//! - `jsonl`: one JSON object per line, `{"partial": "..."}` or `{"final": "..."}`,
//!   optional `"t"` (audio seconds); other keys are ignored.
//!
//! A line that cannot be understood is a [`ParseError`] naming the line: the daemon
//! reports it and reads on.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;

use super::{Event, EventKind, Text, to_text};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DialectKind {
    Plain,
    Jsonl,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("line {line}: not a JSON object ({reason})")]
    Json { line: u64, reason: String },
    #[error("line {line}: a JSON event needs a \"partial\" or a \"final\" string")]
    NoText { line: u64 },
}

#[derive(Deserialize)]
struct JsonEvent<'a> {
    #[serde(borrow, default)]
    partial: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "final")]
    final_: Option<Cow<'a, str>>,
    #[serde(default)]
    t: Option<f64>,
}

/// A dialect parser; keeps what it needs between lines (the last plain partial).
pub struct Dialect {
    kind: DialectKind,
    last: Text,
    open: bool,
}

impl Dialect {
    pub fn new(kind: DialectKind) -> Self {
        Dialect {
            kind,
            last: Text::new(),
            open: false,
        }
    }

    /// Parses one line into at most one event.
    pub fn parse(
        &mut self,
        line: &str,
        line_no: u64,
        received: Instant,
    ) -> Result<Option<Event>, ParseError> {
        let event = |kind, text: &str, t| {
            let (text, cut) = to_text(text);
            if cut {
                log::warn!(
                    "line {line_no}: transcript longer than {} bytes, cut",
                    super::MAX_TEXT_BYTES
                );
            }
            Event {
                kind,
                text,
                t,
                received,
                line: line_no,
            }
        };
        match self.kind {
            DialectKind::Plain => {
                let text = line.trim();
                if text.is_empty() {
                    if !self.open {
                        return Ok(None);
                    }
                    self.open = false;
                    return Ok(Some(event(EventKind::Final, &self.last.clone(), None)));
                }
                self.open = true;
                let ev = event(EventKind::Partial, text, None);
                self.last.clone_from(&ev.text);
                Ok(Some(ev))
            }
            DialectKind::Jsonl => {
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    return Ok(None);
                }
                // serde would also read a JSON array as the struct's fields in order.
                if !trimmed.starts_with('{') {
                    return Err(ParseError::Json {
                        line: line_no,
                        reason: "expected an object".into(),
                    });
                }
                let j: JsonEvent = serde_json::from_str(line).map_err(|e| ParseError::Json {
                    line: line_no,
                    reason: e.to_string(),
                })?;
                match (j.final_, j.partial) {
                    (Some(f), _) => Ok(Some(event(EventKind::Final, &f, j.t))),
                    (None, Some(p)) => Ok(Some(event(EventKind::Partial, &p, j.t))),
                    (None, None) => Err(ParseError::NoText { line: line_no }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parsed = Result<Option<(EventKind, String, Option<f64>)>, ParseError>;

    fn parse_all(kind: DialectKind, lines: &[&str]) -> Vec<Parsed> {
        let mut d = Dialect::new(kind);
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                d.parse(l, i as u64 + 1, Instant::now())
                    .map(|o| o.map(|e| (e.kind, e.text.to_string(), e.t)))
            })
            .collect()
    }

    #[test]
    fn plain_lines_are_partials_and_an_empty_line_ends_the_utterance() {
        let got = parse_all(DialectKind::Plain, &["what", "what time", "", "", "next"]);
        assert_eq!(got[0], Ok(Some((EventKind::Partial, "what".into(), None))));
        assert_eq!(
            got[2],
            Ok(Some((EventKind::Final, "what time".into(), None)))
        );
        assert_eq!(got[3], Ok(None), "a second empty line ends nothing");
        assert_eq!(got[4], Ok(Some((EventKind::Partial, "next".into(), None))));
    }

    #[test]
    fn jsonl_events_and_errors_with_line_numbers() {
        let got = parse_all(
            DialectKind::Jsonl,
            &[
                r#"{"partial": "what time", "t": 1.5, "id": "q1"}"#,
                r#"{"final": "What time?"}"#,
                "",
                "garbage",
                r#"{"foo": 1}"#,
                r#"{"partial": 3}"#,
                r#"["an array in field order"]"#,
            ],
        );
        assert_eq!(
            got[0],
            Ok(Some((EventKind::Partial, "what time".into(), Some(1.5))))
        );
        assert_eq!(
            got[1],
            Ok(Some((EventKind::Final, "What time?".into(), None)))
        );
        assert_eq!(got[2], Ok(None));
        assert!(matches!(got[3], Err(ParseError::Json { line: 4, .. })));
        assert_eq!(got[4], Err(ParseError::NoText { line: 5 }));
        assert!(matches!(got[5], Err(ParseError::Json { line: 6, .. })));
        assert!(matches!(got[6], Err(ParseError::Json { line: 7, .. })));
        assert!(
            got[3]
                .as_ref()
                .unwrap_err()
                .to_string()
                .starts_with("line 4:")
        );
    }
}
