//! The server's turn bookkeeping and the proxy's relay, with a recording backend and
//! plain sockets (no model): what reaches the session, what reaches the peers, and that
//! a retriever that never takes anything does not hold the relay up.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::backend::{Backend, Results, Session};
use super::proxy;

/// Every session operation, as text: "partial 1 what is", "final 1 ...".
#[derive(Clone, Default)]
struct Recorder {
    ops: Arc<Mutex<Vec<String>>>,
    /// Session operations block until this is opened (a busy retriever).
    gate: Option<Arc<(Mutex<bool>, std::sync::Condvar)>>,
}

struct Recording(Recorder);

impl Recording {
    fn op(&mut self, s: String) -> anyhow::Result<()> {
        if let Some(g) = &self.0.gate {
            let mut open = g.0.lock().unwrap();
            while !*open {
                open = g.1.wait(open).unwrap();
            }
        }
        self.0.ops.lock().unwrap().push(s);
        Ok(())
    }
}

impl Session for Recording {
    fn partial(&mut self, turn: u64, text: &str) -> anyhow::Result<()> {
        self.op(format!("partial {turn} {text}"))
    }
    fn final_(&mut self, turn: u64, text: &str) -> anyhow::Result<()> {
        self.op(format!("final {turn} {text}"))
    }
    fn end_of_speech(&mut self, turn: u64) -> anyhow::Result<()> {
        self.op(format!("end {turn}"))
    }
}

impl Backend for Recorder {
    fn open_session(&self, _name: &str) -> anyhow::Result<Box<dyn Session>> {
        Ok(Box::new(Recording(self.clone())))
    }
    fn results(&self, _session: &str) -> anyhow::Result<Option<Box<dyn Results>>> {
        Ok(None)
    }
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/wyoming")
            .join(name),
    )
    .unwrap()
}

/// A fake speech service: reads one request line, then sends `reply` and closes.
fn service(reply: Vec<u8>) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap() == 1 {
            got.push(b[0]);
            if b[0] == b'\n' {
                break;
            }
        }
        s.write_all(&reply).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let _ = s.read_to_end(&mut got);
        got
    });
    (addr, h)
}

/// Runs the proxy for one HA connection; returns what HA received.
fn proxy_once(backend: Recorder, upstream: &str, request: &[u8]) -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut ha = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (conn, _) = l.accept().unwrap();
    let upstream = upstream.to_string();
    std::thread::spawn(move || proxy::run(conn, "wyoming-1", &upstream, &backend));
    // A guard against a hung relay, not a timing assertion.
    ha.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    ha.write_all(request).unwrap();
    let mut got = Vec::new();
    ha.read_to_end(&mut got)
        .expect("the relay forwards to the end");
    got
}

#[test]
fn the_proxy_relays_bytes_unchanged_and_feeds_the_turns() {
    let reply = fixture("asr-streaming.bin");
    let (addr, svc) = service(reply.clone());
    let rec = Recorder::default();
    let request = b"{\"type\": \"describe\", \"version\": \"1.10.2\"}\n";
    let got = proxy_once(rec.clone(), &addr, request);
    assert_eq!(got, reply, "HA gets the service's bytes unchanged");
    assert_eq!(svc.join().unwrap(), request, "the service gets HA's");
    // The feeder may still be draining when HA sees the close.
    for _ in 0..600 {
        if rec.ops.lock().unwrap().len() == 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        *rec.ops.lock().unwrap(),
        [
            "partial 1 what is",
            "partial 1 what is the capital",
            "partial 1 what is the capital of france",
            "final 1 What is the capital of France?"
        ]
    );
}

#[test]
fn a_retriever_that_takes_nothing_does_not_hold_the_relay_up() {
    // 100 turns of chunks: far more than the feed queue holds.
    let mut reply = Vec::new();
    for i in 0..100 {
        for kind in ["transcript-start", "transcript-stop"] {
            let chunk =
                format!("{{\"type\":\"transcript-chunk\",\"data\":{{\"text\":\"word{i} \"}}}}\n");
            if kind == "transcript-stop" {
                reply.extend_from_slice(chunk.as_bytes());
            }
            reply.extend_from_slice(format!("{{\"type\":\"{kind}\"}}\n").as_bytes());
        }
    }
    let (addr, svc) = service(reply.clone());
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let rec = Recorder {
        gate: Some(gate.clone()),
        ..Recorder::default()
    };
    let got = proxy_once(rec.clone(), &addr, b"{\"type\":\"transcribe\"}\n");
    assert_eq!(
        got, reply,
        "everything relayed while the retriever took nothing"
    );
    svc.join().unwrap();
    // Let the feeder go: what it had queued arrives, in order, the rest was dropped.
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    for _ in 0..600 {
        if rec.ops.lock().unwrap().len() >= super::proxy::FEED_QUEUE {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ops = rec.ops.lock().unwrap().clone();
    assert!(
        ops.len() >= super::proxy::FEED_QUEUE && ops.len() < 200,
        "{}",
        ops.len()
    );
    assert_eq!(ops[0], "partial 1 word0");
}

#[test]
fn the_server_numbers_turns_and_asks_replies_only_for_transcripts() {
    use primd_input::wyoming::Event;
    use std::borrow::Cow;
    let rec = Recorder::default();
    let mut session = Recording(rec.clone());
    let mut conn = super::server::Conn::new("wyoming-1");
    let mut replies = Vec::new();
    for (kind, text) in [
        ("transcript-chunk", Some("half")),
        ("transcript-start", None), // abandons turn 1
        ("transcript-chunk", Some("lights off")),
        ("transcript-stop", None), // final of turn 2, no reply asked
        ("transcript", Some("what time is it")), // turn 3, reply
        ("transcript", Some("")),  // nothing to look up: reply 0
        ("audio-chunk", None),
    ] {
        let ev = Event {
            kind: Cow::Borrowed(kind),
            text: text.map(Cow::Borrowed),
        };
        replies.push(conn.feed(&ev, &mut session).unwrap());
    }
    assert_eq!(
        replies,
        [None, None, None, None, Some(3), Some(0), None],
        "replies asked"
    );
    assert_eq!(
        *rec.ops.lock().unwrap(),
        [
            "partial 1 half",
            "partial 2 lights off",
            "final 2 lights off",
            "final 3 what time is it"
        ]
    );
}
