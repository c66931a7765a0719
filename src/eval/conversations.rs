//! `primd eval --conversations FILE.jsonl`: conversations replayed turn by turn, each
//! turn searched with the conversation's context (on) and alone (off), judged by the
//! qrels as today, reported per turn kind.
//!
//! The file is what `primd search` reads, one turn per line in conversation order:
//! `{"id", "text", "conversation"}` plus an optional `"kind"`: `first`, `follow-up`
//! or `switch` (a turn that changes the topic). Without `kind`, a conversation's first
//! line is `first` and the others `later`. Other fields are ignored (the generator,
//! `tools/eval/conversations.py`, writes the question in full and its article too).
//! A turn's `id` is its qrels query id, unless it has a `"qid"` (a question asked more
//! than once in the file: a repeated final, the same follow-up with and without an
//! interjection before it).
//!
//! Kinds of the harder conversations (`conversations.py make --derail`): `interjection`
//! (an off-topic question the corpus cannot answer), `after-interjection` (the follow-up
//! after it) and `no-interjection` (the same follow-up in the same conversation without
//! the interjection), `repeat` (a final sent again, 1-5 times), `cue-less` (a follow-up
//! whose topic words were dropped, not replaced), `unanswerable` (the topic's pronoun in
//! a question of another article: its right answer is `low`), `agent-topic` (a
//! follow-up after the agent set the topic: the line's `"topic"`).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::data::{Qrels, Relevance};
use super::metrics::percentile;
use crate::conversation::{self, ContextSearch, ConversationConfig, Conversations};
use crate::dense::Query;
use crate::embed::{DIM, Embed};
use crate::index::Index;
use crate::retriever::{HybridSearcher, Ranked, SearchParams};

/// The kinds of turn reported, in report order.
pub const KINDS: [&str; 11] = [
    "first",
    "follow-up",
    "switch",
    "later",
    "interjection",
    "after-interjection",
    "no-interjection",
    "repeat",
    "cue-less",
    "unanswerable",
    "agent-topic",
];

/// One turn of the file.
#[derive(Clone, Debug, Deserialize)]
pub struct TurnRecord {
    #[serde(alias = "_id")]
    pub id: serde_json::Value,
    pub text: String,
    pub conversation: serde_json::Value,
    #[serde(default)]
    pub kind: Option<String>,
    /// The qrels id when it is not `id`.
    #[serde(default)]
    pub qid: Option<serde_json::Value>,
    /// The agent sets the conversation's topic before this turn (`{"cmd":"topic"}`).
    #[serde(default)]
    pub topic: Option<String>,
}

/// Reads the turns; a malformed line or an unknown `kind` stops with its line number.
pub fn load(path: &Path) -> anyhow::Result<Vec<(TurnRecord, &'static str)>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut out = Vec::new();
    for (no, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let t: TurnRecord = serde_json::from_str(&line).with_context(|| {
            format!(
                "{}:{}: expected {{\"id\", \"text\", \"conversation\"[, \"kind\"]}}",
                path.display(),
                no + 1
            )
        })?;
        let first = seen.insert(key(&t.conversation), ()).is_none();
        let kind = match t.kind.as_deref() {
            None if first => "first",
            None => "later",
            Some(k) => *KINDS.iter().find(|x| **x == k).with_context(|| {
                format!(
                    "{}:{}: kind {k:?} is not one of {}",
                    path.display(),
                    no + 1,
                    KINDS.join(", ")
                )
            })?,
        };
        out.push((t, kind));
    }
    Ok(out)
}

fn key(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Figures of one kind of turn, context on or off.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KindRow {
    pub kind: &'static str,
    pub context: bool,
    pub turns: usize,
    pub hit1: f64,
    pub hit10: f64,
    pub mrr: f64,
    /// Turns whose results came from the context search.
    pub used: usize,
    /// Turns (judged or not) whose evidence was `low`.
    pub low: usize,
    /// Turns whose top passage is the one of the turn before in the conversation (what a
    /// repeated final must keep).
    pub kept: usize,
    /// Every turn of the kind, judged or not.
    pub all: usize,
    /// Embeddings per turn (the turn's own: the context search embeds nothing more).
    pub embeds_per_turn: f64,
    /// Search time per turn after its embedding (alone + context), milliseconds.
    pub search_ms_p50: f64,
    pub search_ms_p90: f64,
}

/// Per kind of turn: the rank of each judged turn, each turn's search time, and the
/// turns that used the context, were `low`, kept the top passage of the turn before.
type Tally = (Vec<Option<usize>>, Vec<f64>, usize, usize, usize);

/// The reader's part of a replay, as the daemon runs it: each turn's `context` (of
/// `budget` word pieces) read against the turn as its conversation resolved it, the
/// passage of the best sentence leading and the evidence fused with the reader's logits
/// ([`crate::context::judge`]).
pub struct Reading {
    pub builder: crate::context::ContextBuilder,
    pub budget: usize,
}

/// Replays every turn twice (context off, then on) and reports per kind; with
/// `reading`, each turn is judged by the reader too.
pub fn evaluate<E: Embed>(
    index: &Index,
    embedder: &mut E,
    params: &SearchParams,
    cfg: &ConversationConfig,
    turns: &[(TurnRecord, &'static str)],
    qrels: &Qrels,
    mut reading: Option<&mut Reading>,
) -> anyhow::Result<Vec<KindRow>> {
    let mut packed = crate::context::Context::default();
    let mut turn_scratch = conversation::TurnScratch::default();
    let rel = Relevance::new(index)?;
    let mut searcher = HybridSearcher::new(index)?;
    let mut scratch = ContextSearch::new();
    let mut vectors = vec![[0.0f32; DIM]; turns.len()];
    let mut embeds = 0usize;
    if params.retriever.uses_dense() {
        for ((t, _), v) in turns.iter().zip(vectors.iter_mut()) {
            embedder.embed_into(&t.text, v)?;
            embeds += 1;
        }
    }
    let embeds_per_turn = embeds as f64 / turns.len().max(1) as f64;
    let mut rows = Vec::new();
    for context in [false, true] {
        let mut convs = Conversations::new(usize::MAX);
        let mut per: HashMap<&'static str, Tally> = HashMap::new();
        let mut hits = Ranked::new();
        let mut tops: HashMap<String, u32> = HashMap::new();
        for ((t, kind), v) in turns.iter().zip(&vectors) {
            let q = params.retriever.uses_dense().then(|| Query::new(v));
            let t0 = Instant::now();
            searcher.search(params, q.as_ref(), &t.text, &mut hits);
            let c = convs.get(&t.conversation);
            if let Some(topic) = &t.topic {
                let mut tv = [0.0f32; DIM];
                let dense = params.retriever.uses_dense() && !topic.trim().is_empty();
                if dense {
                    embedder.embed_into(topic, &mut tv)?;
                }
                c.set_topic(topic, dense.then_some(&tv));
            }
            let vector = params.retriever.uses_dense().then_some(v);
            let mut used = conversation::choose(
                c,
                &mut scratch,
                &mut searcher,
                params,
                cfg,
                context,
                &t.text,
                vector,
                &mut hits,
            );
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let mut conf = crate::confidence::of_ranked(params.retriever, &hits);
            if let Some(r) = reading.as_deref_mut() {
                let mut count = |s: &str| crate::context::word_pieces(embedder, s);
                conversation::read_turn(
                    &mut r.builder,
                    index,
                    q.as_ref(),
                    &t.text,
                    params.retriever,
                    cfg.low_evidence_threshold,
                    r.budget,
                    &mut count,
                    &scratch,
                    Some(&mut used),
                    &mut hits,
                    &mut packed,
                    &mut conf,
                    &mut turn_scratch,
                );
            }
            conversation::remember(c, index, cfg, &t.text, vector, &hits, conf, &used);
            let low = crate::confidence::is_low(conf, cfg.low_evidence_threshold);
            let top = hits.first().map_or(u32::MAX, |h| h.index);
            let kept = tops.insert(key(&t.conversation), top) == Some(top);
            let relevant = rel.relevant(qrels, &key(t.qid.as_ref().unwrap_or(&t.id)));
            let rank = hits
                .iter()
                .take(10)
                .position(|h| relevant.binary_search(&rel.doc(h.index)).is_ok())
                .map(|r| r + 1);
            let e = per.entry(kind).or_default();
            if !relevant.is_empty() {
                e.0.push(rank);
            }
            e.1.push(ms);
            e.2 += used.used as usize;
            e.3 += low as usize;
            e.4 += kept as usize;
        }
        for kind in KINDS {
            let Some((ranks, mut ms, used, low, kept)) = per.remove(kind) else {
                continue;
            };
            let n = ranks.len().max(1) as f64;
            let all = ms.len();
            ms.sort_by(f64::total_cmp);
            rows.push(KindRow {
                kind,
                context,
                turns: ranks.len(),
                hit1: ranks.iter().filter(|r| **r == Some(1)).count() as f64 / n,
                hit10: ranks.iter().filter(|r| r.is_some()).count() as f64 / n,
                mrr: ranks
                    .iter()
                    .map(|r| r.map_or(0.0, |r| 1.0 / r as f64))
                    .sum::<f64>()
                    / n,
                used,
                low,
                kept,
                all,
                embeds_per_turn,
                search_ms_p50: percentile(&ms, 50.0).unwrap_or(0.0),
                search_ms_p90: percentile(&ms, 90.0).unwrap_or(0.0),
            });
        }
    }
    Ok(rows)
}

/// The rows as a Markdown table.
pub fn table(rows: &[KindRow]) -> String {
    let mut s = String::from(
        "| turn | context | turns | hit@1 | hit@10 | MRR@10 | context used | low | same top as before | embeds/turn | search ms p50 / p90 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.2} | {:.3} / {:.3} |\n",
            r.kind,
            if r.context { "on" } else { "off" },
            r.turns,
            r.hit1,
            r.hit10,
            r.mrr,
            r.used,
            r.low as f64 / r.all.max(1) as f64,
            r.kept as f64 / r.all.max(1) as f64,
            r.embeds_per_turn,
            r.search_ms_p50,
            r.search_ms_p90
        ));
    }
    s
}
