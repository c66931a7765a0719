//! Word-prefix replay: every prefix `q(1:t)` of every query is retrieved, and the
//! stabilisation measures of [`metrics`](super::metrics) are computed from the results.
//!
//! A prefix is the first `t` words of the query *as the daemon sees it*: normalised
//! by the same [`Normalizer`] (case, punctuation, configured fillers), so `n` counts
//! the words that `trigger_interval` counts. Each prefix is searched with
//! [`HybridSearcher::search`] by every retriever asked for, as the daemon's final
//! search runs it: dense is the 1-bit top-`full_search_candidates` scan and int8
//! rerank of the prefix's embedding, lexical the BM25 top-k (no embedding), hybrid
//! the fusion of both over lexical top-`lexical_candidates` ∪ binary top-C. A prefix
//! is embedded once for all retrievers that need it. Identical prefixes ("what is
//! the", shared by hundreds of questions) are retrieved once: retrieval is a pure
//! function of the text, so this skips no prefix, only repeated work.
//!
//! Relevance is judged per document (chunks of a relevant document all count), and
//! the top-1 of `t_sc` is a document too, so a query does not "change its mind" when
//! two chunks of one document swap places.

use std::collections::HashMap;

use serde::Serialize;

use super::data::{Qrels, QueryRecord, Relevance};
use super::metrics::{
    self, CADENCES, HEADLINE_K, KS, LATENCIES_MS, PhiDist, QType, THETAS, hidden_ms,
};
use super::progress::{Progress, run_parallel};
use crate::config::RunConfig;
use crate::dense::Query;
use crate::embed::{DIM, Embed};
use crate::index::Index;
use crate::retriever::{HybridSearcher, Ranked, Retriever, SearchParams};
use crate::stream::normalize::Normalizer;

/// Results kept per prefix: enough for the largest k of [`KS`].
const DEPTH: usize = 10;
/// Empty slot of a result list.
const NONE: u32 = u32::MAX;

/// The headline operating point of the study: L = 600 ms, δ = 3 w/s, θ = 0.8.
pub const HEADLINE_POINT: (f64, f64, f64) = (600.0, 3.0, 0.8);

/// What the replay found for one query.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefixRecord {
    pub id: String,
    pub qtype: QType,
    /// Words of the normalised query.
    pub n: usize,
    pub t_sc: usize,
    /// `t_suf` at each k of [`KS`].
    pub t_suf: [Option<usize>; KS.len()],
    /// A relevant passage is in the top-k at the full query (the favourable slice).
    pub favourable: [bool; KS.len()],
}

impl PrefixRecord {
    /// `t*` of the streamable split at `k`: `t_suf` on the favourable slice, `t_sc`
    /// (the fallback) elsewhere.
    pub fn t_star(&self, k_slot: usize) -> usize {
        if self.favourable[k_slot] {
            self.t_suf[k_slot].unwrap_or(self.n)
        } else {
            self.t_sc
        }
    }
}

/// The replay's per-query records and what it left out.
#[derive(Clone, Debug, Default)]
pub struct PrefixOutcome {
    pub records: Vec<PrefixRecord>,
    /// Queries without a relevant document in the index (no qrels, or ids not indexed).
    pub skipped_no_relevant: usize,
    /// Queries with no word left after normalisation.
    pub skipped_empty: usize,
    pub prefixes: usize,
    pub unique_prefixes: usize,
}

/// Retrieves every word prefix of every query with each of `retrievers`, giving one
/// outcome per retriever (in that order); `make_embedder` is called once per worker,
/// and not at all when no retriever needs embeddings.
#[allow(clippy::too_many_arguments)]
pub fn replay<E: Embed>(
    index: &Index,
    relevance: &Relevance,
    qrels: &Qrels,
    queries: &[QueryRecord],
    cfg: &RunConfig,
    retrievers: &[Retriever],
    workers: usize,
    progress: &Progress,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<Vec<PrefixOutcome>> {
    let mut out = PrefixOutcome::default();
    let mut normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
    normalizer.set_rules(index.word_rules());
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut unique: Vec<String> = Vec::new();
    // Per kept query: its record's fixed part, relevant documents, prefix ids.
    let mut kept: Vec<(&QueryRecord, Vec<u32>, Vec<u32>)> = Vec::new();
    let mut norm = String::new();
    for q in queries {
        let rel = relevance.relevant(qrels, &q.id);
        if rel.is_empty() {
            out.skipped_no_relevant += 1;
            continue;
        }
        normalizer.normalize_into(&q.text, &mut norm);
        if norm.is_empty() {
            out.skipped_empty += 1;
            continue;
        }
        let mut prefix_ids = Vec::new();
        let mut end = 0;
        for word in norm.split(' ') {
            end += word.len() + usize::from(end > 0);
            let prefix = &norm[..end];
            let next = unique.len() as u32;
            let id = *ids.entry(prefix.to_string()).or_insert_with(|| {
                unique.push(prefix.to_string());
                next
            });
            prefix_ids.push(id);
        }
        out.prefixes += prefix_ids.len();
        kept.push((q, rel, prefix_ids));
    }
    out.unique_prefixes = unique.len();

    let k = DEPTH.min(index.len().max(1));
    let params = |retriever| SearchParams {
        retriever,
        k,
        candidates: cfg.stream.full_search_candidates.max(k),
        lexical_candidates: cfg.stream.lexical_candidates,
        fusion: cfg.stream.fusion,
    };
    let dense = retrievers.iter().any(|r| r.uses_dense());
    let label = if dense {
        "prefix replay"
    } else {
        "prefix replay (lexical)"
    };
    // Per unique prefix: the top documents of each retriever.
    let tops: Vec<Vec<[u32; DEPTH]>> = run_parallel(
        label,
        &unique,
        workers,
        progress,
        || {
            let embedder = if dense { Some(make_embedder()?) } else { None };
            Ok((embedder, HybridSearcher::new(index)?, Ranked::new()))
        },
        |(embedder, searcher, hits), _, text| {
            let query = match embedder {
                Some(e) => {
                    let mut v = [0.0f32; DIM];
                    e.embed_into(text, &mut v)?;
                    Some(Query::new(&v))
                }
                None => None,
            };
            let mut per = Vec::with_capacity(retrievers.len());
            for &r in retrievers {
                searcher.search(&params(r), query.as_ref(), text, hits);
                let mut docs = [NONE; DEPTH];
                for (d, h) in docs.iter_mut().zip(hits.iter()) {
                    *d = relevance.doc(h.index);
                }
                per.push(docs);
            }
            Ok(per)
        },
    )?;

    let mut outs = vec![out; retrievers.len()];
    for (q, rel, prefix_ids) in kept {
        for (ri, out) in outs.iter_mut().enumerate() {
            let top = |p: u32| &tops[p as usize][ri];
            let top1: Vec<u32> = prefix_ids.iter().map(|&p| top(p)[0]).collect();
            let ranks: Vec<Option<usize>> = prefix_ids
                .iter()
                .map(|&p| {
                    top(p)
                        .iter()
                        .position(|d| *d != NONE && rel.binary_search(d).is_ok())
                })
                .collect();
            let n = prefix_ids.len();
            let last = ranks[n - 1];
            out.records.push(PrefixRecord {
                id: q.id.clone(),
                qtype: QType::of(&q.text),
                n,
                t_sc: metrics::t_sc(&top1).unwrap_or(n),
                t_suf: KS.map(|k| metrics::t_suf(&ranks, k)),
                favourable: KS.map(|k| last.is_some_and(|r| r < k)),
            });
        }
    }
    Ok(outs)
}

/// φ_suf on the favourable slice at one k.
#[derive(Clone, Debug, Serialize)]
pub struct SufficiencySummary {
    pub k: usize,
    /// Share of the queries in the favourable slice (relevant in the top-k at the full query).
    pub favourable_fraction: f64,
    pub phi_suf: PhiDist,
}

/// Streamable fractions at one (L, δ, θ), with t* at [`HEADLINE_K`].
#[derive(Clone, Debug, Serialize)]
pub struct StreamableCell {
    pub latency_ms: f64,
    pub cadence_wps: f64,
    pub theta: f64,
    pub all: f64,
    /// On the favourable slice (t* = t_suf).
    pub favourable: Option<f64>,
    /// On the rest (t* = t_sc, the fallback).
    pub fallback: Option<f64>,
}

/// RQ4: the measures split by question type.
#[derive(Clone, Debug, Serialize)]
pub struct TypeSummary {
    pub qtype: QType,
    pub count: usize,
    pub favourable_fraction: f64,
    /// Mean φ_suf at [`HEADLINE_K`] on the type's favourable slice.
    pub phi_suf_mean: Option<f64>,
    pub phi_sc_mean: Option<f64>,
    /// Streamable at [`HEADLINE_POINT`].
    pub streamable: f64,
}

/// Aggregate figures of the prefix replay.
#[derive(Clone, Debug, Serialize)]
pub struct PrefixSummary {
    pub queries: usize,
    pub skipped_no_relevant: usize,
    pub skipped_empty: usize,
    pub prefixes: usize,
    pub unique_prefixes: usize,
    pub mean_words: Option<f64>,
    pub headline_k: usize,
    /// φ_sc over all queries.
    pub phi_sc: PhiDist,
    pub sufficiency: Vec<SufficiencySummary>,
    pub streamable: Vec<StreamableCell>,
    pub by_type: Vec<TypeSummary>,
}

impl PrefixSummary {
    /// The cell at (L, δ, θ), if it is on the grid.
    pub fn cell(&self, latency_ms: f64, cadence: f64, theta: f64) -> Option<&StreamableCell> {
        self.streamable
            .iter()
            .find(|c| c.latency_ms == latency_ms && c.cadence_wps == cadence && c.theta == theta)
    }
}

fn fraction(count: usize, of: usize) -> Option<f64> {
    (of > 0).then(|| count as f64 / of as f64)
}

fn slot(k: usize) -> usize {
    KS.iter().position(|&x| x == k).expect("k is one of KS")
}

fn streamable_share(records: &[&PrefixRecord], l: f64, d: f64, theta: f64) -> Option<f64> {
    let hs = HEADLINE_K;
    let n = records
        .iter()
        .filter(|r| metrics::streamable(hidden_ms(r.n, r.t_star(slot(hs)), l, d), l, theta))
        .count();
    fraction(n, records.len())
}

pub fn summarize(o: &PrefixOutcome) -> PrefixSummary {
    let recs = &o.records;
    let all: Vec<&PrefixRecord> = recs.iter().collect();
    let phi_sc: Vec<f64> = recs.iter().map(|r| metrics::phi(r.t_sc, r.n)).collect();
    let sufficiency = KS
        .iter()
        .enumerate()
        .map(|(s, &k)| {
            let phis: Vec<f64> = recs
                .iter()
                .filter(|r| r.favourable[s])
                .filter_map(|r| r.t_suf[s].map(|t| metrics::phi(t, r.n)))
                .collect();
            SufficiencySummary {
                k,
                favourable_fraction: fraction(phis.len(), recs.len()).unwrap_or(0.0),
                phi_suf: PhiDist::of(&phis),
            }
        })
        .collect();
    let hs = slot(HEADLINE_K);
    let (fav, fallback): (Vec<&PrefixRecord>, Vec<&PrefixRecord>) =
        recs.iter().partition(|r| r.favourable[hs]);
    let mut streamable = Vec::new();
    for &theta in &THETAS {
        for &l in &LATENCIES_MS {
            for &d in &CADENCES {
                streamable.push(StreamableCell {
                    latency_ms: l,
                    cadence_wps: d,
                    theta,
                    all: streamable_share(&all, l, d, theta).unwrap_or(0.0),
                    favourable: streamable_share(&fav, l, d, theta),
                    fallback: streamable_share(&fallback, l, d, theta),
                });
            }
        }
    }
    let (hl, hd, ht) = HEADLINE_POINT;
    let by_type = QType::ALL
        .iter()
        .filter_map(|&qt| {
            let of: Vec<&PrefixRecord> = recs.iter().filter(|r| r.qtype == qt).collect();
            if of.is_empty() {
                return None;
            }
            let suf: Vec<f64> = of
                .iter()
                .filter(|r| r.favourable[hs])
                .filter_map(|r| r.t_suf[hs].map(|t| metrics::phi(t, r.n)))
                .collect();
            let sc: Vec<f64> = of.iter().map(|r| metrics::phi(r.t_sc, r.n)).collect();
            Some(TypeSummary {
                qtype: qt,
                count: of.len(),
                favourable_fraction: fraction(suf.len(), of.len()).unwrap_or(0.0),
                phi_suf_mean: metrics::mean(&suf),
                phi_sc_mean: metrics::mean(&sc),
                streamable: streamable_share(&of, hl, hd, ht).unwrap_or(0.0),
            })
        })
        .collect();
    let words: Vec<f64> = recs.iter().map(|r| r.n as f64).collect();
    PrefixSummary {
        queries: recs.len(),
        skipped_no_relevant: o.skipped_no_relevant,
        skipped_empty: o.skipped_empty,
        prefixes: o.prefixes,
        unique_prefixes: o.unique_prefixes,
        mean_words: metrics::mean(&words),
        headline_k: HEADLINE_K,
        phi_sc: PhiDist::of(&phi_sc),
        sufficiency,
        streamable,
        by_type,
    }
}
