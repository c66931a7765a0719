//! `primd run`: threads, channels, back-pressure, signals, shutdown.
//!
//! ```text
//!  reader thread ──events──▶ retriever thread ──answers──▶ writer thread
//!  (bytes → lines →          scheduler + work            (JSON lines,
//!   dialect events)          (embedder, Arc<Index>)       one write each)
//!                                  ▲ control
//!  signals ──────────────▶ supervisor (the calling thread)
//! ```
//! Each thread waits on one thing only, so that nothing one party does can freeze
//! another:
//! - The **reader** turns input into events and sends them on a small bounded channel.
//!   The retriever takes everything waiting every time it wakes, and never waits for
//!   the output, so the reader keeps reading whatever the consumer of the results does
//!   and the recognizer feeding us never blocks on its own writes.
//! - The **retriever** runs the [scheduler](crate::scheduler) (drain, newest partial
//!   wins, idle embed, silence endpoint) on the wall clock. It hands results to the
//!   writer with `try_send` on a bounded channel: when the consumer lags, speculative
//!   events are dropped first (they are only sent while fewer than
//!   [`SPECULATIVE_ROOM`] messages wait), finals wait in a backlog of
//!   [`OUTPUT_BACKLOG`] and past it are dropped, counted and logged. Its loop wakes at
//!   least every [`TICK`] even when idle (the driver's `tick` runs on every turn: the place
//!   for a watchdog ping). It owns the index as an `Arc<Index>`, and each message
//!   carries the index it was answered from, so the index can be replaced between
//!   utterances (rebuild the searcher over the new `Arc`, run the scheduler again).
//! - The **writer** serialises each message once into a reused buffer and writes it
//!   with one `write_all`; a closed output (broken pipe) stops it quietly.
//! - The **supervisor** (the thread that called [`run`]) only waits: for the signals
//!   ([`signals`] forwards SIGINT and SIGTERM as numbers; other signals can be added as
//!   other events), and for the other threads to finish. The first stop signal asks
//!   the retriever to take the events that had arrived, finish the open utterance and
//!   stop; the supervisor then waits
//!   for the writer at most [`DaemonOptions::stop_grace`] (a consumer that does not
//!   read loses what was not written, counted). A second signal returns at once. So a
//!   blocked output never makes the process unkillable.
//!
//! Shutdown without a signal: end of input → the open utterance is finished with its
//! newest partial, its result written, and `run` returns; a closed output → the
//! retriever stops at once (nobody reads the answers).
//!
//! Index swap ([`LiveIndex`], SIGHUP, `primd install-index`): when a validated index is
//! staged, the driver asks the scheduler for the next utterance boundary; there the
//! retriever rebuilds its searcher over the new index with the same embedder and runs
//! on. An utterance in flight finishes on the old index, and every answer carries the
//! index it was answered from, so the writer prints it from that one.
//!
//! The socket hub ([`run_hub`], [`crate::hub`], `primd run --listen`): the same
//! retriever thread also takes the hub's messages from the same channel (sessions'
//! transcripts, clients' registrations), and each session is a lane of the scheduler
//! next to the STT pipe (lane 0, session `stt`). Results of a session go to its owner
//! and subscribers through the hub's per-client bounded queues ([`crate::hub`]'s
//! table: `try_send`, never a wait); the pipe's results still go to the writer above.
//! Serving the hub, the end of the pipe finishes its open utterance and the daemon
//! serves on until a stop signal; a closed stdout only stops the pipe's output; a
//! staged index waits at most [`DaemonOptions::swap_wait`] for a moment with no open
//! turn, then is swapped in anyway.
//!
//! systemd ([`crate::notify`]): `READY=1` once the index, the embedder, the reader and
//! the retriever's searcher are up; `WATCHDOG=1` from the driver's `tick`, which runs on
//! every turn of the retriever loop (a loop that stops turning stops feeding it).

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded, never, select};

use crate::config::RunConfig;
use crate::embed::reader::Reader;
use crate::embed::{Embed, EmbedError};
use crate::hub::table::Table;
// The types the reader, the retriever and the socket hub share live in the hub (the
// lower layer), so the hub never imports the daemon.
pub(crate) use crate::hub::Counters;
use crate::hub::Inbox;
pub use crate::hub::{EVENT_QUEUE, Inbound, SPECULATIVE_ROOM};
use crate::index::Index;
use crate::index::live::LiveIndex;
use crate::input::{Ctx, Dialect, DialectKind, Event, LineReader, MAX_LINE_BYTES};
use crate::notify::{self, Notifier};
use crate::output::{Outbound, SPECULATIVE_SHOWN, encode_message};
use crate::retriever::HybridSearcher;
use crate::scheduler::{
    Driver, Ending, Finished, Flow, LaneOp, Next, STT_LANE, Scheduler, Spot, Stopped,
};
use crate::stream::normalize::Normalizer;
use crate::stream::{Observed, StreamingRetriever};

/// Messages waiting for the writer: the finals' backlog when the consumer lags.
pub const OUTPUT_BACKLOG: usize = 64;

/// The retriever's loop turns at least this often, even when nothing happens.
pub const TICK: Duration = Duration::from_secs(1);

/// Dropped finals are logged at most this often (with the counts so far).
const LAG_LOG_EVERY: Duration = Duration::from_secs(10);

/// Default of [`DaemonOptions::swap_wait`].
pub const SWAP_WAIT: Duration = Duration::from_secs(5);

/// Default of [`DaemonOptions::stop_grace`].
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// What the supervisor tells the retriever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Finish the open utterance and stop.
    Stop,
}

/// A message for the writer, with the index its passages are looked up in.
pub struct Answer {
    pub index: Arc<Index>,
    pub msg: Outbound,
}

/// Options of the daemon that are not retrieval settings.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    pub dialect: Option<DialectKind>,
    /// Send speculative events too.
    pub emit_speculative: bool,
    /// Replay recorded input at its `t` timestamps, this many times faster (0: no pacing).
    pub pace: f64,
    /// After a stop signal, how long the writer may take to write what is left.
    pub stop_grace: Duration,
    /// Serving the hub: how long a staged index waits for a moment when no session
    /// has a turn open before it is swapped in anyway (open turns then lose their
    /// speculation and are searched in full on the new index).
    pub swap_wait: Duration,
    /// The reader the retriever ranks `context` with (none: without it).
    pub reader: ReaderHandoff,
}

/// The reader, handed from the command to the retriever thread (which takes it once, at
/// start, and keeps it across index swaps). A handle because the options are cloned.
#[derive(Clone, Default)]
pub struct ReaderHandoff(Arc<std::sync::Mutex<Option<Reader>>>);

impl ReaderHandoff {
    pub fn new(reader: Option<Reader>) -> Self {
        ReaderHandoff(Arc::new(std::sync::Mutex::new(reader)))
    }

    fn take(&self) -> Option<Reader> {
        self.0.lock().ok().and_then(|mut r| r.take())
    }
}

impl std::fmt::Debug for ReaderHandoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReaderHandoff")
    }
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            dialect: None,
            emit_speculative: false,
            pace: 0.0,
            stop_grace: STOP_GRACE,
            swap_wait: SWAP_WAIT,
            reader: ReaderHandoff::default(),
        }
    }
}

/// Totals over a run, for the closing log line and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    /// Input lines read (when the reader got to the end of its input).
    pub lines: u64,
    pub rejected_lines: u64,
    /// Utterances answered (a final result made).
    pub utterances: u64,
    /// Finals not written: the output lagged past the backlog.
    pub finals_dropped: u64,
    pub speculative_sent: u64,
    /// Speculative events not sent: the output lagged.
    pub speculative_dropped: u64,
    /// Messages written to the output.
    pub written: u64,
    /// Messages handed to the writer and never written (the output was blocked when
    /// the stop grace ran out).
    pub unwritten: u64,
    /// The signal that ended the run at once (a second stop signal).
    pub forced: Option<i32>,
    /// A stop signal ended the run.
    pub stopped_by: Option<i32>,
    /// The stop grace ran out before the writer was done (the output was blocked).
    pub timed_out: bool,
}

/// Registers SIGINT and SIGTERM and forwards each one's number on the returned
/// channel (from a thread of its own). Their default action (terminate) no longer
/// applies: [`run`] decides.
pub fn signals() -> anyhow::Result<Receiver<i32>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let (tx, rx) = bounded(8);
    std::thread::Builder::new()
        .name("primd-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if tx.send(sig).is_err() {
                    return;
                }
            }
        })?;
    Ok(rx)
}

/// The signals that stop the daemon.
fn is_stop(sig: i32) -> bool {
    use signal_hook::consts::{SIGINT, SIGTERM};
    sig == SIGINT || sig == SIGTERM
}

/// What a thread reports to the supervisor when it is done.
enum Done {
    /// The retriever is done: whether its input had ended.
    Retriever(anyhow::Result<bool>),
    /// The writer is done (its counts are in the shared [`Counters`]).
    Writer,
}

/// Runs the daemon until its input ends, its output closes, or a signal (from
/// `signals`) stops it. Threads that are blocked (reading an input that never comes,
/// writing to an output nobody reads) are not joined: the process exits around them.
#[allow(clippy::too_many_arguments)]
pub fn run<E: Embed + 'static>(
    cfg: &RunConfig,
    opts: &DaemonOptions,
    embedder: E,
    live: Arc<LiveIndex>,
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
    signals: Receiver<i32>,
) -> anyhow::Result<RunStats> {
    run_inner(
        cfg,
        opts,
        embedder,
        live,
        Some(input),
        output,
        signals,
        None,
    )
}

/// [`run`] serving the socket hub too: sessions opened through `inbox`'s [`Hub`]
/// handles are lanes of the same retriever, next to the STT pipe (session `stt`, if
/// `input` is given; its results still go to `output`). The end of `input` does not
/// end the daemon: it serves until a stop signal.
///
/// [`Hub`]: crate::hub::Hub
#[allow(clippy::too_many_arguments)]
pub fn run_hub<E: Embed + 'static>(
    cfg: &RunConfig,
    opts: &DaemonOptions,
    embedder: E,
    live: Arc<LiveIndex>,
    input: Option<Box<dyn BufRead + Send>>,
    output: Box<dyn Write + Send>,
    signals: Receiver<i32>,
    inbox: Inbox,
) -> anyhow::Result<RunStats> {
    run_inner(
        cfg,
        opts,
        embedder,
        live,
        input,
        output,
        signals,
        Some(inbox),
    )
}

#[allow(clippy::too_many_arguments)]
fn run_inner<E: Embed + 'static>(
    cfg: &RunConfig,
    opts: &DaemonOptions,
    embedder: E,
    live: Arc<LiveIndex>,
    input: Option<Box<dyn BufRead + Send>>,
    output: Box<dyn Write + Send>,
    signals: Receiver<i32>,
    inbox: Option<Inbox>,
) -> anyhow::Result<RunStats> {
    let index = live.current();
    HybridSearcher::new(&index)?; // the retriever thread's own cannot fail after this
    let (events_tx, events_rx, counts, table) = match inbox {
        Some(inbox) => {
            let pipe = input.is_some();
            inbox.shared.stt_pipe.store(pipe, Ordering::Relaxed);
            let counts = inbox.shared.daemon.clone();
            let table = Table::new(inbox.shared.clone());
            (inbox.tx, inbox.rx, counts, Some(table))
        }
        None => {
            let (tx, rx) = bounded::<Inbound>(EVENT_QUEUE);
            (tx, rx, Arc::new(Counters::default()), None)
        }
    };
    let (control_tx, control_rx) = bounded::<Control>(4);
    let (out_tx, out_rx) = bounded::<Answer>(OUTPUT_BACKLOG);
    let (done_tx, done_rx) = bounded::<Done>(2);
    let dialect = opts.dialect.unwrap_or(DialectKind::Auto);
    let silences = Arc::new(AtomicU64::new(0));
    let (retriever_counts, writer_counts) = (counts.clone(), counts.clone());
    let serving = table.is_some();

    let reader = match input {
        Some(input) => {
            let (pace, endpoint_ms, silences) = (opts.pace, cfg.endpoint_ms, silences.clone());
            Some(
                std::thread::Builder::new()
                    .name("primd-reader".into())
                    .spawn(move || {
                        read_events(input, dialect, endpoint_ms, pace, &silences, events_tx)
                    })?,
            )
        }
        None => {
            drop(events_tx);
            None
        }
    };
    {
        let (cfg, emit_speculative, done_tx, opts) = (
            cfg.clone(),
            opts.emit_speculative,
            done_tx.clone(),
            opts.clone(),
        );
        std::thread::Builder::new()
            .name("primd-retriever".into())
            .spawn(move || {
                let driver = Live {
                    events: events_rx,
                    control: control_rx,
                    out: out_tx,
                    index,
                    live,
                    notifier: Notifier::from_env(),
                    boundary_asked: false,
                    boundary_at: None,
                    swap_wait: opts.swap_wait,
                    carry: None,
                    emit_speculative,
                    shown: heapless::Vec::new(),
                    silences,
                    counts: retriever_counts,
                    input_ended: false,
                    lag_logged: None,
                    draining: None,
                    hub: table,
                    lane_shown: Vec::new(),
                    stdout_gone: false,
                };
                let reader = opts.reader.take();
                let _ = done_tx.send(Done::Retriever(retrieve(&cfg, embedder, reader, driver)));
            })?;
    }
    std::thread::Builder::new()
        .name("primd-writer".into())
        .spawn(move || {
            write_answers(output, out_rx, &writer_counts);
            let _ = done_tx.send(Done::Writer);
        })?;
    if reader.is_some() {
        log::info!("ready: reading {} input", dialect.name());
    }

    let mut stats = RunStats::default();
    let mut signals = signals;
    let mut retriever: Option<bool> = None;
    let mut writer_done = false;
    let mut grace_until: Option<Instant> = None;
    let mut failure = None;
    while retriever.is_none() || !writer_done {
        let timeout = grace_until.map_or(TICK, |g| g.saturating_duration_since(Instant::now()));
        select! {
            recv(signals) -> sig => match sig {
                Ok(sig) if is_stop(sig) && stats.stopped_by.is_none() => {
                    log::info!("signal {sig}: finishing the open utterance, then exiting");
                    stats.stopped_by = Some(sig);
                    grace_until = Some(Instant::now() + opts.stop_grace);
                    let _ = control_tx.try_send(Control::Stop);
                }
                Ok(sig) if is_stop(sig) => {
                    log::warn!("signal {sig} again: exiting now");
                    stats.forced = Some(sig);
                    break;
                }
                Ok(sig) => log::warn!("signal {sig} ignored"),
                Err(_) => signals = never(), // no more signals: wait for the threads
            },
            recv(done_rx) -> done => match done {
                Ok(Done::Retriever(r)) => match r {
                    Ok(r) => retriever = Some(r),
                    Err(e) => {
                        failure = Some(e);
                        retriever = Some(false);
                    }
                },
                Ok(Done::Writer) => {
                    // The output closed (or failed): nobody reads the answers. Serving
                    // the hub, its clients still do.
                    writer_done = true;
                    if !serving {
                        let _ = control_tx.try_send(Control::Stop);
                    }
                }
                Err(_) => break, // cannot happen: both threads report before exiting
            },
            default(timeout) => if grace_until.is_some() {
                stats.timed_out = true;
                log::error!(
                    "output blocked for {:?} after the stop signal: exiting without writing the rest",
                    opts.stop_grace
                );
                break;
            }
        }
    }
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    stats.utterances = get(&counts.utterances);
    stats.finals_dropped = get(&counts.finals_dropped);
    stats.speculative_sent = get(&counts.speculative_sent);
    stats.speculative_dropped = get(&counts.speculative_dropped);
    stats.written = get(&counts.written);
    // (Loaded one by one while the retriever may still run: saturating.)
    let handed = stats.utterances.saturating_sub(stats.finals_dropped) + stats.speculative_sent;
    stats.unwritten = handed.saturating_sub(stats.written + get(&counts.failed));
    // The reader may be blocked reading input that will never come (a signal stopped
    // us); it is only joined when it has finished or is about to.
    if let Some(reader) = reader
        && (retriever == Some(true) || reader.is_finished())
    {
        let (lines, rejected) = reader
            .join()
            .map_err(|_| anyhow::anyhow!("reader thread panicked"))?;
        stats.lines = lines;
        stats.rejected_lines = rejected;
    }
    log::info!(
        "{} utterances answered, {} finals and {} speculative events dropped (output lagging), \
         {} messages written, {} not written, {} input lines rejected",
        stats.utterances,
        stats.finals_dropped,
        stats.speculative_dropped,
        stats.written,
        stats.unwritten,
        stats.rejected_lines
    );
    match failure {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

/// The reader thread: input bytes → events. Returns how many lines it read and how
/// many it rejected.
///
/// `silences` counts the utterances the retriever ended on wall-clock silence: when it
/// moved, the dialect starts its next utterance from nothing.
fn read_events(
    input: Box<dyn BufRead + Send>,
    dialect: DialectKind,
    endpoint_ms: u64,
    pace: f64,
    silences: &AtomicU64,
    tx: Sender<Inbound>,
) -> (u64, u64) {
    let mut lines = LineReader::new(input);
    let mut parser = Dialect::new(dialect, endpoint_ms);
    let (mut read, mut rejected) = (0, 0);
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
        read = line_no;
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
            return (read, rejected); // retriever gone
        }
    }
    let _ = tx.send(Inbound::End);
    (read, rejected)
}

/// Adds one; returns the new count.
fn bump(c: &AtomicU64) -> u64 {
    c.fetch_add(1, Ordering::Relaxed) + 1
}

/// The retriever thread: the scheduler over a [`StreamingRetriever`] on `live.index`,
/// rebuilt over the new index at each swap.
fn retrieve<E: Embed>(
    cfg: &RunConfig,
    embedder: E,
    mut reader: Option<Reader>,
    mut live: Live,
) -> anyhow::Result<bool> {
    let mut scheduler = Scheduler::new(Duration::from_millis(cfg.endpoint_ms));
    let mut embedder = embedder;
    let mut ready = false;
    loop {
        let index = live.index.clone();
        let searcher = HybridSearcher::new(&index)?;
        let normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
        let mut r = StreamingRetriever::new(cfg.stream.clone(), embedder, searcher, normalizer);
        r.set_conversation(cfg.conversation);
        if let Some(rd) = reader.take() {
            r.set_reader(rd, cfg.reader);
        }
        if !ready {
            ready = true;
            live.notifier.ready(&format!(
                "serving {} passages from {}",
                index.len(),
                index.path().display()
            ));
        }
        let stopped = scheduler.run(&mut r, &mut live);
        (embedder, reader) = r.into_parts();
        if stopped != Stopped::Boundary {
            break;
        }
        live.boundary_asked = false;
        live.boundary_at = None;
        if let Some(new) = live.live.take_staged() {
            let utterance = live.counts.utterances.load(Ordering::Relaxed) + 1;
            log::info!(
                "index swapped: now serving {} passages from {:?} (was {}), from utterance {utterance}",
                new.len(),
                new.path(),
                index.len()
            );
            live.notifier.status(&format!(
                "serving {} passages from {} (swapped in before utterance {utterance})",
                new.len(),
                new.path().display()
            ));
            live.index = new;
            if let Some(t) = &live.hub {
                t.swapped();
            }
        }
    }
    log::info!(
        "retriever done ({}): {} utterances answered",
        if live.input_ended {
            "end of input"
        } else {
            "stopped"
        },
        live.counts.utterances.load(Ordering::Relaxed)
    );
    Ok(live.input_ended)
}

/// The wall-clock driver of the scheduler: events from the reader, stops from the
/// supervisor, answers to the writer.
struct Live {
    events: Receiver<Inbound>,
    control: Receiver<Control>,
    out: Sender<Answer>,
    /// The index answers are looked up in (the one the retriever searches).
    index: Arc<Index>,
    /// Where a new index is staged (SIGHUP); swapped in at an utterance boundary.
    live: Arc<LiveIndex>,
    /// systemd: readiness, watchdog, status (does nothing without `NOTIFY_SOCKET`).
    notifier: Notifier,
    /// A boundary was asked of the scheduler for the staged index (asked once).
    boundary_asked: bool,
    /// Serving the hub: when that boundary was asked ([`DaemonOptions::swap_wait`]).
    boundary_at: Option<Instant>,
    swap_wait: Duration,
    /// An event taken while asking for that boundary: the first one after it.
    carry: Option<Inbound>,
    emit_speculative: bool,
    /// The best guess last sent in a speculative event of the open utterance.
    shown: heapless::Vec<u32, SPECULATIVE_SHOWN>,
    /// Utterances ended by wall-clock silence (the reader watches it).
    silences: Arc<AtomicU64>,
    counts: Arc<Counters>,
    /// The reader said its input ended (it has returned, or is about to).
    input_ended: bool,
    /// When a dropped final was last logged.
    lag_logged: Option<Instant>,
    /// After a stop: how many of the events that had arrived before it are left.
    draining: Option<usize>,
    /// Serving the socket hub: its sessions and clients (None: the STT pipe alone).
    hub: Option<Table>,
    /// By lane: the best guess last sent in a speculative event of its open utterance
    /// (lane 0's is `shown`).
    lane_shown: Vec<heapless::Vec<u32, SPECULATIVE_SHOWN>>,
    /// Serving the hub, stdout closed: the pipe's results are no longer written.
    stdout_gone: bool,
}

impl Live {
    /// What an inbound message is for the scheduler; `Next::Woke` for a registration
    /// of the hub (nothing for the scheduler).
    fn inbound(&mut self, m: Result<Inbound, crossbeam_channel::RecvError>) -> Next<Instant> {
        match m {
            Ok(Inbound::Event(ev)) => {
                let at = ev.received;
                Next::Event(ev, at)
            }
            Ok(Inbound::Hub(msg)) => {
                let Some(table) = &mut self.hub else {
                    return Next::Woke;
                };
                match table.apply(msg) {
                    Some(next) => {
                        if let Next::Lane(l, LaneOp::Open { .. } | LaneOp::Close, _) = &next
                            && let Some(shown) = self.lane_shown.get_mut(*l)
                        {
                            shown.clear();
                        }
                        next
                    }
                    None => Next::Woke,
                }
            }
            Ok(Inbound::End) if self.hub.is_some() => {
                // The pipe ended; the hub's sessions go on (until a stop signal).
                log::info!("end of the STT input: serving the socket sessions on");
                Next::Lane(STT_LANE, LaneOp::EndOfInput, Instant::now())
            }
            Ok(Inbound::End) | Err(_) => {
                self.input_ended = true;
                Next::End
            }
        }
    }

    /// A validated index waits and no boundary has been asked for it yet (nor is the
    /// daemon stopping): one atomic load in the common case.
    fn swap_due(&self) -> bool {
        !self.boundary_asked && self.draining.is_none() && self.live.swap_pending()
    }

    /// An event that arrived while the retriever waited. When an index was staged
    /// meanwhile (SIGHUP during the wait), it is kept for after the swap and a boundary
    /// asked first, so that a question asked after the reload is answered from the new
    /// index.
    fn arrived(&mut self, m: Result<Inbound, crossbeam_channel::RecvError>) -> Next<Instant> {
        match m {
            Ok(m) if self.swap_due() => {
                self.carry = Some(m);
                self.ask_boundary();
                Next::Boundary
            }
            m => self.inbound(m),
        }
    }

    fn ask_boundary(&mut self) {
        self.boundary_asked = true;
        if self.hub.is_some() {
            self.boundary_at = Some(Instant::now());
        }
    }

    /// A stop: the events already waiting are still taken (a final read just before the
    /// signal is answered), nothing after them.
    fn stop(&mut self) {
        if self.draining.is_none() {
            self.draining = Some(self.events.len());
        }
    }

    /// Hands a message to the writer without waiting; false when the writer is gone
    /// (serving the hub, it never is false: stdout is then one output among others).
    fn send(&mut self, msg: Outbound) -> bool {
        if self.stdout_gone {
            return true;
        }
        let speculative = matches!(msg, Outbound::Speculative { .. });
        if speculative && self.out.len() >= SPECULATIVE_ROOM {
            bump(&self.counts.speculative_dropped);
            return true;
        }
        let answer = Answer {
            index: self.index.clone(),
            msg,
        };
        match self.out.try_send(answer) {
            Ok(()) => {
                if speculative {
                    bump(&self.counts.speculative_sent);
                }
                true
            }
            Err(TrySendError::Full(a)) => {
                match a.msg {
                    Outbound::Speculative { .. } => {
                        bump(&self.counts.speculative_dropped);
                    }
                    Outbound::Final { utterance, .. } => {
                        let finals = bump(&self.counts.finals_dropped);
                        // One line per episode, and at most one per LAG_LOG_EVERY.
                        let now = Instant::now();
                        if self.lag_logged.is_none_or(|t| now - t >= LAG_LOG_EVERY) {
                            self.lag_logged = Some(now);
                            log::warn!(
                                "output lagging ({OUTPUT_BACKLOG} results waiting): result of \
                                 utterance {utterance} dropped; {finals} finals and {} speculative \
                                 events dropped so far",
                                self.counts.speculative_dropped.load(Ordering::Relaxed)
                            );
                        }
                    }
                }
                true
            }
            Err(TrySendError::Disconnected(_)) => {
                if self.hub.is_some() {
                    self.stdout_gone = true;
                    log::warn!("stdout closed: the STT pipe's results go to subscribers only");
                    return true;
                }
                false
            }
        }
    }
}

impl<'i, E: Embed> Driver<StreamingRetriever<'i, E>> for Live {
    type Time = Instant;

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn poll(&mut self) -> Next<Instant> {
        // A validated index waits: finish the open utterance on the old one, then swap.
        if self.swap_due() {
            self.ask_boundary();
            return Next::Boundary;
        }
        // Serving the hub, sessions may keep turns open for long: swap anyway.
        if self
            .boundary_at
            .is_some_and(|t| t.elapsed() >= self.swap_wait)
        {
            self.boundary_at = None;
            log::info!(
                "index swap: no moment without open turns in {:?}; swapping now (open turns \
                 are searched in full on the new index)",
                self.swap_wait
            );
            return Next::BoundaryNow;
        }
        if let Some(m) = self.carry.take() {
            return self.inbound(Ok(m));
        }
        if self.draining.is_none() {
            match self.control.try_recv() {
                Ok(Control::Stop) | Err(TryRecvError::Disconnected) => self.stop(),
                Err(TryRecvError::Empty) => {}
            }
        }
        if let Some(left) = self.draining {
            // Stopping: what arrived before the stop, then the end.
            return match self.events.try_recv() {
                Ok(m) if left > 0 => {
                    self.draining = Some(left - 1);
                    self.inbound(Ok(m))
                }
                _ => Next::End,
            };
        }
        loop {
            let next = match self.events.try_recv() {
                Ok(m) => self.inbound(Ok(m)),
                Err(TryRecvError::Empty) => Next::Empty,
                Err(TryRecvError::Disconnected) => self.inbound(Err(crossbeam_channel::RecvError)),
            };
            // A hub registration was taken: look for the next message.
            if !matches!(next, Next::Woke) {
                return next;
            }
        }
    }

    fn wait(&mut self, deadline: Option<Instant>) -> Next<Instant> {
        let now = Instant::now();
        // At least every TICK, and as often as the watchdog needs.
        let mut tick = self.notifier.wake_interval().map_or(TICK, |w| w.min(TICK));
        if let Some(t) = self.boundary_at {
            tick = tick.min((t + self.swap_wait).saturating_duration_since(now));
        }
        let wake = deadline.map_or(tick, |d| d.saturating_duration_since(now).min(tick));
        select! {
            // A stop, or the supervisor is gone: the next poll drains, then ends.
            recv(self.control) -> _ => {
                self.stop();
                Next::Woke
            }
            recv(self.events) -> m => self.arrived(m),
            default(wake) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    Next::Timeout
                } else {
                    Next::Woke
                }
            }
        }
    }

    // Runs on every turn of the retriever loop, at least every TICK: the watchdog is fed
    // from here, so a stuck loop stops feeding it and systemd restarts the daemon.
    fn tick(&mut self) {
        notify::test_stall();
        self.notifier
            .alive(self.counts.utterances.load(Ordering::Relaxed));
    }

    fn observed(
        &mut self,
        r: &mut StreamingRetriever<'i, E>,
        utterance: u64,
        ev: Event,
        started: Instant,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        let spot = Spot {
            utterance,
            lane: STT_LANE,
            turn: 0,
        };
        self.observed_in(r, spot, ev, started, result)
    }

    fn observed_in(
        &mut self,
        r: &mut StreamingRetriever<'i, E>,
        spot: Spot,
        ev: Event,
        _started: Instant,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        let observed = match result {
            Ok(o) => o,
            Err(e) => {
                log::error!("input line {}: {e}; partial skipped", ev.line);
                return Flow::Continue;
            }
        };
        let stdout = spot.lane == STT_LANE && self.emit_speculative;
        let hub = self
            .hub
            .as_ref()
            .is_some_and(|h| h.wants_speculative(spot.lane));
        let cfg = r.config();
        let lexical_ran = cfg.enabled && cfg.retriever.uses_lexical();
        if !(stdout || hub) || (observed != Observed::Speculated && !lexical_ran) {
            return Flow::Continue;
        }
        // The fused best guess, sent when a dense speculation ran or the guess changed.
        let mut candidates = heapless::Vec::new();
        for c in r.speculative_guess(SPECULATIVE_SHOWN) {
            let _ = candidates.push(c.index);
        }
        let shown = if spot.lane == STT_LANE {
            &mut self.shown
        } else {
            if self.lane_shown.len() <= spot.lane {
                // Once per lane slot (bounded by the hub's session limit).
                self.lane_shown
                    .resize_with(spot.lane + 1, heapless::Vec::new);
            }
            &mut self.lane_shown[spot.lane]
        };
        if candidates.is_empty() || (observed != Observed::Speculated && candidates == *shown) {
            return Flow::Continue;
        }
        shown.clone_from(&candidates);
        let msg = Outbound::Speculative {
            utterance: spot.utterance,
            partial: ev.text,
            candidates,
        };
        if let Some(h) = &mut self.hub {
            h.deliver(spot.lane, spot.turn, &self.index, &msg);
        }
        if !stdout || self.send(msg) {
            Flow::Continue
        } else {
            Flow::Stop
        }
    }

    fn finished(&mut self, _r: &mut StreamingRetriever<'i, E>, f: Finished<Instant>) -> Flow {
        if f.lane == STT_LANE {
            self.shown.clear();
        } else if let Some(shown) = self.lane_shown.get_mut(f.lane) {
            shown.clear();
        }
        if f.ending == Ending::Silence {
            self.silences.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = match f.outcome {
            Ok(o) => o,
            Err(e) => {
                log::error!("utterance {}: {e}; no results", f.utterance);
                return Flow::Continue;
            }
        };
        bump(&self.counts.utterances);
        let msg = Outbound::Final {
            utterance: f.utterance,
            text: f.text,
            outcome: Box::new(outcome),
            eou_to_result_ms: f.latency.as_secs_f64() * 1e3,
            stale_dropped: f.stale,
        };
        if let Some(h) = &mut self.hub {
            h.deliver(f.lane, f.turn, &self.index, &msg);
        }
        if f.lane != STT_LANE || self.send(msg) {
            Flow::Continue
        } else {
            Flow::Stop
        }
    }
}

/// The writer thread: answers → JSON lines, each serialised once into a reused buffer
/// and written with one `write_all`. A closed output stops it (quietly: the consumer
/// went away), as does any other write error (logged).
fn write_answers(mut output: Box<dyn Write + Send>, rx: Receiver<Answer>, counts: &Counters) {
    let mut buf = Vec::with_capacity(64 * 1024);
    for a in rx {
        buf.clear();
        if let Err(e) = encode_message(&mut buf, &a.index, &a.msg) {
            log::error!("result not written: {e:#}");
            bump(&counts.failed);
            continue;
        }
        if let Err(e) = output.write_all(&buf).and_then(|()| output.flush()) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                log::error!("writing results: {e}");
            }
            return; // dropping rx makes the retriever's next send fail: it stops
        }
        bump(&counts.written);
    }
}

#[cfg(test)]
pub(crate) mod tests;
