//! The hub in-process: the daemon with the fake embedder and the golden corpus, sessions
//! and clients through the public handles (the seam other inputs use). Waits are
//! bounded and wait for what the daemon did (a result delivered), never for time.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::*;
use crate::config::Layer1;
use crate::daemon::tests::{BOUND, Chunks, cfg, index};
use crate::daemon::{DaemonOptions, RunStats, run_hub};
use crate::embed::HashEmbedder;
use crate::index::live::LiveIndex;

pub(crate) struct Daemon {
    pub(crate) hub: Hub,
    /// The socket, once [`listen`] was called.
    pub(crate) socket: Option<(std::path::PathBuf, super::listen::Serving)>,
    pub(crate) sig: Sender<i32>,
    pub(crate) res: Receiver<anyhow::Result<RunStats>>,
    pub(crate) stdout: Receiver<Vec<u8>>,
    pub(crate) _dir: tempfile::TempDir,
}

/// The daemon serving the hub, without an STT pipe.
pub(crate) fn daemon() -> Daemon {
    daemon_with(None)
}

/// The daemon serving the hub, with `input` as the STT pipe (session `stt`).
pub(crate) fn daemon_with(input: Option<Box<dyn std::io::BufRead + Send>>) -> Daemon {
    daemon_opts(input, DaemonOptions::default())
}

pub(crate) fn daemon_opts(
    input: Option<Box<dyn std::io::BufRead + Send>>,
    opts: DaemonOptions,
) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let live = Arc::new(LiveIndex::fixed(index));
    let inbox = Inbox::new(live.clone());
    // Known before the daemon's thread starts (it stores the same): a command sent at
    // once must not race it.
    inbox
        .shared
        .stt_pipe
        .store(input.is_some(), std::sync::atomic::Ordering::Relaxed);
    let hub = inbox.hub();
    let (sig_tx, sig_rx) = bounded(8);
    let (res_tx, res_rx) = bounded(1);
    let (out_tx, out_rx) = bounded(1024);
    std::thread::spawn(move || {
        let out = Box::new(Chunks(out_tx));
        let r = run_hub(&c, &opts, HashEmbedder, live, input, out, sig_rx, inbox);
        let _ = res_tx.send(r);
    });
    Daemon {
        hub,
        socket: None,
        sig: sig_tx,
        res: res_rx,
        stdout: out_rx,
        _dir: dir,
    }
}

pub(crate) fn next(c: &Client, what: &str) -> serde_json::Value {
    let d = c
        .results()
        .recv_timeout(BOUND)
        .unwrap_or_else(|e| panic!("no result ({e}): {what}"));
    let mut buf = Vec::new();
    d.encode(&mut buf).unwrap();
    assert_eq!(buf.last(), Some(&b'\n'));
    serde_json::from_slice(&buf).unwrap()
}

#[test]
fn a_session_opened_in_process_is_answered_to_its_owner_and_subscribers() {
    let d = daemon();
    let owner = d.hub.connect("owner").unwrap();
    let mut watcher = d.hub.connect("watcher").unwrap();
    watcher.subscribe("*", false).unwrap();
    let mut s = owner.open_session("kiosk-1").unwrap();
    assert_eq!(s.partial(7, "what is the capital").unwrap(), Taken::Yes);
    s.partial(7, "what is the capital of france").unwrap();
    s.final_(7, "What is the capital of France?").unwrap();
    for c in [&owner, &watcher] {
        let v = next(c, "the final of turn 7");
        assert_eq!(v["type"], "final");
        assert_eq!(
            (v["session"].as_str(), v["turn"].as_u64()),
            (Some("kiosk-1"), Some(7))
        );
        assert_eq!(v["results"][0]["id"], "paris");
    }
    // An older turn is ignored; a feeding-only session reaches subscribers.
    assert_eq!(s.partial(6, "late").unwrap(), Taken::StaleTurn);
    let mut w = d.hub.open_session("wyoming-1").unwrap();
    w.partial(1, "play some jazz").unwrap();
    w.end_of_speech(1).unwrap();
    let v = next(&watcher, "the wyoming session's final");
    assert_eq!(
        (v["session"].as_str(), v["turn"].as_u64()),
        (Some("wyoming-1"), Some(1))
    );
    assert_eq!(v["text"], "play some jazz");
    assert_eq!(v["results"][0]["id"], "jazz");
    let stats = d.hub.stats();
    assert_eq!((stats.utterances, stats.sessions, stats.clients), (2, 2, 2));
    assert_eq!(stats.stale_turns_ignored, 1);
    assert!(
        d.stdout.try_recv().is_err(),
        "sessions are not written to stdout"
    );
    d.sig.send(signal_hook::consts::SIGTERM).unwrap();
    d.res.recv_timeout(BOUND).unwrap().unwrap();
}

impl Daemon {
    /// Listens on a Unix socket in the test's directory.
    fn listen(&mut self) {
        let path = self._dir.path().join("primd.sock");
        let addr = super::listen::ListenAddr::Unix(path.clone());
        let l = super::listen::bind(&addr, false).unwrap();
        self.socket = Some((path, l.serve(self.hub.clone()).unwrap()));
    }

    fn connect(&self) -> Conn {
        let path = &self.socket.as_ref().expect("listening").0;
        let s = std::os::unix::net::UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        let mut c = Conn {
            reader: std::io::BufReader::new(s.try_clone().unwrap()),
            writer: s,
        };
        let hello = c.next("the greeting");
        assert_eq!(
            (hello["type"].as_str(), hello["protocol"].as_u64()),
            (Some("hello"), Some(1))
        );
        assert_eq!(hello["max_frame"], 65536);
        c
    }

    fn stop(self) {
        self.sig.send(signal_hook::consts::SIGTERM).unwrap();
        self.res.recv_timeout(BOUND).unwrap().unwrap();
    }
}

/// A protocol client over a real socket.
struct Conn {
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    writer: std::os::unix::net::UnixStream,
}

impl Conn {
    fn send(&mut self, line: &str) {
        use std::io::Write;
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.writer.write_all(bytes).unwrap();
    }

    /// The next line (bounded wait: a hang fails the test).
    fn next(&mut self, what: &str) -> serde_json::Value {
        use std::io::BufRead;
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("no line ({e}): {what}"));
        assert!(n > 0, "connection closed: {what}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The next line that is not a speculative result.
    fn next_final(&mut self, what: &str) -> serde_json::Value {
        loop {
            let v = self.next(what);
            if v["type"] != "speculative" {
                return v;
            }
        }
    }

    fn command(&mut self, cmd: &str) -> serde_json::Value {
        self.send(cmd);
        self.next(cmd)
    }
}

fn tag(v: &serde_json::Value) -> (String, u64) {
    (
        v["session"].as_str().unwrap_or("?").to_string(),
        v["turn"].as_u64().unwrap_or(u64::MAX),
    )
}

#[test]
fn two_clients_with_interleaved_turns_each_get_their_own_results() {
    let mut d = daemon();
    d.listen();
    let (mut a, mut b) = (d.connect(), d.connect());
    a.send(r#"{"session":"a","turn":1,"partial":"what is the capital"}"#);
    b.send(r#"{"session":"b","turn":5,"partial":"play some jazz"}"#);
    a.send(r#"{"session":"a","turn":1,"partial":"what is the capital of france"}"#);
    b.send(r#"{"session":"b","turn":5,"final":"play some jazz music"}"#);
    a.send(r#"{"session":"a","turn":1,"final":"What is the capital of France?"}"#);
    let vb = b.next("b's final");
    assert_eq!(
        (vb["type"].as_str(), tag(&vb)),
        (Some("final"), ("b".into(), 5))
    );
    assert_eq!(vb["results"][0]["id"], "jazz");
    let va = a.next("a's final");
    assert_eq!(
        (va["type"].as_str(), tag(&va)),
        (Some("final"), ("a".into(), 1))
    );
    assert_eq!(va["results"][0]["id"], "paris");
    assert_ne!(
        va["utterance"], vb["utterance"],
        "primd's own counter, over all sessions"
    );
    // Neither got the other's: the next line of each is the reply to a ping.
    assert_eq!(a.command(r#"{"cmd":"ping","id":1}"#)["id"], 1);
    assert_eq!(b.command(r#"{"cmd":"ping","id":2}"#)["id"], 2);
    // A session belongs to the connection that opened it.
    b.send(r#"{"session":"a","turn":9,"partial":"hijack"}"#);
    assert_eq!(b.next("session_owned")["code"], "session_owned");
    d.stop();
}

#[test]
fn bad_frames_get_error_replies_and_the_connection_and_others_go_on() {
    let mut d = daemon();
    d.listen();
    let (mut bad, mut good) = (d.connect(), d.connect());
    bad.send("this is not json");
    let e = bad.next("bad_json");
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str(), e["line"].as_u64()),
        (Some("error"), Some("bad_json"), Some(1))
    );
    let mut huge = br#"{"session":"x","turn":1,"partial":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 70_000));
    huge.extend(b"\"}\n");
    bad.send_bytes(&huge);
    assert_eq!(bad.next("frame_too_large")["code"], "frame_too_large");
    bad.send_bytes(b"{\"cmd\":\"pi\xffng\"}\n");
    assert_eq!(bad.next("bad_utf8")["code"], "bad_utf8");
    bad.send(r#"{"session":"stt","turn":1,"partial":"x"}"#);
    assert_eq!(bad.next("reserved")["code"], "reserved_session");
    let e = bad.command(r#"{"cmd":"fly","id":"x"}"#);
    assert_eq!(
        (e["code"].as_str(), e["id"].as_str()),
        (Some("unknown_cmd"), Some("x"))
    );
    // Still open, still answered; and the other client never noticed.
    good.send(r#"{"session":"g","turn":1,"final":"turn off the kitchen lights"}"#);
    assert_eq!(good.next("good's final")["results"][0]["id"], "lights");
    bad.send(r#"{"session":"x","turn":1,"final":"play some jazz"}"#);
    let v = bad.next("bad's final after the errors");
    assert_eq!(
        (v["type"].as_str(), tag(&v)),
        (Some("final"), ("x".into(), 1))
    );
    d.stop();
}

#[test]
fn a_refused_transcript_names_its_session_and_turn() {
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    c.send(r#"{"session":"k","turn":4,"final":"x","context_tokens":-1}"#);
    let e = c.next("a bad context_tokens");
    assert_eq!(
        (e["code"].as_str(), tag(&e), e["line"].as_u64()),
        (Some("bad_message"), ("k".into(), 4), Some(1))
    );
    c.send(r#"{"session":"k","turn":"4","final":"x"}"#);
    let e = c.next("a bad turn");
    assert_eq!(
        (e["session"].as_str(), e.get("turn")),
        (Some("k"), None),
        "{e}"
    );
    // The connection goes on.
    c.send(r#"{"session":"k","turn":6,"final":"play some jazz"}"#);
    assert_eq!(
        c.next("the final after the errors")["results"][0]["id"],
        "jazz"
    );
    d.stop();
}

#[test]
fn a_transcript_without_its_session_is_told_so() {
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    // As one without its turn is: the message says which key is missing.
    let e = c.command(r#"{"turn":4,"final":"what is the capital of france"}"#);
    assert_eq!(e["code"], "bad_message");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("\"session\" is missing"), "{e}");
    d.stop();
}

#[test]
fn a_command_carrying_a_transcript_is_refused_not_half_done() {
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    let e = c.command(r#"{"cmd":"ping","id":1,"session":"k","turn":5,"final":"play some jazz"}"#);
    assert_eq!(
        (
            e["type"].as_str(),
            e["code"].as_str(),
            e["cmd"].as_str(),
            e["id"].as_u64()
        ),
        (Some("error"), Some("bad_message"), Some("ping"), Some(1))
    );
    assert!(e["message"].as_str().unwrap().contains("\"final\""), "{e}");
    // Nothing of it was done: no final for turn 5 arrives before the next reply.
    assert_eq!(c.command(r#"{"cmd":"ping","id":2}"#)["id"], 2);
    d.stop();
}

#[test]
fn reset_of_stt_without_a_pipe_is_refused() {
    // No pipe (--input none): there is no `stt` conversation to forget (with a pipe it
    // is forgotten: conversation_tests, `the_pipe_is_one_conversation_and_reset_forgets_it`).
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    let e = c.command(r#"{"cmd":"reset","session":"stt"}"#);
    assert_eq!(
        (e["type"].as_str(), e["code"].as_str()),
        (Some("error"), Some("unknown_session"))
    );
    assert!(e["message"].as_str().unwrap().contains("no pipe"), "{e}");
    d.stop();
}

#[test]
fn an_empty_final_has_no_results_and_a_context_with_no_best() {
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    for (turn, text) in [(1, ""), (2, "   "), (3, " ?! ")] {
        c.send(&format!(
            r#"{{"session":"e","turn":{turn},"final":"{text}","context_tokens":64}}"#
        ));
        let v = c.next("an empty final");
        assert_eq!(
            (v["type"].as_str(), tag(&v)),
            (Some("final"), ("e".into(), turn))
        );
        assert_eq!(v["path"], "empty", "{v}");
        assert_eq!(v["results"], serde_json::json!([]), "{v}");
        assert_eq!(v["evidence"], "low");
        let ctx = &v["context"];
        assert_eq!(ctx["spans"], serde_json::json!([]), "{v}");
        assert_eq!(
            (ctx["text"].as_str(), ctx["tokens"].as_u64()),
            (Some(""), Some(0))
        );
        assert!(ctx["best"].is_null(), "no best into an empty list: {v}");
    }
    d.stop();
}

/// Every key of `v` as a path: `results[].id`, `context.spans[].start`.
fn key_paths(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(p.clone());
                key_paths(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_key_of_a_final_is_in_the_field_reference() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/results.md")).unwrap();
    let mut d = daemon();
    d.listen();
    let mut c = d.connect();
    c.send(
        r#"{"session":"k","turn":1,"final":"What is the capital of France?","context_tokens":64}"#,
    );
    let v = c.next("a final");
    assert!(
        v["context"]["spans"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{v}"
    );
    assert!(v.get("conversation").is_some(), "{v}");
    let mut paths = Vec::new();
    key_paths(&v, "", &mut paths);
    let missing: Vec<_> = paths
        .iter()
        .filter(|p| !doc.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/results.md does not name {missing:?}"
    );
    d.stop();
}

#[test]
fn turn_rules_newer_abandons_older_is_ignored_end_of_speech_ends() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    a.send(r#"{"session":"k","turn":1,"partial":"what is the capital of france"}"#);
    a.send(r#"{"session":"k","turn":2,"partial":"play some jazz"}"#);
    a.send(r#"{"session":"k","turn":1,"final":"what is the capital of france"}"#);
    a.send(r#"{"session":"k","turn":2,"end_of_speech":true}"#);
    let v = a.next("turn 2's result");
    assert_eq!(
        tag(&v),
        ("k".into(), 2),
        "turn 1 was abandoned: no result for it"
    );
    assert_eq!(
        (v["text"].as_str(), v["results"][0]["id"].as_str()),
        (Some("play some jazz"), Some("jazz"))
    );
    a.send(r#"{"session":"k","turn":2,"final":"again"}"#); // ended: ignored
    a.send(r#"{"session":"k","turn":3,"final":"turn off the kitchen lights"}"#);
    assert_eq!(tag(&a.next("turn 3's result")), ("k".into(), 3));
    let s = a.command(r#"{"cmd":"stats"}"#);
    assert_eq!(s["type"], "reply");
    assert_eq!(s["stats"]["stale_turns_ignored"], 2);
    assert_eq!(s["stats"]["utterances"], 2);
    d.stop();
}

#[test]
fn a_client_that_never_reads_is_disconnected_and_costs_the_others_nothing() {
    let mut d = daemon();
    d.listen();
    let mut sleeper = d.connect();
    assert_eq!(
        sleeper.command(r#"{"cmd":"subscribe","session":"*"}"#)["ok"],
        true
    );
    let mut a = d.connect();
    // Long finals, so that the sleeper's socket buffer and queue fill quickly.
    let long = "play some jazz music ".repeat(90);
    for turn in 1..=400 {
        a.send(&format!(
            r#"{{"session":"a","turn":{turn},"final":"{long}"}}"#
        ));
        let v = a.next("a's final");
        assert_eq!(tag(&v), ("a".into(), turn), "every final answered");
    }
    let s = a.command(r#"{"cmd":"stats"}"#)["stats"].clone();
    assert_eq!(s["disconnects_overflow"], 1, "{s}");
    assert_eq!(s["utterances"], 400);
    // The sleeper's line, while its connection is still being closed: the one final
    // that did not fit, then it was let go.
    for c in s["clients_detail"].as_array().unwrap() {
        let expected = if c["id"] == 1 { 1 } else { 0 };
        assert_eq!(c["finals_dropped"], expected, "{c}");
    }
    // The sleeper gets what was queued before, then the end of the connection.
    use std::io::BufRead;
    let (mut got, mut line) = (0, String::new());
    while sleeper.reader.read_line(&mut line).unwrap_or(0) > 0 {
        got += 1;
        line.clear();
    }
    assert!(got > 1 && got < 400, "{got}");
    d.stop();
}

#[test]
fn a_client_flooding_partials_does_not_starve_another() {
    let mut d = daemon();
    d.listen();
    // The flooder writes partials as fast as the socket takes them and never reads.
    let flood = d.connect();
    let mut w = flood.writer.try_clone().unwrap();
    let flooder = std::thread::spawn(move || {
        use std::io::Write;
        let mut sent = 0;
        for i in 0..20_000 {
            let line = format!(
                "{{\"session\":\"flood\",\"turn\":1,\"partial\":\"play some jazz {i}\"}}\n"
            );
            if w.write_all(line.as_bytes()).is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    let mut b = d.connect();
    for turn in 1..=20 {
        b.send(&format!(
            r#"{{"session":"b","turn":{turn},"partial":"what is the capital"}}"#
        ));
        b.send(&format!(
            r#"{{"session":"b","turn":{turn},"final":"what is the capital of france"}}"#
        ));
        let v = b.next_final("b's final while another client floods");
        assert_eq!(tag(&v), ("b".into(), turn));
        assert_eq!(v["results"][0]["id"], "paris", "{v}");
    }
    assert_eq!(
        flooder.join().unwrap(),
        20_000,
        "the flood was read, not refused"
    );
    // Every partial of the flood was taken (newest wins: most superseded unseen), and
    // the flooding session is still open and answerable.
    let mut flood = flood;
    flood.send(r#"{"session":"flood","turn":1,"final":"play some jazz"}"#);
    let v = flood.next_final("the flooder's own final");
    assert_eq!(tag(&v), ("flood".into(), 1));
    let s = b.command(r#"{"cmd":"stats"}"#)["stats"].clone();
    assert_eq!(s["utterances"], 21, "{s}");
    d.stop();
}

#[test]
fn a_client_that_disconnects_mid_turn_abandons_it() {
    let mut d = daemon();
    d.listen();
    let mut watcher = d.connect();
    watcher.command(r#"{"cmd":"subscribe","session":"*"}"#);
    let mut gone = d.connect();
    gone.send(r#"{"session":"gone","turn":1,"partial":"what is the capital of france"}"#);
    assert_eq!(
        gone.command(r#"{"cmd":"ping"}"#)["ok"],
        true,
        "the partial was taken"
    );
    drop(gone);
    let mut a = d.connect();
    // Wait for the disconnect to be seen (no signal for it: poll the counters).
    let deadline = std::time::Instant::now() + BOUND;
    while d.hub.stats().clients != 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the disconnect was never seen"
        );
        std::thread::yield_now();
    }
    a.send(r#"{"session":"a","turn":1,"final":"play some jazz"}"#);
    assert_eq!(tag(&a.next("a's final")), ("a".into(), 1));
    let v = watcher.next("the watcher sees a's final, not the abandoned turn");
    assert_eq!(tag(&v), ("a".into(), 1));
    assert_eq!(d.hub.stats().sessions, 1);
    d.stop();
}

#[test]
fn reload_and_stats_over_the_socket() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    let r = a.command(r#"{"cmd":"reload","id":7}"#);
    assert_eq!(
        (r["type"].as_str(), r["ok"].as_bool(), r["id"].as_u64()),
        (Some("reply"), Some(true), Some(7))
    );
    assert_eq!(
        (r["staged"].as_bool(), r["passages"].as_u64()),
        (Some(true), Some(6))
    );
    a.send(r#"{"session":"a","turn":1,"final":"play some jazz"}"#);
    assert_eq!(a.next("after the reload")["results"][0]["id"], "jazz");
    let s = a.command(r#"{"cmd":"stats"}"#);
    assert_eq!(
        s["stats"]["swaps"], 1,
        "swapped in before the next utterance"
    );
    assert_eq!(s["stats"]["index"]["passages"], 6);
    // A broken file is refused; the old index keeps serving.
    let path = d.hub.index().path().to_path_buf();
    // Published by rename, as `primd install-index` does (never written in place).
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, b"not an index").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let r = a.command(r#"{"cmd":"reload"}"#);
    assert_eq!(
        (r["type"].as_str(), r["code"].as_str(), r["cmd"].as_str()),
        (Some("error"), Some("reload_failed"), Some("reload"))
    );
    a.send(r#"{"session":"a","turn":2,"final":"what is the capital of france"}"#);
    assert_eq!(
        a.next("after the refused reload")["results"][0]["id"],
        "paris"
    );
    let s = a.command(r#"{"cmd":"stats"}"#)["stats"].clone();
    assert_eq!(
        (
            s["swaps"].as_u64(),
            s["utterances"].as_u64(),
            s["sessions"].as_u64(),
            s["clients"].as_u64()
        ),
        (Some(1), Some(2), Some(1), Some(1))
    );
    let me = &s["clients_detail"][0];
    assert_eq!(
        (
            me["sessions"].as_u64(),
            me["delivered"].as_u64(),
            me["finals_dropped"].as_u64()
        ),
        (Some(1), Some(2), Some(0))
    );
    d.stop();
}

#[test]
fn a_subscriber_gets_the_stt_pipe_s_results_with_their_tags() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    let mut d = daemon_with(Some(Box::new(std::io::BufReader::new(reader))));
    d.listen();
    let mut sub = d.connect();
    let r = sub.command(r#"{"cmd":"subscribe","session":"stt","speculative":true}"#);
    assert_eq!(
        (r["ok"].as_bool(), r["session"].as_str()),
        (Some(true), Some("stt"))
    );
    use std::io::Write;
    writer
        .write_all(b"{\"partial\": \"what is the capital of france\"}\n{\"final\": \"What is the capital of France?\"}\n{\"partial\": \"play some jazz\"}\n")
        .unwrap();
    let v = sub.next_final("stt's first final");
    assert_eq!(
        (v["type"].as_str(), tag(&v)),
        (Some("final"), ("stt".into(), 1))
    );
    assert_eq!(v["results"][0]["id"], "paris");
    // stdout still gets the pipe's lines, untagged.
    let line = d.stdout.recv_timeout(BOUND).unwrap();
    let out: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        (out["type"].as_str(), out.get("session")),
        (Some("final"), None)
    );
    // The end of the pipe finishes its open utterance and the daemon serves on.
    drop(writer);
    let v = sub.next_final("stt's second utterance, ended by the end of input");
    assert_eq!(
        (tag(&v), v["text"].as_str()),
        (("stt".into(), 2), Some("play some jazz"))
    );
    let mut a = d.connect();
    a.send(r#"{"session":"a","turn":1,"final":"turn off the kitchen lights"}"#);
    assert_eq!(
        a.next("served after the pipe ended")["results"][0]["id"],
        "lights"
    );
    d.stop();
}

#[test]
fn sessions_are_bounded() {
    let d = daemon();
    let mut open: Vec<Session> = (0..MAX_SESSIONS)
        .map(|i| d.hub.open_session(&format!("s{i}")).unwrap())
        .collect();
    assert_eq!(
        d.hub.open_session("one-too-many").err(),
        Some(HubError::TooManySessions)
    );
    assert_eq!(
        d.hub.open_session("s3").err(),
        Some(HubError::SessionOwned("s3".into()))
    );
    open.pop();
    let mut again = d.hub.open_session("one-more").unwrap();
    assert_eq!(again.partial(1, "x").unwrap(), Taken::Yes);
    drop(open);
    d.stop();
}

#[test]
fn a_reload_does_not_wait_forever_for_a_turn_left_open() {
    let opts = DaemonOptions {
        swap_wait: std::time::Duration::ZERO,
        ..Default::default()
    };
    let mut d = daemon_opts(None, opts);
    d.listen();
    let (mut idle, mut a) = (d.connect(), d.connect());
    idle.send(r#"{"session":"open","turn":1,"partial":"what is the capital of france"}"#);
    assert_eq!(idle.command(r#"{"cmd":"ping"}"#)["ok"], true);
    assert_eq!(a.command(r#"{"cmd":"reload"}"#)["ok"], true);
    a.send(r#"{"session":"a","turn":1,"final":"play some jazz"}"#);
    assert_eq!(a.next("a's final")["results"][0]["id"], "jazz");
    assert_eq!(d.hub.stats().swaps, 1, "swapped with a turn open");
    // The open turn lost its speculation with the old index, not its words.
    idle.send(r#"{"session":"open","turn":1,"end_of_speech":true}"#);
    let v = idle.next("the open turn's final");
    assert_eq!(
        (v["text"].as_str(), v["results"][0]["id"].as_str()),
        (Some("what is the capital of france"), Some("paris"))
    );
    d.stop();
}

#[test]
fn routing_a_partial_and_its_speculative_result_allocates_nothing() {
    use crate::daemon::Inbound;
    use crate::stream::tests::alloc_count;
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let inbox = Inbox::new(Arc::new(LiveIndex::fixed(index.clone())));
    let hub = inbox.hub();
    let mut table = table::Table::new(inbox.shared.clone());
    // Registrations may allocate (once per client, session, subscription).
    let mut client = hub.connect("c").unwrap();
    client.subscribe("*", true).unwrap();
    let _session = client.open_session("k").unwrap();
    let lane = inbox
        .rx
        .try_iter()
        .filter_map(|m| match m {
            Inbound::Hub(m) => table.apply(m),
            _ => None,
        })
        .find_map(|n| match n {
            crate::scheduler::Next::Lane(l, _, _) => Some(l),
            _ => None,
        })
        .unwrap();
    let mut candidates = heapless::Vec::new();
    candidates.extend([0u32, 1]);
    let msg = Outbound::Speculative {
        utterance: 1,
        partial: crate::input::to_text("what is the").0,
        candidates,
    };
    let event = |text: &str| crate::input::Event {
        kind: crate::input::EventKind::Partial,
        text: crate::input::to_text(text).0,
        t: None,
        received: std::time::Instant::now(),
        line: 0,
    };
    table.deliver(lane, 1, &index, &msg); // warm-up
    client.results().try_recv().unwrap();
    let ev = event("what is the capital");
    let before = alloc_count::count();
    let next = table.apply(HubMsg::Transcript { lane, turn: 1, ev });
    let wanted = table.wants_speculative(lane);
    table.deliver(lane, 1, &index, &msg);
    assert_eq!(alloc_count::count() - before, 0, "allocations per partial");
    assert!(matches!(next, Some(crate::scheduler::Next::Lane(l, _, _)) if l == lane));
    assert!(wanted);
    let d = client.results().try_recv().unwrap();
    assert_eq!((d.session.as_str(), d.turn), ("k", 1));
}

#[path = "conversation_tests.rs"]
mod conversation_tests;
