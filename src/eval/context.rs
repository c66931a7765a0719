//! Answer-in-context: does the text handed to the agent's LLM hold a gold answer, and
//! how many tokens did it cost? The top-1/3/10 passages against `context` at budgets of
//! [`BUDGETS`] word pieces, on the typed questions (one search each, as `primd search`
//! runs it) and on the recorded streams (the daemon's final results, the final
//! transcript as the question).
//!
//! An answers file has one `{"id", "answers": [...]}` per line (Spoken-SQuAD's
//! `answers.jsonl`); a text holds an answer when its words, lower-cased with
//! punctuation dropped, contain the answer's words in a row.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::data::{QueryRecord, StreamRecord};
use super::progress::{Progress, run_parallel};
use crate::config::RunConfig;
use crate::context::{Context, ContextBuilder, ReadSettings, to_json, word_pieces};
use crate::dense::Query;
use crate::embed::reader::Reader;
use crate::embed::{DIM, Embed};
use crate::fusion::Scored;
use crate::index::Index;
use crate::retriever::{HybridSearcher, Ranked, Retriever, SearchParams};
use crate::stream::normalize::Normalizer;

/// The budgets measured, in word pieces.
pub const BUDGETS: [usize; 4] = [32, 64, 128, 256];
/// The passage depths measured.
pub const PASSAGES: [usize; 3] = [1, 3, 10];

/// Gold answers by question id, normalised.
#[derive(Clone, Debug, Default)]
pub struct Answers(HashMap<String, Vec<String>>);

#[derive(Deserialize)]
struct AnswerLine {
    id: String,
    answers: Vec<String>,
}

impl Answers {
    /// Reads an answers file; a malformed line is an error naming it.
    pub fn load(path: &Path) -> anyhow::Result<Answers> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut map = HashMap::new();
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let a: AnswerLine = serde_json::from_str(&line)
                .with_context(|| format!("{} line {}", path.display(), i + 1))?;
            let norm: Vec<String> = a
                .answers
                .iter()
                .map(|s| normalise(s))
                .filter(|s| !s.trim().is_empty())
                .collect();
            map.insert(a.id, norm);
        }
        Ok(Answers(map))
    }

    pub fn get(&self, id: &str) -> Option<&[String]> {
        self.0.get(id).map(Vec::as_slice).filter(|a| !a.is_empty())
    }
}

/// Lower case, every run of non-alphanumerics one space, padded with a space each side
/// (so a containment test matches whole words).
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        out.extend(w.chars().flat_map(char::to_lowercase));
        out.push(' ');
    }
    out
}

/// Whether `text` holds one of the (normalised) `answers`.
pub fn holds(text: &str, answers: &[String]) -> bool {
    let t = normalise(text);
    answers.iter().any(|a| t.contains(a.as_str()))
}

/// One way of handing text over: how often it held an answer, and its mean cost.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Handed {
    /// `"top-3 passages"`, `"context 128"`.
    pub what: String,
    pub answer_rate: f64,
    pub mean_tokens: f64,
    pub mean_words: f64,
}

/// Answer-in-context of one question set.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ContextSummary {
    pub questions: usize,
    /// Questions with no gold answer in the file (left out).
    pub skipped: usize,
    pub rows: Vec<Handed>,
}

/// The reader's part of an answer-in-context run: the reader's files, the settings
/// the `reader` rows use, and (`sweep`) a grid of other settings reported too (the
/// figures the defaults were chosen from).
#[derive(Clone, Debug)]
pub struct ReaderEval {
    pub dir: std::path::PathBuf,
    pub settings: ReadSettings,
    pub sweep: bool,
}

impl ReaderEval {
    /// Every setting measured: the chosen one first, then the sweep's grid.
    fn settings(&self) -> Vec<ReadSettings> {
        let mut all = vec![self.settings];
        if self.sweep {
            for sentences in [8, 12, 16, 24] {
                for cheap_weight in [0.0, 1.0] {
                    for drop in [9.0, 12.0, 1e9] {
                        for floor in [-1e9, -8.0, -6.0, -4.0] {
                            all.push(ReadSettings {
                                sentences,
                                cheap_weight,
                                drop,
                                floor,
                            });
                        }
                    }
                }
            }
        }
        all
    }

    fn label(s: &ReadSettings) -> String {
        let none = |x: f32| {
            if x.abs() >= 1e8 {
                "none".to_string()
            } else {
                x.to_string()
            }
        };
        format!(
            "reader n={} w={} drop={} floor={}",
            s.sentences,
            s.cheap_weight,
            none(s.drop),
            none(s.floor)
        )
    }
}

/// What one question gave: per row of [`ContextSummary::rows`], (held, tokens, words).
type Row = Vec<(bool, usize, usize)>;

/// The builders of one worker: without the reader, and with it (if measured).
pub struct Builders {
    plain: ContextBuilder,
    reader: Option<(ContextBuilder, Vec<ReadSettings>)>,
}

impl Builders {
    pub fn new(reader: Option<&ReaderEval>) -> anyhow::Result<Self> {
        let reader = match reader {
            Some(r) => {
                let settings = r.settings();
                let max = settings.iter().map(|s| s.sentences).max().unwrap_or(0);
                // Loaded per worker; the widest setting is read once per question, the
                // others reuse its logits.
                let widest = ReadSettings {
                    sentences: max,
                    ..settings[0]
                };
                let b = ContextBuilder::with_reader(Reader::load(&r.dir)?, widest);
                Some((b, settings))
            }
            None => None,
        };
        Ok(Builders {
            plain: ContextBuilder::new(),
            reader,
        })
    }
}

/// Judges the passages and the contexts of one question's `hits`.
fn judge<E: Embed>(
    index: &Index,
    builders: &mut Builders,
    embedder: &mut E,
    query: Option<&Query>,
    question: &str,
    hits: &[Scored],
    answers: &[String],
) -> anyhow::Result<Row> {
    let mut row: Row = Vec::new();
    let mut text = String::new();
    for &k in &PASSAGES {
        text.clear();
        for h in hits.iter().take(k) {
            text.push_str(index.passage(h.index as usize)?.text);
            text.push('\n');
        }
        let tokens = word_pieces(embedder, &text);
        row.push((
            holds(&text, answers),
            tokens,
            text.split_whitespace().count(),
        ));
    }
    let mut c = Context::default();
    let mut one = |builder: &mut ContextBuilder, b: usize, row: &mut Row| -> anyhow::Result<()> {
        let mut count = |t: &str| word_pieces(embedder, t);
        builder.build(index, query, question, hits, b, &mut count, &mut c);
        let j = to_json(index, &c)?;
        row.push((
            holds(&j.text, answers),
            c.tokens as usize,
            j.text.split_whitespace().count(),
        ));
        Ok(())
    };
    for &b in &BUDGETS {
        one(&mut builders.plain, b, &mut row)?;
    }
    if let Some((builder, settings)) = builders.reader.as_mut() {
        let widest = builder.read_settings();
        for s in settings.iter() {
            builder.set_read_settings(*s);
            for &b in &BUDGETS {
                one(builder, b, &mut row)?;
            }
        }
        builder.set_read_settings(widest);
    }
    Ok(row)
}

fn summarize(rows: &[Row], skipped: usize, reader: Option<&ReaderEval>) -> ContextSummary {
    let n = rows.len().max(1) as f64;
    let mut names: Vec<String> = PASSAGES
        .iter()
        .map(|k| format!("top-{k} passage{}", if *k == 1 { "" } else { "s" }))
        .chain(BUDGETS.iter().map(|b| format!("context {b}")))
        .collect();
    if let Some(r) = reader {
        for (i, s) in r.settings().iter().enumerate() {
            for b in BUDGETS {
                names.push(if i == 0 {
                    format!("context {b}, reader")
                } else {
                    format!("context {b}, {}", ReaderEval::label(s))
                });
            }
        }
    }
    ContextSummary {
        questions: rows.len(),
        skipped,
        rows: names
            .into_iter()
            .enumerate()
            .map(|(slot, what)| Handed {
                what,
                answer_rate: rows.iter().filter(|r| r[slot].0).count() as f64 / n,
                mean_tokens: rows.iter().map(|r| r[slot].1).sum::<usize>() as f64 / n,
                mean_words: rows.iter().map(|r| r[slot].2).sum::<usize>() as f64 / n,
            })
            .collect(),
    }
}

/// The typed questions: each searched as `primd search` does (top 10, `retriever`).
#[allow(clippy::too_many_arguments)]
pub fn typed<E: Embed>(
    index: &Index,
    queries: &[QueryRecord],
    answers: &Answers,
    cfg: &RunConfig,
    retriever: Retriever,
    workers: usize,
    progress: &Progress,
    reader: Option<&ReaderEval>,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<ContextSummary> {
    let asked: Vec<(&QueryRecord, &[String])> = queries
        .iter()
        .filter_map(|q| answers.get(&q.id).map(|a| (q, a)))
        .collect();
    let params = SearchParams {
        retriever,
        k: 10,
        candidates: cfg.stream.full_search_candidates,
        lexical_candidates: cfg.stream.lexical_candidates,
        fusion: cfg.stream.fusion,
    };
    let rows = run_parallel(
        &format!("{retriever} context, typed"),
        &asked,
        workers,
        progress,
        || {
            Ok((
                make_embedder()?,
                HybridSearcher::new(index)?,
                Builders::new(reader)?,
                Ranked::new(),
            ))
        },
        |(e, s, b, hits), _, (q, a)| {
            let query = retriever
                .uses_dense()
                .then(|| -> anyhow::Result<Query> {
                    let mut v = [0.0; DIM];
                    e.embed_into(&q.text, &mut v)?;
                    Ok(Query::new(&v))
                })
                .transpose()?;
            s.search(&params, query.as_ref(), &q.text, hits);
            judge(index, b, e, query.as_ref(), &q.text, hits, a)
        },
    )?;
    Ok(summarize(&rows, queries.len() - asked.len(), reader))
}

/// The recorded streams: `finals[i]` are the passages the daemon returned for
/// `streams[i]` (best first); the question is the final transcript as the daemon
/// normalises it.
#[allow(clippy::too_many_arguments)]
pub fn streams<E: Embed>(
    index: &Index,
    streams: &[(&StreamRecord, &[u32])],
    answers: &Answers,
    cfg: &RunConfig,
    retriever: Retriever,
    workers: usize,
    progress: &Progress,
    reader: Option<&ReaderEval>,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<ContextSummary> {
    let asked: Vec<(&StreamRecord, &[u32], &[String])> = streams
        .iter()
        .filter_map(|(s, top)| answers.get(&s.id).map(|a| (*s, *top, a)))
        .collect();
    let rows = run_parallel(
        &format!("{retriever} context, streams"),
        &asked,
        workers,
        progress,
        || {
            let mut n = Normalizer::new(cfg.fillers.iter().map(String::as_str));
            n.set_rules(index.word_rules());
            Ok((make_embedder()?, Builders::new(reader)?, n, String::new()))
        },
        |(e, b, n, norm), _, (rec, top, a)| {
            n.normalize_into(&rec.final_text, norm);
            let query = retriever
                .uses_dense()
                .then(|| -> anyhow::Result<Query> {
                    let mut v = [0.0; DIM];
                    e.embed_into(norm, &mut v)?;
                    Ok(Query::new(&v))
                })
                .transpose()?;
            let hits: Vec<Scored> = top.iter().map(|&i| Scored::new(i, None, None)).collect();
            judge(index, b, e, query.as_ref(), norm, &hits, a)
        },
    )?;
    Ok(summarize(&rows, streams.len() - asked.len(), reader))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_match_whole_words_whatever_the_case_and_punctuation() {
        let a = vec![normalise("Denver Broncos"), normalise("gold")];
        assert!(holds("The Denver  Broncos, champions.", &a));
        assert!(holds("it was GOLD!", &a));
        assert!(!holds("golden anniversary", &a));
        assert!(!holds("denver. the broncos", &a));
        assert!(!holds("", &a));
        assert_eq!(normalise("Levi's Stadium"), " levi s stadium ");
    }
}
