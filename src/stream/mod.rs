//! The streaming retriever: retrieves while the user speaks, one utterance at a time.
//!
//! While partial transcripts arrive ([`StreamingRetriever::observe`]):
//! - each partial is normalised (case, punctuation, fillers: [`normalize`]); a partial
//!   is a whole new hypothesis, so a revision ("santa timer 41" → "set a timer for")
//!   is compared with the text of the last speculation word by word, never appended;
//! - once `trigger_interval` words differ from the last speculation (and the partial
//!   has at least `min_tokens` words), the whole partial is re-embedded (never an
//!   average of older vectors);
//! - the similarity gate skips the search when that embedding is within
//!   `similarity_threshold` cosine of the last speculated one (fillers, unstable
//!   partials); otherwise the 1-bit scan keeps the top `max_speculative_results`.
//!
//! With `trigger = "learned"` ([`trigger`]) a trained classifier replaces the
//! every-`trigger_interval`-words rule (NEW_QUERY: embed and scan now; NO_QUERY: the
//! last query still holds); it also judges the final, whose NO_QUERY keeps the last
//! query's embedding instead of embedding after end of speech, so it needs no idle
//! embedding (idle work is off with it).
//!
//! When the retriever has nothing to do between partials, [`StreamingRetriever::idle`]
//! embeds the newest partial if it has not been embedded yet (`idle_embed`), so that at
//! end of speech the final text usually equals an embedded partial. Partials shorter
//! than `min_tokens` are left alone: they are the recognizer's first words, almost never
//! the final (on the dev streams 0.84 embeds per utterance, a tenth of all, went to
//! them), and a final that short is quick to embed after end of speech.
//!
//! At end of utterance ([`StreamingRetriever::finalize`]): the final text's embedding is
//! reused when it normalises to the last embedded partial, computed otherwise; then the
//! [reflector](reflect) either accepts the speculation (rerank its candidates: path
//! `reuse` or `rerank`) or judges it stale (a full search: path `full`).
//!
//! Lexical and hybrid retrievers ([`Retriever`]): a lexical query costs microseconds
//! where an embed costs milliseconds, so every observed partial that differs from the
//! one before gets one (no trigger), with the words only earlier partials had as
//! down-weighted extra terms ([`revisions`], `revision_weight`); the dense speculation
//! above runs as it would alone. The speculative candidates are the union of the newest
//! partial's lexical top-C and the dense speculative candidates. At end of utterance
//! the final gets its own lexical query (unless it repeats the newest partial, whose
//! hits are its own), and the union of its lexical top-C and the dense candidates
//! (speculative, or a full scan when the reflector judges them stale) is reranked with
//! int8 cosines and fused ([`fusion`](crate::fusion)).
//!
//! Conversations ([`crate::conversation`], off unless [`StreamingRetriever::set_conversation`]
//! turns them on): each lane's utterance state carries its conversation's memory, so
//! it goes with the session. At end of utterance, after the final's own results, the
//! turn may get a context search (lexical topic terms, the topic's vector mixed into
//! the final's: no extra embedding); partials are untouched. The STT pipe's lane
//! forgets its conversation after `gap_ms` without a turn.
//!
//! Hot path: after warm-up nothing here allocates (fixed-capacity candidate and hit
//! sets, reused text buffers); of the embedders, only the fp32 one (tract) and the
//! tokenizer's path for non-ASCII text do, per embed.

pub mod normalize;
pub mod revisions;
#[cfg(test)]
pub(crate) mod tests;
pub mod trigger;

use std::time::Instant;

use crate::confidence;
use crate::context::{Context, ContextBuilder, ReadSettings};
use crate::conversation::{self, ContextSearch, Conversation, ConversationConfig, Used};
use crate::dense::{Candidates, DEFAULT_CANDIDATES, Query};
use crate::embed::{DIM, Embed, EmbedError, Embedding, cosine};
use crate::fusion::Fusion;
use crate::hits::Hits;
use crate::retriever::{DEFAULT_LEXICAL_CANDIDATES, Retriever};
use crate::retriever::{HybridSearcher, Ranked, SearchParams, ranked_from};
use normalize::{Normalizer, common_prefix_words, word_count};
use revisions::Revisions;
use trigger::{Trigger, TriggerState};

/// Settings of the streaming retriever: the `[layer1]` section of the config file.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamConfig {
    /// false: wait for the final transcript, then search (the baseline).
    pub enabled: bool,
    /// New words since the last speculation that trigger a re-embed.
    pub trigger_interval: usize,
    /// Gate: skip the speculative search when the new embedding's cosine to the last
    /// speculated one is at least this.
    pub similarity_threshold: f32,
    /// Candidates kept by a speculative 1-bit scan.
    pub max_speculative_results: usize,
    /// Partials with fewer words never trigger (too little signal), nor are embedded
    /// while idle.
    pub min_tokens: usize,
    /// Reflector: the speculation is stale when the final embedding's cosine to the last
    /// speculated one is below this; then a full search runs.
    pub reflector_threshold: f32,
    /// Candidates of a full search (binary scan, then rerank).
    pub full_search_candidates: usize,
    /// Results returned per utterance.
    pub top_k: usize,
    /// Embed the newest partial when idle, so the final can reuse it.
    pub idle_embed: bool,
    /// Which retriever answers (resolved against the index: [`Retriever::resolve`]).
    pub retriever: Retriever,
    /// How lexical and dense scores are fused (hybrid).
    pub fusion: Fusion,
    /// Candidates of each lexical search (per partial and on the final).
    pub lexical_candidates: usize,
    /// Weight of the words only earlier partials of the utterance had, added to the
    /// lexical query (0: not used, the default: on the 150 dev streams 1.0 won 12
    /// utterances at hit@1 and lost 6, too few to call it a rule).
    pub revision_weight: f32,
    /// A final whose top-1 confidence ([`crate::confidence`]) is below this is flagged
    /// `evidence: "low"`.
    pub low_evidence_threshold: f32,
    /// What decides the dense work per partial: the fixed rule (`trigger_interval`,
    /// idle embedding) or a learned model ([`trigger`]).
    pub trigger: Trigger,
    /// Word pieces of `context` per final ([`crate::context`]; 0: none).
    pub context_tokens: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            enabled: true,
            trigger_interval: 3,
            similarity_threshold: 0.95,
            max_speculative_results: 100,
            min_tokens: 3,
            reflector_threshold: 0.90,
            full_search_candidates: DEFAULT_CANDIDATES,
            top_k: 10,
            idle_embed: true,
            retriever: Retriever::Dense,
            fusion: Fusion::default(),
            lexical_candidates: DEFAULT_LEXICAL_CANDIDATES,
            revision_weight: 0.0,
            low_evidence_threshold: crate::confidence::DEFAULT_LOW_EVIDENCE_THRESHOLD,
            trigger: Trigger::Fixed,
            context_tokens: crate::context::DEFAULT_CONTEXT_TOKENS,
        }
    }
}

/// What `observe` did with a partial (its dense side; a lexical query, when the
/// retriever has one, runs on every partial and is not reported here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Too short, too few new words since the last speculation, a repeat of the partial
    /// before, or (learned trigger) judged NO_QUERY: no dense work.
    Waiting,
    /// Embedded, but too close to the last speculation to search again.
    GateSkip,
    /// Embedded and scanned: new speculative candidates.
    Speculated,
}

/// How the final results were produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalPath {
    /// The final text equals an embedded partial (or, learned trigger, was judged
    /// NO_QUERY against the last query): that embedding reranked the candidates.
    Reuse,
    /// The final was embedded and reranked the speculative candidates.
    Rerank,
    /// No usable speculation (or streaming disabled): a full search on the final.
    Full,
    /// The lexical retriever alone: a lexical search on the final, no embedding.
    Lexical,
    /// Nothing was said (empty final and no partial).
    Empty,
}

impl FinalPath {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalPath::Reuse => "reuse",
            FinalPath::Rerank => "rerank",
            FinalPath::Full => "full",
            FinalPath::Lexical => "lexical",
            FinalPath::Empty => "empty",
        }
    }
}

/// Per-utterance counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub partials: u32,
    pub embeds: u32,
    pub speculative_searches: u32,
    pub gate_skips: u32,
    /// Lexical queries on partials (the final's is not counted).
    pub lexical_searches: u32,
    /// Question-sentence pairs the reader read ahead (before end of speech).
    pub pairs_read: u32,
    /// Pairs it read after end of speech (what reading ahead did not cover).
    pub pairs_read_final: u32,
}

/// Work done after end of utterance, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FinalTimings {
    pub embed_ms: f64,
    pub lexical_ms: f64,
    pub scan_ms: f64,
    /// Dense rerank, and fusion for the hybrid retriever.
    pub rerank_ms: f64,
    /// Ranking and packing the sentences of `context`.
    pub context_ms: f64,
}

/// The result of one utterance.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub path: FinalPath,
    /// Best first; `score` is the fused score (hybrid), the cosine (dense) or BM25.
    pub hits: Ranked,
    pub timings: FinalTimings,
    pub counts: Counts,
    /// Cosine of the final embedding to the last speculated one, when there was one.
    pub speculation_cosine: Option<f32>,
    /// The final's embedding was an already embedded partial's (no embed after end of
    /// speech), whichever path followed.
    pub reused_embedding: bool,
    /// Probability that the top-1 is relevant ([`crate::confidence`]); `None`: no results.
    pub confidence: Option<f32>,
    /// The confidence is below `low_evidence_threshold` (or there are no results): the
    /// agent should not present the top-1 as the answer.
    pub low_evidence: bool,
    /// How the conversation was used (`None`: conversations are off).
    pub conversation: Option<Used>,
    /// The best sentences of the top passages within `context_tokens` (empty: off).
    pub context: Context,
}

/// The reflector's rule, kept apart so it is explicit and testable: the speculation is
/// usable when there is one and its embedding is close enough to the final's.
pub fn reflect(cfg: &StreamConfig, speculation_cosine: Option<f32>) -> bool {
    speculation_cosine.is_some_and(|c| c >= cfg.reflector_threshold)
}

/// One utterance's state: what [`StreamingRetriever`] knows of the words said so far.
/// Boxed, so that switching between conversations ([`StreamingRetriever::switch`]) moves
/// two pointers, never the candidate sets, and allocates nothing after a lane's first use.
struct Utterance {
    /// Normalised newest partial.
    current: String,
    /// Normalised text whose embedding is in `embedding` (empty: none).
    embedded_text: String,
    embedding: Embedding,
    /// Normalised text at the last trigger (speculation or gate skip).
    trigger_text: String,
    /// Embedding the current candidates were scanned with (valid when `speculated`).
    spec_embedding: Embedding,
    speculated: bool,
    /// Dense speculative candidates (binary scan).
    candidates: Candidates,
    /// Lexical top-C of the newest observed partial (of the final after `finalize`).
    lexical: Hits,
    revisions: Revisions,
    counts: Counts,
    /// What the trigger remembers of the last dense query.
    trig: TriggerState,
    /// The lane's conversation (its earlier turns).
    conv: Conversation,
    /// This turn may use the conversation (a turn's `"context": false` clears it until
    /// the turn ends).
    context: bool,
    /// This turn's own `context` budget (a turn's `"context_tokens"`), until it ends.
    context_tokens: Option<usize>,
    /// When the lane's last turn ended.
    last_turn: Option<Instant>,
    /// The speculative top passage when the reader last looked (it reads ahead once it
    /// holds still).
    read_top: Option<u32>,
}

impl Utterance {
    fn new() -> Box<Utterance> {
        Box::new(Utterance {
            current: String::with_capacity(1024),
            embedded_text: String::with_capacity(1024),
            embedding: [0.0; DIM],
            trigger_text: String::with_capacity(1024),
            spec_embedding: [0.0; DIM],
            speculated: false,
            candidates: Candidates::new(),
            lexical: Hits::new(),
            revisions: Revisions::new(),
            counts: Counts::default(),
            trig: TriggerState::new(),
            conv: Conversation::new(),
            context: true,
            context_tokens: None,
            last_turn: None,
            read_top: None,
        })
    }
}

/// One utterance at a time per lane; [`finalize`](Self::finalize) resets it for the
/// next. Several conversations (the socket hub's sessions) share one retriever, its
/// embedder and searcher: each has its own [`Utterance`], switched in before its work.
pub struct StreamingRetriever<'i, E: Embed> {
    cfg: StreamConfig,
    embedder: E,
    searcher: HybridSearcher<'i>,
    normalizer: Normalizer,
    /// The active lane's utterance.
    u: Box<Utterance>,
    /// The lane `u` belongs to.
    active: usize,
    /// The other lanes' utterances, by lane (None: the active one, or never used).
    parked: Vec<Option<Box<Utterance>>>,
    /// A second normalised-text buffer, reused: the newest partial until it is found to
    /// differ from the one before (then it swaps with `u.current`), and the final.
    spare: String,
    /// Scratch of [`speculative_guess`](Self::speculative_guess).
    guess: Ranked,
    conversation: ConversationConfig,
    /// Scratch of the context search.
    conv_search: ContextSearch,
    /// Makes each final's `context`.
    context: ContextBuilder,
    /// Scratch of reading a final's `context` ([`conversation::read_turn`]).
    turn_scratch: conversation::TurnScratch,
}

impl<'i, E: Embed> StreamingRetriever<'i, E> {
    /// `cfg.retriever` must be one the index can serve ([`Retriever::resolve`]); a
    /// lexical or hybrid retriever over an index without a lexical section finds no
    /// lexical candidates.
    pub fn new(
        cfg: StreamConfig,
        embedder: E,
        searcher: HybridSearcher<'i>,
        mut normalizer: Normalizer,
    ) -> Self {
        // The partial is normalised once, and that text is what the lexical query
        // analyses: it must be cut by the index's word rules.
        normalizer.set_rules(searcher.index().word_rules());
        crate::context::notice_without_sentences(searcher.index(), cfg.context_tokens);
        let low_evidence_threshold = cfg.low_evidence_threshold;
        StreamingRetriever {
            cfg,
            embedder,
            searcher,
            normalizer,
            u: Utterance::new(),
            active: 0,
            parked: Vec::new(),
            spare: String::with_capacity(1024),
            guess: Ranked::new(),
            conversation: ConversationConfig {
                enabled: false,
                low_evidence_threshold,
                ..ConversationConfig::default()
            },
            conv_search: ContextSearch::new(),
            context: ContextBuilder::new(),
            turn_scratch: conversation::TurnScratch::default(),
        }
    }

    /// Ranks each final's `context` sentences with `reader` ([`crate::context::read`]),
    /// reading ahead while the user speaks ([`idle`](Self::idle)).
    pub fn set_reader(&mut self, reader: crate::embed::reader::Reader, settings: ReadSettings) {
        self.context = ContextBuilder::with_reader(reader, settings);
        // After the end of speech, one batch at most: what was read ahead covers the rest.
        self.context
            .set_build_pairs(crate::context::read::FINAL_PAIRS);
    }

    /// Whether a reader ranks the sentences.
    pub fn has_reader(&self) -> bool {
        self.context.has_reader()
    }

    /// Pairs the reader has read since the start (ahead and at end of speech).
    pub fn pairs_read(&self) -> u64 {
        self.context.pairs_read()
    }

    /// Turns conversations on (or off) for every lane.
    pub fn set_conversation(&mut self, cfg: ConversationConfig) {
        self.conversation = ConversationConfig {
            // A turn's `low` is the one its result line shows.
            low_evidence_threshold: self.cfg.low_evidence_threshold,
            ..cfg
        };
    }

    /// Sets the active lane's conversation topic, as the agent names it (`""` clears
    /// it): [`Conversation::set_topic`], with the text's embedding when the retriever
    /// is dense (one embedding per command; a failed one leaves the topic its terms).
    pub fn set_topic(&mut self, text: &str) {
        let mut v = [0.0f32; crate::embed::DIM];
        let embedded = self.cfg.retriever.uses_dense()
            && !text.trim().is_empty()
            && self.embedder.embed_into(text, &mut v).is_ok();
        self.u.conv.set_topic(text, embedded.then_some(&v));
    }

    /// Forgets the active lane's conversation (a reset, a new session on the lane).
    pub fn forget(&mut self) {
        self.u.conv.reset();
        self.u.last_turn = None;
    }

    /// Whether the active lane's turn in progress may use its conversation (until it
    /// ends; then it is true again).
    pub fn set_context(&mut self, on: bool) {
        self.u.context = on;
    }

    /// The active lane's turn in progress has its own `context` budget (`None`: the
    /// configured `context_tokens`), until it ends.
    pub fn set_context_tokens(&mut self, tokens: Option<usize>) {
        self.u.context_tokens = tokens;
    }

    /// Earlier turns the active lane's conversation remembers.
    pub fn conversation_turns(&self) -> u32 {
        self.u.conv.remembered()
    }

    /// Makes lane `lane`'s utterance the one the calls that follow work on (the
    /// scheduler's lanes: the STT pipe is 0). Moves two boxes; allocates only the first
    /// time a lane is used.
    pub fn switch(&mut self, lane: usize) {
        if lane == self.active {
            return;
        }
        let need = lane.max(self.active) + 1;
        if self.parked.len() < need {
            self.parked.resize_with(need, || None);
        }
        let next = self.parked[lane].take().unwrap_or_else(Utterance::new);
        self.parked[self.active] = Some(std::mem::replace(&mut self.u, next));
        self.active = lane;
    }

    pub fn config(&self) -> &StreamConfig {
        &self.cfg
    }

    /// The embedder and the reader back, for the next retriever (an index swap).
    pub fn into_parts(self) -> (E, Option<crate::embed::reader::Reader>) {
        (self.embedder, self.context.into_reader())
    }

    pub fn searcher(&self) -> &HybridSearcher<'i> {
        &self.searcher
    }

    /// Candidates of the last dense speculative scan of this utterance (empty if none).
    pub fn candidates(&self) -> &Candidates {
        &self.u.candidates
    }

    /// Lexical top-C of the newest observed partial (empty if none, or no lexical side).
    pub fn lexical_candidates(&self) -> &Hits {
        &self.u.lexical
    }

    /// Every speculative candidate: the lexical ones, then the dense ones (a passage in
    /// both comes twice).
    pub fn speculative_candidates(&self) -> impl Iterator<Item = u32> + '_ {
        let lexical = self.u.lexical.iter().map(|h| h.index);
        lexical.chain(self.u.candidates.iter().map(|c| c.index))
    }

    /// Counters of the utterance in progress.
    pub fn counts(&self) -> Counts {
        self.u.counts
    }

    /// Takes one partial transcript (the whole hypothesis so far).
    pub fn observe(&mut self, partial: &str) -> Result<Observed, EmbedError> {
        self.u.counts.partials += 1;
        // Normalised into the spare buffer first: a recognizer that repeats its
        // hypothesis (Vosk prints the same partial several times a second; Moonshine's
        // re-transcription after the last word) gives nothing new to retrieve, so the
        // lexical query and the trigger's state are left as they are.
        self.normalizer.normalize_into(partial, &mut self.spare);
        if !self.u.current.is_empty() && self.spare == self.u.current {
            return Ok(Observed::Waiting);
        }
        std::mem::swap(&mut self.u.current, &mut self.spare);
        if !self.cfg.enabled {
            return Ok(Observed::Waiting);
        }
        if self.cfg.retriever.uses_lexical() && !self.u.current.is_empty() {
            lexical_search(
                &mut self.searcher,
                &mut self.u.revisions,
                &self.cfg,
                &self.u.current,
                &mut self.u.lexical,
            );
            self.u.counts.lexical_searches += 1;
        }
        if !self.cfg.retriever.uses_dense() {
            return Ok(Observed::Waiting);
        }
        self.u.trig.on_partial();
        let words = word_count(&self.u.current);
        if words < self.cfg.min_tokens || !self.triggers(None) {
            return Ok(Observed::Waiting);
        }
        self.embed_current()?;
        self.u.trigger_text.clone_from(&self.u.current);
        let moved = self
            .u
            .speculated
            .then(|| cosine(&self.u.embedding, &self.u.spec_embedding));
        self.u.trig.on_query(moved, &self.u.lexical);
        if moved.is_some_and(|c| c >= self.cfg.similarity_threshold) {
            self.u.counts.gate_skips += 1;
            return Ok(Observed::GateSkip);
        }
        let query = Query::new(&self.u.embedding);
        self.searcher.dense().binary_scan(
            &query,
            self.cfg.max_speculative_results,
            &mut self.u.candidates,
        );
        self.u.spec_embedding = self.u.embedding;
        self.u.speculated = true;
        self.u.counts.speculative_searches += 1;
        Ok(Observed::Speculated)
    }

    /// Whether the trigger asks for a dense query on the newest partial (`final_norm`:
    /// on the final instead, whose lexical hits are in `self.u.lexical`).
    fn triggers(&mut self, final_norm: Option<&str>) -> bool {
        let text = final_norm.unwrap_or(&self.u.current);
        match &self.cfg.trigger {
            Trigger::Fixed => {
                let words = word_count(text);
                let new_words = words - common_prefix_words(text, &self.u.trigger_text).min(words);
                new_words >= self.cfg.trigger_interval
            }
            Trigger::Learned(model) => {
                if text == self.u.trigger_text {
                    return false;
                }
                let lexical = self
                    .cfg
                    .retriever
                    .uses_lexical()
                    .then_some(&self.u.lexical[..]);
                let x =
                    self.u
                        .trig
                        .features(text, &self.u.trigger_text, lexical, &mut self.searcher);
                if final_norm.is_some() {
                    model.new_query_final(&x)
                } else {
                    model.new_query(&x)
                }
            }
        }
    }

    /// The best `k` passages as things stand: the speculative candidates scored with the
    /// newest embedding of a partial (if any) and the newest partial's lexical scores,
    /// fused as the final will be. For `--emit-speculative`; costs one rerank of the
    /// candidates, allocates nothing.
    pub fn speculative_guess(&mut self, k: usize) -> &Ranked {
        let query = (!self.u.embedded_text.is_empty()).then(|| Query::new(&self.u.embedding));
        match (self.cfg.retriever, &query) {
            (Retriever::Lexical, _) => {
                let n = k.min(self.u.lexical.len());
                ranked_from(&self.u.lexical[..n], false, &mut self.guess);
            }
            (Retriever::Dense, Some(q)) => {
                self.searcher
                    .rerank(&self.u.candidates, q, k, &mut self.guess)
            }
            (Retriever::Dense, None) => self.guess.clear(),
            (Retriever::Hybrid, q) => self.searcher.fuse(
                q.as_ref(),
                &self.u.lexical,
                &self.u.candidates,
                self.cfg.fusion,
                k,
                &mut self.guess,
            ),
        }
        &self.guess
    }

    /// Called when no input is waiting: embeds the newest partial if it has not been
    /// embedded yet and has at least `min_tokens` words; else, with a reader, reads one
    /// batch of the sentences the final's context would read if the partial were final
    /// ([`ContextBuilder::prepare`]). Returns whether it did any work (the scheduler
    /// drains its input between two calls, so a partial never waits for more than one
    /// embed or one batch).
    pub fn idle(&mut self) -> Result<bool, EmbedError> {
        if !self.cfg.enabled
            || !self.cfg.idle_embed
            || !matches!(self.cfg.trigger, Trigger::Fixed)
            || !self.cfg.retriever.uses_dense()
            || self.u.current.is_empty()
            || word_count(&self.u.current) < self.cfg.min_tokens
        {
            return Ok(false);
        }
        if self.u.current != self.u.embedded_text {
            self.embed_current()?;
            return Ok(true);
        }
        self.read_ahead()
    }

    /// One batch of the reader's work on the newest partial, once its speculative top
    /// passage has held still over two partials (while it moves, reading would be spent
    /// on sentences the final will not read).
    fn read_ahead(&mut self) -> Result<bool, EmbedError> {
        let budget = self.u.context_tokens.unwrap_or(self.cfg.context_tokens);
        if !self.context.has_reader() || budget == 0 {
            return Ok(false);
        }
        let k = crate::context::CONTEXT_PASSAGES;
        let top = self.speculative_guess(k).first().map(|h| h.index);
        if top.is_none() || top != self.u.read_top {
            // Remembered; read from the next partial on if it stays.
            self.u.read_top = top;
            return Ok(false);
        }
        let query = Query::new(&self.u.embedding);
        let read = self.context.prepare(
            self.searcher.index(),
            Some(&query),
            &self.u.current,
            &self.guess,
            crate::context::read::STEP,
        )?;
        self.u.counts.pairs_read += read as u32;
        Ok(read > 0)
    }

    /// Ends the utterance with its final transcript and returns the results; the
    /// retriever is then ready for the next utterance. An empty final falls back to the
    /// newest partial (some recognizers end with an empty final).
    pub fn finalize(&mut self, final_text: &str) -> Result<Outcome, EmbedError> {
        let mut final_norm = std::mem::take(&mut self.spare);
        self.normalizer.normalize_into(final_text, &mut final_norm);
        if final_norm.is_empty() {
            final_norm.clone_from(&self.u.current);
        }
        let outcome = self.finish(&final_norm).map(|mut o| {
            if self.conversation.enabled {
                let t = Instant::now();
                let used = self.choose(&final_norm, &mut o);
                o.conversation = Some(used);
                o.timings.rerank_ms += ms_since(t);
            }
            // Judged on the retriever's own top [`confidence::DEPTH`] (`finish` ranks at
            // least that many), then cut to what was asked: asking for one passage must
            // not hide the ones it is measured against. With the reader, the passage whose
            // sentence answers best leads, and evidence is whether the sentences answer.
            o.confidence = confidence::of_ranked(self.cfg.retriever, &o.hits);
            let mut used = o.conversation.take();
            self.add_context(&final_norm, used.as_mut(), &mut o);
            o.conversation = used;
            o.low_evidence = confidence::is_low(o.confidence, self.cfg.low_evidence_threshold);
            if let Some(used) = &o.conversation {
                let dense = self.cfg.retriever.uses_dense() && o.path != FinalPath::Empty;
                conversation::remember(
                    &mut self.u.conv,
                    self.searcher.index(),
                    &self.conversation,
                    &final_norm,
                    dense.then_some(&self.u.embedding),
                    &o.hits,
                    o.confidence,
                    used,
                );
            }
            o.hits.truncate(self.cfg.top_k);
            o
        });
        self.spare = final_norm; // keep the buffer's capacity
        self.reset();
        outcome
    }

    /// The turn's conversation choice ([`conversation::choose`]) on the final's results;
    /// the turn is remembered once they are judged.
    fn choose(&mut self, final_norm: &str, o: &mut Outcome) -> Used {
        let now = Instant::now();
        let gap = std::time::Duration::from_millis(self.conversation.gap_ms);
        if self.active == 0
            && self
                .u
                .last_turn
                .is_some_and(|t| now.duration_since(t) > gap)
        {
            self.u.conv.reset(); // the pipe's visitor left
        }
        let p = SearchParams {
            retriever: self.cfg.retriever,
            k: self.cfg.top_k,
            candidates: self.cfg.full_search_candidates.max(self.cfg.top_k),
            lexical_candidates: self.cfg.lexical_candidates.max(self.cfg.top_k),
            fusion: self.cfg.fusion,
        };
        let dense = self.cfg.retriever.uses_dense() && o.path != FinalPath::Empty;
        let vector = dense.then_some(&self.u.embedding);
        let used = conversation::choose(
            &self.u.conv,
            &mut self.conv_search,
            &mut self.searcher,
            &p,
            &self.conversation,
            self.u.context,
            final_norm,
            vector,
            &mut o.hits,
        );
        if !final_norm.is_empty() {
            self.u.last_turn = Some(now);
        }
        used
    }

    /// The final's `context` (budget `context_tokens`; nothing when 0) and its evidence
    /// ([`conversation::read_turn`]: read against the final as its conversation resolved
    /// it, `o.confidence` fused with the reader's logits, a second look for a turn whose
    /// own results do not answer it). The question's embedding is the final's when the
    /// dense side ran.
    fn add_context(&mut self, final_norm: &str, used: Option<&mut Used>, o: &mut Outcome) {
        let budget = self.u.context_tokens.unwrap_or(self.cfg.context_tokens);
        if budget == 0 {
            return;
        }
        let t = Instant::now();
        let dense = !matches!(o.path, FinalPath::Lexical | FinalPath::Empty);
        let query = dense.then(|| Query::new(&self.u.embedding));
        let embedder = &mut self.embedder;
        let mut count = |t: &str| crate::context::word_pieces(embedder, t);
        let pairs = self.context.pairs_read();
        conversation::read_turn(
            &mut self.context,
            self.searcher.index(),
            query.as_ref(),
            final_norm,
            self.cfg.retriever,
            self.cfg.low_evidence_threshold,
            budget,
            &mut count,
            &self.conv_search,
            used,
            &mut o.hits,
            &mut o.context,
            &mut o.confidence,
            &mut self.turn_scratch,
        );
        o.counts.pairs_read_final = (self.context.pairs_read() - pairs) as u32;
        o.timings.context_ms = ms_since(t);
    }

    fn finish(&mut self, final_norm: &str) -> Result<Outcome, EmbedError> {
        let mut out = Outcome {
            path: FinalPath::Empty,
            hits: Ranked::new(),
            timings: FinalTimings::default(),
            counts: self.u.counts,
            speculation_cosine: None,
            reused_embedding: false,
            confidence: None,
            low_evidence: true,
            conversation: None,
            context: Context::default(),
        };
        if final_norm.is_empty() {
            return Ok(out);
        }
        let retriever = self.cfg.retriever;
        // What the confidence reads; `finalize` cuts the list to `top_k`.
        let top_k = confidence::depth(self.cfg.top_k);
        // A final that repeats the newest partial (most do: 75% of the dev recordings)
        // already has its lexical hits: the same query, the same k and the same revision
        // terms (remembering the partial added only words it contains). That takes the
        // query off the end-of-speech path, where it costs most on a large corpus.
        let lexical_known = self.cfg.enabled && self.u.current == final_norm;
        if retriever.uses_lexical() && !lexical_known {
            let t = Instant::now();
            lexical_search(
                &mut self.searcher,
                &mut self.u.revisions,
                &self.cfg,
                final_norm,
                &mut self.u.lexical,
            );
            out.timings.lexical_ms = ms_since(t);
        }
        if !retriever.uses_dense() {
            let n = top_k.min(self.u.lexical.len());
            ranked_from(&self.u.lexical[..n], false, &mut out.hits);
            out.path = FinalPath::Lexical;
            return Ok(out);
        }
        let reused = self.cfg.enabled
            && !self.u.embedded_text.is_empty()
            && self.u.embedded_text == final_norm;
        // The learned trigger judges the final too: NO_QUERY keeps the last query's
        // embedding (no embed after end of speech).
        let kept = !reused
            && self.cfg.enabled
            && self.u.speculated
            && matches!(self.cfg.trigger, Trigger::Learned(_))
            && {
                self.u.trig.on_partial();
                !self.triggers(Some(final_norm))
            };
        out.reused_embedding = reused || kept;
        if !reused && !kept {
            let t = Instant::now();
            self.u.current.clear();
            self.u.current.push_str(final_norm);
            self.embed_current()?;
            out.timings.embed_ms = ms_since(t);
        }
        out.counts = self.u.counts;
        let query = Query::new(&self.u.embedding);
        out.speculation_cosine = self
            .u
            .speculated
            .then(|| cosine(&self.u.embedding, &self.u.spec_embedding));
        let accepted = self.cfg.enabled && reflect(&self.cfg, out.speculation_cosine);
        if accepted {
            out.path = if reused || kept {
                FinalPath::Reuse
            } else {
                FinalPath::Rerank
            };
        } else {
            let t = Instant::now();
            self.searcher.dense().binary_scan(
                &query,
                self.cfg.full_search_candidates.max(top_k),
                &mut self.u.candidates,
            );
            out.timings.scan_ms = ms_since(t);
            out.path = FinalPath::Full;
        }
        let t = Instant::now();
        if retriever.uses_lexical() {
            self.searcher.fuse(
                Some(&query),
                &self.u.lexical,
                &self.u.candidates,
                self.cfg.fusion,
                top_k,
                &mut out.hits,
            );
        } else {
            self.searcher
                .rerank(&self.u.candidates, &query, top_k, &mut out.hits);
        }
        out.timings.rerank_ms = ms_since(t);
        Ok(out)
    }

    /// Forgets the utterance in progress (keeps buffers and settings).
    pub fn reset(&mut self) {
        self.u.current.clear();
        self.u.embedded_text.clear();
        self.u.trigger_text.clear();
        self.u.speculated = false;
        self.u.candidates.clear();
        self.u.lexical.clear();
        self.u.revisions.clear();
        self.guess.clear();
        self.u.counts = Counts::default();
        self.u.trig.reset();
        self.u.context = true;
        self.u.context_tokens = None;
        self.u.read_top = None;
        self.context.forget_reads();
    }

    fn embed_current(&mut self) -> Result<(), EmbedError> {
        self.embedder
            .embed_into(&self.u.current, &mut self.u.embedding)?;
        self.u.counts.embeds += 1;
        self.u.embedded_text.clone_from(&self.u.current);
        Ok(())
    }
}

/// The lexical top-C of a normalised `text` into `out`, with the words only earlier
/// partials had as extra terms when `revision_weight` > 0; then remembers its words.
fn lexical_search(
    searcher: &mut HybridSearcher<'_>,
    revisions: &mut Revisions,
    cfg: &StreamConfig,
    text: &str,
    out: &mut Hits,
) {
    let k = cfg.lexical_candidates.max(cfg.top_k);
    if cfg.revision_weight > 0.0 {
        let extra = revisions.dropped_from(text);
        searcher.lexical(text, extra, cfg.revision_weight, k, out);
        revisions.remember(text);
    } else {
        searcher.lexical(text, "", 0.0, k, out);
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
