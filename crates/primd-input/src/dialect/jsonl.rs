//! `jsonl`: one JSON object per line, `{"partial": "..."}` or `{"final": "..."}`,
//! optional `"t"` (audio seconds); other keys are ignored. A partial whose `t` follows
//! the previous one by at least the endpoint starts a new utterance (the previous one
//! ends with its newest partial).

use std::borrow::Cow;

use serde::Deserialize;

use super::{Ctx, Emit, ParseError, Utterance, json};

#[derive(Deserialize)]
struct JsonEvent<'a> {
    #[serde(borrow, default)]
    partial: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "final")]
    final_: Option<Cow<'a, str>>,
    #[serde(default)]
    t: Option<f64>,
}

pub struct Jsonl {
    pub(super) u: Utterance,
    endpoint_s: f64,
}

impl Jsonl {
    pub fn new(endpoint_s: f64) -> Self {
        Jsonl {
            u: Utterance::default(),
            endpoint_s,
        }
    }

    pub fn parse(&mut self, line: &str, cx: &Ctx, out: &mut Emit) -> Result<(), ParseError> {
        if line.trim().is_empty() {
            return Ok(());
        }
        let j: JsonEvent = json::object(line, cx.line)?;
        match (j.final_, j.partial) {
            (Some(f), _) => {
                self.u.finish(Some(&f), j.t, cx, out);
                Ok(())
            }
            (None, Some(p)) => {
                if self.u.gap(j.t, self.endpoint_s) {
                    self.u.finish(None, None, cx, out);
                }
                self.u.partial(&p, j.t, cx, out);
                Ok(())
            }
            (None, None) => Err(ParseError::NoText { line: cx.line }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind, ParseError};

    #[test]
    fn events_and_errors_with_line_numbers() {
        let input = concat!(
            r#"{"partial": "what time", "t": 1.5, "id": "q1"}"#,
            "\n",
            r#"{"final": "What time?"}"#,
            "\n\ngarbage\n",
            r#"{"foo": 1}"#,
            "\n",
            r#"{"partial": 3}"#,
            "\n",
            r#"["an array in field order"]"#,
            "\n"
        );
        let (ev, err) = run(DialectKind::Jsonl, input.as_bytes());
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "what time".into()),
                (EventKind::Final, "What time?".into())
            ]
        );
        assert!(matches!(err[0], ParseError::Json { line: 4, .. }));
        assert_eq!(err[1], ParseError::NoText { line: 5 });
        assert!(matches!(err[2], ParseError::Json { line: 6, .. }));
        assert!(matches!(err[3], ParseError::Json { line: 7, .. }));
        assert!(err[0].to_string().starts_with("line 4:"));
    }

    #[test]
    fn an_audio_gap_ends_the_utterance_with_its_newest_partial() {
        let input = concat!(
            r#"{"partial": "play some", "t": 1.0}"#,
            "\n",
            r#"{"partial": "play some jazz", "t": 1.5}"#,
            "\n",
            r#"{"partial": "lights off", "t": 4.0}"#,
            "\n"
        );
        let (ev, _) = run(DialectKind::Jsonl, input.as_bytes());
        assert_eq!(finals(&ev), ["play some jazz"]);
        assert_eq!(
            ev.last().unwrap(),
            &(EventKind::Partial, "lights off".into())
        );
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(DialectKind::Jsonl, &fixture("jsonl.jsonl"));
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            finals(&ev),
            [
                "What is the tallest mountain in Africa?",
                "Turn off the kitchen lights."
            ]
        );
    }
}
