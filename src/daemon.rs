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
//! `endpoint_ms`, after which silence ends the utterance.
//!
//! Shutdown: end of input, SIGINT or SIGTERM, or a closed stdout → the open utterance
//! is finalised with its newest partial, its result written, and `run` returns.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use crate::config::RunConfig;
use crate::embed::Embed;
use crate::index::Index;
use crate::input::{Dialect, DialectKind, Event, EventKind, Line, LineReader, Text};
use crate::output::{Outbound, SPECULATIVE_SHOWN, write_message};
use crate::search::Searcher;
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
    log::info!(
        "ready: reading {:?} events",
        opts.dialect.unwrap_or(DialectKind::Jsonl)
    );

    let dialect = opts.dialect.unwrap_or(DialectKind::Jsonl);
    let pace = opts.pace;
    let reader = std::thread::Builder::new()
        .name("primd-reader".into())
        .spawn(move || read_events(input, dialect, pace, events_tx))?;
    let writer_index = index.clone();
    let writer = std::thread::Builder::new()
        .name("primd-writer".into())
        .spawn(move || write_results(output, &writer_index, out_rx))?;

    let searcher = Searcher::new(&index)?;
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
        last_t: None,
        stale: 0,
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
fn read_events(
    input: Box<dyn BufRead + Send>,
    dialect: DialectKind,
    pace: f64,
    tx: Sender<Inbound>,
) -> u64 {
    let mut lines = LineReader::new(input);
    let mut parser = Dialect::new(dialect);
    let mut rejected = 0;
    let started = Instant::now();
    loop {
        let (line_no, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                log::error!("reading input: {e}; stopping");
                break;
            }
        };
        let text = match line {
            Line::Text(t) => t,
            Line::TooLong(n) => {
                rejected += 1;
                log::warn!("input line {line_no}: {n} bytes without a newline, skipped");
                continue;
            }
        };
        match parser.parse(&text, line_no, Instant::now()) {
            Ok(None) => {}
            Ok(Some(mut ev)) => {
                if pace > 0.0
                    && let Some(t) = ev.t
                {
                    let due = started + Duration::from_secs_f64((t / pace).max(0.0));
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    ev.received = Instant::now();
                }
                if tx.send(Inbound::Event(ev)).is_err() {
                    return rejected; // retriever gone
                }
            }
            Err(e) => {
                rejected += 1;
                log::warn!("input {e}; skipped");
            }
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
    last_t: Option<f64>,
    stale: u32,
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
                None => self.finish(None, Instant::now() - endpoint),
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
    fn event(&mut self, ev: Event) -> bool {
        // A gap in audio time longer than the endpoint ends the previous utterance.
        if let (Some(t), Some(prev)) = (ev.t, self.last_t)
            && self.open
            && ev.kind == EventKind::Partial
            && (t - prev) * 1000.0 >= self.cfg.endpoint_ms as f64
            && !self.finish(None, ev.received)
        {
            return false;
        }
        self.last_t = ev.t.or(self.last_t);
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
        match self.r.observe(&ev.text) {
            Ok(Observed::Speculated) if self.opts.emit_speculative => {
                let mut candidates = heapless::Vec::new();
                for c in self.r.candidates().iter().take(SPECULATIVE_SHOWN) {
                    let _ = candidates.push(c.index);
                }
                let msg = Outbound::Speculative {
                    utterance: self.utterance,
                    partial: ev.text,
                    candidates,
                };
                let _ = self.out.send(msg);
            }
            Ok(_) => {}
            Err(e) => log::error!("input line {}: {e}; partial skipped", ev.line),
        }
    }

    /// Ends the open utterance with `final_text` (None: its newest partial); false when
    /// the output is gone.
    fn finish(&mut self, final_text: Option<&Text>, eou: Instant) -> bool {
        if self.pending.take().is_some() {
            self.stale += 1;
        }
        self.open = false;
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
