//! STT output formats ("dialects") → [`Event`]s.
//!
//! Every recognizer prints its hypotheses differently: whole-hypothesis lines, JSON
//! objects, terminal redraws, committed-only increments, re-sent segment lists. Each
//! dialect (one file each) turns its format into the same events: a `Partial` holds the
//! cumulative text of the current utterance (never an increment), a `Final` ends it.
//!
//! | dialect | utterance ends at |
//! |---|---|
//! | `plain` | an empty line |
//! | `jsonl` | a `{"final": ...}` object, or an audio-time gap ≥ `endpoint_ms` |
//! | `whisper-cpp` | a committed line (newline) / a `### Transcription N END` block |
//! | `whisper-streaming` | an audio gap ≥ `endpoint_ms` between committed words |
//! | `whisperlive` | an audio gap ≥ `endpoint_ms` between segments |
//! | `vosk` | a `{"text": ...}` object |
//! | `deepgram` | `speech_final: true`, or an `UtteranceEnd` message |
//! | `auto` | the dialect detected from the first non-empty line ([`auto`]) |
//!
//! Wall-clock silence (no input for `endpoint_ms`) ends an utterance in every dialect;
//! the daemon decides that, and tells the parser through [`Dialect::silence`] so that
//! accumulating dialects start the next utterance from nothing.
//!
//! A line that cannot be understood is a [`ParseError`] naming the line: the daemon
//! reports it and reads on. Parsing borrows from the line and reuses its buffers: no
//! allocation per partial once warm (only errors allocate their message).

mod auto;
mod deepgram;
mod json;
mod jsonl;
mod plain;
mod vosk;
mod whisper_cpp;
mod whisper_streaming;
mod whisperlive;

use std::time::Instant;

pub use super::lines::End;
use super::lines::Mode;
use super::{Event, EventKind, Text, to_text};

pub use auto::detect;

/// An input format. Its command-line / config name is [`DialectKind::name`]; what it
/// reads is [`DialectKind::help`] (the `--dialect` help text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialectKind {
    Auto,
    Plain,
    Jsonl,
    WhisperCpp,
    WhisperStreaming,
    Whisperlive,
    Vosk,
    Deepgram,
}

impl DialectKind {
    /// Every dialect, `auto` first (the order of the `--dialect` help).
    pub const ALL: [DialectKind; 8] = [
        DialectKind::Auto,
        DialectKind::Plain,
        DialectKind::Jsonl,
        DialectKind::WhisperCpp,
        DialectKind::WhisperStreaming,
        DialectKind::Whisperlive,
        DialectKind::Vosk,
        DialectKind::Deepgram,
    ];

    /// The name on the command line and in logs.
    pub fn name(self) -> &'static str {
        match self {
            DialectKind::Auto => "auto",
            DialectKind::Plain => "plain",
            DialectKind::Jsonl => "jsonl",
            DialectKind::WhisperCpp => "whisper-cpp",
            DialectKind::WhisperStreaming => "whisper-streaming",
            DialectKind::Whisperlive => "whisperlive",
            DialectKind::Vosk => "vosk",
            DialectKind::Deepgram => "deepgram",
        }
    }

    /// What the dialect reads, one line.
    pub fn help(self) -> &'static str {
        match self {
            DialectKind::Auto => "Detect from the first non-empty line",
            DialectKind::Plain => "One whole hypothesis per line; an empty line ends the utterance",
            DialectKind::Jsonl => {
                "`{\"partial\": ...}` / `{\"final\": ...}` objects, optional `\"t\"`"
            }
            DialectKind::WhisperCpp => {
                "whisper.cpp `stream` (terminal redraws, or `--step 0` VAD blocks)"
            }
            DialectKind::WhisperStreaming => {
                "ufal whisper_streaming: `[emit_ms] beg_ms end_ms text` committed increments"
            }
            DialectKind::Whisperlive => "collabora WhisperLive JSON segment lists",
            DialectKind::Vosk => "Vosk result objects (pretty-printed JSON accepted)",
            DialectKind::Deepgram => "Deepgram live \"Results\" messages",
        }
    }
}

impl std::str::FromStr for DialectKind {
    type Err = String;

    /// A [`DialectKind::name`].
    fn from_str(s: &str) -> Result<Self, String> {
        DialectKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = DialectKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown dialect {s:?} (one of: {})", names.join(", "))
            })
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("line {line}: not a JSON object ({reason})")]
    Json { line: u64, reason: String },
    #[error("line {line}: a JSON event needs a \"partial\" or a \"final\" string")]
    NoText { line: u64 },
    #[error("line {line}: {dialect}: {reason}")]
    Format {
        line: u64,
        dialect: &'static str,
        reason: String,
    },
}

/// Where a segment came from, for the events it produces.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub line: u64,
    pub received: Instant,
}

/// Receives the events a segment produced (zero, one, or a final then a partial).
pub type Emit<'a> = dyn FnMut(Event) + 'a;

fn event(kind: EventKind, text: &str, t: Option<f64>, cx: &Ctx) -> Event {
    let (mut text, cut) = to_text(text);
    if cut {
        // The cut may fall after a space: keep texts trimmed.
        while text.ends_with(char::is_whitespace) {
            text.pop();
        }
        log::warn!(
            "line {}: transcript longer than {} bytes, cut",
            cx.line,
            super::MAX_TEXT_BYTES
        );
    }
    Event {
        kind,
        text,
        t,
        received: cx.received,
        line: cx.line,
    }
}

/// The utterance being heard, as the dialect last reported it: shared by all parsers
/// so that they end utterances the same way.
#[derive(Default)]
struct Utterance {
    open: bool,
    /// The newest partial (the final when the utterance ends without a final text).
    last: Text,
    /// Audio time of the newest speech, for the gap rule.
    last_t: Option<f64>,
}

impl Utterance {
    /// Reports `text` (the whole hypothesis) as a partial; empty and repeated texts
    /// are not reported.
    fn partial(&mut self, text: &str, t: Option<f64>, cx: &Ctx, out: &mut Emit) {
        let text = text.trim();
        self.last_t = t.or(self.last_t);
        if text.is_empty() || (self.open && self.last.as_str() == text) {
            return;
        }
        let ev = event(EventKind::Partial, text, t, cx);
        self.last.clone_from(&ev.text);
        self.open = true;
        out(ev);
    }

    /// Ends the utterance with `text`, or (None) with its newest partial if one is open.
    fn finish(&mut self, text: Option<&str>, t: Option<f64>, cx: &Ctx, out: &mut Emit) {
        let ev = match text {
            Some(text) => event(EventKind::Final, text.trim(), t, cx),
            None if self.open => {
                let mut ev = event(EventKind::Final, "", t.or(self.last_t), cx);
                ev.text.clone_from(&self.last);
                ev
            }
            None => return,
        };
        self.reset();
        out(ev);
    }

    /// True when speech starting at audio time `start` follows the newest speech of an
    /// open utterance by at least the endpoint: silence ended that utterance.
    fn gap(&self, start: Option<f64>, endpoint_s: f64) -> bool {
        match (start, self.last_t) {
            (Some(start), Some(last)) => self.open && start - last >= endpoint_s,
            _ => false,
        }
    }

    fn reset(&mut self) {
        self.open = false;
        self.last.clear();
        self.last_t = None;
    }
}

enum Parser {
    /// `auto` before the first non-empty line.
    Undecided,
    Plain(plain::Plain),
    Jsonl(jsonl::Jsonl),
    WhisperCpp(whisper_cpp::WhisperCpp),
    WhisperStreaming(whisper_streaming::WhisperStreaming),
    Whisperlive(whisperlive::WhisperLive),
    Vosk(vosk::Vosk),
    Deepgram(deepgram::Deepgram),
}

impl Parser {
    fn new(kind: DialectKind, endpoint_s: f64) -> Parser {
        match kind {
            DialectKind::Auto => Parser::Undecided,
            DialectKind::Plain => Parser::Plain(plain::Plain::default()),
            DialectKind::Jsonl => Parser::Jsonl(jsonl::Jsonl::new(endpoint_s)),
            DialectKind::WhisperCpp => Parser::WhisperCpp(whisper_cpp::WhisperCpp::default()),
            DialectKind::WhisperStreaming => {
                Parser::WhisperStreaming(whisper_streaming::WhisperStreaming::new(endpoint_s))
            }
            DialectKind::Whisperlive => {
                Parser::Whisperlive(whisperlive::WhisperLive::new(endpoint_s))
            }
            DialectKind::Vosk => Parser::Vosk(vosk::Vosk::default()),
            DialectKind::Deepgram => Parser::Deepgram(deepgram::Deepgram::default()),
        }
    }
}

/// A dialect parser with the state it keeps between lines.
pub struct Dialect {
    kind: DialectKind,
    endpoint_s: f64,
    parser: Parser,
}

impl Dialect {
    /// `endpoint_ms`: the silence that ends an utterance, for dialects that only carry
    /// audio times.
    pub fn new(kind: DialectKind, endpoint_ms: u64) -> Self {
        let endpoint_s = endpoint_ms as f64 / 1000.0;
        Dialect {
            kind,
            endpoint_s,
            parser: Parser::new(kind, endpoint_s),
        }
    }

    /// The dialect in use (for `auto`: what was detected, `Auto` until then).
    pub fn kind(&self) -> DialectKind {
        self.kind
    }

    /// How the line reader must cut the input for this dialect.
    pub fn reader_mode(&self) -> Mode {
        match self.parser {
            Parser::Undecided | Parser::WhisperCpp(_) => Mode::Rewrites,
            _ => Mode::Lines,
        }
    }

    /// The daemon ended the utterance on wall-clock silence: the next input starts a
    /// new one.
    pub fn silence(&mut self) {
        match &mut self.parser {
            Parser::Undecided => {}
            Parser::Plain(p) => p.u.reset(),
            Parser::Jsonl(p) => p.u.reset(),
            Parser::WhisperCpp(p) => p.silence(),
            Parser::WhisperStreaming(p) => p.silence(),
            Parser::Whisperlive(p) => p.silence(),
            Parser::Vosk(p) => p.u.reset(),
            Parser::Deepgram(p) => p.silence(),
        }
    }

    /// Parses one segment of input (a line, unless the reader is in rewrite mode),
    /// handing its events to `out`.
    pub fn parse(
        &mut self,
        text: &str,
        end: End,
        cx: Ctx,
        out: &mut Emit,
    ) -> Result<(), ParseError> {
        if let Parser::Undecided = self.parser {
            if end == End::Pending {
                return Ok(()); // decide on whole segments only
            }
            let Some(kind) = detect(text) else {
                return Ok(());
            };
            log::info!(
                "input dialect: {} (auto-detected from line {})",
                kind.name(),
                cx.line
            );
            self.kind = kind;
            self.parser = Parser::new(kind, self.endpoint_s);
        }
        // Only whisper.cpp redraws lines; elsewhere a '\r' seen before detection (a
        // CRLF line) ended the line, and pending text will come again, whole.
        if end == End::Pending && !matches!(self.parser, Parser::WhisperCpp(_)) {
            return Ok(());
        }
        match &mut self.parser {
            Parser::Undecided => Ok(()),
            Parser::Plain(p) => {
                p.parse(text, &cx, out);
                Ok(())
            }
            Parser::Jsonl(p) => p.parse(text, &cx, out),
            Parser::WhisperCpp(p) => {
                p.parse(text, end, &cx, out);
                Ok(())
            }
            Parser::WhisperStreaming(p) => p.parse(text, &cx, out),
            Parser::Whisperlive(p) => p.parse(text, &cx, out),
            Parser::Vosk(p) => p.parse(text, &cx, out),
            Parser::Deepgram(p) => p.parse(text, &cx, out),
        }
    }

    /// Convenience for tests and tools: one newline-ended line → its events.
    pub fn parse_line(
        &mut self,
        line: &str,
        line_no: u64,
        received: Instant,
    ) -> Result<Vec<Event>, ParseError> {
        let mut events = Vec::new();
        let cx = Ctx {
            line: line_no,
            received,
        };
        self.parse(line, End::Newline, cx, &mut |e| events.push(e))?;
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::run;
    use super::*;

    #[test]
    fn every_dialect_name_parses_back_and_others_are_refused() {
        for kind in DialectKind::ALL {
            assert_eq!(kind.name().parse::<DialectKind>(), Ok(kind));
        }
        let e = "whisper_cpp".parse::<DialectKind>().unwrap_err();
        assert!(
            e.contains("whisper_cpp") && e.contains("whisper-cpp"),
            "{e}"
        );
    }

    /// Found by `fuzz/` (target `dialects`): a partial cut at `MAX_TEXT_BYTES` right
    /// after a space kept the space.
    #[test]
    fn a_cut_transcript_is_still_trimmed() {
        let long = format!("{} tail", "abc ".repeat(crate::MAX_TEXT_BYTES));
        for kind in [DialectKind::Plain, DialectKind::Jsonl] {
            let line = match kind {
                DialectKind::Jsonl => format!("{{\"partial\": \"{long}\"}}\n"),
                _ => format!("{long}\n"),
            };
            let (ev, err) = run(kind, line.as_bytes());
            assert!(err.is_empty());
            let text = &ev[0].1;
            assert!(text.len() <= crate::MAX_TEXT_BYTES && text.len() > 2000);
            assert_eq!(text.trim(), text, "{kind:?}");
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Runs a fixture through the real line reader and a dialect.

    use super::*;
    use crate::LineReader;

    /// (kind, text) of every event, and the errors, for `input` read whole.
    pub fn run(kind: DialectKind, input: &[u8]) -> (Vec<(EventKind, String)>, Vec<ParseError>) {
        run_with(kind, input, 800)
    }

    pub fn run_with(
        kind: DialectKind,
        input: &[u8],
        endpoint_ms: u64,
    ) -> (Vec<(EventKind, String)>, Vec<ParseError>) {
        let mut d = Dialect::new(kind, endpoint_ms);
        let mut r = LineReader::new(std::io::BufReader::with_capacity(1 << 16, input));
        let (mut events, mut errors) = (Vec::new(), Vec::new());
        loop {
            r.set_mode(d.reader_mode());
            let Some((n, line)) = r.next_line().unwrap() else {
                break;
            };
            let Ok((text, end)) = line.text() else {
                continue;
            };
            let cx = Ctx {
                line: n,
                received: Instant::now(),
            };
            if let Err(e) = d.parse(text, end, cx, &mut |e| {
                events.push((e.kind, e.text.to_string()))
            }) {
                errors.push(e);
            }
        }
        (events, errors)
    }

    /// The final transcripts only.
    pub fn finals(events: &[(EventKind, String)]) -> Vec<&str> {
        events
            .iter()
            .filter(|(k, _)| *k == EventKind::Final)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    pub fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/dialects")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }
}
