//! Replacing the index under a running daemon: SIGHUP reloads (good files swap in at an
//! utterance boundary, bad ones are refused and the old index keeps serving),
//! `primd install-index`, and a `cp` over the live file (which used to kill the daemon
//! with SIGBUS). Binary-level with the real model, plus one in-process test with the
//! fake embedder.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use primd::config::{self, Layer1};
use primd::daemon::{self, DaemonOptions};
use primd::embed::{DIM, Embed, HashEmbedder};
use primd::index::live::{LiveIndex, Serve};
use primd::index::{IndexMeta, write_index};

/// Generous: a debug build on a loaded machine.
const WAIT: Duration = Duration::from_secs(120);
const QUESTION: &str = "What is the capital of France?";

/// The first `n` passages of the demo corpus (a different corpus from the golden one:
/// no passage id in common).
fn demo_subset(dir: &Path, n: usize) -> PathBuf {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/corpus.jsonl"))
            .unwrap();
    let p = dir.join("demo-subset.jsonl");
    let lines: Vec<&str> = text.lines().take(n).collect();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn ids_of(corpus: &Path) -> HashSet<String> {
    std::fs::read_to_string(corpus)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Two indexes of different corpora built with the real model: (A golden, B demo subset,
/// B's ids). A answers QUESTION with "paris"; B has no such passage.
fn two_real_indexes(dir: &Path) -> (PathBuf, PathBuf, HashSet<String>) {
    let (da, db) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let a = common::build_real_index(&da);
    let corpus_b = demo_subset(&db, 10);
    let b = common::build_index_of(&corpus_b, &db);
    (a, b, ids_of(&corpus_b))
}

/// A running `primd run`: its stdin, its stdout lines, its log so far.
struct Daemon {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<serde_json::Value>,
    log: Arc<Mutex<String>>,
}

impl Daemon {
    fn spawn(index: &Path, extra: &[&str]) -> Daemon {
        let mut child = common::spawn_run(env!("CARGO_BIN_EXE_primd"), index, extra);
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                let v = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let log2 = log.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                let mut g = log2.lock().unwrap();
                g.push_str(&l);
                g.push('\n');
            }
        });
        Daemon {
            child,
            stdin,
            lines,
            log,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next final result.
    fn next_final(&self) -> serde_json::Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["type"] == "final" => return v,
                Ok(_) => {}
                Err(e) => panic!("no final ({e:?}); log:\n{}", self.log()),
            }
        }
    }

    /// Asks QUESTION as one final; returns the top result's id.
    fn ask(&mut self) -> String {
        self.send(&format!("{{\"final\": \"{QUESTION}\"}}"));
        let v = self.next_final();
        v["results"][0]["id"].as_str().unwrap().to_string()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log has `n` lines containing `needle`.
    fn wait_log(&self, needle: &str, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.log().matches(needle).count() < n {
            assert!(
                Instant::now() < deadline,
                "log never said {needle:?} ({n}x):\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn hup(&self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    }

    /// Closes stdin and waits: the daemon must exit 0 by itself (not by a signal).
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let log = self.log();
        assert!(status.success(), "{status:?}\n{log}");
        log
    }
}

/// Replaces `to` by `bytes` the safe way (another file, then rename).
fn publish(dir: &Path, bytes: &[u8], to: &Path) {
    let tmp = dir.join("publish.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

#[test]
fn cp_over_the_live_index_neither_crashes_nor_loses_a_question() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, b_ids) = two_real_indexes(dir.path());
    // Served: B (the larger file); written over it in place: A (smaller), so without
    // protection the daemon's next read past A's end would be SIGBUS.
    assert!(std::fs::metadata(&a).unwrap().len() < std::fs::metadata(&b).unwrap().len());
    let live = dir.path().join("live.idx");
    std::fs::copy(&b, &live).unwrap();
    let mut d = Daemon::spawn(&live, &[]);
    let before = d.ask();
    assert!(b_ids.contains(&before), "{before}");
    // An utterance is open while `cp` truncates and rewrites the mapped file in place.
    d.send(r#"{"partial": "what is the capital"}"#);
    std::fs::copy(&a, &live).unwrap();
    d.send(&format!("{{\"final\": \"{QUESTION}\"}}"));
    let v = d.next_final();
    assert_eq!(v["results"][0]["id"].as_str().unwrap(), before, "{v}");
    // Still serving the old corpus, from memory.
    assert_eq!(d.ask(), before);
    assert!(d.log().contains("serving a private copy"), "{}", d.log());
    assert_eq!(std::fs::read(&live).unwrap(), std::fs::read(&a).unwrap());
    // What cp wrote is loaded on SIGHUP.
    d.hup();
    d.wait_log("is valid", 1);
    assert_eq!(d.ask(), "paris");
    let log = d.finish();
    assert!(log.contains("4 utterances answered"), "{log}");
}

#[test]
fn install_index_swaps_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, b_ids) = two_real_indexes(dir.path());
    let live = dir.path().join("live.idx");
    std::fs::copy(&a, &live).unwrap();
    let pid_file = dir.path().join("primd.pid");
    let mut d = Daemon::spawn(&live, &["--pid-file", pid_file.to_str().unwrap()]);
    assert_eq!(d.ask(), "paris");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, d.child.id());
    // A truncated file is refused by the command itself: nothing installed, no signal.
    let bytes = std::fs::read(&b).unwrap();
    let trunc = dir.path().join("trunc.idx");
    std::fs::write(&trunc, &bytes[..bytes.len() - 100]).unwrap();
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["install-index", trunc.to_str().unwrap(), "--to"])
        .arg(&live)
        .arg("--model")
        .arg(common::model_dir())
        .arg("--pid-file")
        .arg(&pid_file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("corrupt")
            || String::from_utf8_lossy(&out.stderr).contains("truncated"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&live).unwrap(), std::fs::read(&a).unwrap());
    // The good one.
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["install-index", b.to_str().unwrap(), "--to"])
        .arg(&live)
        .arg("--model")
        .arg(common::model_dir())
        .arg("--pid-file")
        .arg(&pid_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&live).unwrap(), bytes);
    d.wait_log("is valid", 1);
    let id = d.ask();
    assert!(b_ids.contains(&id), "{id} is not from the new index");
    // No temporary file left beside the target.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("install"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    let log = d.finish();
    assert!(log.contains("index swapped"), "{log}");
    assert!(!pid_file.exists(), "pid file removed at exit");
}

#[test]
fn sighup_swaps_a_good_index_and_keeps_the_old_one_on_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, b_ids) = two_real_indexes(dir.path());
    let live = dir.path().join("live.idx");
    std::fs::copy(&a, &live).unwrap();
    let mut d = Daemon::spawn(&live, &[]);
    assert_eq!(d.ask(), "paris");
    let good = std::fs::read(&b).unwrap();
    // Truncated.
    publish(dir.path(), &good[..good.len() / 2], &live);
    d.hup();
    d.wait_log("reload refused", 1);
    assert_eq!(d.ask(), "paris");
    // One flipped bit in the passages' text: only the CRC sees it.
    let mut flipped = good.clone();
    let needle = b"Harbour Science Museum";
    let at = good
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    flipped[at] ^= 0x20; // 'H' -> 'h'

    publish(dir.path(), &flipped, &live);
    d.hup();
    d.wait_log("reload refused", 2);
    assert!(d.log().contains("checksum"), "{}", d.log());
    assert_eq!(d.ask(), "paris");
    // A foreign index: built with another model (fp32), so another fingerprint.
    let fp32_dir = dir.path().join("fp32");
    std::fs::create_dir_all(&fp32_dir).unwrap();
    let foreign = common::build_index_with(
        &common::data("golden-corpus.jsonl"),
        &fp32_dir,
        primd::embed::Precision::Fp32,
    );
    publish(dir.path(), &std::fs::read(&foreign).unwrap(), &live);
    d.hup();
    d.wait_log("reload refused", 3);
    assert_eq!(d.ask(), "paris");
    // Not an index at all.
    publish(dir.path(), b"# not an index\n", &live);
    d.hup();
    d.wait_log("reload refused", 4);
    assert_eq!(d.ask(), "paris");
    // The good one swaps in: the answers change.
    publish(dir.path(), &good, &live);
    d.hup();
    d.wait_log("is valid", 1);
    let id = d.ask();
    assert!(b_ids.contains(&id), "{id} is not from the new index");
    let log = d.finish();
    assert_eq!(log.matches("index swapped").count(), 1, "{log}");
    assert!(log.contains("6 utterances answered"), "{log}");
}

/// Output lines of an in-process daemon, one per message.
struct Lines(Vec<u8>, Sender<String>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        while let Some(n) = self.0.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.0.drain(..=n).collect();
            let _ = self
                .1
                .send(String::from_utf8_lossy(&line).trim().to_string());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn next_of_type(rx: &Receiver<String>, ty: &str) -> serde_json::Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let l = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("no {ty} event"),
            Err(RecvTimeoutError::Disconnected) => panic!("daemon gone before a {ty} event"),
        };
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        if v["type"] == ty {
            return v;
        }
    }
}

fn fake_index(corpus: &Path, to: &Path) {
    let (passages, vectors) = common::embed_corpus(corpus, &mut HashEmbedder);
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: HashEmbedder.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    write_index(to, &meta, &passages, &vectors).unwrap();
}

/// In process, with the fake embedder: a reload staged while an utterance is open does
/// not touch it (its final is answered from the old index), and the next utterance is
/// answered from the new one.
#[test]
fn in_process_an_utterance_in_flight_finishes_on_the_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let golden = common::data("golden-corpus.jsonl");
    let demo = demo_subset(dir.path(), 12);
    let (a_ids, b_ids) = (ids_of(&golden), ids_of(&demo));
    let live_path = dir.path().join("live.idx");
    fake_index(&golden, &live_path);
    let serve = Serve {
        lease: false,
        ..Serve::default()
    };
    let live = Arc::new(LiveIndex::open(&live_path, serve).unwrap());
    let mut cfg = config::load(None, Layer1::default()).unwrap();
    cfg.resolve_retriever(&live.current()).unwrap();
    let (reader, mut input) = std::io::pipe().unwrap();
    let (tx, rx) = channel();
    let opts = DaemonOptions {
        emit_speculative: true,
        ..DaemonOptions::default()
    };
    let live2 = live.clone();
    let run = std::thread::spawn(move || {
        daemon::run(
            &cfg,
            &opts,
            HashEmbedder,
            live2,
            Box::new(BufReader::new(reader)),
            Box::new(Lines(Vec::new(), tx)),
            crossbeam_channel::never(),
        )
        .unwrap()
    });
    let mut say = |l: &str| {
        input.write_all(l.as_bytes()).unwrap();
        input.write_all(b"\n").unwrap();
    };
    say(r#"{"partial": "turn off the kitchen"}"#);
    next_of_type(&rx, "speculative"); // the utterance is open on the old index
    fake_index(&demo, &live_path);
    live.reload().unwrap();
    assert!(live.swap_pending());
    say(r#"{"final": "turn off the kitchen lights"}"#);
    let first = next_of_type(&rx, "final");
    for r in first["results"].as_array().unwrap() {
        assert!(a_ids.contains(r["id"].as_str().unwrap()), "{first}");
    }
    say(r#"{"final": "when is the museum open"}"#);
    let second = next_of_type(&rx, "final");
    assert!(!second["results"].as_array().unwrap().is_empty());
    for r in second["results"].as_array().unwrap() {
        assert!(b_ids.contains(r["id"].as_str().unwrap()), "{second}");
    }
    assert!(!live.swap_pending());
    assert_eq!(live.current().len(), 12);
    drop(input);
    let stats = run.join().unwrap();
    assert_eq!(stats.utterances, 2);
}
