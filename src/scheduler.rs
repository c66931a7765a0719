//! The retriever's scheduling policy, once, for both clocks: `primd run` drives it with
//! the wall clock and a channel of events, `primd eval` with a virtual clock in audio
//! seconds that advances by the measured duration of each piece of work.
//!
//! Why a module of its own: the order of work *is* the latency and the quality a user
//! gets (which partials are observed, when the final waits, when silence ends an
//! utterance). When the daemon and the evaluation each had a copy, eval's figures were
//! only as good as the two copies' agreement; now both run this loop, and the policy is
//! tested here without threads, pipes or a model (a scripted [`Work`] and a simulated
//! clock).
//!
//! The policy, one turn of [`Scheduler::run`] at a time:
//! - **drain**: whatever has arrived is taken before any work is done;
//! - **newest partial wins**: of a run of waiting partials only the newest is observed;
//!   the older ones are superseded unseen (counted as `stale`), never queued behind;
//! - **finals are never dropped**: a final ends the utterance the moment it is taken
//!   (it supersedes a partial still waiting), and the utterance's result is handed to
//!   the driver whatever happens to it next;
//! - **idle work**: when nothing is waiting the retriever does its idle work
//!   ([`Work::idle`]: embed the newest partial), which cannot be interrupted;
//! - **silence endpoint**: with an utterance open, once nothing has arrived for
//!   `endpoint` after the retriever ran out of work, its newest partial is the final;
//! - **end of input** (or a stop the driver asks for): the open utterance is finished
//!   with its newest partial, then the loop returns.
//!
//! The scheduler owns no clock, thread or channel: time, events and waiting come from
//! the [`Driver`], which also receives what the work produced (speculations, results).
//! It calls [`Driver::tick`] on every turn of its loop, and a wall-clock driver's
//! [`wait`](Driver::wait) returns [`Next::Woke`] at least every second or so, so a
//! driver can prove the loop is alive (a watchdog) even when nobody speaks. Its state
//! (utterance numbers, the open utterance) lives in [`Scheduler`], apart from the
//! [`Work`], so a driver can ask for the next utterance boundary ([`Next::Boundary`]),
//! rebuild the work there (e.g. over a new index) and run again.

use std::mem;
use std::time::{Duration, Instant};

use crate::embed::{Embed, EmbedError};
use crate::input::{Event, EventKind, Text};
use crate::stream::{Observed, Outcome, StreamingRetriever};

/// A point on a driver's clock.
pub trait Time: Copy + PartialOrd + std::fmt::Debug {
    fn plus(self, d: Duration) -> Self;
    /// `self - earlier`, zero when `earlier` is later.
    fn since(self, earlier: Self) -> Duration;
}

impl Time for Instant {
    fn plus(self, d: Duration) -> Self {
        self + d
    }
    fn since(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A virtual clock's time: seconds since the start of a recording.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

impl Time for Seconds {
    fn plus(self, d: Duration) -> Self {
        Seconds(self.0 + d.as_secs_f64())
    }
    fn since(self, earlier: Self) -> Duration {
        Duration::from_secs_f64((self.0 - earlier.0).max(0.0))
    }
}

/// The work the scheduler orders: [`StreamingRetriever`] in the daemon and in eval.
pub trait Work {
    fn observe(&mut self, partial: &str) -> Result<Observed, EmbedError>;
    /// Idle work; whether anything was done.
    fn idle(&mut self) -> Result<bool, EmbedError>;
    fn finalize(&mut self, text: &str) -> Result<Outcome, EmbedError>;
}

impl<E: Embed> Work for StreamingRetriever<'_, E> {
    fn observe(&mut self, partial: &str) -> Result<Observed, EmbedError> {
        StreamingRetriever::observe(self, partial)
    }
    fn idle(&mut self) -> Result<bool, EmbedError> {
        StreamingRetriever::idle(self)
    }
    fn finalize(&mut self, text: &str) -> Result<Outcome, EmbedError> {
        StreamingRetriever::finalize(self, text)
    }
}

/// What a driver has for the scheduler.
// Moved by value like the daemon's channel messages: boxing would allocate per partial.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Next<T> {
    /// An event, and when it arrived on the driver's clock.
    Event(Event, T),
    /// ([`Driver::poll`]) Nothing has arrived.
    Empty,
    /// ([`Driver::wait`]) Woke up before the deadline with nothing to take: the loop
    /// turns once (and ticks) and waits again.
    Woke,
    /// ([`Driver::wait`]) The deadline passed with nothing arriving.
    Timeout,
    /// No more input: end of stream, or a stop asked for.
    End,
    /// Return from [`Scheduler::run`] at the next utterance boundary: at once when no
    /// utterance is open, else as soon as the open one has ended (e.g. to rebuild the
    /// work over a new index, while the utterance in flight finishes on the old one).
    Boundary,
}

/// Whether the loop goes on after a callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// What ended an utterance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The recognizer's final.
    Final,
    /// `endpoint` of silence; the newest partial is the final.
    Silence,
    /// Input ended (or a stop) with the utterance open; its newest partial is the final.
    EndOfInput,
}

/// A finished utterance, for [`Driver::finished`].
#[derive(Debug)]
pub struct Finished<T> {
    /// 1-based, over the scheduler's life.
    pub utterance: u64,
    /// The final text (the newest partial unless `ending` is [`Ending::Final`]).
    pub text: Text,
    pub outcome: Result<Outcome, EmbedError>,
    pub ending: Ending,
    /// End of utterance: the final's arrival; for silence, when the retriever ran out
    /// of work (`endpoint` before it was declared); for end of input, when it was taken.
    pub eou: T,
    /// End of utterance → the retriever took it (waiting for work in progress).
    pub waited: Duration,
    /// End of utterance → results ready.
    pub latency: Duration,
    /// Partials of the utterance superseded unseen.
    pub stale: u32,
}

/// Events, time and waiting for the scheduler; results from it. `W` is the work.
pub trait Driver<W> {
    type Time: Time;

    fn now(&self) -> Self::Time;

    /// What has arrived by now, without waiting: an event, [`Next::Empty`] or
    /// [`Next::End`].
    fn poll(&mut self) -> Next<Self::Time>;

    /// Waits for an event until `deadline` (`None`: no deadline): returns it,
    /// [`Next::Timeout`], [`Next::End`], or [`Next::Woke`] (a spurious or periodic
    /// wake-up).
    fn wait(&mut self, deadline: Option<Self::Time>) -> Next<Self::Time>;

    /// Runs one piece of work. A virtual clock advances by its measured duration; on
    /// the wall clock the time has passed by itself.
    fn work<R>(&mut self, w: &mut W, f: impl FnOnce(&mut W) -> R) -> R {
        f(w)
    }

    /// Called on every turn of the loop (at least as often as `wait` wakes).
    fn tick(&mut self) {}

    /// A partial of utterance `utterance` was observed (work started at `started`).
    fn observed(
        &mut self,
        w: &mut W,
        utterance: u64,
        ev: Event,
        started: Self::Time,
        result: Result<Observed, EmbedError>,
    ) -> Flow;

    /// Idle work ran (started at `started`); `Ok(false)`: there was none to do.
    fn idled(&mut self, started: Self::Time, result: Result<bool, EmbedError>) -> Flow {
        let _ = started;
        if let Err(e) = result {
            log::error!("idle embed: {e}");
        }
        Flow::Continue
    }

    /// An utterance ended and was finalised.
    fn finished(&mut self, w: &mut W, f: Finished<Self::Time>) -> Flow;
}

/// Why [`Scheduler::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The driver said [`Next::End`] (the open utterance, if any, was finished first).
    End,
    /// A callback returned [`Flow::Stop`].
    Driver,
    /// The driver asked for it ([`Next::Boundary`]); no utterance is open, and events
    /// not yet taken are still the driver's: [`Scheduler::run`] can go on with them.
    Boundary,
}

/// The policy's state: the open utterance and the utterance count.
#[derive(Debug)]
pub struct Scheduler<T> {
    endpoint: Duration,
    /// Number of the open (or next) utterance.
    utterance: u64,
    /// Newest partial not yet observed.
    pending: Option<Event>,
    /// An utterance has started and not ended.
    open: bool,
    /// Text of the open utterance's newest partial (its final if silence ends it).
    newest: Text,
    /// Partials of the open utterance superseded unseen.
    stale: u32,
    /// With an utterance open: since when the retriever has had nothing to do.
    idle_since: Option<T>,
    /// The driver asked to return at the next utterance boundary.
    boundary_asked: bool,
}

impl<T: Time> Scheduler<T> {
    /// `endpoint`: the silence that ends an open utterance.
    pub fn new(endpoint: Duration) -> Self {
        Scheduler {
            endpoint,
            utterance: 1,
            pending: None,
            open: false,
            newest: Text::new(),
            stale: 0,
            idle_since: None,
            boundary_asked: false,
        }
    }

    /// Whether an utterance is open (a partial came and no final yet).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Runs the policy until the driver ends the input, asks for a boundary, or a
    /// callback stops it.
    pub fn run<W: Work, D: Driver<W, Time = T>>(&mut self, w: &mut W, d: &mut D) -> Stopped {
        loop {
            if self.boundary_asked && !self.open {
                self.boundary_asked = false;
                return Stopped::Boundary;
            }
            d.tick();
            let next = match d.poll() {
                Next::Empty | Next::Woke | Next::Timeout => {
                    // Nothing waiting: observe the newest partial, else idle work, else
                    // wait (with an utterance open, at most until silence ends it).
                    if let Some(ev) = self.pending.take() {
                        let started = d.now();
                        let result = d.work(w, |w| w.observe(&ev.text));
                        if d.observed(w, self.utterance, ev, started, result) == Flow::Stop {
                            return Stopped::Driver;
                        }
                        continue;
                    }
                    let started = d.now();
                    let result = d.work(w, |w| w.idle());
                    let worked = matches!(result, Ok(true));
                    if d.idled(started, result) == Flow::Stop {
                        return Stopped::Driver;
                    }
                    if worked {
                        continue;
                    }
                    let deadline = self.open.then(|| {
                        let since = *self.idle_since.get_or_insert_with(|| d.now());
                        since.plus(self.endpoint)
                    });
                    d.wait(deadline)
                }
                next => next,
            };
            let flow = match next {
                Next::Event(ev, at) => {
                    self.idle_since = None;
                    self.offer(w, d, ev, at)
                }
                Next::Empty | Next::Woke => Flow::Continue,
                Next::Timeout => match self.idle_since {
                    Some(since) if self.open => self.finish(w, d, None, since, Ending::Silence),
                    _ => Flow::Continue,
                },
                Next::Boundary => {
                    self.boundary_asked = true;
                    Flow::Continue
                }
                Next::End => {
                    if self.open {
                        let now = d.now();
                        self.finish(w, d, None, now, Ending::EndOfInput);
                    }
                    return Stopped::End;
                }
            };
            if flow == Flow::Stop {
                return Stopped::Driver;
            }
        }
    }

    /// Takes one event that arrived at `at`.
    fn offer<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
        ev: Event,
        at: T,
    ) -> Flow {
        match ev.kind {
            EventKind::Partial => {
                self.open = true;
                self.newest.clone_from(&ev.text);
                if self.pending.replace(ev).is_some() {
                    self.stale += 1;
                }
                Flow::Continue
            }
            // The final supersedes any partial still waiting.
            EventKind::Final => self.finish(w, d, Some(ev.text), at, Ending::Final),
        }
    }

    /// Ends the open utterance with `final_text` (None: its newest partial).
    fn finish<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
        final_text: Option<Text>,
        eou: T,
        ending: Ending,
    ) -> Flow {
        if self.pending.take().is_some() {
            self.stale += 1;
        }
        self.open = false;
        self.idle_since = None;
        let text = match final_text {
            Some(t) => t,
            None => self.newest.clone(),
        };
        self.newest.clear();
        let utterance = self.utterance;
        self.utterance += 1;
        let started = d.now();
        let outcome = d.work(w, |w| w.finalize(&text));
        let f = Finished {
            utterance,
            text,
            outcome,
            ending,
            eou,
            waited: started.since(eou),
            latency: d.now().since(eou),
            stale: mem::take(&mut self.stale),
        };
        d.finished(w, f)
    }
}

#[cfg(test)]
mod tests;
