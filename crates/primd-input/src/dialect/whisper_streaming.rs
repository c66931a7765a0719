//! `whisper-streaming`: ufal/whisper_streaming (`whisper_online.py`, its server) prints
//! only *committed* text, as increments: `beg_ms end_ms text`, or with a leading
//! emission time `emit_ms beg_ms end_ms text` (`%1.4f`, so it always has a decimal
//! point, while the audio times never do: that is how the two forms are told apart).
//!
//! Increments are joined into the cumulative partial (a space is added only when
//! neither side has one: faster-whisper words carry their leading space). Nothing in
//! the format ends an utterance; audio silence does: an increment starting at least
//! `endpoint_ms` after the previous one ended closes the utterance (the daemon's
//! wall-clock `endpoint_ms` also does, live). Events carry `t` = the increment's end.
//! Live, the server (`whisper_online_server.py`) sends these lines over TCP: pipe
//! `nc` into primd.

use super::whisper_cpp::join_into;
use super::{Ctx, Emit, ParseError, Utterance};

pub struct WhisperStreaming {
    u: Utterance,
    endpoint_s: f64,
    acc: String,
}

impl WhisperStreaming {
    pub fn new(endpoint_s: f64) -> Self {
        WhisperStreaming {
            u: Utterance::default(),
            endpoint_s,
            acc: String::new(),
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
        let (beg, end, text) = split(line).ok_or_else(|| ParseError::Format {
            line: cx.line,
            dialect: "whisper-streaming",
            reason: "expected \"[emit_ms] beg_ms end_ms text\"".into(),
        })?;
        let (beg, end) = (beg / 1000.0, end / 1000.0);
        if self.u.gap(Some(beg), self.endpoint_s) {
            self.u.finish(None, None, cx, out);
            self.acc.clear();
        }
        if !self.u.open {
            self.acc.clear();
        }
        // Bounded like an event's text: beyond it, increments are no longer kept.
        if self.acc.len() + text.len() < 4 * super::super::MAX_TEXT_BYTES {
            join_into(&mut self.acc, text);
        }
        self.u.partial(&self.acc, Some(end), cx, out);
        Ok(())
    }
}

/// `[emit] beg end text` → (beg, end, text as printed after the separating space).
fn split(line: &str) -> Option<(f64, f64, &str)> {
    let line = line.trim_end_matches(['\r', '\n']);
    // The server's line_packet can pad with NUL bytes.
    let mut rest = line.trim_start_matches(|c: char| c == '\0' || c.is_whitespace());
    let mut nums = [0.0f64; 3];
    let mut n = 0;
    let mut first_has_point = false;
    while n < 3 {
        let end = rest.find(' ').unwrap_or(rest.len());
        let tok = &rest[..end];
        let Ok(x) = tok.parse::<f64>() else { break };
        if !x.is_finite() || tok.starts_with(['+', '-']) && n > 0 {
            return None;
        }
        if n == 0 {
            first_has_point = tok.contains('.');
        }
        nums[n] = x;
        n += 1;
        rest = rest.get(end + 1..).unwrap_or("");
        // With an emission time there are three numbers; without, two.
        if n == 2 && !first_has_point {
            break;
        }
    }
    let (beg, end) = match (n, first_has_point) {
        (3, true) => (nums[1], nums[2]),
        (2, false) => (nums[0], nums[1]),
        _ => return None,
    };
    (end >= beg && beg >= 0.0).then_some((beg, end, rest))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run, run_with};
    use super::super::{DialectKind, EventKind};
    use super::*;

    #[test]
    fn both_line_forms() {
        assert_eq!(split("0 1200  What is"), Some((0.0, 1200.0, " What is")));
        assert_eq!(
            split("3021.5521 0 1200  What is"),
            Some((0.0, 1200.0, " What is"))
        );
        assert_eq!(
            split("1200 2400 12 apples"),
            Some((1200.0, 2400.0, "12 apples"))
        );
        assert_eq!(split("what 1 2"), None);
        assert_eq!(split("2400 1200 backwards"), None);
        assert_eq!(split("1.5 2400"), None);
        assert_eq!(split("\0\0 0 500 padded"), Some((0.0, 500.0, "padded")));
    }

    #[test]
    fn increments_accumulate_and_silence_ends_the_utterance() {
        let input = b"0 600  What is\n700 1500  the capital\n1600 2300  of France?\n5000 5400  Lights\n5500 6000  off.\n";
        let (ev, err) = run_with(DialectKind::WhisperStreaming, input, 800);
        assert!(err.is_empty());
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "What is".into()),
                (EventKind::Partial, "What is the capital".into()),
                (EventKind::Partial, "What is the capital of France?".into()),
                (EventKind::Final, "What is the capital of France?".into()),
                (EventKind::Partial, "Lights".into()),
                (EventKind::Partial, "Lights off.".into()),
            ]
        );
    }

    #[test]
    fn garbage_is_reported_with_its_line() {
        let (ev, err) = run(DialectKind::WhisperStreaming, b"0 500 hi\nnot a line\n");
        assert_eq!(ev.len(), 1);
        assert!(err[0].to_string().starts_with("line 2: whisper-streaming"));
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(
            DialectKind::WhisperStreaming,
            &fixture("whisper-streaming.txt"),
        );
        assert!(err.is_empty(), "{err:?}");
        // The last utterance is still open at the end of the fixture.
        assert_eq!(finals(&ev), ["What is the tallest mountain in Africa?"]);
        assert_eq!(
            ev.last().unwrap(),
            &(EventKind::Partial, "Turn off the kitchen lights.".into())
        );
    }
}
