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
//! **Lanes** (the socket hub's sessions, [`Next::Lane`]): each conversation has its own
//! open utterance (pending partial, newest text, idle time); finals are taken when
//! drained, then the newest partial of each lane, lanes in turn (round robin), then
//! idle embeds, lanes in turn; the silence endpoint applies to the lanes opened with
//! it (the STT pipe, lane [`STT_LANE`]); a lane's turn can also end by
//! [`LaneOp::EndOfSpeech`] or be abandoned ([`LaneOp::Abandon`], [`LaneOp::Close`]).
//! The work switches to a lane's own utterance state before working for it
//! ([`Work::switch`]). With lane 0 alone, every step above is the single-stream policy,
//! unchanged (its tests below are the original ones).
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
    /// The work that follows is lane `lane`'s (its own utterance state). Work with one
    /// stream ignores it.
    fn switch(&mut self, lane: usize) {
        let _ = lane;
    }
    /// Forgets the current lane's utterance in progress (no result).
    fn abandon(&mut self) {}
    /// Forgets the current lane's conversation (earlier turns).
    fn forget(&mut self) {}
    /// The current lane's turn in progress: whether it may use its conversation, and
    /// its own `context` budget (`None`: the configured one).
    fn turn_options(&mut self, context: bool, tokens: Option<usize>) {
        let _ = (context, tokens);
    }
    /// The current lane's conversation topic, set by the agent (`""`: cleared).
    fn set_topic(&mut self, text: &str) {
        let _ = text;
    }
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
    fn switch(&mut self, lane: usize) {
        StreamingRetriever::switch(self, lane)
    }
    fn abandon(&mut self) {
        StreamingRetriever::reset(self)
    }
    fn forget(&mut self) {
        StreamingRetriever::forget(self)
    }
    fn turn_options(&mut self, context: bool, tokens: Option<usize>) {
        self.set_context(context);
        self.set_context_tokens(tokens);
    }
    fn set_topic(&mut self, text: &str) {
        StreamingRetriever::set_topic(self, text)
    }
}

/// What a driver has for the scheduler.
// Moved by value like the daemon's channel messages: boxing would allocate per partial.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Next<T> {
    /// An event of the STT pipe ([`STT_LANE`]), and when it arrived on the driver's
    /// clock.
    Event(Event, T),
    /// Something for lane `usize` (a session of the socket hub), and when it arrived.
    Lane(usize, LaneOp, T),
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
    /// Return from [`Scheduler::run`] now, open utterances or not (a boundary asked
    /// earlier did not come in time): their lanes stay open here, and the work the
    /// driver rebuilds starts their utterance states afresh (a final then searches in
    /// full, on the new index).
    BoundaryNow,
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
    /// The session said its turn ended ([`LaneOp::EndOfSpeech`]); the newest partial
    /// is the final.
    EndOfSpeech,
}

/// A finished utterance, for [`Driver::finished`].
#[derive(Debug)]
pub struct Finished<T> {
    /// 1-based, over the scheduler's life (all lanes).
    pub utterance: u64,
    /// The lane it belonged to ([`STT_LANE`] for the pipe).
    pub lane: usize,
    /// The session's turn; for [`STT_LANE`] its own 1-based utterance count.
    pub turn: u64,
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

    /// [`observed`](Self::observed) with the lane: a driver of several lanes
    /// overrides this one (the default forgets the lane).
    fn observed_in(
        &mut self,
        w: &mut W,
        spot: Spot,
        ev: Event,
        started: Self::Time,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        self.observed(w, spot.utterance, ev, started, result)
    }

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
    /// The driver said [`Next::End`] (the open utterances, if any, were finished first).
    End,
    /// A callback returned [`Flow::Stop`].
    Driver,
    /// The driver asked for it ([`Next::Boundary`]); no utterance is open (unless the
    /// driver forced it: [`Next::BoundaryNow`]), and events not yet taken are still the
    /// driver's: [`Scheduler::run`] can go on with them.
    Boundary,
}

/// One conversation's utterance state in the scheduler: the STT pipe is lane
/// [`STT_LANE`]; the socket hub opens one lane per session.
#[derive(Debug)]
struct Lane<T> {
    /// In use (lane 0 always is).
    live: bool,
    /// Silence ends its open utterance (the STT pipe); sessions end theirs themselves.
    endpoint: bool,
    /// Number of the open utterance (over all lanes); 0 while none is open.
    utterance: u64,
    /// The open utterance's turn: the client's, or for lane 0 its own 1-based count.
    turn: u64,
    /// Utterances begun in this lane (lane 0's turns).
    begun: u64,
    /// Newest partial not yet observed.
    pending: Option<Event>,
    /// An utterance has started and not ended.
    open: bool,
    /// Text of the open utterance's newest partial (its final if silence ends it).
    newest: Text,
    /// Partials of the open utterance superseded unseen.
    stale: u32,
    /// With an utterance open: since when the retriever has had nothing to do for it.
    idle_since: Option<T>,
}

impl<T> Lane<T> {
    fn new(endpoint: bool) -> Self {
        Lane {
            live: true,
            endpoint,
            utterance: 0,
            turn: 0,
            begun: 0,
            pending: None,
            open: false,
            newest: Text::new(),
            stale: 0,
            idle_since: None,
        }
    }
}

/// The STT pipe's lane ([`Next::Event`]); other lanes are the driver's to open.
pub const STT_LANE: usize = 0;

/// What happens to one lane ([`Next::Lane`]).
// Moved by value, as [`Next`] is.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum LaneOp {
    /// The lane starts (or starts again) empty; `endpoint`: silence ends its
    /// utterances, as it does the STT pipe's.
    Open { endpoint: bool },
    /// A partial or final transcript of turn `turn`. A partial opens the turn when
    /// none is open; a final ends it.
    Transcript { turn: u64, ev: Event },
    /// The open turn ended without a final text: its newest partial is the final
    /// (an empty one when nothing was said).
    EndOfSpeech { turn: u64 },
    /// The open utterance is dropped: no result (a newer turn began).
    Abandon,
    /// The open utterance is finished with its newest partial, as at end of input,
    /// and the lane stays (the pipe ended while the daemon serves on).
    EndOfInput,
    /// The open utterance is dropped and the lane freed (the session closed).
    Close,
    /// The lane's conversation is forgotten (`{"cmd":"reset"}`); an open turn goes on.
    Reset,
    /// Whether the lane's turn in progress (or its next one) may use the conversation
    /// (a message's `"context"`), and its `context` budget (`"context_tokens"`; `None`:
    /// the daemon's); back to the defaults when the turn ends.
    Context { on: bool, tokens: Option<u32> },
    /// The agent sets the lane's conversation topic (`{"cmd":"topic"}`; `""` clears it).
    Topic(String),
}

/// Where a piece of work belongs, for [`Driver::observed_in`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spot {
    /// Over all lanes, 1-based.
    pub utterance: u64,
    pub lane: usize,
    /// The lane's turn (see [`Finished::turn`]).
    pub turn: u64,
}

/// The policy's state: the lanes (open utterances) and the utterance count.
#[derive(Debug)]
pub struct Scheduler<T> {
    endpoint: Duration,
    /// Number of the next utterance to begin.
    next_utterance: u64,
    lanes: Vec<Lane<T>>,
    /// Lanes in use.
    live_lanes: usize,
    /// Round robin: the lane last observed, the lane last given idle work.
    observe_rr: usize,
    idle_rr: usize,
    /// The driver asked to return at the next utterance boundary.
    boundary_asked: bool,
}

impl<T: Time> Scheduler<T> {
    /// `endpoint`: the silence that ends an open utterance of the STT pipe.
    pub fn new(endpoint: Duration) -> Self {
        Scheduler {
            endpoint,
            next_utterance: 1,
            lanes: vec![Lane::new(true)],
            live_lanes: 1,
            observe_rr: 0,
            idle_rr: 0,
            boundary_asked: false,
        }
    }

    /// Whether an utterance is open in any lane.
    pub fn is_open(&self) -> bool {
        self.lanes.iter().any(|l| l.open)
    }

    /// Runs the policy until the driver ends the input, asks for a boundary, or a
    /// callback stops it.
    ///
    /// Over several lanes: finals are taken the moment they are drained (before any
    /// partial work); then the newest partial of each lane with one waiting, lanes in
    /// turn (round robin), so a chatty lane cannot starve a quiet one; then idle work,
    /// lanes in turn. With lane 0 alone this is exactly the single-stream policy.
    pub fn run<W: Work, D: Driver<W, Time = T>>(&mut self, w: &mut W, d: &mut D) -> Stopped {
        loop {
            if self.boundary_asked && !self.is_open() {
                self.boundary_asked = false;
                return Stopped::Boundary;
            }
            d.tick();
            let next = match d.poll() {
                Next::Empty | Next::Woke | Next::Timeout => {
                    // Busy with other lanes: the pipe's silence is not held up by them.
                    if self.live_lanes > 1 && self.silences_due(w, d) == Flow::Stop {
                        return Stopped::Driver;
                    }
                    // Nothing waiting: observe the newest partial, else idle work, else
                    // wait (with an utterance open, at most until silence ends it).
                    if let Some(l) = self.next_pending() {
                        let ev = self.lanes[l].pending.take().expect("next_pending");
                        let lane = &self.lanes[l];
                        let spot = Spot {
                            utterance: lane.utterance,
                            lane: l,
                            turn: lane.turn,
                        };
                        w.switch(l);
                        let started = d.now();
                        let result = d.work(w, |w| w.observe(&ev.text));
                        if d.observed_in(w, spot, ev, started, result) == Flow::Stop {
                            return Stopped::Driver;
                        }
                        continue;
                    }
                    match self.idle_round(w, d) {
                        None => return Stopped::Driver,
                        Some(true) => continue,
                        Some(false) => {}
                    }
                    let deadline = self.deadline();
                    d.wait(deadline)
                }
                next => next,
            };
            let flow = match next {
                Next::Event(ev, at) => self.transcript(w, d, STT_LANE, None, ev, at),
                Next::Lane(l, op, at) => self.lane_op(w, d, l, op, at),
                Next::Empty | Next::Woke => Flow::Continue,
                Next::Timeout => self.silences_due(w, d),
                Next::Boundary => {
                    self.boundary_asked = true;
                    Flow::Continue
                }
                Next::BoundaryNow => {
                    self.boundary_asked = false;
                    return Stopped::Boundary;
                }
                Next::End => {
                    for l in 0..self.lanes.len() {
                        if self.lanes[l].open {
                            let now = d.now();
                            self.finish(w, d, l, None, now, Ending::EndOfInput);
                        }
                    }
                    return Stopped::End;
                }
            };
            if flow == Flow::Stop {
                return Stopped::Driver;
            }
        }
    }

    /// The next lane (round robin) with a partial waiting.
    fn next_pending(&mut self) -> Option<usize> {
        let n = self.lanes.len();
        let found = (1..=n)
            .map(|i| (self.observe_rr + i) % n)
            .find(|&l| self.lanes[l].pending.is_some())?;
        self.observe_rr = found;
        Some(found)
    }

    /// Idle work for the open lanes in turn (lane 0 alone: once, open or not, as the
    /// single-stream loop always did). `Some(true)`: one worked; `None`: stop.
    fn idle_round<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
    ) -> Option<bool> {
        let n = self.lanes.len();
        let mut tried = false;
        for i in 1..=n {
            let l = (self.idle_rr + i) % n;
            let lane = &self.lanes[l];
            if !(lane.open || (l == STT_LANE && n == 1)) {
                continue;
            }
            tried = true;
            w.switch(l);
            let started = d.now();
            let result = d.work(w, |w| w.idle());
            let worked = matches!(result, Ok(true));
            if d.idled(started, result) == Flow::Stop {
                return None;
            }
            if worked {
                self.idle_rr = l;
                return Some(true);
            }
            let lane = &mut self.lanes[l];
            if lane.open && lane.endpoint && lane.idle_since.is_none() {
                lane.idle_since = Some(d.now());
            }
        }
        if !tried {
            // Nothing open anywhere: the single-stream loop's idle call, which finds
            // nothing to do.
            w.switch(STT_LANE);
            let started = d.now();
            let result = d.work(w, |w| w.idle());
            let worked = matches!(result, Ok(true));
            if d.idled(started, result) == Flow::Stop {
                return None;
            }
            return Some(worked);
        }
        Some(false)
    }

    /// When silence ends the first open endpoint lane (None: no lane waits for it).
    fn deadline(&mut self) -> Option<T> {
        let endpoint = self.endpoint;
        self.lanes
            .iter()
            .filter(|l| l.open && l.endpoint)
            .filter_map(|l| l.idle_since.map(|s| s.plus(endpoint)))
            .fold(None, |m: Option<T>, t| match m {
                Some(m) if m <= t => Some(m),
                _ => Some(t),
            })
    }

    /// Ends, with their newest partial, the open endpoint lanes silent for `endpoint`.
    fn silences_due<W: Work, D: Driver<W, Time = T>>(&mut self, w: &mut W, d: &mut D) -> Flow {
        for l in 0..self.lanes.len() {
            let lane = &self.lanes[l];
            let Some(since) = lane.idle_since else {
                continue;
            };
            if lane.open
                && lane.endpoint
                && since.plus(self.endpoint) <= d.now()
                && self.finish(w, d, l, None, since, Ending::Silence) == Flow::Stop
            {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    fn lane_op<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
        l: usize,
        op: LaneOp,
        at: T,
    ) -> Flow {
        if l >= self.lanes.len() {
            // Lanes are few (the driver bounds them) and their slots reused.
            self.lanes.resize_with(l + 1, || {
                let mut lane = Lane::new(false);
                lane.live = false;
                lane
            });
        }
        match op {
            LaneOp::Open { endpoint } => {
                self.abandon(w, l);
                let lane = &mut self.lanes[l];
                if !lane.live {
                    self.live_lanes += 1;
                }
                *lane = Lane::new(endpoint);
                w.switch(l);
                w.forget(); // a new session on the lane starts its own conversation
                Flow::Continue
            }
            LaneOp::Reset => {
                w.switch(l);
                w.forget();
                Flow::Continue
            }
            LaneOp::Context { on, tokens } => {
                w.switch(l);
                w.turn_options(on, tokens.map(|t| t as usize));
                Flow::Continue
            }
            LaneOp::Topic(text) => {
                w.switch(l);
                w.set_topic(&text);
                Flow::Continue
            }
            LaneOp::Transcript { turn, ev } => self.transcript(w, d, l, Some(turn), ev, at),
            LaneOp::EndOfSpeech { turn } => {
                self.begin(l, Some(turn));
                self.finish(w, d, l, None, at, Ending::EndOfSpeech)
            }
            LaneOp::Abandon => {
                self.abandon(w, l);
                Flow::Continue
            }
            LaneOp::EndOfInput => {
                if self.lanes[l].open {
                    self.finish(w, d, l, None, at, Ending::EndOfInput)
                } else {
                    Flow::Continue
                }
            }
            LaneOp::Close => {
                self.abandon(w, l);
                w.switch(l);
                w.forget(); // the conversation goes with the session
                let lane = &mut self.lanes[l];
                if lane.live && l != STT_LANE {
                    lane.live = false;
                    self.live_lanes -= 1;
                }
                Flow::Continue
            }
        }
    }

    /// Drops lane `l`'s open utterance without a result.
    fn abandon<W: Work>(&mut self, w: &mut W, l: usize) {
        let lane = &mut self.lanes[l];
        if !lane.open && lane.pending.is_none() {
            return;
        }
        lane.pending = None;
        lane.open = false;
        lane.newest.clear();
        lane.stale = 0;
        lane.idle_since = None;
        lane.utterance = 0;
        w.switch(l);
        w.abandon();
    }

    /// Numbers the lane's utterance if none is open yet.
    fn begin(&mut self, l: usize, turn: Option<u64>) {
        let lane = &mut self.lanes[l];
        if lane.utterance == 0 {
            lane.utterance = self.next_utterance;
            self.next_utterance += 1;
            lane.begun += 1;
            lane.turn = turn.unwrap_or(lane.begun);
        }
    }

    /// Takes one transcript for lane `l` that arrived at `at`.
    fn transcript<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
        l: usize,
        turn: Option<u64>,
        ev: Event,
        at: T,
    ) -> Flow {
        self.begin(l, turn);
        let lane = &mut self.lanes[l];
        lane.idle_since = None;
        match ev.kind {
            EventKind::Partial => {
                lane.open = true;
                lane.newest.clone_from(&ev.text);
                if lane.pending.replace(ev).is_some() {
                    lane.stale += 1;
                }
                Flow::Continue
            }
            // The final supersedes any partial still waiting.
            EventKind::Final => self.finish(w, d, l, Some(ev.text), at, Ending::Final),
        }
    }

    /// Ends lane `l`'s open utterance with `final_text` (None: its newest partial).
    fn finish<W: Work, D: Driver<W, Time = T>>(
        &mut self,
        w: &mut W,
        d: &mut D,
        l: usize,
        final_text: Option<Text>,
        eou: T,
        ending: Ending,
    ) -> Flow {
        self.begin(l, None);
        let lane = &mut self.lanes[l];
        if lane.pending.take().is_some() {
            lane.stale += 1;
        }
        lane.open = false;
        lane.idle_since = None;
        // A final without a word (some recognizers end an utterance with an empty one)
        // stands for the newest partial *received*: the ones superseded unseen count too,
        // or the answer would depend on how fast the partials came.
        let text = match final_text {
            Some(t) if t.chars().any(char::is_alphanumeric) || lane.newest.is_empty() => t,
            _ => lane.newest.clone(),
        };
        lane.newest.clear();
        let utterance = mem::take(&mut lane.utterance);
        let (turn, stale) = (lane.turn, mem::take(&mut lane.stale));
        w.switch(l);
        let started = d.now();
        let outcome = d.work(w, |w| w.finalize(&text));
        let f = Finished {
            utterance,
            lane: l,
            turn,
            text,
            outcome,
            ending,
            eou,
            waited: started.since(eou),
            latency: d.now().since(eou),
            stale,
        };
        d.finished(w, f)
    }
}

#[cfg(test)]
mod tests;
