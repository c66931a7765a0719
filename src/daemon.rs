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
//!
//! Index swap ([`LiveIndex`], SIGHUP): the retriever borrows its index, so a swap ends
//! one `Retrieval` at an utterance boundary and starts the next over the new index with
//! the same embedder; the writer is told in band (`ToWriter::Index`), so results queued
//! before the swap are still printed from the index that produced them.
//!
//! systemd (`crate::notify`): `READY=1` once the index, the embedder and the input
//! threads are up; the watchdog is fed from the retriever loop itself, which wakes for it
//! when idle.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use crate::config::RunConfig;
use crate::embed::Embed;
use crate::hybrid::HybridSearcher;
use crate::index::Index;
use crate::index::live::LiveIndex;
use crate::input::{Ctx, Dialect, DialectKind, Event, EventKind, LineReader, MAX_LINE_BYTES, Text};
use crate::notify::{self, Notifier};
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

/// What the writer thread receives: results, in order, and the index to print the
/// following ones from (sent when a swap happens).
// By value like `Inbound`: the bounded channel preallocates its slots once.
#[allow(clippy::large_enum_variant)]
enum ToWriter {
    Out(Outbound),
    Index(Arc<Index>),
}

/// Why a `Retrieval` stopped.
#[allow(clippy::large_enum_variant)] // one per swap, on the stack
enum Stop {
    /// Input ended or the output is gone.
    End,
    /// A new index is staged and no utterance is open: swap, then go on with this
    /// message (already received, not yet handled).
    Swap(Option<Inbound>),
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
    live: Arc<LiveIndex>,
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
) -> anyhow::Result<RunStats> {
    let mut index = live.current();
    let (events_tx, events_rx) = bounded::<Inbound>(EVENT_QUEUE);
    let (out_tx, out_rx) = bounded::<ToWriter>(EVENT_QUEUE);
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
        .spawn(move || write_results(output, writer_index, out_rx))?;

    let mut notifier = Notifier::from_env();
    notifier.ready(&format!(
        "serving {} passages from {}",
        index.len(),
        index.path().display()
    ));
    let mut embedder = embedder;
    let mut stats = RunStats::default();
    let mut utterance = 1;
    let mut carry = None;
    loop {
        let searcher = HybridSearcher::new(&index)?;
        let normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
        let mut retrieval = Retrieval {
            r: StreamingRetriever::new(cfg.stream.clone(), embedder, searcher, normalizer),
            cfg,
            opts,
            out: &out_tx,
            stats,
            utterance,
            pending: None,
            open: false,
            newest: Text::new(),
            shown: heapless::Vec::new(),
            stale: 0,
            silences: &silences,
            live: &live,
            notifier: &mut notifier,
            silence_at: None,
        };
        let stop = retrieval.run(&events_rx, carry.take());
        (stats, utterance) = (retrieval.stats, retrieval.utterance);
        embedder = retrieval.r.into_embedder();
        let Stop::Swap(next) = stop else { break };
        carry = next;
        if let Some(new) = live.take_staged() {
            log::info!(
                "index swapped: now serving {} passages from {:?} (was {}), from utterance {utterance}",
                new.len(),
                new.path(),
                index.len()
            );
            notifier.status(&format!(
                "serving {} passages from {} (swapped in before utterance {utterance})",
                new.len(),
                new.path().display()
            ));
            index = new;
            if out_tx.send(ToWriter::Index(index.clone())).is_err() {
                break;
            }
        }
    }
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
    out: &'a Sender<ToWriter>,
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
    /// The served index: a staged successor is taken at an utterance boundary.
    live: &'a LiveIndex,
    notifier: &'a mut Notifier,
    /// With an utterance open and nothing to do: when silence ends it.
    silence_at: Option<Instant>,
}

impl<E: Embed> Retrieval<'_, '_, E> {
    fn run(&mut self, rx: &Receiver<Inbound>, mut carry: Option<Inbound>) -> Stop {
        let endpoint = Duration::from_millis(self.cfg.endpoint_ms);
        loop {
            // 0. The watchdog is fed from here: a loop that stops turning stops feeding it.
            notify::test_stall();
            self.notifier.alive(self.stats.utterances);
            // A new index is staged: swap between utterances (`open`: one is in flight).
            let boundary = !self.open && self.pending.is_none();
            if boundary && self.live.swap_pending() {
                return Stop::Swap(carry);
            }
            // 1. Take what is waiting, without blocking.
            let next = match carry.take().map_or_else(|| rx.try_recv(), Ok) {
                Ok(m) => {
                    if boundary && self.live.swap_pending() {
                        return Stop::Swap(Some(m));
                    }
                    self.silence_at = None;
                    Some(m)
                }
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
                    // 3. Block; with an utterance open, at most until silence ends it;
                    // at most one watchdog interval (then around the loop, which feeds it).
                    let silence_at = self.open.then(|| {
                        *self
                            .silence_at
                            .get_or_insert_with(|| Instant::now() + endpoint)
                    });
                    let wake = self.notifier.wake_interval().map(|w| Instant::now() + w);
                    let deadline = match (silence_at, wake) {
                        (Some(s), Some(w)) => Some(s.min(w)),
                        (s, w) => s.or(w),
                    };
                    let got = match deadline {
                        Some(d) => match rx.recv_deadline(d) {
                            Ok(m) => Some(m),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => Some(Inbound::End),
                        },
                        None => Some(rx.recv().unwrap_or(Inbound::End)),
                    };
                    match got {
                        Some(m) => {
                            // A swap staged while we slept goes before a new utterance.
                            if !self.open && self.live.swap_pending() {
                                return Stop::Swap(Some(m));
                            }
                            self.silence_at = None;
                            Some(m)
                        }
                        // Silence ended the utterance.
                        None if silence_at.is_some_and(|s| Instant::now() >= s) => {
                            self.silence_at = None;
                            None
                        }
                        // Only a watchdog wake-up.
                        None => continue,
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
                return Stop::End;
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
        let _ = self.out.send(ToWriter::Out(msg));
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
        self.out.send(ToWriter::Out(msg)).is_ok()
    }
}

/// The writer thread: results → JSON lines. A closed output stops it.
fn write_results(mut output: Box<dyn Write + Send>, mut index: Arc<Index>, rx: Receiver<ToWriter>) {
    for msg in rx {
        let msg = match msg {
            ToWriter::Out(m) => m,
            ToWriter::Index(new) => {
                index = new; // the old mapping goes when its last result is printed
                continue;
            }
        };
        if let Err(e) = write_message(&mut output, &index, &msg) {
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
