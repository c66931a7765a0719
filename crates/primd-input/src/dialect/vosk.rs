//! `vosk`: Vosk recognizer results, as its examples print them: pretty-printed JSON
//! objects spread over several lines (`{`, `  "partial" : "what is"`, `}`), or one
//! per line. `{"partial": ..}` is the cumulative hypothesis of the utterance (Vosk
//! sends many empty ones: skipped), `{"text": ..}` (with or without `"result"` word
//! timings, or `{"alternatives": [{"text": ..}, ..]}`) is its final.
//!
//! Lines are gathered until the object's braces balance (strings and escapes are
//! respected), in a buffer bounded like a line: an object over
//! [`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES) is dropped, reported, and reading
//! resynchronises at the next line that starts an object.

use std::borrow::Cow;

use serde::Deserialize;

use super::json::{First, object};
use super::{Ctx, Emit, ParseError, Utterance};
use crate::MAX_LINE_BYTES;

#[derive(Deserialize)]
struct Result_<'a> {
    #[serde(borrow, default)]
    partial: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    alternatives: Option<First<Alternative<'a>>>,
}

#[derive(Deserialize)]
struct Alternative<'a> {
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Default)]
pub struct Vosk {
    pub(super) u: Utterance,
    /// The object being gathered.
    obj: String,
    /// Its first line.
    start_line: u64,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// An over-long object was dropped: skip until a line starts a new one.
    resync: bool,
}

impl Vosk {
    pub fn parse(&mut self, line: &str, cx: &Ctx, out: &mut Emit) -> Result<(), ParseError> {
        let trimmed = line.trim();
        if self.depth == 0 {
            if trimmed.is_empty() {
                return Ok(());
            }
            if !trimmed.starts_with('{') {
                if self.resync {
                    return Ok(());
                }
                return Err(ParseError::Json {
                    line: cx.line,
                    reason: "expected an object".into(),
                });
            }
            self.resync = false;
            self.obj.clear();
            self.start_line = cx.line;
            self.in_string = false;
            self.escaped = false;
        } else if self.resync {
            return Ok(());
        }
        if self.obj.len() + line.len() + 1 > MAX_LINE_BYTES {
            let line_no = self.start_line;
            self.drop_object();
            return Err(ParseError::Format {
                line: line_no,
                dialect: "vosk",
                reason: format!("object longer than {MAX_LINE_BYTES} bytes, skipped"),
            });
        }
        self.obj.push_str(line);
        self.obj.push('\n');
        if !self.scan(line) {
            // An unbalanced '}': not an object we can follow.
            let line_no = self.start_line;
            self.drop_object();
            return Err(ParseError::Json {
                line: line_no,
                reason: "unbalanced braces".into(),
            });
        }
        if self.depth > 0 {
            return Ok(()); // the object goes on
        }
        let obj = std::mem::take(&mut self.obj);
        let cx = Ctx {
            line: self.start_line,
            ..*cx
        };
        let result = self.object(&obj, &cx, out);
        self.obj = obj;
        result
    }

    fn object(&mut self, obj: &str, cx: &Ctx, out: &mut Emit) -> Result<(), ParseError> {
        let r: Result_ = object(obj, cx.line)?;
        let alternative = r.alternatives.and_then(|First(a)| a).map(|a| a.text);
        if let Some(text) = r.text.or(alternative) {
            let text = (!text.trim().is_empty()).then_some(text.as_ref());
            self.u.finish(text, None, cx, out);
        } else if let Some(p) = r.partial {
            self.u.partial(&p, None, cx, out);
        }
        Ok(())
    }

    /// Follows braces through `line`; false on a '}' with nothing open.
    fn scan(&mut self, line: &str) -> bool {
        for b in line.bytes() {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' => self.depth += 1,
                b'}' => {
                    if self.depth == 0 {
                        return false;
                    }
                    self.depth -= 1;
                    if self.depth == 0 {
                        // Anything after the closing brace is left to serde to reject.
                        return true;
                    }
                }
                _ => {}
            }
        }
        true
    }

    fn drop_object(&mut self) {
        self.obj.clear();
        self.depth = 0;
        self.in_string = false;
        self.escaped = false;
        self.resync = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind};
    use crate::MAX_LINE_BYTES;

    #[test]
    fn pretty_printed_objects_and_empty_partials() {
        let input = b"{\n  \"partial\" : \"\"\n}\n{\n  \"partial\" : \"what is\"\n}\n{\n  \"partial\" : \"what is \\\"it\\\" {\"\n}\n{\n  \"result\" : [{\n      \"conf\" : 1.0,\n      \"word\" : \"what\"\n    }],\n  \"text\" : \"what is it\"\n}\n{\"text\": \"\"}\n";
        let (ev, err) = run(DialectKind::Vosk, input);
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "what is".into()),
                (EventKind::Partial, "what is \"it\" {".into()),
                (EventKind::Final, "what is it".into()),
            ],
            "an empty final with nothing open ends nothing"
        );
    }

    #[test]
    fn a_broken_or_endless_object_is_reported_and_reading_resynchronises() {
        let mut input = b"{\n  \"partial\" : \"a\",,\n}\n}\n".to_vec();
        input.extend(b"{\n  \"partial\" : \"");
        for _ in 0..(MAX_LINE_BYTES / 1000 + 1) {
            input.extend(std::iter::repeat_n(b'x', 1000));
            input.push(b'\n');
        }
        input.extend(b"\"\n}\n{\"alternatives\": [{\"text\": \"lights off\", \"confidence\": 0.9}, {\"text\": \"lie its off\"}]}\n");
        let (ev, err) = run(DialectKind::Vosk, &input);
        assert_eq!(finals(&ev), ["lights off"]);
        assert_eq!(err.len(), 3, "{err:?}");
        assert!(err[0].to_string().starts_with("line 1:"), "{}", err[0]);
        assert!(err[1].to_string().starts_with("line 4:"), "{}", err[1]);
        assert!(err[2].to_string().contains("longer than"), "{}", err[2]);
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(DialectKind::Vosk, &fixture("vosk.txt"));
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            finals(&ev),
            [
                "what is the tallest mountain in africa",
                "turn off the kitchen lights"
            ]
        );
    }
}
