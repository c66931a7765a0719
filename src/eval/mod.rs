//! `primd eval`: how early a query's intent stabilises with primd's own dense
//! retriever, and how much latency streaming really hides, on the user's data.
//!
//! Two replays, both through the daemon's code rather than a re-implementation:
//! - [`prefix`]: every word prefix of every typed question through
//!   [`Searcher::search`](crate::search::Searcher::search) (binary scan + int8 rerank),
//!   giving the stabilisation measures of the study in `seeds/002` ([`metrics`]);
//! - [`streams`]: recorded recognizer partials through
//!   [`StreamingRetriever`](crate::stream::StreamingRetriever), streaming vs the
//!   `enabled = false` baseline, and optionally a sweep of its trigger and gate.
//!
//! [`report`] turns the figures into JSON, a one-screen summary and a Markdown report
//! with [`svg`] plots. Work runs on a few threads ([`progress`]), each with its own
//! embedder; [`evaluate`] wires it together for the command and the tests.

pub mod data;
pub mod metrics;
pub mod prefix;
pub mod progress;
pub mod report;
pub mod streams;
pub mod svg;
#[cfg(test)]
mod tests;

use std::time::Instant;

use serde::Serialize;

use crate::config::RunConfig;
use crate::embed::Embed;
use crate::index::Index;
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
    pub workers: usize,
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
    pub prefix: prefix::PrefixSummary,
    pub streams: Option<StreamSummary>,
    pub sweep: Option<Vec<SweepPoint>>,
    pub seconds: Seconds,
}

/// The report plus the per-item results the plots need.
pub struct EvalRun {
    pub report: EvalReport,
    pub prefix_records: Vec<prefix::PrefixRecord>,
    /// (streaming, baseline) per utterance.
    pub stream_results: Option<(Vec<UttResult>, Vec<UttResult>)>,
}

/// Runs both replays (the stream one when `streams` is given) and the sweep.
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

    let t = Instant::now();
    let outcome = prefix::replay(
        index,
        &relevance,
        qrels,
        queries,
        cfg,
        opts.workers,
        &bar,
        &make_embedder,
    )?;
    let prefix_summary = prefix::summarize(&outcome);
    seconds.prefix = t.elapsed().as_secs_f64();

    let mut stream_results = None;
    let mut stream_summary = None;
    let mut sweep = None;
    if let Some(recs) = streams_in {
        let t = Instant::now();
        let judged = streams::judged(recs, &relevance, qrels);
        let mut base_cfg = cfg.stream.clone();
        base_cfg.enabled = false;
        let run = |label: &str, stream: &crate::stream::StreamConfig| {
            streams::replay(
                label,
                index,
                &relevance,
                &judged,
                cfg,
                stream,
                opts.workers,
                &bar,
                &make_embedder,
            )
        };
        let baseline = run("baseline replay", &base_cfg)?;
        let streaming = run("streaming replay", &cfg.stream)?;
        stream_summary = Some(streams::summarize(
            &streaming,
            &baseline,
            recs.len() - judged.len(),
        ));
        seconds.streams = t.elapsed().as_secs_f64();
        if opts.sweep {
            let t = Instant::now();
            let mut runs = Vec::new();
            for &ti in &streams::SWEEP_TRIGGERS {
                for &st in &streams::SWEEP_THRESHOLDS {
                    let mut s = cfg.stream.clone();
                    s.enabled = true;
                    s.trigger_interval = ti;
                    s.similarity_threshold = st;
                    let label = format!("sweep {ti} × {st}");
                    runs.push((ti, st, run(&label, &s)?));
                }
            }
            sweep = Some(streams::sweep_points(&runs, &baseline));
            seconds.sweep = t.elapsed().as_secs_f64();
        }
        stream_results = Some((streaming, baseline));
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
                workers: opts.workers,
            },
            prefix: prefix_summary,
            streams: stream_summary,
            sweep,
            seconds,
        },
        prefix_records: outcome.records,
        stream_results,
    })
}
