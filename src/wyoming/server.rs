//! primd as a Wyoming server: one connection, one session.
//!
//! Transcript events become the session's turns ([`Transcripts`]: chunk deltas joined
//! into the partial, `transcript` the final, `transcript-stop` the end of a turn left
//! open); `describe` gets primd's [`info`](super::info); `ping` gets `pong`; other
//! events are dropped, as Wyoming servers are expected to. A final `transcript` is
//! answered as a `handle` service answers: `handled` with one sentence (the context's
//! best, `backend::final_result`), or `not-handled` when the evidence is low or nothing
//! was found.
//!
//! A frame that breaks the framing or a limit ends the connection (its framing is
//! lost) with an `error` event and a logged reason; a frame with unreadable data gets
//! an `error` event and the connection reads on. Neither touches other connections.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use primd_input::wyoming::{FrameReader, Payloads, Transcripts, Turn, write_event};

use super::backend::{Backend, Results, Session};
use super::{Options, info};

/// How long a reply waits for its turn's result before answering `not-handled`.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A peer that does not read its replies for this long is disconnected.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The protocol version primd writes in its events' headers (the `wyoming` package
/// version whose schema it follows).
pub const VERSION: &str = "1.10.2";

pub fn run(stream: TcpStream, name: &str, opts: &Options, backend: &dyn Backend) {
    let mut out = match Replies::new(&stream) {
        Ok(o) => o,
        Err(e) => {
            log::warn!("{name}: {e}; closing");
            return;
        }
    };
    let mut session = match backend.open_session(name) {
        Ok(s) => s,
        Err(e) => {
            log::warn!("{name}: no session: {e:#}; closing");
            out.error(&format!("primd: {e:#}"), "no_session");
            return;
        }
    };
    let mut results = backend.results(name).unwrap_or_else(|e| {
        log::warn!("{name}: no results for the replies: {e:#}");
        None
    });
    let mut frames = FrameReader::new(BufReader::new(&stream), Payloads::Skip);
    let mut conn = Conn::new(name);
    loop {
        let frame = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => {
                log::info!("{name}: closed by the peer");
                break;
            }
            Err(e) => {
                log::warn!("{name}: {e}; closing the connection");
                out.error(&e.to_string(), "bad_frame");
                break;
            }
        };
        let ev = match frame.event() {
            Ok(ev) => ev,
            Err(e) => {
                log::warn!("{name}: {e}; event skipped");
                out.error(&e.to_string(), "bad_data");
                continue;
            }
        };
        let ok = match ev.kind.as_ref() {
            "describe" => out.event("info", &info::info_data(opts)),
            "ping" => {
                let data = ev
                    .text
                    .as_deref()
                    .map(|t| serde_json::json!({ "text": t }).to_string());
                out.event("pong", data.as_deref().unwrap_or("").as_bytes())
            }
            _ => match conn.feed(&ev, session.as_mut()) {
                Ok(Some(reply_turn)) => out.reply(reply_turn, results.as_deref_mut()),
                Ok(None) => true,
                Err(e) => {
                    log::warn!("{name}: {e:#}; closing");
                    out.error(&format!("primd: {e:#}"), "stopped");
                    false
                }
            },
        };
        if !ok {
            break;
        }
    }
}

/// A connection's turn state.
pub(super) struct Conn<'a> {
    name: &'a str,
    transcripts: Transcripts,
    /// The turn the next transcript belongs to.
    turn: u64,
}

/// What a `transcript` asks for: a reply about turn `Some(n)`, or a `not-handled` for
/// a transcript with no text (`Some(0)`).
pub(super) type ReplyTurn = u64;

impl<'a> Conn<'a> {
    pub(super) fn new(name: &'a str) -> Self {
        Conn {
            name,
            transcripts: Transcripts::new(),
            turn: 1,
        }
    }

    /// Feeds one event to the session; returns the turn to reply about when the event
    /// was a `transcript` (0: it ended no turn).
    pub(super) fn feed(
        &mut self,
        ev: &primd_input::wyoming::Event,
        session: &mut dyn Session,
    ) -> anyhow::Result<Option<ReplyTurn>> {
        let asks = ev.kind == "transcript";
        let turn = self.turn;
        match self.transcripts.feed(ev) {
            Some(Turn::Partial(t)) => session.partial(turn, t)?,
            Some(Turn::Final(t)) => {
                log::debug!("{}: turn {turn}: {t:?}", self.name);
                session.final_(turn, t)?;
                self.turn += 1;
                return Ok(asks.then_some(turn));
            }
            Some(Turn::Abandon) => self.turn += 1,
            None => {}
        }
        Ok(asks.then_some(0))
    }
}

/// The connection's write side: events written whole, bounded by [`WRITE_TIMEOUT`].
struct Replies {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Replies {
    fn new(stream: &TcpStream) -> anyhow::Result<Replies> {
        let stream = stream.try_clone()?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        Ok(Replies {
            stream,
            buf: Vec::with_capacity(1024),
        })
    }

    /// Writes one event; false when the peer is gone or does not read.
    fn event(&mut self, kind: &str, data: &[u8]) -> bool {
        self.buf.clear();
        write_event(&mut self.buf, kind, data, VERSION);
        match self.stream.write_all(&self.buf) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("wyoming: writing {kind}: {e}; closing");
                false
            }
        }
    }

    fn error(&mut self, text: &str, code: &str) {
        let data = serde_json::json!({ "text": text, "code": code }).to_string();
        self.event("error", data.as_bytes());
    }

    /// Answers a `transcript` as a `handle` service: one sentence (`handled`), or
    /// `not-handled` with the reason.
    fn reply(&mut self, turn: ReplyTurn, results: Option<&mut (dyn Results + 'static)>) -> bool {
        let mut context = None;
        let (kind, text) = if turn == 0 {
            ("not-handled", "primd: the transcript was empty".to_string())
        } else {
            match results.map(|r| r.final_of(turn, REPLY_TIMEOUT)) {
                Some(Some(r)) => match r.top {
                    Some((_, text)) if !r.low_evidence => {
                        context = r.context;
                        ("handled", text)
                    }
                    Some(_) => (
                        "not-handled",
                        "primd: no passage matches that well enough".to_string(),
                    ),
                    None => ("not-handled", "primd: no passage found".to_string()),
                },
                Some(None) => ("not-handled", "primd: no result in time".to_string()),
                None => (
                    "not-handled",
                    "primd: results are published on stdout and the socket API only".to_string(),
                ),
            }
        };
        let data = match context {
            Some(c) => serde_json::json!({ "text": text, "context": c }),
            None => serde_json::json!({ "text": text }),
        };
        self.event(kind, data.to_string().as_bytes())
    }
}
