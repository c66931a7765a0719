//! `primd run`: threads, channels, signals, shutdown.
//!
//! ```text
//! reader thread ──events──▶ retriever (calling thread) ──results──▶ writer thread
//!  (bytes → lines →          owns embedder + mmapped index            (JSON lines)
//!   dialect events)
//! ```
//! The event channel is bounded. The retriever drains everything that is waiting before
//! it works, and of a run of partials it only looks at the newest: a stale partial is
//! superseded, never queued behind (the count is reported as `stale_dropped`). Finals
//! are never dropped. When nothing is waiting the retriever does its idle work (embed
//! the newest partial), then blocks; with an utterance open it blocks at most
//! `endpoint_ms`, after which silence ends the utterance; it counts those endings in
//! an atomic the reader checks before each line, so that dialects which accumulate an
//! utterance from pieces (whisper-streaming, WhisperLive, Deepgram) start the next one
//! from nothing. Gaps in *audio* time are endpointed by the dialect itself (it sends a
//! final), deterministically, however far ahead of the retriever the reader is.
//!
//! Shutdown: end of input, SIGINT or SIGTERM, or a closed stdout → the open utterance
//! is finalised with its newest partial, its result written, and `run` returns.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use crate::config::RunConfig;
use crate::embed::Embed;
use crate::hybrid::HybridSearcher;
use crate::index::Index;
use crate::input::{Ctx, Dialect, DialectKind, Event, EventKind, LineReader, MAX_LINE_BYTES, Text};
use crate::output::{Outbound, SPECULATIVE_SHOWN, write_message};
use crate::stream::normalize::Normalizer;
use crate::stream::{Observed, StreamingRetriever};

/// Events waiting between reader and retriever. Small: the retriever drains it whole
/// every time it wakes, and a full queue slows the reader rather than growing.
const EVENT_QUEUE: usize = 64;

/// What reaches the retriever.
// Events are moved by value on purpose: boxing them would allocate per partial, while
// the bounded channel preallocates its slots once.
#[allow(clippy::large_enum_variant)]
pub enum Inbound {
    Event(Event),
    /// No more input (end of stream, read error, signal, or closed output).
    End,
}

/// Options of the daemon that are not retrieval settings.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    pub dialect: Option<DialectKind>,
    /// Send speculative events too.
    pub emit_speculative: bool,
    /// Replay recorded input at its `t` timestamps, this many times faster (0: no pacing).
    pub pace: f64,
}

/// Totals over a run, for the closing log line and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    pub utterances: u64,
    pub rejected_lines: u64,
}

/// Runs the daemon until its input ends or a signal/closed output stops it.
pub fn run<E: Embed + 'static>(
    cfg: &RunConfig,
    opts: &DaemonOptions,
    embedder: E,
    index: Arc<Index>,
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
) -> anyhow::Result<RunStats> {
    let (events_tx, events_rx) = bounded::<Inbound>(EVENT_QUEUE);
    let (out_tx, out_rx) = bounded::<Outbound>(EVENT_QUEUE);
    install_signal_handler(events_tx.clone())?;
    let dialect = opts.dialect.unwrap_or(DialectKind::Auto);
    log::info!("ready: reading {} input", dialect.name());

    let pace = opts.pace;
    let endpoint_ms = cfg.endpoint_ms;
    let silences = Arc::new(AtomicU64::new(0));
    let reader_silences = silences.clone();
    let reader = std::thread::Builder::new()
        .name("primd-reader".into())
        .spawn(move || {
            read_events(
                input,
                dialect,
                endpoint_ms,
                pace,
                reader_silences,
                events_tx,
            )
        })?;
    let writer_index = index.clone();
    let writer = std::thread::Builder::new()
        .name("primd-writer".into())
        .spawn(move || write_results(output, &writer_index, out_rx))?;

    let searcher = HybridSearcher::new(&index)?;
    let normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
    let mut retrieval = Retrieval {
        r: StreamingRetriever::new(cfg.stream.clone(), embedder, searcher, normalizer),
        cfg,
        opts,
        out: &out_tx,
        stats: RunStats::default(),
        utterance: 1,
        pending: None,
        open: false,
        newest: Text::new(),
        shown: heapless::Vec::new(),
        stale: 0,
        silences: &silences,
    };
    retrieval.run(&events_rx);
    let mut stats = retrieval.stats;
    drop(retrieval);
    drop(out_tx); // lets the writer finish
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer thread panicked"))?;
    // The reader may be blocked reading input that will never come (a signal stopped
    // us); it is not joined, the process exits around it.
    if reader.is_finished() {
        stats.rejected_lines = reader
            .join()
            .map_err(|_| anyhow::anyhow!("reader thread panicked"))?;
    }
    log::info!(
        "{} utterances answered, {} input lines rejected",
        stats.utterances,
        stats.rejected_lines
    );
    Ok(stats)
}

/// The reader thread: input bytes → events. Returns how many lines it rejected.
///
/// `silences` counts the utterances the retriever ended on wall-clock silence: when it
/// moved, the dialect starts its next utterance from nothing.
fn read_events(
    input: Box<dyn BufRead + Send>,
    dialect: DialectKind,
    endpoint_ms: u64,
    pace: f64,
    silences: Arc<AtomicU64>,
    tx: Sender<Inbound>,
) -> u64 {
    let mut lines = LineReader::new(input);
    let mut parser = Dialect::new(dialect, endpoint_ms);
    let mut rejected = 0;
    let mut silences_seen = 0;
    let started = Instant::now();
    let gone = std::cell::Cell::new(false);
    let mut send = |mut ev: Event| {
        if gone.get() {
            return;
        }
        if pace > 0.0
            && let Some(t) = ev.t
        {
            let due = started + Duration::from_secs_f64((t / pace).max(0.0));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            ev.received = Instant::now();
        }
        gone.set(tx.send(Inbound::Event(ev)).is_err());
    };
    loop {
        lines.set_mode(parser.reader_mode());
        let (line_no, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                log::error!("reading input: {e}; stopping");
                break;
            }
        };
        let (text, end) = match line.text() {
            Ok(t) => t,
            Err(n) => {
                rejected += 1;
                log::warn!(
                    "input line {line_no}: {n} bytes without a newline, skipped (limit {MAX_LINE_BYTES})"
                );
                continue;
            }
        };
        let s = silences.load(Ordering::Relaxed);
        if s != silences_seen {
            silences_seen = s;
            parser.silence();
        }
        let cx = Ctx {
            line: line_no,
            received: Instant::now(),
        };
        if let Err(e) = parser.parse(text, end, cx, &mut send) {
            rejected += 1;
            log::warn!("input {e}; skipped");
        }
        if gone.get() {
            return rejected; // retriever gone
        }
    }
    let _ = tx.send(Inbound::End);
    rejected
}

/// The retriever loop's state (runs on the calling thread).
struct Retrieval<'a, 'i, E: Embed> {
    r: StreamingRetriever<'i, E>,
    cfg: &'a RunConfig,
    opts: &'a DaemonOptions,
    out: &'a Sender<Outbound>,
    stats: RunStats,
    utterance: u64,
    /// Newest partial not yet observed.
    pending: Option<Event>,
    /// An utterance has started and not ended.
    open: bool,
    /// Text of the newest partial of the open utterance (the final if silence ends it).
    newest: Text,
    /// The best guess last sent in a speculative event of the open utterance.
    shown: heapless::Vec<u32, SPECULATIVE_SHOWN>,
    stale: u32,
    /// Utterances ended by wall-clock silence (the reader watches it).
    silences: &'a AtomicU64,
}

impl<E: Embed> Retrieval<'_, '_, E> {
    fn run(&mut self, rx: &Receiver<Inbound>) {
        let endpoint = Duration::from_millis(self.cfg.endpoint_ms);
        loop {
            // 1. Take what is waiting, without blocking.
            let next = match rx.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Disconnected) => Some(Inbound::End),
                Err(TryRecvError::Empty) => {
                    // 2. Nothing waiting: observe the newest partial, else idle work.
                    if self.pending.is_some() {
                        self.observe_pending();
                        continue;
                    }
                    match self.r.idle() {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(e) => log::error!("idle embed: {e}"),
                    }
                    // 3. Block; with an utterance open, at most until silence ends it.
                    if self.open {
                        match rx.recv_timeout(endpoint) {
                            Ok(m) => Some(m),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => Some(Inbound::End),
                        }
                    } else {
                        Some(rx.recv().unwrap_or(Inbound::End))
                    }
                }
            };
            let keep_going = match next {
                // Silence: the newest partial is the final; speech ended `endpoint` ago.
                None => {
                    self.silences.fetch_add(1, Ordering::Relaxed);
                    self.finish(None, Instant::now() - endpoint)
                }
                Some(Inbound::End) => {
                    if self.open {
                        self.finish(None, Instant::now());
                    }
                    false
                }
                Some(Inbound::Event(ev)) => self.event(ev),
            };
            if !keep_going {
                return;
            }
        }
    }

    /// Handles one event; false when the output is gone.
    /// (Gaps in audio time are endpointed by the dialect, which sends a final.)
    fn event(&mut self, ev: Event) -> bool {
        match ev.kind {
            EventKind::Partial => {
                self.open = true;
                self.newest.clone_from(&ev.text);
                if self.pending.replace(ev).is_some() {
                    self.stale += 1;
                }
                true
            }
            // The final supersedes any partial still waiting.
            EventKind::Final => self.finish(Some(&ev.text), ev.received),
        }
    }

    fn observe_pending(&mut self) {
        let Some(ev) = self.pending.take() else {
            return;
        };
        let observed = match self.r.observe(&ev.text) {
            Ok(o) => o,
            Err(e) => {
                log::error!("input line {}: {e}; partial skipped", ev.line);
                return;
            }
        };
        let cfg = self.r.config();
        let lexical_ran = cfg.enabled && cfg.retriever.uses_lexical();
        if !self.opts.emit_speculative || (observed != Observed::Speculated && !lexical_ran) {
            return;
        }
        // The fused best guess, sent when a dense speculation ran or the guess changed.
        let mut candidates = heapless::Vec::new();
        for c in self.r.speculative_guess(SPECULATIVE_SHOWN) {
            let _ = candidates.push(c.index);
        }
        if candidates.is_empty() || (observed != Observed::Speculated && candidates == self.shown) {
            return;
        }
        self.shown.clone_from(&candidates);
        let msg = Outbound::Speculative {
            utterance: self.utterance,
            partial: ev.text,
            candidates,
        };
        let _ = self.out.send(msg);
    }

    /// Ends the open utterance with `final_text` (None: its newest partial); false when
    /// the output is gone.
    fn finish(&mut self, final_text: Option<&Text>, eou: Instant) -> bool {
        if self.pending.take().is_some() {
            self.stale += 1;
        }
        self.open = false;
        self.shown.clear();
        let text = final_text.cloned().unwrap_or_else(|| self.newest.clone());
        self.newest.clear();
        let utterance = self.utterance;
        self.utterance += 1;
        let outcome = match self.r.finalize(&text) {
            Ok(o) => o,
            Err(e) => {
                log::error!("utterance {utterance}: {e}; no results");
                return true;
            }
        };
        self.stats.utterances += 1;
        let msg = Outbound::Final {
            utterance,
            text,
            outcome: Box::new(outcome),
            eou_to_result_ms: eou.elapsed().as_secs_f64() * 1e3,
            stale_dropped: std::mem::take(&mut self.stale),
        };
        self.out.send(msg).is_ok()
    }
}

/// The writer thread: results → JSON lines. A closed output stops it.
fn write_results(mut output: Box<dyn Write + Send>, index: &Index, rx: Receiver<Outbound>) {
    for msg in rx {
        if let Err(e) = write_message(&mut output, index, &msg) {
            let closed = e
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
            if !closed {
                log::error!("writing results: {e:#}");
            }
            return; // dropping rx makes the retriever's next send fail: it stops
        }
    }
}

/// SIGINT/SIGTERM → an `End` event: the retriever finishes the open utterance and stops.
fn install_signal_handler(tx: Sender<Inbound>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("primd-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                log::info!("signal {sig}: finishing the open utterance, then exiting");
                let _ = tx.send(Inbound::End);
            }
        })?;
    Ok(())
}
