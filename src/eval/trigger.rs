//! `primd eval --train-trigger FILE`: labels, trains and calibrates the learned
//! NO_QUERY/NEW_QUERY trigger ([`crate::stream::trigger`]) on typed questions.
//!
//! **Labels** (seed 003 §12-13, with the production retriever as the pseudo-query
//! engine): every word prefix of a typed question (from `min_tokens` words on) is a
//! partial. At each, two result lists are compared, both as the final would compute
//! them if the utterance ended there (this prefix's lexical hits, fused with a dense
//! side): *now* — this prefix embedded and scanned — and *keep* — the previous useful
//! query's embedding and candidates (none before the first). The prefix is NEW_QUERY
//! when querying now changes what the agent would get: the relevant passage enters the
//! top-10, or at least [`CHANGED`] of the ten passages differ; NO_QUERY otherwise. Why
//! this rule: hit@10 is what the product promises, so gaining the relevant passage is
//! the paper's "more relevant evidence"; and three of ten passages replaced is a list
//! an agent would read differently (the paper's "meaningfully different"), a qrel-free
//! signal that also covers questions whose answer is never found. Smaller reorderings
//! within the same ten are what the final's own lexical query and rerank already fix.
//! A NEW_QUERY prefix becomes the previous useful query of the next ones.
//!
//! **Negative samples**: per question, one prefix is labelled again with its previous
//! query swapped for another (seeded, unrelated) question, so the model sees stale
//! queries and must ask for a new one, not learn to stay quiet.
//!
//! **Model**: logistic regression on standardised features, fitted by Newton's method
//! with a small ridge (exact, deterministic: no shuffling, no seed dependence beyond the
//! negative samples' fixed seed).
//!
//! **Thresholds** (one for partials, one for the final, whose NEW_QUERY costs an embed
//! after end of speech): every second question is replayed through the real
//! [`StreamingRetriever`] (prefixes as partials, the whole question as the final; the
//! fixed trigger with idle embedding after every partial, as the daemon has between
//! spoken partials), once with the fixed default and once per pair of [`THRESHOLDS`] ×
//! [`FINAL_THRESHOLDS`]; the pair kept is the cheapest (embeds + speculative searches)
//! whose hit@10 is within [`HIT10_TOLERANCE`] of the fixed default's and which embeds
//! at most [`MAX_FINALS_EMBEDDED`] of the finals after end of speech (so the median
//! final needs no embed: the latency stays sub-millisecond). The questions behind the
//! evaluation's recorded streams are left out of training.
//!
//! **Thresholds on recorded streams** (`--trigger-streams`): the same pairs replayed on
//! a recognizer's own recordings through the daemon's scheduler (`streams::replay`,
//! virtual clock), keeping the cheapest pair within [`HIT10_TOLERANCE`] of the fixed
//! default's hit@10 that makes no more finals wait for an embed after end of speech
//! than the fixed default does (so the latency percentiles stay the fixed rule's). Why
//! offer it: the features count words and partials, and how many words a partial adds
//! depends on the recognizer's cadence (typed prefixes add one word each; the dev
//! recordings about 1.1 every 0.5 s, with revisions), so thresholds chosen on typed
//! prefixes are conservative on real streams. The model's weights still come from the
//! typed questions only; the questions behind the trigger streams are not trained on.
//! `tools/eval/trigger_folds.py` judges it on streams it did not choose on.
//!
//! All features are used. (`partials_since_query` is nearly `new_words` on typed
//! prefixes, one word per partial, where real partials come with the audio; a model
//! without it, measured on 2026-12-01 with `primd eval --train-trigger` (tolerance 0.005 then), chose the same
//! thresholds and cost 0.82 of the fixed trigger's work on the streams but lost one
//! relevant passage; with it 0.91 and none.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::data::{Qrels, QueryRecord, Relevance, StreamRecord};
use super::progress::{Progress, run_parallel};
use super::streams;
use crate::config::RunConfig;
use crate::embed::{Embed, EmbedError, Embedding, Fingerprint, cosine};
use crate::hits::Hits;
use crate::hybrid::{HybridSearcher, Ranked, Retriever};
use crate::index::Index;
use crate::search::{Candidates, Query};
use crate::stream::normalize::Normalizer;
use crate::stream::trigger::{
    FEATURES, FIRST_LEXICAL, Features, N_FEATURES, TrainingInfo, Trigger, TriggerModel,
    TriggerState,
};
use crate::stream::{FinalPath, StreamConfig, StreamingRetriever};

/// Passages of the top-10 that must change for NEW_QUERY (without the relevant one entering).
pub const CHANGED: usize = 3;
/// Typed hit@10 the learned trigger may lose against the fixed default when its
/// threshold is chosen: issue #18's "equal hit@10 (± 0.01)". (At 0.005 no pair met both
/// conditions on the dev questions and the most eager pair was taken by the fallback:
/// 2% fewer embeds + scans than the fixed rule on the recorded streams; at 0.01 the
/// pair chosen on the typed questions saves 22% there at the same hit@10.)
pub const HIT10_TOLERANCE: f64 = 0.01;
/// Partial thresholds tried.
pub const THRESHOLDS: [f32; 6] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7];
/// Final thresholds tried.
pub const FINAL_THRESHOLDS: [f32; 5] = [0.05, 0.1, 0.15, 0.2, 0.3];
/// Share of typed finals a chosen policy may embed after end of speech: under half, so
/// the median final needs no embed. (Pessimistic: a typed final is never seen as a
/// partial first, where a recognizer's final often repeats its last partial.)
pub const MAX_FINALS_EMBEDDED: f64 = 0.5;
/// Seed of the negative samples' question choice.
pub const SEED: u64 = 0x7219_9e3f_5eed;
/// Ridge of the Newton fit (on standardised features).
const RIDGE: f64 = 1.0;

/// One labelled partial.
#[derive(Clone, Debug)]
pub struct Row {
    pub x: Features,
    pub new_query: bool,
    pub negative: bool,
}

/// Label counts.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClassBalance {
    pub rows: usize,
    pub new_query: usize,
    pub no_query: usize,
    pub new_query_share: f64,
    pub negative_samples: usize,
    /// NEW_QUERY among the negative samples.
    pub negative_new_query: usize,
    /// NEW_QUERY because the relevant passage entered the top-10 (the rest: ≥ CHANGED
    /// passages changed).
    pub relevant_entered: usize,
}

impl ClassBalance {
    pub fn of(rows: &[Row], relevant_entered: usize) -> Self {
        let new_query = rows.iter().filter(|r| r.new_query).count();
        ClassBalance {
            rows: rows.len(),
            new_query,
            no_query: rows.len() - new_query,
            new_query_share: new_query as f64 / rows.len().max(1) as f64,
            negative_samples: rows.iter().filter(|r| r.negative).count(),
            negative_new_query: rows.iter().filter(|r| r.negative && r.new_query).count(),
            relevant_entered,
        }
    }
}

/// One policy replayed on the typed questions.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TypedPoint {
    /// `None`: the fixed default; else (partial, final) thresholds.
    pub threshold: Option<(f32, f32)>,
    pub embeds_per_question: f64,
    pub speculative_searches_per_question: f64,
    pub hit1: f64,
    pub hit10: f64,
    /// Finals that had to be embedded after end of speech.
    pub final_embedded: f64,
}

impl TypedPoint {
    pub fn cost(&self) -> f64 {
        self.embeds_per_question + self.speculative_searches_per_question
    }
}

/// What training found (in the eval report).
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    pub questions: usize,
    /// Questions left out because a recorded stream speaks them (`--streams` or
    /// `--trigger-streams`).
    pub left_out_stream_questions: usize,
    pub labels: ClassBalance,
    /// Training accuracy at the chosen threshold (rows labelled the same).
    pub train_accuracy: f64,
    pub features: Vec<String>,
    pub weights: Vec<f32>,
    /// The fixed default, then each threshold tried, on the typed questions (when the
    /// thresholds were chosen there).
    pub typed: Vec<TypedPoint>,
    /// Every second kept question replayed for the thresholds (0: chosen on streams).
    pub typed_questions: usize,
    /// The same on the recorded streams of `--trigger-streams` (per utterance), when the
    /// thresholds were chosen there.
    pub streams: Vec<TypedPoint>,
    /// (partial, final).
    pub threshold: (f32, f32),
    /// False when no pair met both conditions (then: the best hit@10 among those
    /// within the finals bound).
    pub conditions_met: bool,
    pub seconds: f64,
}

/// Whether querying now (`now`) beats keeping the previous query (`keep`): see the
/// module docs. `rel` says whether a passage is relevant.
pub fn label(now: &[u32], keep: &[u32], rel: impl Fn(u32) -> bool) -> (bool, bool) {
    let entered = now.iter().any(|&p| rel(p)) && !keep.iter().any(|&p| rel(p));
    let changed = now.iter().filter(|p| !keep.contains(p)).count();
    (entered || changed >= CHANGED, entered)
}

/// A question's rows, how many NEW_QUERY rows the relevant passage's entry made, and
/// every (prefix, embedding) computed.
pub type Labelled = (Vec<Row>, usize, Vec<(String, Embedding)>);

/// One typed question through one policy: embeds, speculative searches, hit@1, hit@10,
/// final embedded after end of speech.
type TypedRun = (u32, u32, bool, bool, bool);

/// Labeller of one worker: a searcher and an embedder.
pub struct Labeller<'i, E: Embed> {
    searcher: HybridSearcher<'i>,
    embedder: E,
    stream: StreamConfig,
    lexical: Hits,
    out: Ranked,
}

/// The previous useful query, as the labeller keeps it.
struct Prev {
    text: String,
    embedding: Embedding,
    candidates: Candidates,
}

impl<'i, E: Embed> Labeller<'i, E> {
    pub fn new(index: &'i Index, embedder: E, stream: StreamConfig) -> anyhow::Result<Self> {
        Ok(Labeller {
            searcher: HybridSearcher::new(index)?,
            embedder,
            stream,
            lexical: Hits::new(),
            out: Ranked::new(),
        })
    }

    fn lexical_on(&self) -> bool {
        self.stream.retriever.uses_lexical() && self.searcher.has_lexical()
    }

    /// The top-10 the final would get with these lexical hits and this dense side.
    fn top10(&mut self, dense: Option<(&Embedding, &Candidates)>) -> Vec<u32> {
        let k = self.stream.top_k.min(10);
        match (self.lexical_on(), dense) {
            (true, d) => {
                let q = d.map(|(e, _)| Query::new(e));
                let empty = Candidates::new();
                let cands = d.map_or(&empty, |(_, c)| c);
                self.searcher.fuse(
                    q.as_ref(),
                    &self.lexical,
                    cands,
                    self.stream.fusion,
                    k,
                    &mut self.out,
                );
            }
            (false, Some((e, c))) => self.searcher.rerank(c, &Query::new(e), k, &mut self.out),
            (false, None) => self.out.clear(),
        }
        self.out.iter().map(|s| s.index).collect()
    }

    fn embed_scan(&mut self, text: &str) -> Result<(Embedding, Candidates), EmbedError> {
        let mut e = [0.0; crate::embed::DIM];
        self.embedder.embed_into(text, &mut e)?;
        let mut c = Candidates::new();
        self.searcher.dense().binary_scan(
            &Query::new(&e),
            self.stream.max_speculative_results,
            &mut c,
        );
        Ok((e, c))
    }

    fn lexical_of(&mut self, text: &str) {
        if self.lexical_on() {
            let k = self.stream.lexical_candidates.max(self.stream.top_k);
            self.searcher.lexical(text, "", 0.0, k, &mut self.lexical);
        } else {
            self.lexical.clear();
        }
    }

    /// Labels every prefix of `words` (a normalised question), and one negative sample
    /// at prefix `neg_at` against `neg_text`; returns the rows, the number labelled
    /// NEW_QUERY because the relevant passage entered, and every embedding computed.
    pub fn label_question(
        &mut self,
        words: &[&str],
        rel: &dyn Fn(u32) -> bool,
        neg_text: &str,
        neg_at: usize,
    ) -> Result<Labelled, EmbedError> {
        let mut rows = Vec::new();
        let mut entered_n = 0;
        let mut embeds = Vec::new();
        let mut st = TriggerState::new();
        let mut prev: Option<Prev> = None;
        let lexical_on = self.lexical_on();
        let min = self.stream.min_tokens.max(1);
        for k in 1..=words.len() {
            let text = words[..k].join(" ");
            st.on_partial();
            if k < min {
                continue;
            }
            self.lexical_of(&text);
            let prev_text = prev.as_ref().map_or("", |p| p.text.as_str());
            let lex = lexical_on.then_some(&self.lexical[..]);
            let x = st.features(&text, prev_text, lex, &mut self.searcher);
            let (e, cands) = self.embed_scan(&text)?;
            embeds.push((text.clone(), e));
            let now = self.top10(Some((&e, &cands)));
            let keep = match &prev {
                Some(p) => self.top10(Some((&p.embedding, &p.candidates))),
                None => self.top10(None),
            };
            let (y, entered) = label(&now, &keep, rel);
            entered_n += usize::from(y && entered);
            rows.push(Row {
                x,
                new_query: y,
                negative: false,
            });
            if k == neg_at && !neg_text.is_empty() {
                // The same prefix against a stale, unrelated previous query.
                let (ne, nc) = self.embed_scan(neg_text)?;
                let mut ns = TriggerState::new();
                self.lexical_of(neg_text);
                ns.on_query(None, &self.lexical);
                ns.on_partial();
                self.lexical_of(&text);
                let lex = lexical_on.then_some(&self.lexical[..]);
                let x = ns.features(&text, neg_text, lex, &mut self.searcher);
                let keep = self.top10(Some((&ne, &nc)));
                let (y, entered) = label(&now, &keep, rel);
                entered_n += usize::from(y && entered);
                rows.push(Row {
                    x,
                    new_query: y,
                    negative: true,
                });
            }
            if y {
                let cos = prev.as_ref().map(|p| cosine(&e, &p.embedding));
                st.on_query(cos, &self.lexical);
                prev = Some(Prev {
                    text,
                    embedding: e,
                    candidates: cands,
                });
            }
        }
        Ok((rows, entered_n, embeds))
    }
}

/// Logistic regression by Newton's method on standardised features `used` of `rows`:
/// (mean, scale, weights, bias), deterministic.
pub fn fit(rows: &[Row], used: &[usize]) -> (Vec<f32>, Vec<f32>, Vec<f32>, f32) {
    let d = used.len();
    let n = rows.len().max(1) as f64;
    let mut mean = vec![0.0f64; d];
    let mut var = vec![0.0f64; d];
    for r in rows {
        for (j, &s) in used.iter().enumerate() {
            mean[j] += r.x[s] as f64 / n;
        }
    }
    for r in rows {
        for (j, &s) in used.iter().enumerate() {
            var[j] += (r.x[s] as f64 - mean[j]).powi(2) / n;
        }
    }
    let scale: Vec<f64> = var
        .iter()
        .map(|v| if *v > 1e-12 { v.sqrt() } else { 1.0 })
        .collect();
    let z = |r: &Row| -> Vec<f64> {
        let mut v: Vec<f64> = used
            .iter()
            .enumerate()
            .map(|(j, &s)| (r.x[s] as f64 - mean[j]) / scale[j])
            .collect();
        v.push(1.0);
        v
    };
    let zs: Vec<Vec<f64>> = rows.iter().map(z).collect();
    let mut w = vec![0.0f64; d + 1];
    for _ in 0..50 {
        let mut g = vec![0.0f64; d + 1];
        let mut h = vec![vec![0.0f64; d + 1]; d + 1];
        for (r, x) in rows.iter().zip(&zs) {
            let t: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-t).exp());
            let y = f64::from(u8::from(r.new_query));
            let s = (p * (1.0 - p)).max(1e-9);
            for i in 0..=d {
                g[i] += (p - y) * x[i];
                for j in 0..=d {
                    h[i][j] += s * x[i] * x[j];
                }
            }
        }
        for i in 0..d {
            g[i] += RIDGE * w[i];
            h[i][i] += RIDGE;
        }
        let step = solve(h, g);
        let mut moved = 0.0f64;
        for i in 0..=d {
            w[i] -= step[i];
            moved = moved.max(step[i].abs());
        }
        if moved < 1e-8 {
            break;
        }
    }
    (
        mean.iter().map(|&v| v as f32).collect(),
        scale.iter().map(|&v| v as f32).collect(),
        w[..d].iter().map(|&v| v as f32).collect(),
        w[d] as f32,
    )
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting (a small, symmetric
/// positive definite system).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap_or(c);
        a.swap(c, p);
        b.swap(c, p);
        let d = a[c][c];
        if d.abs() < 1e-300 {
            continue;
        }
        for r in c + 1..n {
            let f = a[r][c] / d;
            if f != 0.0 {
                let (top, bottom) = a.split_at_mut(r);
                for (x, y) in bottom[0][c..n].iter_mut().zip(&top[c][c..n]) {
                    *x -= f * y;
                }
                b[r] -= f * b[c];
            }
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        let s: f64 = (c + 1..n).map(|k| a[c][k] * x[k]).sum();
        x[c] = if a[c][c].abs() < 1e-300 {
            0.0
        } else {
            (b[c] - s) / a[c][c]
        };
    }
    x
}

/// An embedder answering from the embeddings the labeller computed, falling back to the
/// real one (shared by one worker's retrievers).
struct Cached<E: Embed> {
    shared: Arc<Mutex<(HashMap<String, Embedding>, E)>>,
    fingerprint: Fingerprint,
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
fn replay_typed<E: Embed>(
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
struct Grid<'a> {
    cfg: &'a RunConfig,
    policies: &'a [StreamConfig],
    pairs: &'a [(f32, f32)],
    workers: usize,
    progress: &'a Progress,
}

/// Every policy of the grid over the typed questions `work` of `items`: one point
/// each. `caches` holds the embeddings the
/// labelling computed, so the replay embeds nothing twice.
fn replay_typed_all<E: Embed>(
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
fn replay_streams<E: Embed>(
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

/// Labels, fits and calibrates a trigger for `cfg.stream.retriever` on `index` from
/// `queries` (those whose id is in `exclude` are left out).
#[allow(clippy::too_many_arguments)]
pub fn train<E: Embed>(
    index: &Index,
    queries: &[QueryRecord],
    qrels: &Qrels,
    exclude: &[String],
    cfg: &RunConfig,
    workers: usize,
    progress: &Progress,
    command: &str,
    calibration: Option<&[StreamRecord]>,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<(TriggerModel, TrainReport)> {
    let started = std::time::Instant::now();
    let relevance = Relevance::new(index)?;
    let retriever = cfg.stream.retriever;
    anyhow::ensure!(
        retriever.uses_dense(),
        "the lexical retriever does no dense work: there is nothing for a trigger to decide"
    );
    // Checked before the long labelling: streams that cannot judge a threshold.
    if let Some(recs) = calibration.filter(|r| !r.is_empty()) {
        anyhow::ensure!(
            !streams::judged(recs, &relevance, qrels).is_empty(),
            "none of the trigger streams has a relevant passage in the index"
        );
    }
    let mut normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
    let mut items: Vec<(Vec<String>, Vec<u32>)> = Vec::new();
    let mut left_out = 0;
    let mut norm = String::new();
    // The trigger streams' questions choose the thresholds: not trained on either.
    let calibrating = |id: &String| calibration.unwrap_or_default().iter().any(|s| &s.id == id);
    for q in queries {
        if exclude.contains(&q.id) || calibrating(&q.id) {
            left_out += 1;
            continue;
        }
        let rel = relevance.relevant(qrels, &q.id);
        normalizer.normalize_into(&q.text, &mut norm);
        if rel.is_empty() || norm.is_empty() {
            continue;
        }
        items.push((norm.split(' ').map(str::to_string).collect(), rel));
    }
    anyhow::ensure!(
        !items.is_empty(),
        "no typed question with a relevant passage to train on"
    );
    // Negative samples: a seeded choice of another question and of the prefix.
    let mut rng = crate::testing::Rng::new(SEED);
    let n = items.len();
    let negs: Vec<(usize, usize)> = (0..n)
        .map(|i| {
            let mut j = rng.index(n);
            if j == i {
                j = (j + 1) % n;
            }
            let len = items[i].0.len();
            let min = cfg.stream.min_tokens.max(1);
            let at = if len >= min {
                min + rng.index(len - min + 1)
            } else {
                0
            };
            (j, at)
        })
        .collect();
    let work: Vec<usize> = (0..n).collect();
    let is_rel = |rel: &[u32], p: u32| rel.binary_search(&relevance.doc(p)).is_ok();
    let labelled = run_parallel(
        "labelling typed prefixes",
        &work,
        workers,
        progress,
        || Labeller::new(index, make_embedder()?, cfg.stream.clone()),
        |lab, _, &i| {
            let (words, rel) = &items[i];
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let (j, at) = negs[i];
            let neg = if n > 1 {
                items[j].0.join(" ")
            } else {
                String::new()
            };
            Ok(lab.label_question(&words, &|p| is_rel(rel, p), &neg, at)?)
        },
    )?;
    let mut rows = Vec::new();
    let mut entered = 0;
    let mut caches = Vec::with_capacity(n);
    for (r, e, c) in labelled {
        rows.extend(r);
        entered += e;
        caches.push(c);
    }
    let labels = ClassBalance::of(&rows, entered);
    let lexical_on = retriever.uses_lexical() && index.lexical().is_some();
    let used: Vec<usize> = (0..N_FEATURES)
        .filter(|&s| lexical_on || (s < FIRST_LEXICAL))
        .collect();
    let (mean, scale, weights, bias) = fit(&rows, &used);
    let names: Vec<&str> = used.iter().map(|&s| FEATURES[s]).collect();
    let info = TrainingInfo {
        questions: n,
        rows: labels.rows,
        new_query: labels.new_query,
        no_query: labels.no_query,
        negative_samples: labels.negative_samples,
        retriever: retriever.to_string(),
        index: index
            .path()
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        passages: index.len(),
        command: command.to_string(),
    };
    let analyzer = lexical_on
        .then(|| index.lexical().map(|l| l.spec().id()))
        .flatten();
    let model = TriggerModel::new(
        &names,
        &mean,
        &scale,
        &weights,
        bias,
        (0.5, 0.5),
        &index.meta().fingerprint,
        analyzer,
        info,
    )
    .map_err(anyhow::Error::msg)?;

    // The threshold: replay the typed questions with each policy.
    let mut policies: Vec<StreamConfig> = Vec::new();
    let mut fixed = cfg.stream.clone();
    fixed.enabled = true;
    fixed.trigger = Trigger::Fixed;
    policies.push(fixed);
    let pairs: Vec<(f32, f32)> = THRESHOLDS
        .iter()
        .flat_map(|&t| FINAL_THRESHOLDS.iter().map(move |&f| (t, f)))
        .collect();
    for &t in &pairs {
        let mut s = cfg.stream.clone();
        s.enabled = true;
        s.trigger = Trigger::Learned(Arc::new(model.with_thresholds(t)));
        policies.push(s);
    }
    let grid = Grid {
        cfg,
        policies: &policies,
        pairs: &pairs,
        workers,
        progress,
    };
    let (typed, streamed, typed_questions, bound) = match calibration.filter(|r| !r.is_empty()) {
        Some(recs) => {
            let points = replay_streams(index, &grid, &relevance, qrels, recs, &make_embedder)?;
            // No more finals embedded after end of speech than the fixed rule: the
            // same share of finals waits for an embed, so the latency percentiles are
            // the fixed rule's.
            let bound = points[0].final_embedded;
            (Vec::new(), points, 0, bound)
        }
        None => {
            let sim_work: Vec<usize> = (0..n).step_by(2).collect();
            let points = replay_typed_all(
                index,
                &grid,
                &items,
                caches,
                &sim_work,
                &is_rel,
                &make_embedder,
            )?;
            (points, Vec::new(), sim_work.len(), MAX_FINALS_EMBEDDED)
        }
    };
    let points = if streamed.is_empty() {
        &typed
    } else {
        &streamed
    };
    let base = points[0].clone();
    let fast = |p: &&TypedPoint| p.final_embedded <= bound;
    let met = points[1..]
        .iter()
        .filter(fast)
        .filter(|p| p.hit10 >= base.hit10 - HIT10_TOLERANCE)
        .min_by(|a, b| a.cost().total_cmp(&b.cost()));
    let fallback = || {
        points[1..].iter().filter(fast).max_by(|a, b| {
            a.hit10
                .total_cmp(&b.hit10)
                .then(b.cost().total_cmp(&a.cost()))
        })
    };
    let conditions_met = met.is_some();
    let chosen = met
        .or_else(fallback)
        .and_then(|p| p.threshold)
        .unwrap_or((THRESHOLDS[0], FINAL_THRESHOLDS[0]));
    let model = model.with_thresholds(chosen);
    let agree = rows
        .iter()
        .filter(|r| model.new_query(&r.x) == r.new_query)
        .count();
    let report = TrainReport {
        questions: n,
        left_out_stream_questions: left_out,
        labels,
        train_accuracy: agree as f64 / rows.len().max(1) as f64,
        features: names.iter().map(|s| s.to_string()).collect(),
        weights,
        typed,
        typed_questions,
        streams: streamed,
        threshold: chosen,
        conditions_met,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((model, report))
}

/// The retriever a learned trigger can run with on this index (for the comparison).
pub fn suits(model: &TriggerModel, retriever: Retriever) -> bool {
    retriever.uses_dense() && (!model.uses_lexical() || retriever.uses_lexical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashEmbedder;

    const CORPUS: &[(&str, &str)] = &[
        ("a", "zulu alpha beta omega"),
        ("g", "gamma delta"),
        ("e", "epsilon"),
    ];

    fn index(dir: &std::path::Path) -> Index {
        crate::testing::hash_index(dir, CORPUS)
    }

    #[test]
    fn new_query_when_the_relevant_passage_enters_or_three_of_ten_change() {
        let now: Vec<u32> = (1..=10).collect();
        let rel = |p: u32| p == 99;
        let keep3: Vec<u32> = (1..=7).chain(11..=13).collect();
        let keep2: Vec<u32> = (1..=8).chain(11..=12).collect();
        assert_eq!(label(&now, &keep3, rel), (true, false));
        assert_eq!(label(&now, &keep2, rel), (false, false));
        assert_eq!(label(&now, &now, rel), (false, false));
        let rel5 = |p: u32| p == 5;
        let no5: Vec<u32> = (1..=4).chain(6..=11).collect();
        assert_eq!(
            label(&now, &no5, rel5),
            (true, true),
            "the relevant one entered"
        );
        assert_eq!(
            label(&no5, &now, rel5),
            (false, false),
            "it left: keeping was better"
        );
        assert_eq!(label(&now, &[], rel), (true, false), "nothing before");
    }

    #[test]
    fn prefixes_of_a_hand_made_index_get_the_known_labels() {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path());
        let stream = StreamConfig {
            retriever: Retriever::Dense,
            top_k: 1,
            max_speculative_results: 3,
            min_tokens: 1,
            ..StreamConfig::default()
        };
        let mut lab = Labeller::new(&index, HashEmbedder, stream).unwrap();
        let g = 1; // passage "gamma delta"
        let (rows, entered, embeds) = lab
            .label_question(&["zulu", "gamma", "delta"], &|p| p == g, "epsilon", 3)
            .unwrap();
        let labels: Vec<(bool, bool)> = rows.iter().map(|r| (r.new_query, r.negative)).collect();
        // "zulu" finds the zulu passage (not relevant, one of one changed: NO_QUERY);
        // "zulu gamma" brings the relevant one in (NEW_QUERY); "zulu gamma delta" finds
        // it again (NO_QUERY); against a stale "epsilon" query it is NEW_QUERY.
        assert_eq!(
            labels,
            [(false, false), (true, false), (false, false), (true, true)]
        );
        assert_eq!(entered, 2);
        assert_eq!(embeds.len(), 3);
        // The features saw what the trigger sees: words new since the last query.
        assert_eq!(rows[1].x[0], 2.0, "no query before: both words are new");
        assert_eq!(rows[2].x[0], 1.0, "one word since the NEW_QUERY prefix");
        assert_eq!(rows[3].x[0], 3.0, "nothing in common with the stale query");
        assert_eq!(rows[3].x[1], 1.0, "the stale query's word is dropped");
    }

    #[test]
    fn the_fit_is_deterministic_and_orders_by_the_signal() {
        let rows: Vec<Row> = (0..200)
            .map(|i| {
                let mut x = [0.0; N_FEATURES];
                x[0] = (i % 7) as f32;
                x[2] = (i % 3) as f32; // noise
                Row {
                    x,
                    new_query: i % 7 >= 3 || i % 29 == 0,
                    negative: false,
                }
            })
            .collect();
        let used = [0, 2];
        let a = fit(&rows, &used);
        assert_eq!(a, fit(&rows, &used), "same rows, same weights");
        assert!(a.2[0] > 1.0, "new words push towards NEW_QUERY: {:?}", a.2);
        assert!(
            a.2[1].abs() < a.2[0].abs() / 4.0,
            "noise weighs little: {:?}",
            a.2
        );
    }
}
