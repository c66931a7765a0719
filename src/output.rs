//! Results → JSON lines.
//!
//! The retriever sends compact messages (passage positions, scores, timings); the
//! daemon's writer thread looks the passages up in the index and serialises them here,
//! so the retriever's hot path never formats or allocates. Each message becomes one
//! complete line in a buffer the caller reuses, which the writer then writes with one
//! `write_all`: a consumer never sees half a line followed by a stall, and a slow
//! consumer costs one buffer, not a formatter per message.

use serde::Serialize;

use crate::fusion::Scored;
use crate::index::{Index, PassageRef};
use crate::input::Text;
use crate::stream::Outcome;

/// Passages shown in a speculative event.
pub const SPECULATIVE_SHOWN: usize = 5;

/// What the retriever hands to the writer.
#[derive(Clone)]
pub enum Outbound {
    /// End of an utterance.
    Final {
        utterance: u64,
        text: Text,
        outcome: Box<Outcome>,
        /// End of utterance (final received, or silence detected) → results ready.
        eou_to_result_ms: f64,
        /// Partials dropped unseen because a newer one was already waiting.
        stale_dropped: u32,
    },
    /// The best guess while the user speaks changed (only with `--emit-speculative`):
    /// the speculative candidates, fused as the final will be, best first.
    Speculative {
        utterance: u64,
        partial: Text,
        candidates: heapless::Vec<u32, SPECULATIVE_SHOWN>,
    },
}

/// One result as JSON; `primd search` prints the same shape. `score` is what results
/// are ranked by: the fused score (hybrid), the cosine (dense) or BM25 (lexical);
/// `dense` (int8 cosine) and `bm25` are each retriever's own score, `null` when that
/// retriever did not score the passage.
#[derive(Serialize)]
pub struct ResultJson<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub score: f32,
    pub dense: Option<f32>,
    pub bm25: Option<f32>,
    pub text: &'a str,
    pub chunk: u32,
}

impl<'a> ResultJson<'a> {
    pub fn new(p: PassageRef<'a>, s: &Scored) -> Self {
        ResultJson {
            id: p.id,
            title: p.title,
            score: s.score,
            dense: s.dense,
            bm25: s.bm25,
            text: p.text,
            chunk: p.chunk,
        }
    }
}

#[derive(Serialize)]
struct Ms {
    embed: f64,
    lexical: f64,
    scan: f64,
    rerank: f64,
    context: f64,
    eou_to_result: f64,
}

#[derive(Serialize)]
struct CountsJson {
    partials: u32,
    embeds: u32,
    speculative_searches: u32,
    gate_skips: u32,
    lexical_searches: u32,
    stale_dropped: u32,
    /// Question-sentence pairs the reader read while the user spoke, and after.
    pairs_read: u32,
    pairs_read_final: u32,
}

/// The socket hub's tags of a message: the session and the turn it answers.
#[derive(Clone, Copy, Debug)]
pub struct Tag<'a> {
    pub session: &'a str,
    pub turn: u64,
}

#[derive(Serialize)]
struct FinalJson<'a> {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<u64>,
    utterance: u64,
    text: &'a str,
    path: &'static str,
    reused_embedding: bool,
    speculation_cosine: Option<f32>,
    /// Probability that the top-1 is relevant (`null`: no results).
    confidence: Option<f32>,
    /// `"ok"`, or `"low"`: the agent should not present the top-1 as the answer.
    evidence: &'static str,
    /// How the turn used its conversation (absent when conversations are off).
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<ConversationJson<'a>>,
    results: Vec<ResultJson<'a>>,
    /// The best sentences of the results within the budget (`crate::context`); absent
    /// when the budget is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<crate::context::ContextJson<'a>>,
    ms: Ms,
    counts: CountsJson,
}

#[derive(Serialize)]
struct ConversationJson<'a> {
    used: bool,
    turns: u32,
    /// The topic the context search added (`null` when `used` is false).
    topic: Option<&'a str>,
}

#[derive(Serialize)]
struct CandidateJson<'a> {
    id: &'a str,
    title: &'a str,
}

#[derive(Serialize)]
struct SpeculativeJson<'a> {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn: Option<u64>,
    utterance: u64,
    partial: &'a str,
    candidates: Vec<CandidateJson<'a>>,
}

/// Appends one message to `out` as one JSON line (newline included).
pub fn encode_message(out: &mut Vec<u8>, index: &Index, msg: &Outbound) -> anyhow::Result<()> {
    encode_tagged(out, index, msg, None)
}

/// [`encode_message`] with the socket hub's `session` and `turn` fields (after `type`).
pub fn encode_tagged(
    out: &mut Vec<u8>,
    index: &Index,
    msg: &Outbound,
    tag: Option<Tag<'_>>,
) -> anyhow::Result<()> {
    let start = out.len();
    let r = encode(out, index, msg, tag);
    if r.is_err() {
        out.truncate(start); // never half a line
    }
    r
}

fn encode(
    out: &mut Vec<u8>,
    index: &Index,
    msg: &Outbound,
    tag: Option<Tag<'_>>,
) -> anyhow::Result<()> {
    let session = tag.map(|t| t.session);
    let turn = tag.map(|t| t.turn);
    match msg {
        Outbound::Final {
            utterance,
            text,
            outcome,
            eou_to_result_ms,
            stale_dropped,
        } => {
            let mut results = Vec::with_capacity(outcome.hits.len());
            for h in &outcome.hits {
                results.push(ResultJson::new(index.passage(h.index as usize)?, h));
            }
            let c = outcome.counts;
            let line = FinalJson {
                r#type: "final",
                session,
                turn,
                utterance: *utterance,
                text,
                path: outcome.path.as_str(),
                reused_embedding: outcome.reused_embedding,
                speculation_cosine: outcome.speculation_cosine,
                confidence: outcome.confidence,
                evidence: crate::confidence::label(outcome.low_evidence),
                conversation: outcome.conversation.as_ref().map(|u| ConversationJson {
                    used: u.used,
                    turns: u.turns,
                    topic: u.topic.as_deref(),
                }),
                results,
                context: (outcome.context.budget > 0)
                    .then(|| crate::context::to_json(index, &outcome.context))
                    .transpose()?,
                ms: Ms {
                    embed: outcome.timings.embed_ms,
                    lexical: outcome.timings.lexical_ms,
                    scan: outcome.timings.scan_ms,
                    rerank: outcome.timings.rerank_ms,
                    context: outcome.timings.context_ms,
                    eou_to_result: *eou_to_result_ms,
                },
                counts: CountsJson {
                    // Seen = observed + superseded before they could be observed.
                    partials: c.partials + stale_dropped,
                    embeds: c.embeds,
                    speculative_searches: c.speculative_searches,
                    gate_skips: c.gate_skips,
                    lexical_searches: c.lexical_searches,
                    stale_dropped: *stale_dropped,
                    pairs_read: c.pairs_read,
                    pairs_read_final: c.pairs_read_final,
                },
            };
            serde_json::to_writer(&mut *out, &line)?;
        }
        Outbound::Speculative {
            utterance,
            partial,
            candidates,
        } => {
            let mut shown = Vec::with_capacity(candidates.len());
            for &i in candidates {
                let p = index.passage(i as usize)?;
                shown.push(CandidateJson {
                    id: p.id,
                    title: p.title,
                });
            }
            let line = SpeculativeJson {
                r#type: "speculative",
                session,
                turn,
                utterance: *utterance,
                partial,
                candidates: shown,
            };
            serde_json::to_writer(&mut *out, &line)?;
        }
    }
    out.push(b'\n');
    Ok(())
}
