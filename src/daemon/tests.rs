//! The daemon in-process: the fake embedder, in-memory input and output, signals sent
//! as numbers on a channel. Every wait below is bounded (a hang fails the test with a
//! message instead of blocking the suite) and none stands in for synchronisation: the
//! tests wait for what the daemon did (a line written, a write blocked, the input read
//! to its end).

use std::io::{BufReader, Cursor, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::RecvTimeoutError;
use signal_hook::consts::{SIGINT, SIGTERM};

use super::*;
use crate::config::{self, Layer1};
use crate::embed::{DIM, Embedding, Fingerprint, HashEmbedder};
use crate::index::{IndexMeta, PassageRecord, write_index};

/// Long enough for any machine; only reached when the behaviour under test is broken.
pub(crate) const BOUND: Duration = Duration::from_secs(60);

/// The golden corpus, embedded with the fake embedder.
pub(crate) fn index(dir: &Path) -> Arc<Index> {
    let corpus = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/golden-corpus.jsonl"
    );
    let (mut passages, mut vectors) = (Vec::new(), Vec::new());
    for line in std::fs::read_to_string(corpus).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (title, text) = (v["title"].as_str().unwrap(), v["text"].as_str().unwrap());
        let mut e = [0.0; DIM];
        HashEmbedder
            .embed_into(&format!("{title}. {text}"), &mut e)
            .unwrap();
        vectors.extend_from_slice(&e);
        passages.push(PassageRecord {
            id: v["id"].as_str().unwrap().into(),
            title: title.into(),
            text: text.into(),
            chunk: 0,
            word_start: 0,
            word_end: text.split_whitespace().count() as u32,
        });
    }
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: HashEmbedder.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let path = dir.join("golden-hash.idx");
    write_index(&path, &meta, &passages, &vectors).unwrap();
    Arc::new(Index::open(&path).unwrap())
}

pub(crate) fn cfg(index: &Index, flags: Layer1) -> RunConfig {
    let mut c = config::load(None, flags).unwrap();
    c.resolve_retriever(index).unwrap();
    c
}

/// An output whose every `write` call is one chunk on a channel.
pub(crate) struct Chunks(pub(crate) Sender<Vec<u8>>);

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An output nobody reads until `gate` opens (a message, or its sender dropped). It
/// says on `blocked` when its first write starts waiting.
struct Gated {
    gate: Receiver<()>,
    blocked: Sender<()>,
    open: bool,
    out: Chunks,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.open {
            let _ = self.blocked.send(());
            let _ = self.gate.recv();
            self.open = true;
        }
        self.out.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An output whose reader went away.
struct Closed;

impl Write for Closed {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The fake embedder, stuck in its first embed of a text with `stuck_on` in it until
/// `release` opens; says on `started` when it gets stuck.
struct Stuck {
    stuck_on: &'static str,
    started: Sender<()>,
    release: Receiver<()>,
}

impl Embed for Stuck {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        if text.contains(self.stuck_on) {
            let _ = self.started.send(());
            let _ = self.release.recv();
        }
        HashEmbedder.embed_into(text, out)
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        HashEmbedder.count_tokens(text)
    }
    fn fingerprint(&self) -> Fingerprint {
        HashEmbedder.fingerprint()
    }
}

/// The daemon on its own thread; its result arrives on the returned channel.
fn spawn<E: Embed + 'static>(
    cfg: RunConfig,
    opts: DaemonOptions,
    embedder: E,
    index: Arc<Index>,
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
) -> (Sender<i32>, Receiver<anyhow::Result<RunStats>>) {
    let (sig_tx, sig_rx) = bounded(8);
    let (res_tx, res_rx) = bounded(1);
    std::thread::spawn(move || {
        let live = Arc::new(LiveIndex::fixed(index));
        let _ = res_tx.send(run(&cfg, &opts, embedder, live, input, output, sig_rx));
    });
    (sig_tx, res_rx)
}

fn finished(res: &Receiver<anyhow::Result<RunStats>>, what: &str) -> RunStats {
    match res.recv_timeout(BOUND) {
        Ok(r) => r.unwrap(),
        Err(RecvTimeoutError::Timeout) => panic!("the daemon did not return: {what}"),
        Err(e) => panic!("{e}"),
    }
}

/// Waits for the next written line (each chunk must be exactly one line).
fn next_line(chunks: &Receiver<Vec<u8>>, what: &str) -> serde_json::Value {
    let chunk = chunks
        .recv_timeout(BOUND)
        .unwrap_or_else(|e| panic!("no line ({e}): {what}"));
    parse_line(&chunk)
}

fn parse_line(chunk: &[u8]) -> serde_json::Value {
    let s = std::str::from_utf8(chunk).unwrap();
    assert!(
        s.ends_with('\n') && s.matches('\n').count() == 1,
        "one write per line: {s:?}"
    );
    serde_json::from_str(s).unwrap()
}

fn all_lines(chunks: &Receiver<Vec<u8>>) -> Vec<serde_json::Value> {
    chunks.try_iter().map(|c| parse_line(&c)).collect()
}

fn finals(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines.iter().filter(|v| v["type"] == "final").collect()
}

const STREAM: &str = r#"{"partial": "what is", "t": 0.3}
{"partial": "what is the capital", "t": 0.6}
{"partial": "what is the capital of fr", "t": 0.9}
{"partial": "what is the capital of france", "t": 1.2}
{"final": "What is the capital of France?", "t": 1.4}
this is not json
{"foo": 1}
{"partial": "um turn", "t": 3.0}
{"partial": "um turn off the", "t": 3.3}
{"partial": "um turn off the kitchen lights", "t": 3.6}
{"final": "Um, turn off the kitchen lights.", "t": 3.9}
{"partial": "play some jazz", "t": 6.0}
{"partial": "play some jazz music in the living room", "t": 6.4}
"#;

#[test]
fn answers_each_utterance_from_memory_one_write_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let (tx, rx) = bounded(1024);
    // Paced at 10x the stream's audio times, so partials arrive while "speaking".
    let opts = DaemonOptions {
        emit_speculative: true,
        pace: 10.0,
        ..Default::default()
    };
    let input = Box::new(Cursor::new(STREAM.as_bytes().to_vec()));
    let (_sig, res) = spawn(c, opts, HashEmbedder, index, input, Box::new(Chunks(tx)));
    let stats = finished(&res, "end of input");
    let lines = all_lines(&rx);
    let f = finals(&lines);
    let top: Vec<_> = f
        .iter()
        .map(|v| v["results"][0]["id"].as_str().unwrap())
        .collect();
    assert_eq!(top, ["paris", "lights", "jazz"]);
    let utt: Vec<_> = f.iter().map(|v| v["utterance"].as_u64().unwrap()).collect();
    assert_eq!(utt, [1, 2, 3]);
    assert_eq!(
        f[2]["text"], "play some jazz music in the living room",
        "input ended: the newest partial is the final"
    );
    assert!(lines.iter().any(|v| v["type"] == "speculative"));
    assert_eq!(
        (stats.lines, stats.rejected_lines, stats.utterances),
        (13, 2, 3)
    );
    assert_eq!(stats.written, lines.len() as u64);
    assert_eq!(stats.written, 3 + stats.speculative_sent);
    assert_eq!((stats.unwritten, stats.finals_dropped), (0, 0));
    assert_eq!(
        (stats.forced, stats.stopped_by, stats.timed_out),
        (None, None, false)
    );
}

#[test]
fn silence_ends_an_utterance_while_the_input_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(
        &index,
        Layer1 {
            endpoint_ms: Some(50),
            ..Default::default()
        },
    );
    let (tx, rx) = bounded(1024);
    let opts = DaemonOptions {
        dialect: Some(DialectKind::Plain),
        ..Default::default()
    };
    let (reader, mut writer) = std::io::pipe().unwrap();
    let input = Box::new(BufReader::new(reader));
    let (_sig, res) = spawn(c, opts, HashEmbedder, index, input, Box::new(Chunks(tx)));
    writer.write_all(b"turn off the kitchen lights\n").unwrap();
    let v = next_line(&rx, "silence should end the utterance");
    assert_eq!(
        (v["utterance"].as_u64(), v["text"].as_str()),
        (Some(1), Some("turn off the kitchen lights"))
    );
    assert_eq!(v["results"][0]["id"], "lights");
    writer.write_all(b"play some jazz music\n").unwrap();
    let v = next_line(&rx, "silence should end the second utterance");
    assert_eq!(
        (v["utterance"].as_u64(), v["text"].as_str()),
        (Some(2), Some("play some jazz music"))
    );
    drop(writer);
    let stats = finished(&res, "end of input");
    assert_eq!(stats.utterances, 2);
}

/// The fake embedder, counting its embeds.
struct Counting(Arc<AtomicU64>);

impl Embed for Counting {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        HashEmbedder.embed_into(text, out)
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        HashEmbedder.count_tokens(text)
    }
    fn fingerprint(&self) -> Fingerprint {
        HashEmbedder.fingerprint()
    }
}

/// Input lines handed out one per read, each once `embeds` has reached its count (so
/// a partial is observed before its final comes, as when someone speaks); says when
/// it has been read to its end.
struct Scripted {
    lines: Vec<(String, u64)>,
    next: usize,
    embeds: Arc<AtomicU64>,
    reached: Arc<AtomicBool>,
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some((line, after)) = self.lines.get(self.next) else {
            self.reached.store(true, Ordering::SeqCst);
            return Ok(0);
        };
        let t0 = Instant::now();
        while self.embeds.load(Ordering::SeqCst) < *after {
            assert!(t0.elapsed() < BOUND, "the retriever stopped embedding");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(line.len() <= buf.len());
        buf[..line.len()].copy_from_slice(line.as_bytes());
        self.next += 1;
        Ok(line.len())
    }
}

#[test]
fn a_consumer_that_stops_reading_never_stops_the_input_speculative_events_go_first() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    const N: u64 = 300;
    // Each utterance: a partial (embedded and scanned: a speculative event), then its
    // final (another text: embedded again), sent once the partial has been embedded.
    let embeds = Arc::new(AtomicU64::new(0));
    let mut lines = Vec::new();
    for i in 0..N {
        let (partial, fin) = match i % 3 {
            0 => ("what is the capital", "what is the capital of france"),
            1 => ("turn off the lights", "turn off the kitchen lights"),
            _ => ("play some jazz", "play some jazz music"),
        };
        lines.push((format!("{{\"partial\": \"{partial}\"}}\n"), 2 * i));
        lines.push((format!("{{\"final\": \"{fin}\"}}\n"), 2 * i + 1));
    }
    let reached = Arc::new(AtomicBool::new(false));
    let input = Box::new(BufReader::new(Scripted {
        lines,
        next: 0,
        embeds: embeds.clone(),
        reached: reached.clone(),
    }));
    let (tx, rx) = bounded(4 * N as usize);
    let (gate_tx, gate_rx) = bounded(1);
    let (blocked_tx, blocked_rx) = bounded(1);
    let output = Gated {
        gate: gate_rx,
        blocked: blocked_tx,
        open: false,
        out: Chunks(tx),
    };
    let opts = DaemonOptions {
        emit_speculative: true,
        ..Default::default()
    };
    let (_sig, res) = spawn(c, opts, Counting(embeds), index, input, Box::new(output));
    blocked_rx.recv_timeout(BOUND).expect("the first write");
    // The output is blocked; the input must still be read to its end.
    let t0 = Instant::now();
    while !reached.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < BOUND,
            "the input stopped being read while the output was blocked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(gate_tx);
    let stats = finished(&res, "end of input, output open again");
    let lines = all_lines(&rx);
    assert_eq!(stats.lines, 2 * N, "every input line was read");
    assert_eq!(stats.utterances, N, "every utterance was answered");
    let written_finals = finals(&lines).len() as u64;
    // At most the last EVENT_QUEUE / 2 utterances can have been answered after the
    // output opened again: the rest met a full backlog.
    assert!(
        stats.finals_dropped >= N - (OUTPUT_BACKLOG + 1 + EVENT_QUEUE / 2 + 1) as u64,
        "{stats:?}"
    );
    assert_eq!(
        written_finals + stats.finals_dropped,
        N,
        "every final written or counted as dropped: {stats:?}"
    );
    assert!(
        stats.speculative_dropped > stats.finals_dropped,
        "{stats:?}"
    );
    // What waited while the output was blocked: the message in the writer's hands and
    // the backlog. At most SPECULATIVE_ROOM + 1 speculative events made it in; the
    // rest of the backlog is finals, the first utterances', in order.
    let backlog = &lines[..OUTPUT_BACKLOG + 1];
    let spec = backlog
        .iter()
        .filter(|v| v["type"] == "speculative")
        .count();
    assert!(
        spec <= SPECULATIVE_ROOM + 1,
        "{spec} speculative events queued"
    );
    let utt: Vec<u64> = finals(backlog)
        .iter()
        .map(|v| v["utterance"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (1..=utt.len() as u64).collect();
    assert_eq!(utt, want);
    assert_eq!(utt.len() + spec, OUTPUT_BACKLOG + 1);
    assert_eq!(stats.written, lines.len() as u64);
}

#[test]
fn a_stop_signal_finishes_the_open_utterance_and_returns() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(
        &index,
        Layer1 {
            endpoint_ms: Some(60_000),
            ..Default::default()
        },
    );
    let (tx, rx) = bounded(1024);
    let opts = DaemonOptions {
        emit_speculative: true,
        ..Default::default()
    };
    let (reader, mut writer) = std::io::pipe().unwrap();
    let input = Box::new(BufReader::new(reader));
    let (sig, res) = spawn(c, opts, HashEmbedder, index, input, Box::new(Chunks(tx)));
    writer
        .write_all(b"{\"partial\": \"play some jazz music\"}\n")
        .unwrap();
    let v = next_line(&rx, "a speculative event: the partial was observed");
    assert_eq!(v["type"], "speculative");
    sig.send(SIGTERM).unwrap();
    // The input stays open: the signal, not its end, stops the daemon.
    let stats = finished(&res, "SIGTERM");
    let v = next_line(&rx, "the open utterance's result");
    assert_eq!(
        (v["type"].as_str(), v["text"].as_str()),
        (Some("final"), Some("play some jazz music"))
    );
    assert_eq!(v["results"][0]["id"], "jazz");
    assert_eq!(
        (stats.stopped_by, stats.forced, stats.timed_out),
        (Some(SIGTERM), None, false)
    );
    assert_eq!((stats.utterances, stats.unwritten), (1, 0));
    drop(writer);
}

/// The wall-clock driver alone, over channels the test fills.
fn live(index: Arc<Index>) -> (Live, Sender<Inbound>, Sender<Control>) {
    let (events_tx, events) = bounded(EVENT_QUEUE);
    let (control_tx, control) = bounded(4);
    let (out, _) = bounded(OUTPUT_BACKLOG);
    let live = Live {
        events,
        control,
        out,
        live: Arc::new(LiveIndex::fixed(index.clone())),
        index,
        notifier: Notifier::from_env(),
        boundary_asked: false,
        boundary_at: None,
        swap_wait: SWAP_WAIT,
        carry: None,
        emit_speculative: false,
        shown: heapless::Vec::new(),
        silences: Arc::new(AtomicU64::new(0)),
        counts: Arc::new(Counters::default()),
        input_ended: false,
        lag_logged: None,
        draining: None,
        hub: None,
        lane_shown: Vec::new(),
        stdout_gone: false,
    };
    (live, events_tx, control_tx)
}

fn inbound(kind: crate::input::EventKind, text: &str) -> Inbound {
    Inbound::Event(Event {
        kind,
        text: crate::input::to_text(text).0,
        t: None,
        received: Instant::now(),
        line: 1,
    })
}

/// What the driver hands the scheduler, as (kind, text) or a name.
fn next_of(live: &mut Live, wait: bool) -> String {
    type W = StreamingRetriever<'static, HashEmbedder>;
    let next = if wait {
        <Live as Driver<W>>::wait(live, None)
    } else {
        <Live as Driver<W>>::poll(live)
    };
    match next {
        Next::Event(ev, _) => format!("{:?} {}", ev.kind, ev.text),
        other => format!("{other:?}"),
    }
}

#[test]
fn a_stop_takes_the_events_that_arrived_before_it_then_ends() {
    use crate::input::EventKind::{Final, Partial};
    let dir = tempfile::tempdir().unwrap();
    let (mut live, events, control) = live(index(dir.path()));
    events.send(inbound(Partial, "play some jazz")).unwrap();
    events
        .send(inbound(Final, "Play some jazz music."))
        .unwrap();
    control.send(Control::Stop).unwrap();
    assert_eq!(next_of(&mut live, false), "Partial play some jazz");
    // Arrived after the stop was seen: never taken.
    events.send(inbound(Partial, "turn off")).unwrap();
    assert_eq!(next_of(&mut live, false), "Final Play some jazz music.");
    assert_eq!(next_of(&mut live, false), "End");
    assert_eq!(next_of(&mut live, false), "End");

    // A stop while waiting: the wait returns, the next poll ends.
    let (mut live, _events, control) = live_again(&dir);
    control.send(Control::Stop).unwrap();
    assert_eq!(next_of(&mut live, true), "Woke");
    assert_eq!(next_of(&mut live, false), "End");
}

fn live_again(dir: &tempfile::TempDir) -> (Live, Sender<Inbound>, Sender<Control>) {
    live(Arc::new(
        Index::open(&dir.path().join("golden-hash.idx")).unwrap(),
    ))
}

/// The daemon with its output blocked after one final was handed to the writer.
fn blocked_daemon(
    grace: Duration,
) -> (
    Sender<i32>,
    Receiver<anyhow::Result<RunStats>>,
    Sender<()>,
    std::io::PipeWriter,
) {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let (tx, _rx) = bounded(1024);
    let (gate_tx, gate_rx) = bounded(1);
    let (blocked_tx, blocked_rx) = bounded(1);
    let output = Gated {
        gate: gate_rx,
        blocked: blocked_tx,
        open: false,
        out: Chunks(tx),
    };
    let opts = DaemonOptions {
        stop_grace: grace,
        ..Default::default()
    };
    let (reader, mut writer) = std::io::pipe().unwrap();
    let input = Box::new(BufReader::new(reader));
    let (sig, res) = spawn(c, opts, HashEmbedder, index, input, Box::new(output));
    writer
        .write_all(b"{\"partial\": \"play some jazz\"}\n{\"final\": \"play some jazz music\"}\n{\"partial\": \"turn off\"}\n")
        .unwrap();
    blocked_rx.recv_timeout(BOUND).expect("the first write");
    (sig, res, gate_tx, writer)
}

#[test]
fn a_stop_with_the_output_blocked_gives_up_after_the_grace() {
    let (sig, res, _gate, _input) = blocked_daemon(Duration::from_millis(100));
    sig.send(SIGINT).unwrap();
    let stats = finished(&res, "SIGINT with the output blocked");
    assert_eq!((stats.stopped_by, stats.timed_out), (Some(SIGINT), true));
    assert_eq!(stats.forced, None);
    assert_eq!(stats.written, 0);
    assert!(stats.unwritten >= 1, "{stats:?}");
}

#[test]
fn a_second_signal_returns_at_once_with_the_output_blocked() {
    // A grace no test would wait for: only the second signal can end this run.
    let (sig, res, _gate, _input) = blocked_daemon(Duration::from_secs(3600));
    sig.send(SIGTERM).unwrap();
    sig.send(SIGINT).unwrap();
    let stats = finished(&res, "a second signal");
    assert_eq!(
        (stats.stopped_by, stats.forced),
        (Some(SIGTERM), Some(SIGINT))
    );
}

#[test]
fn a_second_signal_returns_at_once_with_the_retriever_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let (tx, _rx) = bounded(1024);
    let (started_tx, started_rx) = bounded(1);
    let (release_tx, release_rx) = bounded(1);
    let stuck = Stuck {
        stuck_on: "jazz",
        started: started_tx,
        release: release_rx,
    };
    let opts = DaemonOptions {
        stop_grace: Duration::from_secs(3600),
        ..Default::default()
    };
    let (reader, mut writer) = std::io::pipe().unwrap();
    let input = Box::new(BufReader::new(reader));
    let (sig, res) = spawn(c, opts, stuck, index, input, Box::new(Chunks(tx)));
    writer
        .write_all(b"{\"partial\": \"play some jazz music\"}\n")
        .unwrap();
    started_rx.recv_timeout(BOUND).expect("the embed started");
    sig.send(SIGTERM).unwrap();
    sig.send(SIGTERM).unwrap();
    let stats = finished(&res, "a second signal, retriever stuck");
    assert_eq!(stats.forced, Some(SIGTERM));
    drop(release_tx);
    drop(writer);
}

#[test]
fn a_closed_output_stops_the_daemon_with_its_input_open() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let c = cfg(&index, Layer1::default());
    let (reader, mut writer) = std::io::pipe().unwrap();
    let input = Box::new(BufReader::new(reader));
    let (_sig, res) = spawn(
        c,
        DaemonOptions::default(),
        HashEmbedder,
        index,
        input,
        Box::new(Closed),
    );
    writer
        .write_all(b"{\"partial\": \"play some jazz\"}\n{\"final\": \"play some jazz music\"}\n")
        .unwrap();
    let stats = finished(&res, "the output closed");
    assert_eq!((stats.utterances, stats.written), (1, 0));
    drop(writer);
}

#[test]
fn the_daemon_runs_a_learned_trigger_from_its_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let model = crate::stream::tests::two_new_words_model(&index);
    let path = dir.path().join("trigger.json");
    model.save(&path).unwrap();
    let mut c = cfg(
        &index,
        Layer1 {
            trigger_model: Some(path),
            ..Default::default()
        },
    );
    c.load_trigger(&index).unwrap();
    assert_eq!(
        c.stream.trigger.kind(),
        crate::stream::trigger::TriggerKind::Learned
    );
    let (tx, rx) = bounded(1024);
    let input = Box::new(Cursor::new(STREAM.as_bytes().to_vec()));
    let opts = DaemonOptions::default();
    let (_sig, res) = spawn(c, opts, HashEmbedder, index, input, Box::new(Chunks(tx)));
    let stats = finished(&res, "end of input");
    let lines = all_lines(&rx);
    let top: Vec<_> = finals(&lines)
        .iter()
        .map(|v| v["results"][0]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        top,
        ["paris", "lights", "jazz"],
        "same answers as the fixed trigger"
    );
    assert_eq!((stats.utterances, stats.finals_dropped), (3, 0));
}
