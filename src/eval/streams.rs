//! Real-stream replay: recorded recognizer partials through the daemon's
//! [`StreamingRetriever`], streaming vs the `enabled = false` baseline.
//!
//! The replay runs the daemon's own [`Scheduler`] (drain, newest partial wins, idle
//! embed, silence endpoint, finals never dropped), driven by a virtual clock instead of
//! the wall clock: time is audio seconds, events arrive at their `t` (each partial, then
//! the final at the end of the audio), and each piece of work advances the clock by
//! its *measured* duration. So the replay runs as fast as the machine allows (no
//! sleeping) and keeps the order of work the daemon would have at real time: a partial
//! whose successor arrives before the retriever is free is superseded, never observed
//! (the recordings stamp the last partial and the final at the same instant, so the
//! last partial is usually superseded, as it is in `primd run` fed the same recording);
//! idle work runs only when nothing has arrived; the final waits for work in progress.
//! Each record is one utterance, ended by its final (the silence endpoint,
//! `endpoint_ms`, would end it earlier only if the recording had a longer gap; the
//! record is then judged on the utterance its final ends).
//!
//! Latency is what the daemon reports as `eou_to_result`: the time the final waited for
//! work in progress plus the time of [`StreamingRetriever::finalize`], both on the
//! virtual clock, i.e. measured. Given the measured durations the order of work is
//! deterministic; on a slower or busier machine more partials are superseded, exactly
//! as they would be in the daemon.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::data::{Qrels, Relevance, StreamRecord};
use super::metrics::{self, pareto_front};
use super::progress::{Progress, run_parallel};
use crate::config::RunConfig;
use crate::embed::{Embed, EmbedError};
use crate::index::Index;
use crate::input::{Event, EventKind, to_text};
use crate::retriever::HybridSearcher;
use crate::scheduler::{Driver, Finished, Flow, Next, Scheduler, Seconds, Time};
use crate::stream::normalize::Normalizer;
use crate::stream::{Counts, FinalPath, Observed, StreamConfig, StreamingRetriever};

/// What one utterance gave in one mode.
#[derive(Clone, Debug, PartialEq)]
pub struct UttResult {
    pub path: FinalPath,
    pub hit1: bool,
    pub hit10: bool,
    /// End of utterance → results, milliseconds: waiting for work in progress, then
    /// `finalize` (measured).
    pub latency_ms: f64,
    /// The part of it the final waited for work in progress.
    pub waited_ms: f64,
    pub counts: Counts,
    /// Audio time (s) at which a speculative scan's candidates first held a relevant
    /// passage (when that scan finished).
    pub first_relevant_s: Option<f64>,
    pub audio_s: f64,
    /// Share of the final top-10 found in the last speculative candidates (when any).
    pub overlap: Option<f64>,
    /// Partials never observed (a newer event came at the same audio time).
    pub superseded: u32,
    pub max_partial_work_ms: f64,
    /// Shortest audio time between an observed partial and the next event, ms.
    pub min_gap_ms: f64,
    /// The final's passages, best first (for answer-in-context: `super::context`).
    pub top: Vec<u32>,
}

/// The virtual-clock driver of the scheduler over one record.
struct Replay<'a> {
    rec: &'a StreamRecord,
    final_t: f64,
    /// Index of the next event to arrive (the partials, then the final).
    next: usize,
    now: Seconds,
    /// `received` of the events (unused on this clock).
    epoch: Instant,
    is_rel: &'a dyn Fn(u32) -> bool,
    first_relevant_s: Option<f64>,
    /// Start of the last observed partial's work, until the retriever waits.
    work_start: Option<Seconds>,
    max_work: Duration,
    min_gap_ms: f64,
    /// The speculative candidates after the newest observed partial (what the final
    /// is judged against: idle work does not change them).
    speculative: Vec<u32>,
    finished: Option<Finished<Seconds>>,
    error: Option<EmbedError>,
}

impl Replay<'_> {
    fn events(&self) -> usize {
        self.rec.partials.len() + 1
    }

    fn t_of(&self, i: usize) -> f64 {
        self.rec.partials.get(i).map_or(self.final_t, |p| p.t)
    }

    /// Takes the next event.
    fn take(&mut self) -> Next<Seconds> {
        let i = self.next;
        self.next += 1;
        let (kind, text) = match self.rec.partials.get(i) {
            Some(p) => (EventKind::Partial, &p.text),
            None => (EventKind::Final, &self.rec.final_text),
        };
        let t = self.t_of(i);
        let ev = Event {
            kind,
            text: to_text(text).0,
            t: Some(t),
            received: self.epoch,
            line: i as u64 + 1,
        };
        Next::Event(ev, Seconds(t))
    }

    fn stop_on(&mut self, e: EmbedError) -> Flow {
        self.error = Some(e);
        Flow::Stop
    }
}

impl<'i, E: Embed> Driver<StreamingRetriever<'i, E>> for Replay<'_> {
    type Time = Seconds;

    fn now(&self) -> Seconds {
        self.now
    }

    fn poll(&mut self) -> Next<Seconds> {
        if self.next == self.events() {
            Next::End
        } else if Seconds(self.t_of(self.next)) <= self.now {
            self.take()
        } else {
            Next::Empty
        }
    }

    fn wait(&mut self, deadline: Option<Seconds>) -> Next<Seconds> {
        self.work_start = None;
        if self.next == self.events() {
            return Next::End;
        }
        let t = Seconds(self.t_of(self.next));
        match deadline {
            Some(d) if d < t => {
                self.now = d;
                Next::Timeout
            }
            _ => {
                if self.now < t {
                    self.now = t;
                }
                self.take()
            }
        }
    }

    fn work<R>(
        &mut self,
        w: &mut StreamingRetriever<'i, E>,
        f: impl FnOnce(&mut StreamingRetriever<'i, E>) -> R,
    ) -> R {
        let t0 = Instant::now();
        let r = f(w);
        self.now = self.now.plus(t0.elapsed());
        r
    }

    fn observed(
        &mut self,
        r: &mut StreamingRetriever<'i, E>,
        _utterance: u64,
        ev: Event,
        started: Seconds,
        result: Result<Observed, EmbedError>,
    ) -> Flow {
        let observed = match result {
            Ok(o) => o,
            Err(e) => return self.stop_on(e),
        };
        self.work_start = Some(started);
        self.max_work = self.max_work.max(self.now.since(started));
        let t = ev.t.unwrap_or(0.0);
        let next_t = self.t_of(ev.line as usize); // the event after this one
        self.min_gap_ms = self.min_gap_ms.min((next_t - t) * 1e3);
        // New speculative candidates: a dense scan, or (lexical retrievers) every partial.
        let refreshed = observed == Observed::Speculated
            || (r.config().enabled && r.config().retriever.uses_lexical());
        if refreshed
            && self.first_relevant_s.is_none()
            && r.speculative_candidates().any(|p| (self.is_rel)(p))
        {
            self.first_relevant_s = Some(self.now.0);
        }
        self.speculative.clear();
        self.speculative.extend(r.speculative_candidates());
        Flow::Continue
    }

    fn idled(&mut self, _started: Seconds, result: Result<bool, EmbedError>) -> Flow {
        if let Err(e) = result {
            return self.stop_on(e);
        }
        if let Some(s) = self.work_start {
            self.max_work = self.max_work.max(self.now.since(s));
        }
        Flow::Continue
    }

    fn finished(&mut self, _r: &mut StreamingRetriever<'i, E>, f: Finished<Seconds>) -> Flow {
        self.work_start = None;
        self.finished = Some(f);
        Flow::Continue
    }
}

/// Replays one utterance through `r` (which is reset after it) with the daemon's
/// scheduler; `endpoint` is the daemon's silence endpoint.
pub fn replay_one<E: Embed>(
    r: &mut StreamingRetriever<'_, E>,
    rec: &StreamRecord,
    relevant: &[u32],
    relevance: &Relevance,
    endpoint: Duration,
) -> anyhow::Result<UttResult> {
    let is_rel = |passage: u32| relevant.binary_search(&relevance.doc(passage)).is_ok();
    let mut replay = Replay {
        rec,
        final_t: rec.final_t(),
        next: 0,
        now: Seconds(0.0),
        epoch: Instant::now(),
        is_rel: &is_rel,
        first_relevant_s: None,
        work_start: None,
        max_work: Duration::ZERO,
        min_gap_ms: f64::INFINITY,
        speculative: Vec::new(),
        finished: None,
        error: None,
    };
    Scheduler::new(endpoint).run(r, &mut replay);
    if let Some(e) = replay.error {
        return Err(e.into());
    }
    let f = replay
        .finished
        .ok_or_else(|| anyhow::anyhow!("stream {}: no utterance ended", rec.id))?;
    let outcome = f.outcome?;
    let top10 = &outcome.hits[..outcome.hits.len().min(10)];
    let speculated = outcome.counts.speculative_searches > 0 || outcome.counts.lexical_searches > 0;
    let overlap = (speculated && !top10.is_empty()).then(|| {
        let shared = top10
            .iter()
            .filter(|h| replay.speculative.contains(&h.index))
            .count();
        shared as f64 / top10.len() as f64
    });
    Ok(UttResult {
        path: outcome.path,
        hit1: top10.first().is_some_and(|h| is_rel(h.index)),
        hit10: top10.iter().any(|h| is_rel(h.index)),
        latency_ms: f.latency.as_secs_f64() * 1e3,
        waited_ms: f.waited.as_secs_f64() * 1e3,
        counts: outcome.counts,
        first_relevant_s: replay.first_relevant_s,
        audio_s: replay.final_t,
        overlap,
        superseded: f.stale,
        max_partial_work_ms: replay.max_work.as_secs_f64() * 1e3,
        min_gap_ms: replay.min_gap_ms,
        top: top10.iter().map(|h| h.index).collect(),
    })
}

/// The utterances that have a relevant document in the index, with those documents.
pub fn judged<'s>(
    streams: &'s [StreamRecord],
    relevance: &Relevance,
    qrels: &Qrels,
) -> Vec<(&'s StreamRecord, Vec<u32>)> {
    streams
        .iter()
        .map(|s| (s, relevance.relevant(qrels, &s.id)))
        .filter(|(_, rel)| !rel.is_empty())
        .collect()
}

/// Replays every utterance with `stream` settings (one retriever per worker, with the
/// reader in `reader` when given: it reads ahead in idle time and at the end of speech,
/// as in the daemon).
#[allow(clippy::too_many_arguments)]
pub fn replay<E: Embed>(
    label: &str,
    index: &Index,
    relevance: &Relevance,
    utterances: &[(&StreamRecord, Vec<u32>)],
    cfg: &RunConfig,
    stream: &StreamConfig,
    reader: Option<&(std::path::PathBuf, crate::context::ReadSettings)>,
    workers: usize,
    progress: &Progress,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<Vec<UttResult>> {
    run_parallel(
        label,
        utterances,
        workers,
        progress,
        || {
            let mut r = StreamingRetriever::new(
                stream.clone(),
                make_embedder()?,
                HybridSearcher::new(index)?,
                Normalizer::new(cfg.fillers.iter().map(String::as_str)),
            );
            if let Some((dir, settings)) = reader {
                r.set_reader(crate::embed::reader::Reader::load(dir)?, *settings);
            }
            Ok(r)
        },
        |r, _, (rec, rel)| {
            replay_one(
                r,
                rec,
                rel,
                relevance,
                Duration::from_millis(cfg.endpoint_ms),
            )
        },
    )
}

/// Latency percentiles, milliseconds, and every utterance's latency (ascending), so that
/// runs over parts of a set (cross-validation folds) can be pooled exactly.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub sorted: Vec<f64>,
}

impl Latency {
    pub fn of(results: &[UttResult]) -> Self {
        let mut v: Vec<f64> = results.iter().map(|r| r.latency_ms).collect();
        v.sort_by(f64::total_cmp);
        let p = |q| metrics::percentile(&v, q).unwrap_or(0.0);
        Latency {
            p50: p(50.0),
            p90: p(90.0),
            p95: p(95.0),
            p99: p(99.0),
            max: v.last().copied().unwrap_or(0.0),
            sorted: v,
        }
    }
}

/// Share of utterances per final path.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Paths {
    pub reuse: f64,
    pub rerank: f64,
    pub full: f64,
    pub lexical: f64,
    pub empty: f64,
}

/// Aggregates of one mode (streaming or baseline).
#[derive(Clone, Debug, Serialize)]
pub struct ModeSummary {
    pub utterances: usize,
    pub hit1: f64,
    pub hit10: f64,
    pub paths: Paths,
    pub speculative_searches_per_utterance: f64,
    /// Lexical queries on partials per utterance (lexical and hybrid retrievers).
    pub lexical_searches_per_utterance: f64,
    pub gate_skips_per_utterance: f64,
    pub embeds_per_utterance: f64,
    pub latency_ms: Latency,
    /// Utterances whose speculative candidates held a relevant passage at some point.
    pub relevant_in_speculation: f64,
    /// Over those: audio time of the first such scan, seconds, and as a share of the audio.
    pub first_relevant_s_median: Option<f64>,
    pub first_relevant_fraction_mean: Option<f64>,
    /// Mean share of the final top-10 that the last speculative top-N already held.
    pub overlap_mean: Option<f64>,
    /// Utterances that speculated and still fell back to a full search (reflector).
    pub fell_back_to_full: usize,
    pub superseded_partials_per_utterance: f64,
    /// Utterances whose final had to wait for work in progress.
    pub final_waited: usize,
    pub max_partial_work_ms: f64,
    /// Shortest audio time between an observed partial and the next event (the time the
    /// daemon would have had for that work), ms; `None` when no partial was observed.
    pub min_partial_gap_ms: Option<f64>,
    /// Question-sentence pairs the reader read per utterance, ahead (while the user
    /// spoke) and after the end of speech (0 without the reader).
    pub pairs_read_per_utterance: f64,
    pub pairs_read_final_per_utterance: f64,
    /// With the reader: end of speech → results over the utterances it read nothing
    /// for after the end of speech (what it read ahead covered the final).
    pub read_ahead_covered: Option<Covered>,
}

/// End of speech → results of the utterances the reader's reading ahead covered.
#[derive(Clone, Debug, Serialize)]
pub struct Covered {
    pub utterances: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
}

impl Covered {
    fn of(results: &[UttResult]) -> Option<Covered> {
        if results.iter().all(|r| r.counts.pairs_read == 0) {
            return None;
        }
        let mut v: Vec<f64> = results
            .iter()
            .filter(|r| r.counts.pairs_read > 0 && r.counts.pairs_read_final == 0)
            .map(|r| r.latency_ms)
            .collect();
        v.sort_by(f64::total_cmp);
        Some(Covered {
            utterances: v.len(),
            p50_ms: metrics::percentile(&v, 50.0).unwrap_or(0.0),
            p90_ms: metrics::percentile(&v, 90.0).unwrap_or(0.0),
        })
    }
}

impl ModeSummary {
    pub fn of(results: &[UttResult]) -> Self {
        let n = results.len().max(1) as f64;
        let share =
            |f: &dyn Fn(&UttResult) -> bool| results.iter().filter(|r| f(r)).count() as f64 / n;
        let per =
            |f: &dyn Fn(&UttResult) -> u32| results.iter().map(|r| f(r) as f64).sum::<f64>() / n;
        let firsts: Vec<f64> = results.iter().filter_map(|r| r.first_relevant_s).collect();
        let first_frac: Vec<f64> = results
            .iter()
            .filter_map(|r| r.first_relevant_s.map(|t| t / r.audio_s.max(1e-9)))
            .collect();
        let overlaps: Vec<f64> = results.iter().filter_map(|r| r.overlap).collect();
        ModeSummary {
            utterances: results.len(),
            hit1: share(&|r| r.hit1),
            hit10: share(&|r| r.hit10),
            paths: Paths {
                reuse: share(&|r| r.path == FinalPath::Reuse),
                rerank: share(&|r| r.path == FinalPath::Rerank),
                full: share(&|r| r.path == FinalPath::Full),
                lexical: share(&|r| r.path == FinalPath::Lexical),
                empty: share(&|r| r.path == FinalPath::Empty),
            },
            speculative_searches_per_utterance: per(&|r| r.counts.speculative_searches),
            lexical_searches_per_utterance: per(&|r| r.counts.lexical_searches),
            gate_skips_per_utterance: per(&|r| r.counts.gate_skips),
            embeds_per_utterance: per(&|r| r.counts.embeds),
            latency_ms: Latency::of(results),
            relevant_in_speculation: firsts.len() as f64 / n,
            first_relevant_s_median: metrics::median(&firsts),
            first_relevant_fraction_mean: metrics::mean(&first_frac),
            overlap_mean: metrics::mean(&overlaps),
            fell_back_to_full: results
                .iter()
                .filter(|r| r.counts.speculative_searches > 0 && r.path == FinalPath::Full)
                .count(),
            superseded_partials_per_utterance: per(&|r| r.superseded),
            final_waited: results.iter().filter(|r| r.waited_ms > 0.0).count(),
            max_partial_work_ms: results
                .iter()
                .map(|r| r.max_partial_work_ms)
                .fold(0.0, f64::max),
            min_partial_gap_ms: Some(
                results
                    .iter()
                    .map(|r| r.min_gap_ms)
                    .fold(f64::INFINITY, f64::min),
            )
            .filter(|g| g.is_finite()),
            pairs_read_per_utterance: per(&|r| r.counts.pairs_read),
            pairs_read_final_per_utterance: per(&|r| r.counts.pairs_read_final),
            read_ahead_covered: Covered::of(results),
        }
    }
}

/// Streaming vs baseline on the same utterances.
#[derive(Clone, Debug, Serialize)]
pub struct StreamSummary {
    pub utterances: usize,
    pub skipped_no_relevant: usize,
    pub streaming: ModeSummary,
    pub baseline: ModeSummary,
    /// The baseline's top-10 held a relevant passage and streaming's did not.
    pub lost_relevant: usize,
    /// The other way round.
    pub gained_relevant: usize,
    /// Mis-fires: fell back to a full search after speculating, or lost a relevant passage.
    pub misfires: usize,
}

pub fn summarize(streaming: &[UttResult], baseline: &[UttResult], skipped: usize) -> StreamSummary {
    let lost = |a: &UttResult, b: &UttResult| b.hit10 && !a.hit10;
    let pairs = || streaming.iter().zip(baseline);
    StreamSummary {
        utterances: streaming.len(),
        skipped_no_relevant: skipped,
        streaming: ModeSummary::of(streaming),
        baseline: ModeSummary::of(baseline),
        lost_relevant: pairs().filter(|(s, b)| lost(s, b)).count(),
        gained_relevant: pairs().filter(|(s, b)| lost(b, s)).count(),
        misfires: pairs()
            .filter(|(s, b)| {
                lost(s, b) || (s.counts.speculative_searches > 0 && s.path == FinalPath::Full)
            })
            .count(),
    }
}

/// `trigger_interval` values tried by `--sweep`.
pub const SWEEP_TRIGGERS: [usize; 4] = [1, 2, 3, 5];
/// `similarity_threshold` values tried by `--sweep`.
pub const SWEEP_THRESHOLDS: [f32; 3] = [0.90, 0.95, 0.99];

/// One setting of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub trigger_interval: usize,
    pub similarity_threshold: f32,
    pub speculative_searches_per_utterance: f64,
    /// Embeds per utterance (idle ones and the final's included).
    pub embeds_per_utterance: f64,
    pub gate_skips_per_utterance: f64,
    pub hit1: f64,
    pub hit10: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub lost_relevant: usize,
    pub pareto: bool,
}

/// Builds the sweep's points from each setting's results; marks the Pareto front of
/// (speculative searches per utterance ↓, hit@10 ↑, p50 latency ↓).
pub fn sweep_points(
    runs: &[(usize, f32, Vec<UttResult>)],
    baseline: &[UttResult],
) -> Vec<SweepPoint> {
    let mut points: Vec<SweepPoint> = runs
        .iter()
        .map(|(ti, st, res)| {
            let m = ModeSummary::of(res);
            SweepPoint {
                trigger_interval: *ti,
                similarity_threshold: *st,
                speculative_searches_per_utterance: m.speculative_searches_per_utterance,
                embeds_per_utterance: m.embeds_per_utterance,
                gate_skips_per_utterance: m.gate_skips_per_utterance,
                hit1: m.hit1,
                hit10: m.hit10,
                p50_ms: m.latency_ms.p50,
                p90_ms: m.latency_ms.p90,
                lost_relevant: res
                    .iter()
                    .zip(baseline)
                    .filter(|(s, b)| b.hit10 && !s.hit10)
                    .count(),
                pareto: false,
            }
        })
        .collect();
    let coords: Vec<(f64, f64, f64)> = points
        .iter()
        .map(|p| (p.speculative_searches_per_utterance, p.hit10, p.p50_ms))
        .collect();
    for i in pareto_front(&coords) {
        points[i].pareto = true;
    }
    points
}
