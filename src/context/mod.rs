//! `context`: the sentences of the top passages that answer the question, packed to a
//! token budget, for an agent that hands primd's evidence to a small LLM.
//!
//! Why: on a board the LLM's prompt prefill, not retrieval, is the wait the user hears;
//! ten passages are 1,500-3,000 tokens, and the answer sits in one or two sentences. So
//! at end of speech, with the question's vector and terms already at hand, primd ranks
//! the sentences of its top passages and hands over the best ones within the agent's
//! budget, with where each one came from so the agent can cite.
//!
//! The flow, one file each: [`split`] cuts passages into sentences at build time (the
//! index stores their byte ranges, word-piece counts and int8 vectors:
//! `index::Sentences`); `rank` scores each sentence of the top [`CONTEXT_PASSAGES`]
//! passages by the question (the sentence vector's cosine, the share of the question's
//! idf-weighted terms it contains, and its passage's rank); `pack` takes the best ones
//! that fit (a sentence starting with a pronoun brings the one before it), cuts one at a
//! word boundary when it alone is longer than what is left, and orders them by passage
//! rank, then text order. An index without sentences (built before format v6) gets whole
//! passages instead, cut likewise, and the answer says so (`unit: "passages"`).
//!
//! The retriever calls [`ContextBuilder::build`] on every final: it works in buffers
//! made once ([`Context`] is fixed-capacity spans, no text), so after warm-up it
//! allocates nothing; the writer thread turns the spans into text ([`to_json`]).
//! Tokens are the embedder's word pieces (counted at build time; a cut is counted
//! with the caller's counter, [`word_pieces`]).

mod pack;
mod rank;
pub mod read;
pub mod split;

use heapless::Vec as FixedVec;
use serde::Serialize;

use crate::dense::Query;
use crate::embed::reader::Reader;
use crate::embed::{Embed, EmbedError, MAX_TOKENS};
use crate::fusion::Scored;
use crate::index::{Index, IndexError, SentenceSpan, SentenceTable};
use pack::Cand;
use rank::Ranker;
pub use read::{ReadCache, ReadSettings};

/// The budget when none is given, in word pieces.
pub const DEFAULT_CONTEXT_TOKENS: usize = 128;
/// The largest budget accepted (config key, flag, protocol).
pub const MAX_CONTEXT_TOKENS: usize = 1_000_000;
/// Passages (best first) whose sentences are ranked.
pub const CONTEXT_PASSAGES: usize = 5;
/// Most spans one context holds.
pub const MAX_SPANS: usize = 64;
/// Most sentences ranked per question (the top passages' first ones).
pub(crate) const MAX_SENTENCES: usize = 256;

/// A piece of the context: bytes `start..end` of passage `passage`'s text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// Position of the passage in the index.
    pub passage: u32,
    /// Byte offsets in the passage's text.
    pub start: u32,
    pub end: u32,
    /// Word pieces of `text[start..end]`.
    pub tokens: u32,
    /// The last sentence was cut at a word boundary to fit the budget.
    pub cut: bool,
}

/// What the spans are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    #[default]
    Sentences,
    /// The index has no sentences (built before format v6): whole passages.
    Passages,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Sentences => "sentences",
            Unit::Passages => "passages",
        }
    }
}

/// One answer's context: spans in the order they are handed over (passages by rank,
/// each passage's spans in text order). No text: [`to_json`] makes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Context {
    pub spans: FixedVec<Span, MAX_SPANS>,
    /// Sum of the spans' tokens (≤ the budget).
    pub tokens: u32,
    pub unit: Unit,
    /// The span holding the best-ranked sentence, alone (the spoken answer, Wyoming);
    /// `None` when there are no spans (or the best sentence did not fit at all).
    pub best: Option<usize>,
    /// The budget it was made for (0: context is off).
    pub budget: u32,
    /// The reader's logits, when it read this question's sentences.
    pub reader: Option<ReaderScores>,
}

/// What the reader said of an answer's sentences: its best logit over all it read, and
/// over the top-1 passage's (NaN: none of them read). Higher: answers better; above 0 the
/// model holds a sentence more likely to answer than not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReaderScores {
    pub best: f32,
    pub top1: f32,
    /// The passage of the best sentence (fused score) the reader read.
    pub passage: Option<u32>,
}

/// How much better (in logit) the reader must find a sentence of another of the top
/// passages than the top-1's best for that passage to become the top-1, when the
/// retriever ranked it second; each place further down adds [`PROMOTE_STEP`]. Chosen on
/// the dev questions (0 to 2 give within half a point of each other; hit@1 0.725 →
/// 0.775 on 1,200 typed questions, 0.700 → 0.720 on the 150 recognizer finals).
pub const PROMOTE_MARGIN: f32 = 1.0;

/// What each place a passage stands further down the retriever's ranking adds to
/// [`PROMOTE_MARGIN`]: the retriever's order is evidence too. With one flat margin,
/// "When does the museum open?" on the demo gave the Harbour Lates ("the museum opens
/// for adults only from 18:30"), fourth by the retriever, over the opening hours.
/// Dev (2026-12-07, `primd search`, hit@1): flat 1.0: 0.793 / 0.792 on two sets of 600
/// typed questions, 0.733 on the 150 recognizer finals; with 0.5 a place: 0.798 /
/// 0.788, 0.740; 1.0 a place: 0.797 / 0.782, 0.747; only the top 3: 0.788 / 0.777, 0.733.
pub const PROMOTE_STEP: f32 = 0.5;

/// The reader's logit from which the top-1 passage's best sentence is the one a voice
/// answer speaks, when the reader found a better one in a passage it did not promote
/// ("above 0: more likely to answer than not"): the spoken sentence and the first
/// result agree ("When does the museum open?" spoke the adults-only evening's "the
/// museum opens for adults only from 18:30" under the opening hours). Dev, 600 typed
/// questions, answer in a 32 / 64 / 128-token context: the overall best first 0.632 /
/// 0.743 / 0.827; the top-1's always 0.620 / 0.740 / 0.827; from this logit on 0.623 /
/// 0.742 / 0.827: a point at 32 tokens paid for answers that agree with their passage.
pub const LEAD_LOGIT: f32 = 0.0;

/// The margin a passage at `pos` (0: the top-1) needs to be promoted.
fn promote_margin(pos: usize) -> f32 {
    PROMOTE_MARGIN + PROMOTE_STEP * pos.saturating_sub(1) as f32
}

/// Moves the passage of the reader's best sentence to the top of `hits` when the reader
/// prefers it to every sentence of the top-1 by its margin ([`PROMOTE_MARGIN`],
/// [`PROMOTE_STEP`]); returns whether it did. Nothing without a reader.
pub fn promote(c: &Context, hits: &mut [Scored]) -> bool {
    match c.reader.and_then(|r| promoted(&r, hits)) {
        Some(pos) => {
            hits[..=pos].rotate_right(1);
            true
        }
        None => false,
    }
}

/// Where in `hits` the passage [`promote`] moves to the top stands, if it moves one.
fn promoted(r: &ReaderScores, hits: &[Scored]) -> Option<usize> {
    let top1 = if r.top1.is_finite() { r.top1 } else { -1e9 };
    let pos = r
        .passage
        .and_then(|p| hits.iter().position(|h| h.index == p))?;
    (pos > 0 && r.best - top1 > promote_margin(pos)).then_some(pos)
}

/// The evidence of results whose context the reader read: the passage of its best
/// sentence leads ([`promote`]), and the retriever's `retrieval` confidence is fused with
/// what the reader said of the top-1 ([`confidence::with_reader`]). Without the reader's
/// scores, `retrieval` as it is. What the daemon, `primd search` and `primd eval` all do.
pub fn judge(c: &Context, hits: &mut [Scored], retrieval: Option<f32>) -> Option<f32> {
    let Some(r) = c.reader else {
        return retrieval;
    };
    let promoted = promote(c, hits);
    let top1 = if promoted { r.best } else { r.top1 };
    crate::confidence::with_reader(retrieval, top1, r.best, promoted)
}

impl Context {
    pub fn clear(&mut self) {
        self.spans.clear();
        self.tokens = 0;
        self.unit = Unit::Sentences;
        self.best = None;
        self.budget = 0;
        self.reader = None;
    }
}

/// The number of word pieces of `text` for `e`'s tokenizer, without `[CLS]`/`[SEP]`; a
/// text longer than the model reads is counted word by word (word pieces never span
/// white space, so the counts add up). A word the tokenizer fails on counts 1.
pub fn word_pieces<E: Embed + ?Sized>(e: &mut E, text: &str) -> usize {
    match e.count_tokens(text) {
        Ok(n) if n < MAX_TOKENS => n.saturating_sub(2),
        _ => text
            .split_whitespace()
            .map(|w| e.count_tokens(w).map_or(1, |n| n.saturating_sub(2)))
            .sum(),
    }
}

/// The sentences of a passage's `text` ([`split::sentences`]) with their word pieces
/// (`count`: [`word_pieces`]), as the index stores them (build time).
pub fn sentence_spans(text: &str, count: &mut dyn FnMut(&str) -> usize) -> Vec<SentenceSpan> {
    split::sentences(text)
        .into_iter()
        .map(|r| SentenceSpan {
            start: r.start as u32,
            end: r.end as u32,
            tokens: count(&text[r]) as u32,
        })
        .collect()
}

/// The sentence table of `passages` embedded one sentence at a time by `e` (tests and
/// small corpora; `build-index` embeds in parallel batches). A passage longer than
/// 4 GiB has no sentences.
pub fn sentence_table<E: Embed + ?Sized>(
    e: &mut E,
    passages: &[crate::index::PassageRecord],
) -> Result<SentenceTable, crate::embed::EmbedError> {
    let mut table = SentenceTable::default();
    for p in passages {
        let spans = if u32::try_from(p.text.len()).is_ok() {
            sentence_spans(&p.text, &mut |t| word_pieces(e, t))
        } else {
            Vec::new()
        };
        for sp in &spans {
            let mut v = [0.0; crate::embed::DIM];
            e.embed_into(&p.text[sp.start as usize..sp.end as usize], &mut v)?;
            table.vectors.extend_from_slice(&v);
        }
        table.spans.push(spans);
    }
    Ok(table)
}

/// Says once per process that `index` has no sentences (built before format v6), so a
/// `context` of `budget` > 0 is made of whole passages.
pub fn notice_without_sentences(index: &Index, budget: usize) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if budget > 0 && index.sentences().is_none() {
        ONCE.call_once(|| {
            log::warn!(
                "notice: index {} has no sentences (made before index format v6): each \
                 answer's context is whole passages cut to the budget (\"unit\": \"passages\"); \
                 rebuilding it with build-index adds them",
                index.path().display()
            )
        });
    }
}

/// Makes contexts; owns the scratch space (and the reader, if any), so make one per
/// thread.
pub struct ContextBuilder {
    ranker: Ranker,
    cands: FixedVec<Cand, MAX_SENTENCES>,
    reader: Option<Reader>,
    settings: ReadSettings,
    cache: ReadCache,
    /// Most pairs [`build`](Self::build) reads itself (the rest: what was read ahead).
    build_pairs: usize,
}

impl Default for ContextBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextBuilder {
    /// Without a reader: sentences by the cheap score, packed to the budget.
    pub fn new() -> Self {
        ContextBuilder {
            ranker: Ranker::new(),
            cands: FixedVec::new(),
            reader: None,
            settings: ReadSettings::default(),
            cache: ReadCache::default(),
            build_pairs: usize::MAX,
        }
    }

    /// With `reader` ([`read`]): its best sentences, stopping where its score drops.
    pub fn with_reader(reader: Reader, settings: ReadSettings) -> Self {
        ContextBuilder {
            reader: Some(reader),
            settings,
            ..Self::new()
        }
    }

    /// How the reader is used.
    pub fn read_settings(&self) -> ReadSettings {
        self.settings
    }

    /// Uses the reader with `settings` from the next context on (the logits it has
    /// read stay valid).
    pub fn set_read_settings(&mut self, settings: ReadSettings) {
        self.settings = settings;
    }

    /// The reader back (an index swap makes a new builder).
    pub fn into_reader(self) -> Option<Reader> {
        self.reader
    }

    /// At most `pairs` read by [`build`](Self::build) itself, the best not read yet by
    /// the cheap score first: the streaming retriever's end of speech, where what was read
    /// ahead for the partials (stale logits when the final added words) stands in for the
    /// rest. Default: all it reads.
    pub fn set_build_pairs(&mut self, pairs: usize) {
        self.build_pairs = pairs;
    }

    /// Forgets the logits read (a new utterance).
    pub fn forget_reads(&mut self) {
        self.cache.clear();
    }

    /// Whether a reader ranks the sentences.
    pub fn has_reader(&self) -> bool {
        self.reader.is_some()
    }

    /// Pairs the reader has read so far (measurement).
    pub fn pairs_read(&self) -> u64 {
        self.cache.pairs
    }

    /// The candidate sentences of `hits`' top passages, scored cheaply and sorted best
    /// first. False when there are none to read (no sentences in the index).
    fn candidates(
        &mut self,
        index: &Index,
        query: Option<&Query>,
        question: &str,
        hits: &[Scored],
    ) -> bool {
        self.cands.clear();
        let top = &hits[..hits.len().min(CONTEXT_PASSAGES)];
        let Some(sentences) = index.sentences() else {
            return false;
        };
        let (lo, hi) = top
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), h| {
                (lo.min(h.score), hi.max(h.score))
            });
        for (rank, h) in top.iter().enumerate() {
            let retrieval = if hi > lo && (hi - lo).is_finite() {
                (h.score - lo) / (hi - lo)
            } else {
                1.0
            };
            let Ok(p) = index.passage(h.index as usize) else {
                continue;
            };
            for k in sentences.of_passage(h.index as usize) {
                let sp = sentences.span(k);
                let (a, b) = (sp.start as usize, sp.end as usize);
                // Checked here, not at open: a damaged span is skipped, never a panic.
                if b > p.text.len() || !p.text.is_char_boundary(a) || !p.text.is_char_boundary(b) {
                    continue;
                }
                let c = Cand::new(h.index, rank, retrieval, k as u32, sp, &p.text[a..b]);
                if self.cands.push(c).is_err() {
                    break;
                }
            }
        }
        self.ranker
            .score(index, &sentences, query, question, &mut self.cands);
        // Best first (stable: earlier passage, earlier sentence on a tie).
        self.cands.sort_by(|a, b| b.score.total_cmp(&a.score));
        true
    }

    /// Reads ahead, while the user speaks: the sentences the reader would read for
    /// `question` over `hits`, at most `max_pairs` not read yet; returns the pairs read
    /// (0: all were, or there is no reader). A later [`build`](Self::build) for the same
    /// question text finds them read.
    pub fn prepare(
        &mut self,
        index: &Index,
        query: Option<&Query>,
        question: &str,
        hits: &[Scored],
        max_pairs: usize,
    ) -> Result<usize, EmbedError> {
        if self.reader.is_none() || hits.is_empty() || max_pairs == 0 {
            return Ok(0);
        }
        if !self.candidates(index, query, question, hits) {
            return Ok(0);
        }
        let n = self.cands.len().min(self.settings.sentences);
        let reader = self.reader.as_mut().expect("checked");
        read::read(
            reader,
            &mut self.cache,
            index,
            question,
            &mut self.cands[..n],
            max_pairs,
            true,
        )
    }

    /// The context of `question` (embedded as `query`, if it was) over `hits` (best
    /// first), at most `budget` word pieces, into `out` (empty for budget 0 or no hits).
    /// `count` counts the word pieces of a text (for a cut, and for whole passages of an
    /// index without sentences): [`word_pieces`]. A damaged passage record is skipped.
    /// With a reader, the sentences it has not read for this question yet are read now;
    /// a reader that fails leaves the cheap ranking (and says so in the log).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &mut self,
        index: &Index,
        query: Option<&Query>,
        question: &str,
        hits: &[Scored],
        budget: usize,
        count: &mut dyn FnMut(&str) -> usize,
        out: &mut Context,
    ) {
        out.clear();
        let budget = budget.min(MAX_CONTEXT_TOKENS) as u32;
        out.budget = budget;
        if budget == 0 || hits.is_empty() {
            self.cands.clear();
            return;
        }
        if !self.candidates(index, query, question, hits) {
            let top = &hits[..hits.len().min(CONTEXT_PASSAGES)];
            out.unit = Unit::Passages;
            pack::whole_passages(index, top, budget, count, out);
            return;
        }
        let mut stop = None;
        if let Some(reader) = self.reader.as_mut() {
            let n = self.cands.len().min(self.settings.sentences);
            let (head, _) = self.cands.split_at_mut(n);
            // Streaming (a limited budget): stale logits stand, only unread ones are read.
            let (budget, refresh) = (n.min(self.build_pairs), self.build_pairs == usize::MAX);
            match read::read(
                reader,
                &mut self.cache,
                index,
                question,
                head,
                budget,
                refresh,
            ) {
                Ok(_) => stop = read::fuse(&mut self.cands, &self.settings),
                Err(e) => log::warn!("the reader failed, context by the cheap score: {e}"),
            }
            let top1 = hits[0].index;
            let logits = |c: &&Cand| !c.logit.is_nan();
            let best = |acc: f32, c: &Cand| {
                if acc.is_nan() {
                    c.logit
                } else {
                    acc.max(c.logit)
                }
            };
            let passage = self
                .cands
                .iter()
                .filter(logits)
                .max_by(|a, b| a.score.total_cmp(&b.score))
                .map(|c| c.passage);
            out.reader = Some(ReaderScores {
                passage,
                best: self.cands.iter().filter(logits).fold(f32::NAN, best),
                top1: self
                    .cands
                    .iter()
                    .filter(logits)
                    .filter(|c| c.passage == top1)
                    .fold(f32::NAN, best),
            });
        }
        // Nothing the reader finds above its floor (an off-topic question, or one the
        // recognizer garbled): the best sentence alone, which `evidence` marks.
        let below = stop.map(|s| if s.empty { f32::INFINITY } else { s.below });
        // The sentence a voice answer speaks is the answer passage's: when the reader's
        // best sentence is in a passage it does not promote, the top-1's best sentence
        // leads instead, if the reader reads it as an answer too (logit ≥ 0) and it is
        // packed at all.
        let lead = out
            .reader
            .filter(|r| r.passage != Some(hits[0].index) && promoted(r, hits).is_none())
            .and_then(|_| {
                self.cands
                    .iter()
                    .filter(|c| c.passage == hits[0].index && c.logit >= LEAD_LOGIT)
                    .filter(|c| below.is_none_or(|b| c.score >= b))
                    .max_by(|a, b| a.score.total_cmp(&b.score))
                    .map(|c| c.sentence)
            });
        pack::sentences(index, &mut self.cands, budget, below, lead, count, out);
    }
}

/// A context as the agent reads it.
#[derive(Debug, Serialize, PartialEq)]
pub struct ContextJson<'a> {
    /// The spans' text: a passage's spans joined by a space, passages by a line break
    /// (white space adds no word piece, so `tokens` is the text's count).
    pub text: String,
    pub tokens: u32,
    /// `"sentences"`, or `"passages"` for an index built before sentences were stored.
    pub unit: &'static str,
    /// The span holding the best-ranked sentence and nothing else (what a voice answer
    /// speaks); `null` when there are no spans.
    pub best: Option<usize>,
    pub spans: Vec<SpanJson<'a>>,
    /// The reader's logits (absent without a reader).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader: Option<ReaderJson>,
}

/// [`ReaderScores`] as the agent reads them (`null`: not read).
#[derive(Debug, Serialize, PartialEq)]
pub struct ReaderJson {
    pub best: Option<f32>,
    pub top1: Option<f32>,
}

/// Where a span came from: the passage's id and chunk, and character (Unicode scalar)
/// offsets in its `text`.
#[derive(Debug, Serialize, PartialEq)]
pub struct SpanJson<'a> {
    pub passage: &'a str,
    pub chunk: u32,
    pub start: usize,
    pub end: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

/// The text of one span (`""` if the index does not hold it).
pub fn span_text<'a>(index: &'a Index, s: &Span) -> Result<&'a str, IndexError> {
    if s.passage as usize >= index.len() {
        return Ok("");
    }
    let p = index.passage(s.passage as usize)?;
    Ok(p.text.get(s.start as usize..s.end as usize).unwrap_or(""))
}

/// The context's text and spans with character offsets (the writer thread's side).
pub fn to_json<'a>(index: &'a Index, c: &Context) -> Result<ContextJson<'a>, IndexError> {
    let mut text = String::new();
    let mut spans = Vec::with_capacity(c.spans.len());
    let mut prev: Option<u32> = None;
    let mut best = None;
    for (i, s) in c.spans.iter().enumerate() {
        if s.passage as usize >= index.len() {
            continue;
        }
        let p = index.passage(s.passage as usize)?;
        let Some(piece) = p.text.get(s.start as usize..s.end as usize) else {
            continue;
        };
        if let Some(q) = prev {
            text.push(if q == s.passage { ' ' } else { '\n' });
        }
        text.push_str(piece);
        prev = Some(s.passage);
        if c.best == Some(i) {
            best = Some(spans.len());
        }
        let start = p.text[..s.start as usize].chars().count();
        spans.push(SpanJson {
            passage: p.id,
            chunk: p.chunk,
            start,
            end: start + piece.chars().count(),
            cut: s.cut,
        });
    }
    let finite = |x: f32| x.is_finite().then_some(x);
    Ok(ContextJson {
        text,
        tokens: c.tokens,
        unit: c.unit.as_str(),
        best,
        spans,
        reader: c.reader.map(|r| ReaderJson {
            best: finite(r.best),
            top1: finite(r.top1),
        }),
    })
}

#[cfg(test)]
mod tests;
