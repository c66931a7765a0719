//! Replaying policies to choose the thresholds: every pair of the grid through the real
//! streaming retriever on typed questions (prefixes as partials), or through the daemon's
//! scheduler on recorded streams, one [`TypedPoint`] each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::TypedPoint;
use crate::config::RunConfig;
use crate::embed::{Embed, EmbedError, Embedding, Fingerprint};
use crate::eval::data::{Qrels, Relevance, StreamRecord};
use crate::eval::progress::{Progress, run_parallel};
use crate::eval::streams;
use crate::index::Index;
use crate::retriever::HybridSearcher;
use crate::stream::normalize::Normalizer;
use crate::stream::{FinalPath, StreamConfig, StreamingRetriever};

/// One typed question through one policy: embeds, speculative searches, hit@1, hit@10,
/// final embedded after end of speech.
pub(super) type TypedRun = (u32, u32, bool, bool, bool);

/// An embedder answering from the embeddings the labeller computed, falling back to the
/// real one (shared by one worker's retrievers).
pub(super) struct Cached<E: Embed> {
    pub(super) shared: Arc<Mutex<(HashMap<String, Embedding>, E)>>,
    pub(super) fingerprint: Fingerprint,
}

impl<E: Embed> Embed for Cached<E> {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        let mut g = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = g.0.get(text) {
            *out = *e;
            return Ok(0);
        }
        let n = g.1.embed_into(text, out)?;
        g.0.insert(text.to_string(), *out);
        Ok(n)
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        let mut g = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        g.1.count_tokens(text)
    }
    fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

/// One typed question through a streaming retriever: prefixes as partials (idle work
/// after each), the whole question as the final. (embeds, searches, hit@1, hit@10,
/// final embedded after end of speech).
pub(super) fn replay_typed<E: Embed>(
    r: &mut StreamingRetriever<'_, E>,
    words: &[&str],
    rel: &dyn Fn(u32) -> bool,
) -> Result<TypedRun, EmbedError> {
    for k in 1..words.len() {
        r.observe(&words[..k].join(" "))?;
        r.idle()?;
    }
    let o = r.finalize(&words.join(" "))?;
    let top = &o.hits[..o.hits.len().min(10)];
    Ok((
        o.counts.embeds,
        o.counts.speculative_searches,
        top.first().is_some_and(|h| rel(h.index)),
        top.iter().any(|h| rel(h.index)),
        !o.reused_embedding,
    ))
}

/// The policies a threshold choice replays (the fixed default first, then one learned
/// policy per pair of `pairs`), and how.
#[derive(Clone, Copy)]
pub(super) struct Grid<'a> {
    pub(super) cfg: &'a RunConfig,
    pub(super) policies: &'a [StreamConfig],
    pub(super) pairs: &'a [(f32, f32)],
    pub(super) workers: usize,
    pub(super) progress: &'a Progress,
}

/// Every policy of the grid over the typed questions `work` of `items`: one point
/// each. `caches` holds the embeddings the
/// labelling computed, so the replay embeds nothing twice.
pub(super) fn replay_typed_all<E: Embed>(
    index: &Index,
    grid: &Grid<'_>,
    items: &[(Vec<String>, Vec<u32>)],
    caches: Vec<Vec<(String, Embedding)>>,
    work: &[usize],
    is_rel: &(dyn Fn(&[u32], u32) -> bool + Sync),
    make_embedder: &(impl Fn() -> anyhow::Result<E> + Sync),
) -> anyhow::Result<Vec<TypedPoint>> {
    let Grid {
        cfg,
        policies,
        pairs,
        workers,
        progress,
    } = *grid;
    let caches = Mutex::new(caches.into_iter().map(Some).collect::<Vec<_>>());
    let fingerprint = index.meta().fingerprint;
    let per_q = run_parallel(
        "choosing the trigger thresholds",
        work,
        workers,
        progress,
        || {
            let shared = Arc::new(Mutex::new((HashMap::new(), make_embedder()?)));
            let rs = policies
                .iter()
                .map(|p| {
                    let e = Cached {
                        shared: shared.clone(),
                        fingerprint,
                    };
                    let normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
                    Ok(StreamingRetriever::new(
                        p.clone(),
                        e,
                        HybridSearcher::new(index)?,
                        normalizer,
                    ))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok((shared, rs))
        },
        |(shared, rs), _, &i| {
            let cache = caches
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(i)
                .and_then(Option::take)
                .unwrap_or_default();
            {
                let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
                g.0.clear();
                g.0.extend(cache);
            }
            let (words, rel) = &items[i];
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            rs.iter_mut()
                .map(|r| Ok(replay_typed(r, &words, &|p| is_rel(rel, p))?))
                .collect::<anyhow::Result<Vec<_>>>()
        },
    )?;
    let nq = per_q.len().max(1) as f64;
    let mut typed: Vec<TypedPoint> = (0..policies.len())
        .map(|pi| {
            let sum =
                |f: &dyn Fn(&TypedRun) -> f64| per_q.iter().map(|v| f(&v[pi])).sum::<f64>() / nq;
            TypedPoint {
                threshold: None,
                embeds_per_question: sum(&|v| v.0 as f64),
                speculative_searches_per_question: sum(&|v| v.1 as f64),
                hit1: sum(&|v| f64::from(u8::from(v.2))),
                hit10: sum(&|v| f64::from(u8::from(v.3))),
                final_embedded: sum(&|v| f64::from(u8::from(v.4))),
            }
        })
        .collect();
    for (p, &t) in typed[1..].iter_mut().zip(pairs) {
        p.threshold = Some(t);
    }
    Ok(typed)
}

/// Every policy of the grid over recorded recognizer streams, through the
/// daemon's scheduler on the evaluation's virtual clock ([`streams::replay`]): one point
/// each, per utterance; a final "embedded" is one that waited for an embed after end
/// of speech (path `rerank` or `full`).
pub(super) fn replay_streams<E: Embed>(
    index: &Index,
    grid: &Grid<'_>,
    relevance: &Relevance,
    qrels: &Qrels,
    recs: &[StreamRecord],
    make_embedder: &(impl Fn() -> anyhow::Result<E> + Sync),
) -> anyhow::Result<Vec<TypedPoint>> {
    let judged = streams::judged(recs, relevance, qrels);
    let mut points = Vec::with_capacity(grid.policies.len());
    for (i, policy) in grid.policies.iter().enumerate() {
        let threshold = i.checked_sub(1).and_then(|j| grid.pairs.get(j)).copied();
        let label = match threshold {
            Some((t, f)) => format!("trigger streams, learned {t:.2}/{f:.2}"),
            None => "trigger streams, fixed".to_string(),
        };
        let runs = streams::replay(
            &label,
            index,
            relevance,
            &judged,
            grid.cfg,
            policy,
            None, // the trigger's training replays need no reader
            grid.workers,
            grid.progress,
            make_embedder,
        )?;
        let n = runs.len().max(1) as f64;
        let mean = |f: &dyn Fn(&streams::UttResult) -> f64| runs.iter().map(f).sum::<f64>() / n;
        points.push(TypedPoint {
            threshold,
            embeds_per_question: mean(&|r| f64::from(r.counts.embeds)),
            speculative_searches_per_question: mean(&|r| f64::from(r.counts.speculative_searches)),
            hit1: mean(&|r| f64::from(u8::from(r.hit1))),
            hit10: mean(&|r| f64::from(u8::from(r.hit10))),
            final_embedded: mean(&|r| {
                f64::from(u8::from(matches!(
                    r.path,
                    FinalPath::Rerank | FinalPath::Full
                )))
            }),
        });
    }
    Ok(points)
}
