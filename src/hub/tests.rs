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
    pub(crate) sig: Sender<i32>,
    pub(crate) res: Receiver<anyhow::Result<RunStats>>,
    pub(crate) stdout: Receiver<Vec<u8>>,
    pub(crate) _dir: tempfile::TempDir,
}

/// The daemon serving the hub, without an STT pipe.
pub(crate) fn daemon() -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let live = Arc::new(LiveIndex::fixed(index));
    let inbox = Inbox::new(live.clone());
    let hub = inbox.hub();
    let (sig_tx, sig_rx) = bounded(8);
    let (res_tx, res_rx) = bounded(1);
    let (out_tx, out_rx) = bounded(1024);
    std::thread::spawn(move || {
        let opts = DaemonOptions::default();
        let out = Box::new(Chunks(out_tx));
        let r = run_hub(&c, &opts, HashEmbedder, live, None, out, sig_rx, inbox);
        let _ = res_tx.send(r);
    });
    Daemon {
        hub,
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
