//! `whisperlive`: collabora/WhisperLive server messages, one JSON object per line
//! (as a websocket client such as `websocat` prints them):
//! `{"uid": .., "segments": [{"start": "0.000", "end": "2.340", "text": " ..",
//! "completed": true}, ..]}`. The server re-sends its last few completed segments plus
//! the one in progress, so segments are recognised by their times: a completed segment
//! ending after the last one taken is new and joins the utterance; the in-progress one
//! is shown after them. Nothing in the format ends an utterance; an audio gap of at
//! least `endpoint_ms` before a new segment does (and the daemon's wall-clock silence).
//! Status messages (`{"uid", "status": ..}`, `{"message": "SERVER_READY"}`, language
//! detection) are skipped quietly.

use std::borrow::Cow;

use serde::Deserialize;

use super::json::{Num, Tail, object};
use super::whisper_cpp::join_into;
use super::{Ctx, Emit, ParseError, Utterance};

/// Segments kept from one message (the server sends its last 10 by default).
const MAX_SEGMENTS: usize = 32;

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    segments: Option<Tail<Segment<'a>, MAX_SEGMENTS>>,
}

#[derive(Deserialize)]
struct Segment<'a> {
    start: Num,
    end: Num,
    #[serde(borrow)]
    text: Cow<'a, str>,
    #[serde(default)]
    completed: bool,
}

pub struct WhisperLive {
    u: Utterance,
    endpoint_s: f64,
    /// Completed segments of the current utterance, joined.
    acc: String,
    /// The end time of the newest completed segment taken (any utterance).
    committed_end: f64,
    /// Reused buffer: `acc` + the in-progress segment.
    shown: String,
}

impl WhisperLive {
    pub fn new(endpoint_s: f64) -> Self {
        WhisperLive {
            u: Utterance::default(),
            endpoint_s,
            acc: String::new(),
            committed_end: f64::NEG_INFINITY,
            shown: String::new(),
        }
    }

    pub fn silence(&mut self) {
        self.u.reset();
        self.acc.clear();
    }

    pub fn parse(&mut self, line: &str, cx: &Ctx, out: &mut Emit) -> Result<(), ParseError> {
        if line.trim().is_empty() {
            return Ok(());
        }
        let m: Message = object(line, cx.line)?;
        let Some(Tail(segments)) = m.segments else {
            log::debug!("line {}: whisperlive status message skipped", cx.line);
            return Ok(());
        };
        let mut in_progress: Option<(f64, f64, &str)> = None;
        for s in &segments {
            let (start, end) = (s.start.0, s.end.0);
            if s.completed {
                // Re-sent segments end no later than what was taken (small slack for
                // rounding of the printed times).
                if end <= self.committed_end + 1e-3 {
                    continue;
                }
                self.gap(start, cx, out);
                self.committed_end = end;
                if self.acc.len() < 4 * super::super::MAX_TEXT_BYTES {
                    join_into(&mut self.acc, s.text.trim_end());
                }
                self.u.last_t = Some(end);
                self.u.open |= !self.acc.trim().is_empty();
            } else if end > self.committed_end + 1e-3 {
                in_progress = Some((start, end, s.text.as_ref()));
            }
        }
        self.shown.clear();
        self.shown.push_str(&self.acc);
        let mut t = self.u.last_t;
        if let Some((start, end, text)) = in_progress {
            self.gap(start, cx, out);
            self.shown.clear();
            self.shown.push_str(&self.acc);
            join_into(&mut self.shown, text.trim_end());
            t = Some(end);
        }
        let shown = std::mem::take(&mut self.shown);
        self.u.partial(&shown, t, cx, out);
        self.shown = shown;
        Ok(())
    }

    /// New speech at `start` after a long enough gap: the open utterance ends first.
    fn gap(&mut self, start: f64, cx: &Ctx, out: &mut Emit) {
        if self.u.gap(Some(start), self.endpoint_s) {
            // Completed segments taken in this message but not yet shown belong to the
            // old utterance too.
            if self.acc.trim() != self.u.last.as_str() && !self.acc.trim().is_empty() {
                let acc = std::mem::take(&mut self.acc);
                self.u.finish(Some(&acc), None, cx, out);
                self.acc = acc;
            } else {
                self.u.finish(None, None, cx, out);
            }
            self.acc.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind};

    #[test]
    fn resent_segments_are_taken_once_and_the_in_progress_one_is_shown() {
        let input = concat!(
            r#"{"uid": "a", "segments": [{"start": "0.000", "end": "1.000", "text": " What is", "completed": false}]}"#,
            "\n",
            r#"{"uid": "a", "segments": [{"start": "0.000", "end": "1.800", "text": " What is the capital?", "completed": true}, {"start": "1.800", "end": "2.400", "text": " Of", "completed": false}]}"#,
            "\n",
            r#"{"uid": "a", "segments": [{"start": "0.000", "end": "1.800", "text": " What is the capital?", "completed": true}, {"start": "1.800", "end": "2.900", "text": " Of France.", "completed": true}]}"#,
            "\n",
            r#"{"uid": "a", "status": "WAIT", "message": 1.5}"#,
            "\n",
            r#"{"uid": "a", "segments": [{"start": "1.800", "end": "2.900", "text": " Of France.", "completed": true}, {"start": 6.0, "end": 6.5, "text": " Lights", "completed": false}]}"#,
            "\n"
        );
        let (ev, err) = run(DialectKind::Whisperlive, input.as_bytes());
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "What is".into()),
                (EventKind::Partial, "What is the capital? Of".into()),
                (EventKind::Partial, "What is the capital? Of France.".into()),
                (EventKind::Final, "What is the capital? Of France.".into()),
                (EventKind::Partial, "Lights".into()),
            ]
        );
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(DialectKind::Whisperlive, &fixture("whisperlive.jsonl"));
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(finals(&ev), ["What is the tallest mountain in Africa?"]);
        assert_eq!(
            ev.last().unwrap(),
            &(EventKind::Partial, "Turn off the kitchen lights.".into())
        );
    }
}
