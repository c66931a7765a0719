//! `deepgram`: Deepgram live-streaming messages, one JSON object per line:
//! `{"type": "Results", "channel": {"alternatives": [{"transcript": ..}]},
//! "is_final": .., "speech_final": .., "start": .., "duration": ..}`.
//! An interim result (`is_final: false`) replaces the segment in progress; an
//! `is_final` result fixes it and the next segment starts; `speech_final: true` or an
//! `{"type": "UtteranceEnd"}` message ends the utterance. `Metadata` and
//! `SpeechStarted` messages are skipped. Events carry `t` = start + duration.

use std::borrow::Cow;

use serde::Deserialize;

use super::json::{First, Num, object};
use super::whisper_cpp::join_into;
use super::{Ctx, Emit, ParseError, Utterance};

/// Read first: other message types give `channel` other shapes.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    channel: Option<Channel<'a>>,
    #[serde(default)]
    is_final: bool,
    #[serde(default)]
    speech_final: bool,
    #[serde(default)]
    start: Option<Num>,
    #[serde(default)]
    duration: Option<Num>,
}

#[derive(Deserialize)]
struct Channel<'a> {
    #[serde(borrow)]
    alternatives: First<Alternative<'a>>,
}

#[derive(Deserialize)]
struct Alternative<'a> {
    #[serde(borrow)]
    transcript: Cow<'a, str>,
}

#[derive(Default)]
pub struct Deepgram {
    u: Utterance,
    /// `is_final` segments of the current utterance, joined.
    acc: String,
    /// Reused buffer: `acc` + the interim segment.
    shown: String,
}

impl Deepgram {
    pub fn silence(&mut self) {
        self.u.reset();
        self.acc.clear();
    }

    pub fn parse(&mut self, line: &str, cx: &Ctx, out: &mut Emit) -> Result<(), ParseError> {
        if line.trim().is_empty() {
            return Ok(());
        }
        let k: Kind = object(line, cx.line)?;
        match k.kind.as_deref() {
            Some("Results") | None => {}
            Some("UtteranceEnd") => {
                self.end(None, cx, out);
                return Ok(());
            }
            Some(other) => {
                log::debug!("line {}: deepgram {other} message skipped", cx.line);
                return Ok(());
            }
        }
        let m: Message = object(line, cx.line)?;
        let Some(channel) = m.channel else {
            return Err(ParseError::Format {
                line: cx.line,
                dialect: "deepgram",
                reason: "a Results message needs \"channel\"".into(),
            });
        };
        let transcript = channel.alternatives.0.map(|a| a.transcript);
        let transcript = transcript.as_deref().unwrap_or("").trim();
        let t = match (m.start, m.duration) {
            (Some(s), Some(d)) => Some(s.0 + d.0),
            (Some(s), None) => Some(s.0),
            _ => None,
        };
        self.shown.clear();
        self.shown.push_str(&self.acc);
        if !transcript.is_empty() {
            join_into(&mut self.shown, transcript);
        }
        if m.is_final && self.shown.len() < 4 * super::super::MAX_TEXT_BYTES {
            self.acc.clone_from(&self.shown);
        }
        let shown = std::mem::take(&mut self.shown);
        self.u.partial(&shown, t, cx, out);
        self.shown = shown;
        if m.speech_final {
            self.end(t, cx, out);
        }
        Ok(())
    }

    fn end(&mut self, t: Option<f64>, cx: &Ctx, out: &mut Emit) {
        let acc = std::mem::take(&mut self.acc);
        let text = (!acc.trim().is_empty()).then_some(acc.as_str());
        self.u.finish(text, t, cx, out);
        self.acc = acc;
        self.acc.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind};

    fn results(text: &str, is_final: bool, speech_final: bool) -> String {
        format!(
            r#"{{"type": "Results", "channel_index": [0, 1], "duration": 1.0, "start": 0.0, "is_final": {is_final}, "speech_final": {speech_final}, "channel": {{"alternatives": [{{"transcript": "{text}", "confidence": 0.98, "words": []}}, {{"transcript": "other"}}]}}}}"#
        )
    }

    #[test]
    fn interim_results_replace_finals_accumulate_speech_final_ends() {
        let input = [
            r#"{"type": "Metadata", "request_id": "x", "channels": 1}"#.to_string(),
            r#"{"type": "SpeechStarted", "channel": [0], "timestamp": 0.0}"#.to_string(),
            results("what is", false, false),
            results("what is the capitol", false, false),
            results("what is the capital", true, false),
            results("of", false, false),
            results("of france", true, true),
            results("lights", false, false),
            r#"{"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 3.1}"#.to_string(),
            r#"{"type": "UtteranceEnd"}"#.to_string(),
        ]
        .join("\n");
        let (ev, err) = run(DialectKind::Deepgram, input.as_bytes());
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "what is".into()),
                (EventKind::Partial, "what is the capitol".into()),
                (EventKind::Partial, "what is the capital".into()),
                (EventKind::Partial, "what is the capital of".into()),
                (EventKind::Partial, "what is the capital of france".into()),
                (EventKind::Final, "what is the capital of france".into()),
                (EventKind::Partial, "lights".into()),
                (EventKind::Final, "lights".into()),
            ]
        );
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(DialectKind::Deepgram, &fixture("deepgram.jsonl"));
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
