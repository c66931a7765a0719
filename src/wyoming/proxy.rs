//! primd as a transparent Wyoming proxy in front of a speech-to-text service.
//!
//! ```text
//!  Home Assistant ──frames──▶ relay ──same bytes──▶ speech service (faster-whisper, ...)
//!                 ◀──same bytes── relay ◀──frames──
//!                                   │ transcript events (try_send, never waits)
//!                                   ▼
//!                           feeder ──▶ session wyoming-N ──▶ retriever ──▶ socket API, stdout
//! ```
//!
//! Each direction is a relay thread that cuts the stream into frames (the fuzzed
//! parser, with its limits) and writes each frame's bytes exactly as received: nothing
//! is re-serialised, so whatever the two ends agree on (versions, fields primd does not
//! know, audio payloads) passes unchanged. The service → HA relay also reads the
//! transcript events and hands the turns to a feeder thread on a bounded queue with
//! `try_send`, before forwarding the frame: retrieval starts as early as possible, a
//! slow Home Assistant delays nobody's retrieval, and a busy retriever never delays the
//! relay (a partial that finds the queue full is dropped; the next one supersedes it).
//!
//! Ends: a service that cannot be reached, or that drops, closes the HA connection
//! (logged with the reason); HA closing its side closes the service's write side, and
//! the service's answer still reaches HA until the service closes. A broken frame
//! (framing lost, a limit) closes both. Other connections and the daemon go on.

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crossbeam_channel::{Receiver, TrySendError, bounded};
use primd_input::Text;
use primd_input::wyoming::{Frame, FrameReader, Payloads, Transcripts, Turn};

use super::backend::{Backend, Session};

/// How long connecting to the speech service may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Turns waiting between the relay and the feeder.
pub const FEED_QUEUE: usize = 32;

/// Read buffer per direction.
const READ_BUFFER: usize = 64 * 1024;

/// What the relay hands the feeder (by value: a turn's text is inline, no allocation).
enum Op {
    Partial(u64, Text),
    Final(u64, Text),
}

pub fn run(ha: TcpStream, name: &str, upstream: &str, backend: &dyn Backend) {
    let service = match connect(upstream) {
        Ok(s) => s,
        Err(e) => {
            log::warn!(
                "{name}: speech service {upstream} unreachable ({e}); closing the Home Assistant connection"
            );
            let _ = ha.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = service.set_nodelay(true);
    log::info!("{name}: relaying to {upstream}");
    let session = match backend.open_session(name) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("{name}: no session ({e:#}): relaying without retrieval");
            None
        }
    };
    let (tx, rx) = bounded::<Op>(FEED_QUEUE);
    std::thread::scope(|s| {
        if let Some(session) = session {
            s.spawn(move || feed(rx, session, name));
        }
        s.spawn(|| {
            let end = relay(&ha, &service, |_| {});
            finish(name, "Home Assistant", end, &ha, &service);
        });
        let mut transcripts = Transcripts::new();
        let mut turn = 1u64;
        let mut dropped = 0u64;
        let end = relay(&service, &ha, |frame| {
            let Ok(ev) = frame.event() else {
                return; // forwarded all the same
            };
            let op = match transcripts.feed(&ev) {
                Some(Turn::Partial(t)) => Op::Partial(turn, primd_input::to_text(t).0),
                Some(Turn::Final(t)) => {
                    let op = Op::Final(turn, primd_input::to_text(t).0);
                    turn += 1;
                    op
                }
                Some(Turn::Abandon) => {
                    turn += 1;
                    return;
                }
                None => return,
            };
            if let Err(TrySendError::Full(op)) = tx.try_send(op) {
                dropped += 1;
                if let Op::Final(t, _) = op {
                    log::warn!("{name}: retriever busy: the final of turn {t} was dropped");
                }
            }
        });
        drop(tx);
        if dropped > 0 {
            log::info!("{name}: {dropped} transcript events not retrieved (retriever busy)");
        }
        finish(name, "the speech service", end, &service, &ha);
    });
    log::info!("{name}: closed");
}

fn connect(upstream: &str) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in upstream.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("resolves to no address")))
}

/// How a relay direction ended.
enum End {
    /// The sender closed its side between frames.
    Closed,
    /// Anything else (a read or write error, a broken frame): the reason.
    Failed(String),
}

/// Relays frames from `from` to `to` until one side ends; `seen` looks at each frame
/// before it is forwarded.
fn relay(from: &TcpStream, mut to: &TcpStream, mut seen: impl FnMut(&Frame)) -> End {
    let mut frames = FrameReader::new(BufReader::with_capacity(READ_BUFFER, from), Payloads::Keep);
    loop {
        match frames.next_frame() {
            Ok(Some(frame)) => {
                seen(&frame);
                if let Err(e) = to.write_all(frame.raw) {
                    return End::Failed(format!("forwarding frame {}: {e}", frame.number));
                }
            }
            Ok(None) => return End::Closed,
            Err(e) => return End::Failed(e.to_string()),
        }
    }
}

/// After a direction ended: a clean close is passed on as a close of the write side
/// (what was said the other way still arrives), when the service closed, or anything
/// failed, both connections are closed.
fn finish(name: &str, sender: &str, end: End, from: &TcpStream, to: &TcpStream) {
    match end {
        End::Closed if sender == "Home Assistant" => {
            log::info!("{name}: Home Assistant closed its side");
            let _ = to.shutdown(Shutdown::Write);
        }
        End::Closed => {
            log::info!("{name}: {sender} closed the connection; closing Home Assistant's");
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
        End::Failed(reason) => {
            log::warn!("{name}: from {sender}: {reason}; closing both connections");
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}

/// The feeder thread: turns → the session, at the retriever's pace.
fn feed(rx: Receiver<Op>, mut session: Box<dyn Session>, name: &str) {
    for op in rx {
        let r = match &op {
            Op::Partial(turn, t) => session.partial(*turn, t),
            Op::Final(turn, t) => {
                log::debug!("{name}: turn {turn}: {:?}", t.as_str());
                session.final_(*turn, t)
            }
        };
        if let Err(e) = r {
            log::warn!("{name}: {e:#}; no more retrieval on this connection");
            return;
        }
    }
}
