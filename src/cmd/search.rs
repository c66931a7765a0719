//! `primd search`: queries in, one JSON line of results per query out, from the
//! retriever the index supports (hybrid by default; `--exact` is dense brute force).
//!
//! A malformed input line is reported on stderr with its line number and skipped; the
//! remaining queries are still answered.
//!
//! A query's text is normalised as the daemon normalises a final (case, punctuation,
//! fillers: [`Normalizer`]) before it is embedded, searched and packed, so a line and
//! the same final over the socket, Wyoming or the pipe get the same answer and context.

use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;

use anyhow::{Context, bail};
use primd::conversation::{self, ContextSearch, Conversations};
use primd::dense::Query;
use primd::embed::{DIM, Embed};
use primd::hits::Hits;
use primd::index::Index;
use primd::output::ResultJson;
use primd::retriever::{
    HybridSearcher, Ranked, Retriever, SearchParams, SearchTimings, ranked_from,
};
use primd::stream::normalize::Normalizer;
use primd::{confidence, config};
use serde::{Deserialize, Serialize};

use crate::cli::SearchArgs;

/// `{"id", "text"}` (BEIR's `_id` too: its query files work as published), and
/// optionally `"conversation"`: the id of the conversation the line is a turn of
/// (a string or a number; turns of one conversation are taken in input order).
#[derive(Deserialize)]
struct InputLine {
    #[serde(alias = "_id")]
    id: serde_json::Value,
    text: String,
    #[serde(default, deserialize_with = "conversation_id")]
    conversation: Option<serde_json::Value>,
    /// `false`: this turn is retrieved alone (it is still remembered).
    #[serde(default)]
    context: Option<bool>,
    /// This line's own `context` budget (as a turn's `"context_tokens"` on the socket).
    #[serde(default)]
    context_tokens: Option<i64>,
    /// Sets the conversation's topic before this turn (as `{"cmd":"topic"}` on the
    /// socket; `""` clears it).
    #[serde(default)]
    topic: Option<String>,
}

/// A line's place in its conversation.
struct Turn<'a> {
    /// The conversation's id.
    id: &'a serde_json::Value,
    /// `"context"`: the turn may use its conversation.
    context: bool,
    /// `"topic"`: the agent's topic, set before the turn.
    topic: Option<&'a str>,
}

/// A conversation id is a string or a number (`null`: none); anything else is refused.
fn conversation_id<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    use serde_json::Value;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v @ (Value::String(_) | Value::Number(_)) => Ok(Some(v)),
        other => Err(serde::de::Error::custom(format!(
            "\"conversation\" must be a string or a number, not {other}"
        ))),
    }
}

/// A line's `"context_tokens"`, checked by the rule of the socket's per-turn key.
fn line_budget(tokens: Option<i64>) -> anyhow::Result<Option<usize>> {
    match tokens {
        None => Ok(None),
        Some(n) if (0..=primd::context::MAX_CONTEXT_TOKENS as i64).contains(&n) => {
            Ok(Some(n as usize))
        }
        Some(n) => bail!(
            "\"context_tokens\" {n} is outside 0..={}",
            primd::context::MAX_CONTEXT_TOKENS
        ),
    }
}

#[derive(Serialize)]
struct Timings {
    embed: f64,
    lexical: f64,
    scan: f64,
    rerank: f64,
}

#[derive(Serialize)]
struct OutputLine<'a> {
    id: &'a serde_json::Value,
    /// Probability that the top-1 is relevant (`null` with no results).
    confidence: Option<f32>,
    /// `"ok"`, or `"low"` when `confidence` is below `low_evidence_threshold`.
    evidence: &'static str,
    results: Vec<ResultJson<'a>>,
    /// The best sentences of the results within `--context-tokens` (absent with 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<primd::context::ContextJson<'a>>,
    /// How the turn used its conversation (only for lines with a `conversation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<UsedJson>,
    ms: Timings,
}

#[derive(Serialize)]
struct UsedJson {
    used: bool,
    turns: u32,
    /// The topic the context search added (`null` when `used` is false).
    topic: Option<String>,
}

pub fn run(args: &SearchArgs) -> anyhow::Result<()> {
    let flags = args.model.to_layer1().overridden_by(config::Layer1 {
        retriever: args.retriever,
        ..args.fusion.to_layer1()
    });
    let mut cfg = config::load(None, flags)?;
    cfg.conversation = args.conversation.apply(cfg.conversation)?;
    // A turn's `low` is the one its line shows.
    cfg.conversation.low_evidence_threshold = cfg.stream.low_evidence_threshold;
    let index = Index::open(&args.index)?;
    if args.verify {
        index.verify()?;
    }
    let retriever = if args.exact {
        match cfg.retriever {
            None | Some(Retriever::Dense) => Retriever::Dense,
            Some(r) => bail!("--exact is a dense brute-force search; it cannot be {r}"),
        }
    } else {
        Retriever::resolve(cfg.retriever, &index)?
    };
    log::info!("{retriever} retriever over {:?}", args.index);
    // The lexical retriever needs no model.
    let mut embedder = if retriever.uses_dense() {
        Some(super::embedder_for(&index, &args.model.model, &cfg)?)
    } else {
        None
    };
    let params = SearchParams {
        retriever,
        // Ranked at least as deep as the confidence reads; cut to --k after it.
        k: confidence::depth(args.k as usize),
        candidates: args.candidates as usize,
        lexical_candidates: cfg.stream.lexical_candidates,
        fusion: cfg.stream.fusion,
    };
    let mut searcher = HybridSearcher::new(&index)?;
    let mut context = match super::load_reader(&args.model.model, &args.reader)? {
        Some(r) => primd::context::ContextBuilder::with_reader(r, cfg.reader),
        None => primd::context::ContextBuilder::new(),
    };
    let mut packed = primd::context::Context::default();
    let mut hits = Ranked::new();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut conversations = Conversations::new(MAX_CONVERSATIONS);
    let mut scratch = ContextSearch::new();
    // A query with no words (empty, white space, punctuation, fillers) is answered as
    // the daemon answers such a final: no results, evidence "low", an empty context.
    let mut normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
    normalizer.set_rules(index.word_rules());
    let mut norm = String::new();
    let mut turn_scratch = conversation::TurnScratch::default();
    let mut answer = |id: &serde_json::Value,
                      raw: &str,
                      conv: Option<Turn<'_>>,
                      budget: Option<usize>,
                      out: &mut BufWriter<_>|
     -> anyhow::Result<()> {
        normalizer.normalize_into(raw, &mut norm);
        let text = norm.as_str();
        let t0 = Instant::now();
        let mut v = [0.0f32; DIM];
        let said = !text.is_empty();
        let query = match embedder.as_mut() {
            Some(e) if said => {
                e.embed_into(text, &mut v)?;
                Some(Query::new(&v))
            }
            _ => None,
        };
        let embed_ms = ms(t0.elapsed());
        let t = if !said {
            hits.clear();
            SearchTimings::default()
        } else if args.exact {
            let t1 = Instant::now();
            if let Some(q) = &query {
                let mut exact = Hits::new();
                searcher.dense().exact(q, params.k, &mut exact);
                ranked_from(&exact, true, &mut hits);
            }
            SearchTimings {
                scan_ms: ms(t1.elapsed()),
                ..Default::default()
            }
        } else {
            searcher.search(&params, query.as_ref(), text, &mut hits)
        };
        // The turn's conversation: its choice now, remembered once its results are judged.
        let mut turn_of = None;
        if let Some(turn) = conv.filter(|_| !args.exact && cfg.conversation.enabled) {
            let c = conversations.get(turn.id);
            if let Some(t) = turn.topic {
                let mut tv = [0.0f32; DIM];
                let embedded = match embedder.as_mut() {
                    Some(e) if !t.trim().is_empty() => {
                        e.embed_into(t, &mut tv)?;
                        true
                    }
                    _ => false,
                };
                c.set_topic(t, embedded.then_some(&tv));
            }
            let vector = query.is_some().then_some(&v);
            let u = conversation::choose(
                c,
                &mut scratch,
                &mut searcher,
                &params,
                &cfg.conversation,
                turn.context,
                &norm,
                vector,
                &mut hits,
            );
            turn_of = Some((turn.id, u));
        }
        let mut confidence = confidence::of_ranked(retriever, &hits);
        // The context is made from the retriever's own top passages, whatever k asks.
        let budget = budget.unwrap_or(cfg.stream.context_tokens);
        // Without a model (lexical retriever) a cut counts words, not pieces.
        let mut count = |t: &str| match embedder.as_mut() {
            Some(e) => primd::context::word_pieces(e, t),
            None => t.split_whitespace().count(),
        };
        // As the daemon: read against the turn as resolved, the evidence whether the
        // sentences answer, and a second look for a turn whose own results do not.
        conversation::read_turn(
            &mut context,
            &index,
            query.as_ref(),
            &norm,
            retriever,
            cfg.stream.low_evidence_threshold,
            budget,
            &mut count,
            &scratch,
            turn_of.as_mut().map(|(_, u)| u),
            &mut hits,
            &mut packed,
            &mut confidence,
            &mut turn_scratch,
        );
        let context = (budget > 0)
            .then(|| primd::context::to_json(&index, &packed))
            .transpose()?;
        let used = turn_of.map(|(id, u)| {
            let vector = query.is_some().then_some(&v);
            let c = conversations.get(id);
            conversation::remember(
                c,
                &index,
                &cfg.conversation,
                &norm,
                vector,
                &hits,
                confidence,
                &u,
            );
            UsedJson {
                used: u.used,
                turns: u.turns,
                topic: u.topic.map(|t| t.as_str().to_string()),
            }
        });
        hits.truncate(args.k as usize);
        let results = hits
            .iter()
            .map(|h| Ok(ResultJson::new(index.passage(h.index as usize)?, h)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let line = OutputLine {
            id,
            confidence,
            evidence: confidence::evidence(confidence, cfg.stream.low_evidence_threshold),
            results,
            context,
            conversation: used,
            ms: Timings {
                embed: embed_ms,
                lexical: t.lexical_ms,
                scan: t.scan_ms,
                rerank: t.rerank_ms,
            },
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
        Ok(())
    };
    if !args.query.is_empty() {
        for (i, q) in args.query.iter().enumerate() {
            answer(&serde_json::Value::from(i), q, None, None, &mut out)?;
        }
        out.flush()?;
        return Ok(());
    }
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::new();
    let mut lineno = 0;
    while stdin.read_until(b'\n', &mut buf).context("reading stdin")? > 0 {
        lineno += 1;
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if !line.is_empty() {
            let parsed = serde_json::from_str::<InputLine>(line)
                .map_err(anyhow::Error::from)
                .and_then(|q| line_budget(q.context_tokens).map(|b| (q, b)));
            match parsed {
                Ok((q, budget)) => {
                    let conv = q.conversation.as_ref().map(|c| Turn {
                        id: c,
                        context: q.context.unwrap_or(true),
                        topic: q.topic.as_deref(),
                    });
                    answer(&q.id, &q.text, conv, budget, &mut out)?;
                    out.flush()?;
                }
                Err(e) => {
                    log::error!("stdin line {lineno}: skipped, expected {{\"id\", \"text\"}}: {e}")
                }
            }
        }
        buf.clear();
    }
    out.flush()?;
    Ok(())
}

/// Conversations `primd search` keeps at once; past it the least recently used is
/// forgotten (its next turn starts a new one).
const MAX_CONVERSATIONS: usize = 4096;

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
