//! The socket protocol's client frames (`docs/protocol.md`): one line of bytes → a
//! [`Request`], or the [`Refusal`] primd replies with (the connection stays open).
//!
//! Here, next to the STT dialects, because it parses bytes from any process that can
//! connect: it is fuzzed alone (`fuzz/`, target `protocol`), and the saved corpus runs
//! in `cargo test`. Frames are cut by the bounded [`LineReader`](crate::LineReader) with
//! [`MAX_FRAME_BYTES`]; [`parse_line`] takes what it hands out, so an oversized frame
//! and invalid UTF-8 are refused with their own codes, not mistaken for bad JSON.
//!
//! Parsing allocates (a JSON value per frame): it runs on the connection's own thread,
//! never on the retriever's, and a frame is bounded.

use std::borrow::Cow;

use serde_json::Value;

use crate::Line;

/// Longest frame (a line without its newline), in bytes.
pub const MAX_FRAME_BYTES: usize = 65_536;

/// Longest session name, in bytes.
pub const MAX_SESSION_BYTES: usize = 64;

/// The largest `context_tokens` a turn may ask for (as the daemon's own setting).
pub const MAX_CONTEXT_TOKENS: u32 = 1_000_000;

/// The protocol's version (the greeting's `protocol`).
pub const PROTOCOL_VERSION: u32 = 1;

/// What a client asked.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// A transcript of one turn of one of the client's sessions.
    Transcript {
        session: String,
        turn: u64,
        what: What,
        /// `"context": false`: this turn is retrieved without its conversation.
        context: bool,
        /// `"context_tokens": N`: this turn's `context` budget in word pieces, instead
        /// of the daemon's (0: none).
        context_tokens: Option<u32>,
    },
    /// A command; `id` is echoed in its reply.
    Command { id: Option<Value>, cmd: Command },
}

#[derive(Clone, Debug, PartialEq)]
pub enum What {
    /// The whole hypothesis so far.
    Partial(String),
    /// The final transcript: ends the turn.
    Final(String),
    /// The turn ended without a final text.
    EndOfSpeech,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Ping,
    /// `session`: a name, or `"*"` for every session.
    Subscribe {
        session: String,
        speculative: bool,
    },
    Unsubscribe {
        session: String,
    },
    /// Closes one of the client's sessions (an open turn is abandoned).
    Close {
        session: String,
    },
    /// Forgets a session's conversation (its earlier turns).
    Reset {
        session: String,
    },
    /// Sets a session's conversation topic: `text`, or the passage `passage` (by id);
    /// neither clears it.
    Topic {
        session: String,
        topic: TopicSource,
    },
    Reload,
    Stats,
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Ping => "ping",
            Command::Subscribe { .. } => "subscribe",
            Command::Unsubscribe { .. } => "unsubscribe",
            Command::Close { .. } => "close",
            Command::Reset { .. } => "reset",
            Command::Topic { .. } => "topic",
            Command::Reload => "reload",
            Command::Stats => "stats",
        }
    }
}

/// What `{"cmd":"topic"}` sets the topic to.
#[derive(Clone, Debug, PartialEq)]
pub enum TopicSource {
    /// `"text"`: the topic as the agent names it.
    Text(String),
    /// `"passage"`: a passage's id (the topic is its title).
    Passage(String),
    /// Neither: the topic is cleared.
    Clear,
}

/// Longest topic text, in bytes (a conversation keeps 512).
pub const MAX_TOPIC_BYTES: usize = 512;

/// Why a frame was refused: the error reply's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// One of [`CODES`].
    pub code: &'static str,
    pub message: String,
    /// The command's name and `id`, when the frame got that far (`id` boxed: it is
    /// rare, and keeps a refusal small).
    pub cmd: Option<String>,
    pub id: Option<Box<Value>>,
    /// A transcript's `session` and `turn`, when the frame has valid ones.
    pub session: Option<String>,
    pub turn: Option<u64>,
}

/// Every error code a frame can be refused with.
pub const CODES: [&str; 6] = [
    "frame_too_large",
    "bad_utf8",
    "bad_json",
    "bad_message",
    "reserved_session",
    "unknown_cmd",
];

impl Refusal {
    /// A refusal with `code` and `message` and nothing else named.
    pub fn new(code: &'static str, message: impl Into<String>) -> Refusal {
        refuse(code, message)
    }
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
        cmd: None,
        id: None,
        session: None,
        turn: None,
    }
}

/// The keys that make a message a transcript (besides `session` and `turn`).
const TRANSCRIPT_KEYS: [&str; 3] = ["partial", "final", "end_of_speech"];

/// Whether a client may not send transcripts for `name` (primd's own sessions).
pub fn is_reserved(name: &str) -> bool {
    name == "stt" || name.starts_with("wyoming-")
}

/// One line from a [`LineReader`](crate::LineReader) (in [`Mode::Lines`](crate::Mode),
/// limit [`MAX_FRAME_BYTES`]); `None` for an empty line (ignored).
pub fn parse_line(line: &Line<'_>) -> Option<Result<Request, Refusal>> {
    let text = match line {
        Line::TooLong(n) => {
            return Some(Err(refuse(
                "frame_too_large",
                format!("a frame of {n} bytes: the limit is {MAX_FRAME_BYTES}; skipped"),
            )));
        }
        // The reader replaces invalid UTF-8: a replaced copy is an invalid frame.
        Line::Text(Cow::Owned(_)) | Line::Rewrite(Cow::Owned(_)) | Line::Pending(Cow::Owned(_)) => {
            return Some(Err(refuse("bad_utf8", "the frame is not valid UTF-8")));
        }
        Line::Text(t) | Line::Rewrite(t) | Line::Pending(t) => t.as_ref(),
    };
    if text.trim().is_empty() {
        return None;
    }
    Some(parse(text))
}

/// One frame's text.
pub fn parse(text: &str) -> Result<Request, Refusal> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| refuse("bad_json", format!("invalid JSON: {e}")))?;
    let Value::Object(o) = v else {
        return Err(refuse("bad_message", "a message is a JSON object"));
    };
    if let Some(cmd) = o.get("cmd") {
        let id = o.get("id").cloned();
        let with = |mut r: Refusal, name: Option<&str>| {
            r.id = id.clone().map(Box::new);
            r.cmd = name.map(str::to_string);
            r
        };
        let Some(name) = cmd.as_str() else {
            return Err(with(refuse("bad_message", "\"cmd\" is a string"), None));
        };
        // A transcript riding on a command would be dropped unseen: refuse the frame.
        if let Some(key) = TRANSCRIPT_KEYS.iter().find(|k| o.contains_key(**k)) {
            let r = refuse(
                "bad_message",
                format!(
                    "a command carries no transcript: send \"{key}\" in a message of its \
                     own (\"session\", \"turn\", \"{key}\"; no \"cmd\")"
                ),
            );
            return Err(with(r, Some(name)));
        }
        let session = || match o.get("session") {
            Some(Value::String(s)) if s == "*" || valid_name(s) => Ok(s.clone()),
            Some(_) => Err(refuse(
                "bad_message",
                format!("\"session\" is \"*\" or a name of 1 to {MAX_SESSION_BYTES} bytes"),
            )),
            None => Err(refuse(
                "bad_message",
                format!("{name}: \"session\" is missing"),
            )),
        };
        let cmd = match name {
            "ping" => Command::Ping,
            "reload" => Command::Reload,
            "stats" => Command::Stats,
            "subscribe" => Command::Subscribe {
                session: session().map_err(|r| with(r, Some(name)))?,
                speculative: match o.get("speculative") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        let r = refuse("bad_message", "\"speculative\" is true or false");
                        return Err(with(r, Some(name)));
                    }
                },
            },
            "unsubscribe" => Command::Unsubscribe {
                session: session().map_err(|r| with(r, Some(name)))?,
            },
            "close" => Command::Close {
                session: session().map_err(|r| with(r, Some(name)))?,
            },
            "reset" => Command::Reset {
                session: session().map_err(|r| with(r, Some(name)))?,
            },
            "topic" => {
                let session = session().map_err(|r| with(r, Some(name)))?;
                let field = |key: &str| match o.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) if s.len() <= MAX_TOPIC_BYTES => Ok(Some(s.clone())),
                    Some(_) => Err(refuse(
                        "bad_message",
                        format!("\"{key}\" is a string of at most {MAX_TOPIC_BYTES} bytes"),
                    )),
                };
                let text = field("text").map_err(|r| with(r, Some(name)))?;
                let passage = field("passage").map_err(|r| with(r, Some(name)))?;
                let topic = match (text, passage) {
                    (Some(_), Some(_)) => {
                        let r = refuse("bad_message", "\"text\" or \"passage\", not both");
                        return Err(with(r, Some(name)));
                    }
                    (Some(t), None) if !t.trim().is_empty() => TopicSource::Text(t),
                    (None, Some(p)) => TopicSource::Passage(p),
                    _ => TopicSource::Clear,
                };
                Command::Topic { session, topic }
            }
            _ => {
                let shown: String = name.chars().take(64).collect();
                let r = refuse("unknown_cmd", format!("unknown command {shown:?}"));
                return Err(with(r, Some(name)));
            }
        };
        return Ok(Request::Command { id, cmd });
    }
    let session = match o.get("session") {
        Some(Value::String(s)) if valid_name(s) => s.clone(),
        Some(_) => {
            return Err(refuse(
                "bad_message",
                format!("\"session\" is a string of 1 to {MAX_SESSION_BYTES} bytes"),
            ));
        }
        None if o.contains_key("turn") || TRANSCRIPT_KEYS.iter().any(|k| o.contains_key(*k)) => {
            return Err(refuse("bad_message", "\"session\" is missing"));
        }
        None => {
            return Err(refuse(
                "bad_message",
                "neither a command (\"cmd\") nor a transcript (\"session\", \"turn\", ...)",
            ));
        }
    };
    // From here a refusal names the session (and the turn, once it is read).
    let tagged = |mut r: Refusal, turn: Option<u64>| {
        r.session = Some(session.clone());
        r.turn = turn;
        r
    };
    if is_reserved(&session) {
        return Err(tagged(
            refuse(
                "reserved_session",
                format!("{session:?} is primd's own session: subscribe to it instead"),
            ),
            None,
        ));
    }
    let turn = match o.get("turn") {
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or(0),
        Some(_) => {
            let r = refuse("bad_message", "\"turn\" is a non-negative integer");
            return Err(tagged(r, None));
        }
        None => return Err(tagged(refuse("bad_message", "\"turn\" is missing"), None)),
    };
    transcript(&o, session.clone(), turn).map_err(|r| tagged(r, Some(turn)))
}

/// The rest of a transcript frame, once its `session` and `turn` are read.
fn transcript(
    o: &serde_json::Map<String, Value>,
    session: String,
    turn: u64,
) -> Result<Request, Refusal> {
    let text = |key: &str| match o.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(refuse("bad_message", format!("\"{key}\" is a string"))),
    };
    let partial = text("partial")?;
    let final_ = text("final")?;
    let context = match o.get("context") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(refuse("bad_message", "\"context\" is true or false")),
    };
    let context_tokens = match o.get("context_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if n <= MAX_CONTEXT_TOKENS => Some(n),
            _ => {
                return Err(refuse(
                    "bad_message",
                    format!("\"context_tokens\" is an integer, 0..={MAX_CONTEXT_TOKENS}"),
                ));
            }
        },
    };
    let eos = match o.get("end_of_speech") {
        None | Some(Value::Bool(false)) | Some(Value::Null) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err(refuse("bad_message", "\"end_of_speech\" is true")),
    };
    let what = match (partial, final_, eos) {
        (Some(p), None, false) => What::Partial(p),
        (None, Some(f), false) => What::Final(f),
        (None, None, true) => What::EndOfSpeech,
        (None, None, false) => {
            return Err(refuse(
                "bad_message",
                "a transcript has \"partial\", \"final\" or \"end_of_speech\": true",
            ));
        }
        _ => {
            return Err(refuse(
                "bad_message",
                "only one of \"partial\", \"final\", \"end_of_speech\" per message",
            ));
        }
    };
    Ok(Request::Transcript {
        session,
        turn,
        what,
        context,
        context_tokens,
    })
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_SESSION_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> &'static str {
        parse(text).unwrap_err().code
    }

    #[test]
    fn transcripts_and_commands() {
        assert_eq!(
            parse(r#"{"session":"kiosk-1","turn":7,"partial":"what is","x":1}"#).unwrap(),
            Request::Transcript {
                session: "kiosk-1".into(),
                turn: 7,
                what: What::Partial("what is".into()),
                context: true,
                context_tokens: None,
            }
        );
        assert!(matches!(
            parse(r#"{"session":"k","turn":2,"final":"x","context_tokens":64}"#).unwrap(),
            Request::Transcript {
                context_tokens: Some(64),
                ..
            }
        ));
        for bad in ["-1", "1.5", "\"64\"", "1000001", "true"] {
            let line = format!(r#"{{"session":"k","turn":2,"final":"x","context_tokens":{bad}}}"#);
            assert_eq!(code(&line), "bad_message", "{bad}");
        }
        assert!(matches!(
            parse(r#"{"session":"k","turn":2,"final":"and for children?","context":false}"#)
                .unwrap(),
            Request::Transcript { context: false, .. }
        ));
        assert_eq!(
            code(r#"{"session":"k","turn":2,"final":"x","context":"no"}"#),
            "bad_message"
        );
        assert_eq!(
            parse(r#"{"cmd":"reset","session":"kiosk-1"}"#).unwrap(),
            Request::Command {
                id: None,
                cmd: Command::Reset {
                    session: "kiosk-1".into()
                }
            }
        );
        assert_eq!(code(r#"{"cmd":"reset"}"#), "bad_message");
        assert_eq!(
            parse(r#"{"cmd":"topic","session":"k","text":"Planetarium"}"#).unwrap(),
            Request::Command {
                id: None,
                cmd: Command::Topic {
                    session: "k".into(),
                    topic: TopicSource::Text("Planetarium".into()),
                },
            }
        );
        assert!(matches!(
            parse(r#"{"cmd":"topic","session":"k","passage":"planetarium-shows"}"#).unwrap(),
            Request::Command {
                cmd: Command::Topic {
                    topic: TopicSource::Passage(_),
                    ..
                },
                ..
            }
        ));
        assert!(matches!(
            parse(r#"{"cmd":"topic","session":"k","text":null}"#).unwrap(),
            Request::Command {
                cmd: Command::Topic {
                    topic: TopicSource::Clear,
                    ..
                },
                ..
            }
        ));
        for bad in [
            r#"{"cmd":"topic","session":"k","text":"a","passage":"b"}"#,
            r#"{"cmd":"topic","session":"k","text":[1]}"#,
            r#"{"cmd":"topic","text":"a"}"#,
        ] {
            assert_eq!(code(bad), "bad_message", "{bad}");
        }
        assert!(matches!(
            parse(r#"{"session":"k","turn":0,"final":""}"#).unwrap(),
            Request::Transcript { what: What::Final(f), .. } if f.is_empty()
        ));
        assert!(matches!(
            parse(r#"{"session":"k","turn":1,"end_of_speech":true}"#).unwrap(),
            Request::Transcript {
                what: What::EndOfSpeech,
                ..
            }
        ));
        assert_eq!(
            parse(r#"{"cmd":"subscribe","session":"stt","speculative":true,"id":[1]}"#).unwrap(),
            Request::Command {
                id: Some(serde_json::json!([1])),
                cmd: Command::Subscribe {
                    session: "stt".into(),
                    speculative: true
                }
            }
        );
        assert!(matches!(
            parse(r#"{"cmd":"stats"}"#).unwrap(),
            Request::Command {
                id: None,
                cmd: Command::Stats
            }
        ));
    }

    #[test]
    fn bad_frames_get_their_codes() {
        assert_eq!(code("{\"session\":"), "bad_json");
        assert_eq!(code("[1,2]"), "bad_message");
        assert_eq!(code(r#"{"foo":1}"#), "bad_message");
        assert_eq!(
            code(r#"{"session":"k","turn":-1,"partial":"x"}"#),
            "bad_message"
        );
        assert_eq!(
            code(r#"{"session":"k","turn":1.5,"partial":"x"}"#),
            "bad_message"
        );
        assert_eq!(code(r#"{"session":"k","partial":"x"}"#), "bad_message");
        assert_eq!(code(r#"{"session":"k","turn":1}"#), "bad_message");
        assert_eq!(
            code(r#"{"session":"k","turn":1,"partial":"a","final":"b"}"#),
            "bad_message"
        );
        assert_eq!(
            code(r#"{"session":"","turn":1,"partial":"a"}"#),
            "bad_message"
        );
        let long = "x".repeat(65);
        assert_eq!(
            code(&format!(r#"{{"session":"{long}","turn":1,"partial":"a"}}"#)),
            "bad_message"
        );
        assert_eq!(
            code(r#"{"session":"stt","turn":1,"partial":"a"}"#),
            "reserved_session"
        );
        assert_eq!(
            code(r#"{"session":"wyoming-2","turn":1,"partial":"a"}"#),
            "reserved_session"
        );
        let r = parse(r#"{"cmd":"launch","id":5}"#).unwrap_err();
        assert_eq!(
            (r.code, r.cmd.as_deref(), r.id.map(|v| *v)),
            ("unknown_cmd", Some("launch"), Some(5.into()))
        );
        let r = parse(r#"{"cmd":"subscribe","id":"a"}"#).unwrap_err();
        assert_eq!(
            (r.code, r.cmd.as_deref()),
            ("bad_message", Some("subscribe"))
        );
    }

    #[test]
    fn refusals_name_what_the_frame_has_and_what_it_lacks() {
        // A transcript's refusal names its session, and its turn once that is read.
        let r = parse(r#"{"session":"k","turn":7,"final":"x","context_tokens":-1}"#).unwrap_err();
        assert_eq!(
            (r.code, r.session.as_deref(), r.turn),
            ("bad_message", Some("k"), Some(7))
        );
        let r = parse(r#"{"session":"k","turn":"7","final":"x"}"#).unwrap_err();
        assert_eq!((r.session.as_deref(), r.turn), (Some("k"), None));
        let r = parse(r#"{"session":"stt","turn":1,"partial":"a"}"#).unwrap_err();
        assert_eq!(
            (r.code, r.session.as_deref()),
            ("reserved_session", Some("stt"))
        );
        // A transcript without its session is told so, as one without its turn is.
        for line in [
            r#"{"turn":1,"final":"x"}"#,
            r#"{"partial":"x"}"#,
            r#"{"turn":1,"end_of_speech":true}"#,
        ] {
            let r = parse(line).unwrap_err();
            assert_eq!(
                (r.code, r.message.as_str()),
                ("bad_message", "\"session\" is missing"),
                "{line}"
            );
        }
        assert!(
            parse(r#"{"foo":1}"#)
                .unwrap_err()
                .message
                .contains("neither")
        );
        // A command carrying a transcript is refused, not half done.
        for key in ["final", "partial"] {
            let line = format!(r#"{{"cmd":"ping","id":3,"session":"k","turn":1,"{key}":"x"}}"#);
            let r = parse(&line).unwrap_err();
            assert_eq!(
                (r.code, r.cmd.as_deref(), r.id.clone().map(|v| *v)),
                ("bad_message", Some("ping"), Some(3.into()))
            );
            assert!(r.message.contains(key), "{}", r.message);
        }
        let r = parse(r#"{"cmd":"reset","session":"k","end_of_speech":true}"#).unwrap_err();
        assert_eq!((r.code, r.cmd.as_deref()), ("bad_message", Some("reset")));
    }

    #[test]
    fn oversize_and_invalid_utf8_lines_are_refused_as_such() {
        let r = parse_line(&Line::TooLong(70_000)).unwrap().unwrap_err();
        assert_eq!(r.code, "frame_too_large");
        let lossy = String::from_utf8_lossy(b"{\"cmd\":\"p\xffing\"}");
        let r = parse_line(&Line::Text(lossy)).unwrap().unwrap_err();
        assert_eq!(r.code, "bad_utf8");
        assert!(parse_line(&Line::Text(Cow::Borrowed("  "))).is_none());
    }
}
