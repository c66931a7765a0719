//! `auto`: the dialect is decided by the first non-empty line, with fixed rules (first
//! match wins), so the same input is always read the same way:
//!
//! 1. a terminal escape (`ESC`), `[Start speaking]`, `### Transcription`, or a
//!    `[00:00:00.000 --> ` timestamp → `whisper-cpp`;
//! 2. a line that is just `{` → `vosk` (its pretty-printed objects);
//! 3. a JSON object, by its keys: `segments`, `uid` or `message` → `whisperlive`;
//!    `type`, `channel` or `is_final` → `deepgram`; `partial` or `final` → `jsonl`;
//!    `text`, `result` or `alternatives` → `vosk`; anything else, or a line starting
//!    with `{` that does not parse → `jsonl` (which then reports the line);
//! 4. two or three leading numbers then text (`0 1200 what`, `3021.5 0 1200 what`) →
//!    `whisper-streaming`;
//! 5. anything else → `plain`.
//!
//! The daemon logs the result at info level.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::DialectKind;

#[derive(Deserialize)]
struct Keys<'a> {
    segments: Option<IgnoredAny>,
    uid: Option<IgnoredAny>,
    message: Option<IgnoredAny>,
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    channel: Option<IgnoredAny>,
    is_final: Option<IgnoredAny>,
    partial: Option<IgnoredAny>,
    #[serde(rename = "final")]
    final_: Option<IgnoredAny>,
    text: Option<IgnoredAny>,
    result: Option<IgnoredAny>,
    alternatives: Option<IgnoredAny>,
}

/// The dialect of an input whose first non-empty segment is `line`; `None` for a
/// blank line (undecided yet).
pub fn detect(line: &str) -> Option<DialectKind> {
    let t = line.trim();
    if t.is_empty() {
        return None;
    }
    if line.contains('\x1b')
        || t.starts_with("[Start speaking]")
        || t.starts_with("### Transcription")
        || (t.len() >= 18 && t.starts_with('[') && t.as_bytes()[13..18] == *b" --> ")
    {
        return Some(DialectKind::WhisperCpp);
    }
    if t == "{" {
        return Some(DialectKind::Vosk);
    }
    if t.starts_with('{') {
        let Ok(k) = serde_json::from_str::<Keys>(t) else {
            return Some(DialectKind::Jsonl);
        };
        let kind = if k.segments.is_some() || k.uid.is_some() || k.message.is_some() {
            DialectKind::Whisperlive
        } else if k.kind.is_some() || k.channel.is_some() || k.is_final.is_some() {
            DialectKind::Deepgram
        } else if k.partial.is_some() || k.final_.is_some() {
            DialectKind::Jsonl
        } else if k.text.is_some() || k.result.is_some() || k.alternatives.is_some() {
            DialectKind::Vosk
        } else {
            DialectKind::Jsonl
        };
        return Some(kind);
    }
    if leading_numbers(t) {
        return Some(DialectKind::WhisperStreaming);
    }
    Some(DialectKind::Plain)
}

/// `N N text` or `N.N N N text`, the two whisper_streaming line forms.
fn leading_numbers(t: &str) -> bool {
    let mut it = t.split(' ');
    let is_int = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let is_dec = |s: &str| {
        s.split_once('.')
            .is_some_and(|(a, b)| is_int(a) && is_int(b))
    };
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(a), Some(b), Some(c), Some(_)) if is_dec(a) => is_int(b) && is_int(c),
        (Some(a), Some(b), Some(_), _) => is_int(a) && is_int(b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{Dialect, DialectKind};
    use super::*;

    #[test]
    fn rules() {
        use DialectKind::*;
        let cases: &[(&str, Option<DialectKind>)] = &[
            ("   ", None),
            ("[Start speaking]", Some(WhisperCpp)),
            ("\x1b[2K", Some(WhisperCpp)),
            (
                "### Transcription 0 START | t0 = 0 ms | t1 = 2000 ms",
                Some(WhisperCpp),
            ),
            ("[00:00:00.000 --> 00:00:02.000]  Hello", Some(WhisperCpp)),
            ("{", Some(Vosk)),
            (r#"{"text": "hi", "result": []}"#, Some(Vosk)),
            (r#"{"partial": "hi"}"#, Some(Jsonl)),
            (r#"{"final": "hi", "t": 1}"#, Some(Jsonl)),
            (
                r#"{"uid": "x", "message": "SERVER_READY"}"#,
                Some(Whisperlive),
            ),
            (r#"{"uid": "x", "segments": []}"#, Some(Whisperlive)),
            (r#"{"type": "Metadata"}"#, Some(Deepgram)),
            (
                r#"{"channel": {"alternatives": []}, "is_final": true}"#,
                Some(Deepgram),
            ),
            (r#"{"broken"#, Some(Jsonl)),
            ("0 1200  What is", Some(WhisperStreaming)),
            ("3021.5521 0 1200  What is", Some(WhisperStreaming)),
            ("12 apples", Some(Plain)),
            ("what is the capital", Some(Plain)),
            ("1.5 apples and 2 pears", Some(Plain)),
        ];
        for (line, want) in cases {
            assert_eq!(detect(line), *want, "{line:?}");
        }
    }

    #[test]
    fn every_fixture_is_detected_and_read_like_its_dialect() {
        use DialectKind::*;
        for (file, kind) in [
            ("plain.txt", Plain),
            ("jsonl.jsonl", Jsonl),
            ("whisper-cpp.txt", WhisperCpp),
            ("whisper-cpp-vad.txt", WhisperCpp),
            ("whisper-streaming.txt", WhisperStreaming),
            ("whisperlive.jsonl", Whisperlive),
            ("vosk.txt", Vosk),
            ("deepgram.jsonl", Deepgram),
        ] {
            let input = fixture(file);
            let (auto, auto_err) = run(Auto, &input);
            let (direct, direct_err) = run(kind, &input);
            assert_eq!(auto, direct, "{file}");
            assert_eq!(auto_err, direct_err, "{file}");
            assert!(!finals(&auto).is_empty(), "{file}");
            let mut d = Dialect::new(Auto, 800);
            let first = String::from_utf8_lossy(&input);
            let first = first
                .split(['\n', '\r'])
                .find(|l| !l.trim().is_empty())
                .unwrap();
            d.parse_line(first, 1, std::time::Instant::now()).unwrap();
            assert_eq!(d.kind(), kind, "{file}");
        }
    }

    #[test]
    fn crlf_json_is_not_mistaken_for_terminal_redraws() {
        let input = b"{\"partial\": \"hi there\"}\r\n{\"final\": \"Hi there.\"}\r\n";
        let (ev, err) = run(DialectKind::Auto, input);
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(finals(&ev), ["Hi there."]);
    }
}
