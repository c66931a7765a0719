//! The policy on a simulated clock: scripted events at set times, work of set cost.
//! No threads, no model, no index: every order of work below is exact.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::input::to_text;
use crate::retriever::Ranked;
use crate::stream::{Counts, FinalPath, FinalTimings};

/// The simulated clock, in seconds, shared by the driver and the work.
type Clock = Rc<RefCell<f64>>;

/// Work that records what it was asked and costs set times on the clock.
struct Fake {
    clock: Clock,
    observe_s: f64,
    idle_s: f64,
    finalize_s: f64,
    /// Newest observed text not yet embedded by idle work, by lane.
    idle_todo: Vec<bool>,
    calls: Vec<String>,
    /// The lane switched to ([`Work::switch`]).
    lane: usize,
}

impl Fake {
    fn new(clock: &Clock, observe_s: f64, idle_s: f64, finalize_s: f64) -> Self {
        Fake {
            clock: clock.clone(),
            observe_s,
            idle_s,
            finalize_s,
            idle_todo: vec![false],
            calls: Vec::new(),
            lane: 0,
        }
    }
    /// A call, named with its lane when it is not the pipe's.
    fn call(&mut self, what: String) {
        let c = match self.lane {
            0 => what,
            l => format!("{l}: {what}"),
        };
        self.calls.push(c);
    }
    fn todo(&mut self) -> &mut bool {
        if self.idle_todo.len() <= self.lane {
            self.idle_todo.resize(self.lane + 1, false);
        }
        &mut self.idle_todo[self.lane]
    }
    fn spend(&self, s: f64) {
        *self.clock.borrow_mut() += s;
    }
}

impl Work for Fake {
    fn observe(&mut self, partial: &str) -> Result<Observed, EmbedError> {
        self.spend(self.observe_s);
        self.call(format!("observe {partial}"));
        *self.todo() = true;
        Ok(Observed::Waiting)
    }
    fn idle(&mut self) -> Result<bool, EmbedError> {
        if !std::mem::take(self.todo()) {
            return Ok(false);
        }
        self.spend(self.idle_s);
        self.call("idle".into());
        Ok(true)
    }
    fn switch(&mut self, lane: usize) {
        self.lane = lane;
    }
    fn abandon(&mut self) {
        *self.todo() = false;
        self.call("abandon".into());
    }
    fn finalize(&mut self, text: &str) -> Result<Outcome, EmbedError> {
        self.spend(self.finalize_s);
        self.call(format!("finalize {text}"));
        *self.todo() = false;
        Ok(Outcome {
            path: FinalPath::Full,
            hits: Ranked::new(),
            timings: FinalTimings::default(),
            counts: Counts::default(),
            speculation_cosine: None,
            reused_embedding: false,
            confidence: None,
            low_evidence: true,
            conversation: None,
            context: Default::default(),
        })
    }
}

/// What the driver saw of a finished utterance (times in seconds).
#[derive(Debug, PartialEq)]
struct Done {
    utterance: u64,
    text: String,
    ending: Ending,
    eou: f64,
    waited: f64,
    latency: f64,
    stale: u32,
}

/// Scripted events on the simulated clock.
struct Sim {
    clock: Clock,
    events: Vec<(f64, EventKind, &'static str)>,
    next: usize,
    /// `wait` answers `Woke` this many times before each real answer, each time
    /// `WAKE_S` later (a periodic wake-up).
    wakes: u32,
    woke: u32,
    /// Stop the loop after this many finished utterances.
    stop_after: Option<usize>,
    /// Ask for the next utterance boundary at this time.
    boundary_at: Option<f64>,
    /// In order: "tick", "wait <deadline>".
    trace: Vec<String>,
    observed: Vec<(u64, String, f64)>,
    done: Vec<Done>,
}

impl Sim {
    fn new(clock: &Clock, events: Vec<(f64, EventKind, &'static str)>) -> Self {
        Sim {
            clock: clock.clone(),
            events,
            next: 0,
            wakes: 0,
            woke: 0,
            stop_after: None,
            boundary_at: None,
            trace: Vec::new(),
            observed: Vec::new(),
            done: Vec::new(),
        }
    }
    fn take(&mut self) -> Next<Seconds> {
        let (t, kind, text) = self.events[self.next];
        self.next += 1;
        let ev = Event {
            kind,
            text: to_text(text).0,
            t: Some(t),
            received: Instant::now(),
            line: self.next as u64,
        };
        Next::Event(ev, Seconds(t))
    }
}

/// A simulated wait for the next arrival at `t`: when the deadline comes first, the
/// clock moves to it and the wait times out (true); else the clock moves to `t`.
fn arrives_after(clock: &Clock, deadline: Option<Seconds>, t: f64) -> bool {
    let mut c = clock.borrow_mut();
    match deadline {
        Some(d) if d < Seconds(t) => {
            *c = d.0;
            true
        }
        _ => {
            *c = c.max(t);
            false
        }
    }
}

fn p(t: f64, text: &'static str) -> (f64, EventKind, &'static str) {
    (t, EventKind::Partial, text)
}

fn f(t: f64, text: &'static str) -> (f64, EventKind, &'static str) {
    (t, EventKind::Final, text)
}

impl Driver<Fake> for Sim {
    type Time = Seconds;

    fn now(&self) -> Seconds {
        Seconds(*self.clock.borrow())
    }

    fn poll(&mut self) -> Next<Seconds> {
        if self.boundary_at.is_some_and(|b| Seconds(b) <= self.now()) {
            self.boundary_at = None;
            return Next::Boundary;
        }
        match self.events.get(self.next) {
            None => Next::End,
            Some(&(t, ..)) if Seconds(t) <= self.now() => self.take(),
            Some(_) => Next::Empty,
        }
    }

    fn wait(&mut self, deadline: Option<Seconds>) -> Next<Seconds> {
        self.trace
            .push(format!("wait {:?}", deadline.map(|d| (d.0 * 1e6).round())));
        if self.woke < self.wakes {
            self.woke += 1;
            *self.clock.borrow_mut() += WAKE_S;
            return Next::Woke;
        }
        self.woke = 0;
        let Some(&(t, ..)) = self.events.get(self.next) else {
            return Next::End;
        };
        if let Some(b) = self.boundary_at.filter(|&b| b < t) {
            self.boundary_at = None;
            *self.clock.borrow_mut() = b;
            return Next::Boundary;
        }
        if arrives_after(&self.clock, deadline, t) {
            return Next::Timeout;
        }
        self.take()
    }

    fn tick(&mut self) {
        self.trace.push("tick".into());
    }

    fn observed(
        &mut self,
        _w: &mut Fake,
        utterance: u64,
        ev: Event,
        started: Seconds,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        result.unwrap();
        self.observed
            .push((utterance, ev.text.to_string(), started.0));
        Flow::Continue
    }

    fn finished(&mut self, _w: &mut Fake, f: Finished<Seconds>) -> Flow {
        f.outcome.unwrap();
        self.done.push(Done {
            utterance: f.utterance,
            text: f.text.to_string(),
            ending: f.ending,
            eou: f.eou.0,
            waited: f.waited.as_secs_f64(),
            latency: f.latency.as_secs_f64(),
            stale: f.stale,
        });
        match self.stop_after {
            Some(n) if self.done.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        }
    }
}

const ENDPOINT: Duration = Duration::from_millis(800);

/// Time between two wake-ups of a waiting driver.
const WAKE_S: f64 = 0.1;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn run(sim: &mut Sim, work: &mut Fake) -> Stopped {
    Scheduler::new(ENDPOINT).run(work, sim)
}

#[test]
fn newest_partial_wins_idle_work_only_when_nothing_waits() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.05, 0.05, 0.01);
    let mut sim = Sim::new(
        &clock,
        vec![
            p(0.00, "a"),
            p(0.01, "a b"),     // arrives while "a" is observed...
            p(0.02, "a b c"),   // ...and is superseded by this one
            f(0.50, "a b c d"), // after the idle embed
        ],
    );
    assert_eq!(run(&mut sim, &mut work), Stopped::End);
    assert_eq!(
        work.calls,
        ["observe a", "observe a b c", "idle", "finalize a b c d"]
    );
    let observed: Vec<_> = sim.observed.iter().map(|o| (o.0, o.1.as_str())).collect();
    assert_eq!(observed, [(1, "a"), (1, "a b c")]);
    assert!(
        close(sim.observed[1].2, 0.05),
        "taken when the first work ended"
    );
    let d = &sim.done[0];
    assert_eq!((d.utterance, d.ending, d.stale), (1, Ending::Final, 1));
    assert!(
        close(d.eou, 0.5) && close(d.waited, 0.0) && close(d.latency, 0.01),
        "{d:?}"
    );
}

#[test]
fn an_empty_final_stands_for_the_newest_partial_received_even_one_superseded_unseen() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.3, 0.05, 0.02);
    // "x y z" is superseded by the final before any work sees it; the final is empty.
    let mut sim = Sim::new(&clock, vec![p(0.0, "x y"), p(0.1, "x y z"), f(0.2, " ")]);
    run(&mut sim, &mut work);
    assert_eq!(work.calls, ["observe x y", "finalize x y z"]);
    assert_eq!(sim.done[0].text.as_str(), "x y z");
}

#[test]
fn a_final_supersedes_a_waiting_partial_and_waits_for_work_in_progress() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.3, 0.05, 0.02);
    let mut sim = Sim::new(
        &clock,
        vec![p(0.0, "x y"), p(0.1, "x y z"), f(0.2, "X y z.")],
    );
    run(&mut sim, &mut work);
    assert_eq!(work.calls, ["observe x y", "finalize X y z."]);
    let d = &sim.done[0];
    assert_eq!((d.text.as_str(), d.stale), ("X y z.", 1));
    // Received at 0.2, taken when the observe ended at 0.3, answered 0.02 later.
    assert!(
        close(d.eou, 0.2) && close(d.waited, 0.1) && close(d.latency, 0.12),
        "{d:?}"
    );
}

#[test]
fn silence_ends_an_open_utterance_with_its_newest_partial() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.02, 0.005);
    let mut sim = Sim::new(
        &clock,
        vec![
            p(0.0, "turn off"),
            p(0.1, "turn off the lights"),
            p(3.0, "play jazz"),
            f(3.2, "Play jazz."),
        ],
    );
    run(&mut sim, &mut work);
    assert_eq!(
        work.calls,
        [
            "observe turn off",
            "idle",
            "observe turn off the lights",
            "idle",
            "finalize turn off the lights",
            "observe play jazz",
            "idle",
            "finalize Play jazz."
        ]
    );
    let d = &sim.done[0];
    assert_eq!(
        (d.utterance, d.text.as_str(), d.ending),
        (1, "turn off the lights", Ending::Silence)
    );
    // Out of work at 0.1 + 0.01 + 0.02; declared `endpoint` later.
    assert!(close(d.eou, 0.13), "{d:?}");
    assert!(close(d.waited, 0.8) && close(d.latency, 0.805), "{d:?}");
    let d = &sim.done[1];
    assert_eq!((d.utterance, d.ending), (2, Ending::Final));
    let observed: Vec<_> = sim.observed.iter().map(|o| o.0).collect();
    assert_eq!(observed, [1, 1, 2], "utterance numbers");
}

#[test]
fn wake_ups_tick_and_keep_the_silence_deadline() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.02, 0.005);
    let mut sim = Sim::new(&clock, vec![p(0.0, "turn off the lights"), p(5.0, "x")]);
    sim.wakes = 3;
    run(&mut sim, &mut work);
    assert_eq!(sim.done[0].ending, Ending::Silence);
    assert!(close(sim.done[0].eou, 0.03), "{:?}", sim.done[0]);
    // Out of work at 0.03: every wait until silence (woken at 0.13, 0.23, 0.33) has
    // the deadline 0.83, and the loop ticked before each.
    let waits: Vec<&String> = sim.trace.iter().filter(|t| t.starts_with("wait")).collect();
    assert_eq!(waits[..4], ["wait Some(830000.0)"; 4]);
    for pair in sim.trace.windows(2) {
        assert!(
            !(pair[0].starts_with("wait") && pair[1].starts_with("wait")),
            "a turn without a tick: {:?}",
            sim.trace
        );
    }
}

#[test]
fn end_of_input_finishes_the_open_utterance_with_its_newest_partial() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.01, 0.01);
    let mut sim = Sim::new(&clock, vec![p(0.0, "a b c"), p(0.0, "a b c d")]);
    assert_eq!(run(&mut sim, &mut work), Stopped::End);
    assert_eq!(
        work.calls,
        ["finalize a b c d"],
        "input ended before any work"
    );
    let d = &sim.done[0];
    assert_eq!((d.ending, d.stale), (Ending::EndOfInput, 2));
}

#[test]
fn finals_are_never_dropped_however_slow_the_work() {
    let clock = Clock::default();
    // Each final costs 0.1 s; utterances come every 0.01 s.
    let mut work = Fake::new(&clock, 0.05, 0.05, 0.1);
    let texts = [
        "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    let mut events = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        events.push(p(i as f64 * 0.01, t));
        events.push(f(i as f64 * 0.01 + 0.005, t));
    }
    let mut sim = Sim::new(&clock, events);
    run(&mut sim, &mut work);
    let done: Vec<(u64, &str)> = sim
        .done
        .iter()
        .map(|d| (d.utterance, d.text.as_str()))
        .collect();
    let want: Vec<(u64, &str)> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (i as u64 + 1, *t))
        .collect();
    assert_eq!(done, want);
    // The backlog grows: each final waited for the ones before it.
    assert!(sim.done.windows(2).all(|w| w[1].waited > w[0].waited));
}

#[test]
fn a_driver_can_stop_the_loop_between_utterances() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.01, 0.01);
    let mut sim = Sim::new(
        &clock,
        vec![p(0.0, "a"), f(0.1, "a"), p(0.2, "b"), f(0.3, "b")],
    );
    sim.stop_after = Some(1);
    let mut scheduler = Scheduler::new(ENDPOINT);
    assert_eq!(scheduler.run(&mut work, &mut sim), Stopped::Driver);
    assert!(!scheduler.is_open());
    assert_eq!(sim.done.len(), 1);
    // Run again (e.g. over a rebuilt work): numbering goes on.
    sim.stop_after = None;
    scheduler.run(&mut work, &mut sim);
    assert_eq!(sim.done[1].utterance, 2);
    assert_eq!(sim.done[1].text, "b");
}

#[test]
fn a_boundary_asked_mid_utterance_comes_after_its_final() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.01, 0.01);
    let events = vec![p(0.0, "a b"), f(0.1, "a b."), p(0.2, "c d"), f(0.3, "c d.")];
    let mut sim = Sim::new(&clock, events);
    sim.boundary_at = Some(0.05); // while "a b" is open
    let mut scheduler = Scheduler::new(ENDPOINT);
    assert_eq!(scheduler.run(&mut work, &mut sim), Stopped::Boundary);
    let done: Vec<_> = sim.done.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(done, ["a b."], "the open utterance finished first");
    assert_eq!(sim.next, 2, "the next utterance's events are not taken");
    // Idle: a boundary asked now comes at once.
    sim.boundary_at = Some(0.0);
    assert_eq!(scheduler.run(&mut work, &mut sim), Stopped::Boundary);
    assert_eq!(sim.next, 2);
    // Run again (e.g. over rebuilt work): numbering goes on.
    assert_eq!(scheduler.run(&mut work, &mut sim), Stopped::End);
    let d = &sim.done[1];
    assert_eq!((d.utterance, d.text.as_str()), (2, "c d."));
}

/// Scripted lane operations on the simulated clock (the socket hub's sessions).
struct Lanes {
    clock: Clock,
    ops: Vec<(f64, usize, LaneOp)>,
    /// (lane, turn, utterance, text, ending) of each finished utterance.
    done: Vec<(usize, u64, u64, String, Ending)>,
}

impl Lanes {
    fn new(clock: &Clock, mut ops: Vec<(f64, usize, LaneOp)>) -> Self {
        ops.reverse(); // popped from the end
        Lanes {
            clock: clock.clone(),
            ops,
            done: Vec::new(),
        }
    }
    fn take(&mut self) -> Next<Seconds> {
        let (t, lane, op) = self.ops.pop().unwrap();
        match (lane, op) {
            (0, LaneOp::Transcript { ev, .. }) => Next::Event(ev, Seconds(t)),
            (lane, op) => Next::Lane(lane, op, Seconds(t)),
        }
    }
}

fn ev(kind: EventKind, text: &str) -> Event {
    Event {
        kind,
        text: to_text(text).0,
        t: None,
        received: Instant::now(),
        line: 0,
    }
}

/// A partial of turn `turn` of lane `lane` at `t` (lane 0: the pipe's).
fn lp(t: f64, lane: usize, turn: u64, text: &str) -> (f64, usize, LaneOp) {
    let ev = ev(EventKind::Partial, text);
    (t, lane, LaneOp::Transcript { turn, ev })
}

fn lf(t: f64, lane: usize, turn: u64, text: &str) -> (f64, usize, LaneOp) {
    let ev = ev(EventKind::Final, text);
    (t, lane, LaneOp::Transcript { turn, ev })
}

fn open(t: f64, lane: usize) -> (f64, usize, LaneOp) {
    (t, lane, LaneOp::Open { endpoint: false })
}

impl Driver<Fake> for Lanes {
    type Time = Seconds;

    fn now(&self) -> Seconds {
        Seconds(*self.clock.borrow())
    }

    fn poll(&mut self) -> Next<Seconds> {
        match self.ops.last() {
            None => Next::End,
            Some(&(t, ..)) if Seconds(t) <= self.now() => self.take(),
            Some(_) => Next::Empty,
        }
    }

    fn wait(&mut self, deadline: Option<Seconds>) -> Next<Seconds> {
        let Some(&(t, ..)) = self.ops.last() else {
            return Next::End;
        };
        if arrives_after(&self.clock, deadline, t) {
            return Next::Timeout;
        }
        self.take()
    }

    fn observed(
        &mut self,
        _w: &mut Fake,
        _utterance: u64,
        _ev: Event,
        _started: Seconds,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        result.unwrap();
        Flow::Continue
    }

    fn finished(&mut self, _w: &mut Fake, f: Finished<Seconds>) -> Flow {
        f.outcome.unwrap();
        let text = f.text.to_string();
        self.done
            .push((f.lane, f.turn, f.utterance, text, f.ending));
        Flow::Continue
    }
}

#[test]
fn lanes_are_served_in_turn_so_a_chatty_one_cannot_starve_a_quiet_one() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.1, 0.01, 0.01);
    let mut lanes = Lanes::new(
        &clock,
        vec![
            open(0.0, 1),
            open(0.0, 2),
            lp(0.0, 1, 1, "a1"),
            lp(0.0, 2, 1, "b1"),
            lp(0.05, 1, 1, "a2"),
            lp(0.15, 1, 1, "a3"), // supersedes a2, unseen
            lp(0.16, 1, 1, "a4"),
            lf(0.17, 2, 1, "B."),
            lf(0.5, 1, 1, "A."),
        ],
    );
    assert_eq!(
        Scheduler::new(ENDPOINT).run(&mut work, &mut lanes),
        Stopped::End
    );
    assert_eq!(
        work.calls,
        [
            "1: observe a1",  // 0.0-0.1
            "2: observe b1",  // lane 1's a2 waits: lane 2's turn
            "2: finalize B.", // drained at 0.2: a final before any partial work
            "1: observe a4",  // the newest of lane 1's partials
            "1: idle",
            "1: finalize A."
        ]
    );
    let done: Vec<_> = lanes
        .done
        .iter()
        .map(|d| (d.0, d.1, d.2, d.3.as_str()))
        .collect();
    assert_eq!(
        done,
        [(2, 1, 2, "B."), (1, 1, 1, "A.")],
        "numbered as they began"
    );
}

#[test]
fn silence_ends_the_pipe_s_utterance_only_sessions_end_their_own() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.01, 0.01);
    let mut lanes = Lanes::new(
        &clock,
        vec![
            open(0.0, 1),
            lp(0.0, 0, 0, "turn off"),
            lp(0.0, 1, 4, "play some"),
            (5.0, 1, LaneOp::EndOfSpeech { turn: 4 }),
            lp(6.0, 1, 5, "never ended"),
        ],
    );
    assert_eq!(
        Scheduler::new(ENDPOINT).run(&mut work, &mut lanes),
        Stopped::End
    );
    let done: Vec<_> = lanes
        .done
        .iter()
        .map(|d| (d.0, d.1, d.3.as_str(), d.4))
        .collect();
    assert_eq!(
        done,
        [
            (0, 1, "turn off", Ending::Silence),
            (1, 4, "play some", Ending::EndOfSpeech),
            (1, 5, "never ended", Ending::EndOfInput)
        ]
    );
}

#[test]
fn an_abandoned_or_closed_turn_gets_no_result() {
    let clock = Clock::default();
    let mut work = Fake::new(&clock, 0.01, 0.01, 0.01);
    let mut lanes = Lanes::new(
        &clock,
        vec![
            open(0.0, 1),
            lp(0.0, 1, 1, "first"),
            (0.1, 1, LaneOp::Abandon),
            lp(0.2, 1, 2, "second"),
            lf(0.3, 1, 2, "Second."),
            lp(0.4, 1, 3, "third"),
            (0.5, 1, LaneOp::Close),
            open(0.6, 1), // the lane reused by another session
            (0.7, 1, LaneOp::EndOfSpeech { turn: 1 }),
        ],
    );
    let mut scheduler = Scheduler::new(ENDPOINT);
    assert_eq!(scheduler.run(&mut work, &mut lanes), Stopped::End);
    let done: Vec<_> = lanes.done.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(
        done,
        [(2, "Second."), (1, "")],
        "nothing said: an empty final"
    );
    assert_eq!(work.calls.iter().filter(|c| *c == "1: abandon").count(), 2);
    assert!(!scheduler.is_open());
}
