//! `primd eval`: how early a query's intent stabilises with primd's own retrievers
//! (dense, lexical, hybrid: one section each, in one run), and how much latency
//! streaming really hides, on the user's data.
//!
//! Two replays per retriever, both through the daemon's code rather than a
//! re-implementation:
//! - [`prefix`]: every word prefix of every typed question through
//!   [`HybridSearcher::search`](crate::retriever::HybridSearcher::search) (the search the
//!   daemon runs on a final), giving the stabilisation measures of the study in
//!   `seeds/002` ([`metrics`]); the lexical retriever needs no embedding;
//! - [`streams`]: recorded recognizer partials through
//!   [`StreamingRetriever`](crate::stream::StreamingRetriever), streaming vs the
//!   `enabled = false` baseline, and optionally a sweep of its trigger and gate.
//!
//! [`report`] turns the figures into JSON, a one-screen summary and a Markdown report
//! with [`svg`] plots. Work runs on a few threads ([`progress`]), each with its own
//! embedder; [`evaluate`] wires it together for the command and the tests.

pub mod context;
pub mod conversations;
pub mod data;
pub mod metrics;
pub mod prefix;
pub mod progress;
pub mod report;
pub mod streams;
pub mod svg;
#[cfg(test)]
mod tests;
pub mod trigger;

use std::time::Instant;

use serde::Serialize;

use crate::config::RunConfig;
use crate::embed::Embed;
use crate::index::Index;
use crate::retriever::Retriever;
use data::{Qrels, QueryRecord, Relevance, StreamRecord};
use progress::Progress;
use streams::{StreamSummary, SweepPoint, UttResult};

/// How to run the evaluation.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    pub workers: usize,
    pub sweep: bool,
    /// Draw progress bars (when stderr is a terminal).
    pub progress: bool,
    /// Retrievers to measure, each in its own section (empty: `cfg.stream.retriever`).
    /// The sweep runs with the first.
    pub retrievers: Vec<Retriever>,
    /// A learned trigger to compare with the fixed one on the streams (each retriever
    /// it suits: [`trigger::suits`]).
    pub learned_trigger: Option<std::sync::Arc<crate::stream::trigger::TriggerModel>>,
    /// Gold answers: measure answer-in-context ([`context`]) too.
    pub answers: Option<std::sync::Arc<context::Answers>>,
    /// Answer-in-context with the reader too (rows `context N, reader`).
    pub reader: Option<context::ReaderEval>,
    /// The reader of the stream replays, as the daemon runs it (`None`: without).
    pub stream_reader: Option<(std::path::PathBuf, crate::context::ReadSettings)>,
}

/// The settings the run used, echoed in the report.
#[derive(Clone, Debug, Serialize)]
pub struct SettingsJson {
    pub trigger_interval: usize,
    pub similarity_threshold: f32,
    pub max_speculative_results: usize,
    pub min_tokens: usize,
    pub reflector_threshold: f32,
    pub full_search_candidates: usize,
    pub top_k: usize,
    pub idle_embed: bool,
    pub fusion: crate::fusion::FusionRule,
    pub lexical_weight: f32,
    pub lexical_candidates: usize,
    pub revision_weight: f32,
    /// "fixed" or "learned": the trigger of the `streaming` figures.
    pub trigger: crate::stream::trigger::TriggerKind,
    pub workers: usize,
    /// The stream replays ran with the reader (`context`, promotion, evidence).
    pub reader: bool,
}

/// Wall-clock seconds of each phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Seconds {
    pub prefix: f64,
    pub streams: f64,
    pub sweep: f64,
    pub total: f64,
}

/// The aggregate figures (`--json` prints exactly this).
#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    pub index: String,
    pub passages: usize,
    /// The embedder's precision ("int8" or "fp32"), filled in by the caller that loaded it.
    pub model: Option<String>,
    pub settings: SettingsJson,
    /// One section per retriever, in the order asked for.
    pub retrievers: Vec<RetrieverReport>,
    /// The sweep of the first retriever.
    pub sweep: Option<Vec<SweepPoint>>,
    /// `--train-trigger`: labels, fit and threshold choice on the typed questions.
    pub trigger_training: Option<trigger::TrainReport>,
    pub seconds: Seconds,
}

/// The figures of one retriever.
#[derive(Clone, Debug, Serialize)]
pub struct RetrieverReport {
    pub retriever: Retriever,
    pub prefix: prefix::PrefixSummary,
    pub streams: Option<StreamSummary>,
    /// Fixed vs learned trigger on the streams (when a learned one is given).
    pub trigger: Option<TriggerComparison>,
    /// Answer-in-context against budget (when an answers file is given).
    pub context: Option<ContextReport>,
}

/// Answer-in-context of the typed questions and of the streams' finals.
#[derive(Clone, Debug, Serialize)]
pub struct ContextReport {
    pub typed: context::ContextSummary,
    pub streams: Option<context::ContextSummary>,
}

/// The fixed and the learned trigger on the same streams.
#[derive(Clone, Debug, Serialize)]
pub struct TriggerComparison {
    /// (partial, final).
    pub threshold: (f32, f32),
    pub fixed: streams::ModeSummary,
    pub learned: streams::ModeSummary,
    /// Embeds + speculative searches per utterance, learned / fixed.
    pub cost_ratio: f64,
    /// Utterances whose top-10 held a relevant passage with the fixed trigger and not
    /// with the learned one, and the other way round.
    pub lost_relevant: usize,
    pub gained_relevant: usize,
}

/// The per-item results of one retriever, for the plots and record files.
pub struct RetrieverRun {
    pub retriever: Retriever,
    pub prefix_records: Vec<prefix::PrefixRecord>,
    /// (streaming, baseline) per utterance.
    pub stream_results: Option<(Vec<UttResult>, Vec<UttResult>)>,
}

/// The report plus the per-item results the plots need.
pub struct EvalRun {
    pub report: EvalReport,
    /// In the order of `report.retrievers`.
    pub runs: Vec<RetrieverRun>,
}

/// Runs both replays (the stream one when `streams` is given) for each retriever, and
/// the sweep for the first.
pub fn evaluate<E: Embed>(
    index: &Index,
    queries: &[QueryRecord],
    qrels: &Qrels,
    streams_in: Option<&[StreamRecord]>,
    cfg: &RunConfig,
    opts: &EvalOptions,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<EvalRun> {
    let started = Instant::now();
    let mut seconds = Seconds::default();
    let relevance = Relevance::new(index)?;
    let bar = Progress::new(opts.progress);
    let retrievers = if opts.retrievers.is_empty() {
        vec![cfg.stream.retriever]
    } else {
        opts.retrievers.clone()
    };

    let t = Instant::now();
    let outcomes = prefix::replay(
        index,
        &relevance,
        qrels,
        queries,
        cfg,
        &retrievers,
        opts.workers,
        &bar,
        &make_embedder,
    )?;
    seconds.prefix = t.elapsed().as_secs_f64();

    let mut reports = Vec::new();
    let mut runs = Vec::new();
    let mut sweep = None;
    for (i, (&retriever, outcome)) in retrievers.iter().zip(outcomes).enumerate() {
        let mut stream_results = None;
        let mut stream_summary = None;
        let mut comparison = None;
        if let Some(recs) = streams_in {
            let t = Instant::now();
            let judged = streams::judged(recs, &relevance, qrels);
            let mut stream_cfg = cfg.stream.clone();
            stream_cfg.retriever = retriever;
            let mut base_cfg = stream_cfg.clone();
            base_cfg.enabled = false;
            let run = |label: &str, stream: &crate::stream::StreamConfig| {
                streams::replay(
                    label,
                    index,
                    &relevance,
                    &judged,
                    cfg,
                    stream,
                    opts.stream_reader.as_ref(),
                    opts.workers,
                    &bar,
                    &make_embedder,
                )
            };
            let baseline = run(&format!("{retriever} baseline replay"), &base_cfg)?;
            let streaming = run(&format!("{retriever} streaming replay"), &stream_cfg)?;
            stream_summary = Some(streams::summarize(
                &streaming,
                &baseline,
                recs.len() - judged.len(),
            ));
            if let Some(model) = opts
                .learned_trigger
                .as_ref()
                .filter(|m| trigger::suits(m, retriever))
            {
                use crate::stream::trigger::Trigger;
                let mut fixed_cfg = stream_cfg.clone();
                fixed_cfg.trigger = Trigger::Fixed;
                let mut learned_cfg = stream_cfg.clone();
                learned_cfg.trigger = Trigger::Learned(model.clone());
                let other = |c: &crate::stream::StreamConfig, label: &str| {
                    if *c == stream_cfg {
                        Ok(streaming.clone())
                    } else {
                        run(&format!("{retriever} {label} trigger replay"), c)
                    }
                };
                let fixed = other(&fixed_cfg, "fixed")?;
                let learned = other(&learned_cfg, "learned")?;
                let (f, l) = (
                    streams::ModeSummary::of(&fixed),
                    streams::ModeSummary::of(&learned),
                );
                let cost = |m: &streams::ModeSummary| {
                    m.embeds_per_utterance + m.speculative_searches_per_utterance
                };
                let pairs = || fixed.iter().zip(&learned);
                comparison = Some(TriggerComparison {
                    threshold: model.thresholds(),
                    cost_ratio: cost(&l) / cost(&f).max(1e-9),
                    fixed: f,
                    learned: l,
                    lost_relevant: pairs().filter(|(a, b)| a.hit10 && !b.hit10).count(),
                    gained_relevant: pairs().filter(|(a, b)| !a.hit10 && b.hit10).count(),
                });
            }
            seconds.streams += t.elapsed().as_secs_f64();
            if opts.sweep && i == 0 {
                let t = Instant::now();
                let mut points = Vec::new();
                for &ti in &streams::SWEEP_TRIGGERS {
                    for &st in &streams::SWEEP_THRESHOLDS {
                        let mut s = stream_cfg.clone();
                        s.enabled = true;
                        s.trigger_interval = ti;
                        s.similarity_threshold = st;
                        let label = format!("sweep {ti} × {st}");
                        points.push((ti, st, run(&label, &s)?));
                    }
                }
                sweep = Some(streams::sweep_points(&points, &baseline));
                seconds.sweep = t.elapsed().as_secs_f64();
            }
            stream_results = Some((streaming, baseline));
        }
        let context = match &opts.answers {
            Some(answers) => {
                let typed = context::typed(
                    index,
                    queries,
                    answers,
                    cfg,
                    retriever,
                    opts.workers,
                    &bar,
                    opts.reader.as_ref(),
                    &make_embedder,
                )?;
                let streams = match (&stream_results, streams_in) {
                    (Some((streaming, _)), Some(recs)) => {
                        let judged = streams::judged(recs, &relevance, qrels);
                        let finals: Vec<_> = judged
                            .iter()
                            .zip(streaming)
                            .map(|((rec, _), r)| (*rec, r.top.as_slice()))
                            .collect();
                        Some(context::streams(
                            index,
                            &finals,
                            answers,
                            cfg,
                            retriever,
                            opts.workers,
                            &bar,
                            opts.reader.as_ref(),
                            &make_embedder,
                        )?)
                    }
                    _ => None,
                };
                Some(ContextReport { typed, streams })
            }
            None => None,
        };
        reports.push(RetrieverReport {
            retriever,
            prefix: prefix::summarize(&outcome),
            streams: stream_summary,
            trigger: comparison,
            context,
        });
        runs.push(RetrieverRun {
            retriever,
            prefix_records: outcome.records,
            stream_results,
        });
    }
    seconds.total = started.elapsed().as_secs_f64();
    let s = &cfg.stream;
    Ok(EvalRun {
        report: EvalReport {
            index: index.path().display().to_string(),
            passages: index.len(),
            model: None,
            settings: SettingsJson {
                trigger_interval: s.trigger_interval,
                similarity_threshold: s.similarity_threshold,
                max_speculative_results: s.max_speculative_results,
                min_tokens: s.min_tokens,
                reflector_threshold: s.reflector_threshold,
                full_search_candidates: s.full_search_candidates,
                top_k: s.top_k,
                idle_embed: s.idle_embed,
                fusion: s.fusion.rule,
                lexical_weight: s.fusion.lexical_weight,
                lexical_candidates: s.lexical_candidates,
                revision_weight: s.revision_weight,
                trigger: s.trigger.kind(),
                workers: opts.workers,
                reader: opts.stream_reader.is_some(),
            },
            retrievers: reports,
            sweep,
            trigger_training: None,
            seconds,
        },
        runs,
    })
}
