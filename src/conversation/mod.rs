//! Conversations: each turn is retrieved with what the earlier turns of the same
//! conversation established, only as far as the turn needs it.
//!
//! Why: people ask a kiosk "When was the museum built?", then "Who designed it?". Alone,
//! the follow-up has lost its topic; glued to the previous question (plain
//! concatenation, the known weak baseline) every answer is dragged back to the previous
//! paragraph and a switch to another topic is wrecked. So a conversation keeps, per
//! session, its last [`MAX_TURNS`] turns (final text, query vector, top passages,
//! confidence) and its *topic*: the text and vector of the newest turn, plus the topic
//! before it when that turn leaned on it (so "who designed it?" → "and when did he
//! die?" still knows the museum). All of it lives in space allocated once per session.
//!
//! Per turn ([`turn`]): the turn is always searched alone (as without a
//! conversation). When there is a topic, a second search runs with the topic added: its
//! text's terms in the lexical query at weight `topic_weight`, and a dense query that is
//! the turn's vector plus `vector_weight` times the topic's vector (normalised) — no
//! extra embedding. A turn whose words lean on earlier ones ([`cues`]: a pronoun,
//! "there", "that", an elliptic "and ..."/"what about ...", a turn of three words or
//! fewer) keeps the context results unless the turn alone was confident and the context
//! search is not ([`decide`]), so a question that names its own topic (a switch) keeps
//! its own results; a turn without such words takes them only when they are clearly
//! more confident and supported by its own top passages ([`cueless_takes_context`]).
//! Only answered turns move the topic, and a repeated final is searched as the turn it
//! repeats ([`TopicMove`]). Measured alternatives and the dev figures are in
//! `docs/conversations.md`.
//!
//! With the reader, the caller judges the turn between [`choose`] and [`remember`]: the
//! turn is read as its conversation resolved it ([`resolved`]), a turn whose own results
//! do not answer it gets a [`second_look`] at the context search's, and only then is it
//! remembered, so the reader's evidence decides whether it moves the topic. [`turn`] is
//! the same without a reader.
//!
//! Nothing here allocates after a conversation is made; the context search uses the
//! caller's [`ContextSearch`] scratch.

pub mod cues;
pub mod settings;

use heapless::Vec as FixedVec;

use crate::confidence;
use crate::dense::Query;
use crate::embed::{DIM, Embedding};
use crate::retriever::{HybridSearcher, Ranked, SearchParams};
pub use cues::{Cues, cues};

/// Turns a conversation remembers.
pub const MAX_TURNS: usize = 4;

/// Bytes of a turn's text kept (cut at a character boundary), and of the topic text.
pub const TEXT_BYTES: usize = 512;

/// Top passages remembered per turn.
pub const TOP: usize = 10;

/// Default of [`ConversationConfig::gap_ms`]: a kiosk's visitor who has said nothing for
/// 30 s has most likely left; the next one starts afresh. Turns of one conversation
/// follow each other within seconds (the answer is read out, then the next question),
/// so 30 s keeps a slow talker's conversation and forgets a passer-by's.
pub const DEFAULT_GAP_MS: u64 = 30_000;

/// Default lexical weight of the topic's terms (a turn's own terms weigh 1).
pub const DEFAULT_TOPIC_WEIGHT: f32 = 0.75;

/// Default weight of the topic's vector added to the turn's.
pub const DEFAULT_VECTOR_WEIGHT: f32 = 0.3;

/// The `[conversation]` settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConversationConfig {
    /// Carry context between the turns of a conversation.
    pub enabled: bool,
    /// The STT pipe's conversation ends after this much time without a turn.
    pub gap_ms: u64,
    pub topic_weight: f32,
    pub vector_weight: f32,
    pub decision: Decision,
    /// A turn whose results are below this confidence (its evidence is `low`) does not
    /// replace the topic (not a `[conversation]` key: the callers' `low_evidence_threshold`).
    pub low_evidence_threshold: f32,
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig {
            enabled: true,
            gap_ms: DEFAULT_GAP_MS,
            topic_weight: DEFAULT_TOPIC_WEIGHT,
            vector_weight: DEFAULT_VECTOR_WEIGHT,
            decision: Decision::default(),
            low_evidence_threshold: confidence::DEFAULT_LOW_EVIDENCE_THRESHOLD,
        }
    }
}

/// Which turns get the context search's results.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The turn's words lean on earlier ones ([`Cues::need`]), unless its own search
    /// was confident and the context search is not.
    #[default]
    Cues,
    /// Every turn with a topic before it (for measuring).
    Always,
    /// Whichever of the two searches is more confident.
    Evidence,
}

/// One remembered turn.
#[derive(Clone, Debug)]
pub struct Turn {
    pub text: String,
    pub vector: Embedding,
    pub has_vector: bool,
    pub top: FixedVec<u32, TOP>,
    pub confidence: Option<f32>,
    /// Its results came from the context search.
    pub used_context: bool,
}

impl Turn {
    fn new() -> Turn {
        Turn {
            text: String::with_capacity(TEXT_BYTES),
            vector: [0.0; DIM],
            has_vector: false,
            top: FixedVec::new(),
            confidence: None,
            used_context: false,
        }
    }
}

/// One conversation's memory. Boxed by its owners (it holds a few vectors).
#[derive(Clone, Debug)]
pub struct Conversation {
    turns: [Turn; MAX_TURNS],
    /// Turns recorded since the last reset (the newest is `turns[(count - 1) % MAX_TURNS]`).
    count: u64,
    /// Topic text: the newest turn's, then the topic before it when it leaned on it.
    topic: String,
    topic_vector: Embedding,
    has_topic_vector: bool,
    /// The topic the newest turn was searched with (a repeat of that turn is searched
    /// with it again, so it gets the same answer).
    before: String,
    before_vector: Embedding,
    has_before_vector: bool,
    /// Scratch for building the next topic text.
    spare: String,
}

/// What a turn does to the topic ([`Conversation::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicMove {
    /// The turn's answer becomes the topic.
    Replace,
    /// The topic stays: the turn was answered `low` and does not name its answer's
    /// title (an off-topic question, a recognizer's garbage); the turn is remembered.
    /// A `low` turn that names it ("When did the Normans reach Italy?" answered from
    /// "Normans") is a switch whose right answer was flagged `low`: it moves the topic.
    Keep,
    /// The turn repeats the one before: it was searched with that turn's topic, and
    /// nothing moves.
    Repeat,
}

impl Default for Conversation {
    fn default() -> Self {
        Self::new()
    }
}

/// A topic's text as a result names it (fixed capacity: no allocation per turn).
pub type TopicText = heapless::String<TEXT_BYTES>;

/// How a turn used its conversation (the result's `"conversation"` field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Used {
    /// The results came from the search with context.
    pub used: bool,
    /// Earlier turns of the conversation it could lean on (at most [`MAX_TURNS`]).
    pub turns: u32,
    /// The topic the context search added (`None` when `used` is false).
    pub topic: Option<TopicText>,
    /// The topic the context search ran with when its results were not taken (their
    /// second look: [`second_look`]).
    pub tried: Option<TopicText>,
}

impl Conversation {
    pub fn new() -> Conversation {
        Conversation {
            turns: std::array::from_fn(|_| Turn::new()),
            count: 0,
            topic: String::with_capacity(TEXT_BYTES),
            topic_vector: [0.0; DIM],
            has_topic_vector: false,
            before: String::with_capacity(TEXT_BYTES),
            before_vector: [0.0; DIM],
            has_before_vector: false,
            spare: String::with_capacity(TEXT_BYTES),
        }
    }

    /// Forgets every turn (keeps the space).
    pub fn reset(&mut self) {
        self.count = 0;
        self.topic.clear();
        self.has_topic_vector = false;
        self.before.clear();
        self.has_before_vector = false;
        for t in &mut self.turns {
            t.text.clear();
            t.has_vector = false;
            t.top.clear();
            t.confidence = None;
            t.used_context = false;
        }
    }

    /// Turns recorded since the last reset.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Earlier turns a new turn can lean on.
    pub fn remembered(&self) -> u32 {
        self.count.min(MAX_TURNS as u64) as u32
    }

    /// The newest turn, if any.
    pub fn last(&self) -> Option<&Turn> {
        (self.count > 0).then(|| &self.turns[((self.count - 1) % MAX_TURNS as u64) as usize])
    }

    /// What the next turn may add: the topic's text and vector (the vector only when
    /// the turns had embeddings).
    pub fn topic(&self) -> Option<(&str, Option<&Embedding>)> {
        (!self.topic.is_empty()).then(|| {
            (
                self.topic.as_str(),
                self.has_topic_vector.then_some(&self.topic_vector),
            )
        })
    }

    /// The topic the newest turn was searched with (what its repeat is searched with).
    pub fn topic_before(&self) -> Option<(&str, Option<&Embedding>)> {
        (!self.before.is_empty()).then(|| {
            (
                self.before.as_str(),
                self.has_before_vector.then_some(&self.before_vector),
            )
        })
    }

    /// The agent sets the topic (`{"cmd":"topic"}`): what it just answered about, as a
    /// text (a passage's title, a name) and, when the caller embedded it, its vector.
    /// The next turns that lean on earlier ones are searched with it until an answered
    /// turn replaces it; a repeat of the turn before is searched with it too. An empty
    /// text clears the topic (the turns stay remembered).
    pub fn set_topic(&mut self, text: &str, vector: Option<&Embedding>) {
        self.topic.clear();
        self.topic.push_str(cut_topic(text));
        self.has_topic_vector = false;
        if let Some(v) = vector.filter(|_| !self.topic.is_empty()) {
            self.topic_vector = *v;
            self.has_topic_vector = true;
        }
        self.before.clone_from(&self.topic);
        self.before_vector = self.topic_vector;
        self.has_before_vector = self.has_topic_vector;
    }

    /// Whether `text` repeats the newest turn: the same words, or two words or more
    /// found in it as they stand (a final sent twice, a recognizer's shorter second
    /// final). Texts as the callers normalise them (lower case, no punctuation).
    pub fn repeats(&self, text: &str) -> bool {
        self.last()
            .is_some_and(|t| !t.text.is_empty() && contains_words(&t.text, text))
    }

    /// Remembers a finished turn: its text, its own vector (`None`: no embedding), its
    /// results, whether they came from the context search, and the title of its top
    /// passage (`""`: none). The topic moves on: the title when there is one (what a
    /// pronoun in the next turn most likely stands for: "the museum", "Super Bowl 50"),
    /// else the turn's text followed by the old topic's when the turn leaned on it; the
    /// topic vector likewise (`vector_weight` of the old one added).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        text: &str,
        vector: Option<&Embedding>,
        hits: &Ranked,
        confidence: Option<f32>,
        used_context: bool,
        vector_weight: f32,
        title: &str,
        moves: TopicMove,
    ) {
        let slot = (self.count % MAX_TURNS as u64) as usize;
        let t = &mut self.turns[slot];
        t.text.clear();
        push_cut(&mut t.text, text, TEXT_BYTES);
        t.has_vector = vector.is_some();
        if let Some(v) = vector {
            t.vector = *v;
        }
        t.top.clear();
        for h in hits.iter().take(TOP) {
            let _ = t.top.push(h.index);
        }
        t.confidence = confidence;
        t.used_context = used_context;
        self.count += 1;
        if moves == TopicMove::Repeat {
            return;
        }
        // This turn was searched with the topic as it stands: its repeat will be too.
        self.before.clone_from(&self.topic);
        self.before_vector = self.topic_vector;
        self.has_before_vector = self.has_topic_vector;
        if moves == TopicMove::Keep && !self.topic.is_empty() {
            return;
        }

        self.spare.clear();
        let title = title.trim();
        if !title.is_empty() {
            push_cut(&mut self.spare, title, TEXT_BYTES);
        } else {
            push_cut(&mut self.spare, text, TEXT_BYTES);
        }
        if title.is_empty() && used_context && !self.topic.is_empty() {
            let room = TEXT_BYTES.saturating_sub(self.spare.len() + 1);
            if room > 0 {
                self.spare.push(' ');
                push_cut(&mut self.spare, &self.topic, room);
            }
        }
        std::mem::swap(&mut self.topic, &mut self.spare);
        match vector {
            Some(v) if used_context && self.has_topic_vector => {
                let old = self.topic_vector;
                mix(v, &old, vector_weight, &mut self.topic_vector);
            }
            Some(v) => {
                self.topic_vector = *v;
                self.has_topic_vector = true;
            }
            None => self.has_topic_vector = false,
        }
    }
}

/// A topic's text as the conversation keeps it: trimmed, at most [`TEXT_BYTES`] bytes.
pub fn cut_topic(text: &str) -> &str {
    let t = text.trim();
    let mut end = t.len().min(TEXT_BYTES);
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    &t[..end]
}

/// Appends `s` to `out`, at most `max` bytes of it, cut at a character boundary.
fn push_cut(out: &mut String, s: &str, max: usize) {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&s[..end]);
}

/// Whether the words of `needle` are all of `hay`'s, or (two words or more) a run of
/// them. Allocates nothing.
fn contains_words(hay: &str, needle: &str) -> bool {
    let n = needle.split_whitespace().count();
    if n == 0 {
        return false;
    }
    let h = hay.split_whitespace().count();
    if n == h || n < 2 {
        return n == h && hay.split_whitespace().eq(needle.split_whitespace());
    }
    (0..h.saturating_sub(n) + 1).any(|start| {
        hay.split_whitespace()
            .skip(start)
            .take(n)
            .eq(needle.split_whitespace())
    })
}

/// Whether the turn names the title's topic: a title word of four letters or more is
/// one of the turn's words, or the start of one (plurals: "normans" for "Norman").
pub fn names_title(text: &str, title: &str) -> bool {
    title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .any(|t| {
            text.split(|c: char| !c.is_alphanumeric()).any(|w| {
                w.len() >= t.len()
                    && w.is_char_boundary(t.len())
                    && w[..t.len()].eq_ignore_ascii_case(t)
            })
        })
}

/// `out` = normalise(`a` + `w` · `b`) (`a` alone if the sum is zero).
pub fn mix(a: &Embedding, b: &Embedding, w: f32, out: &mut Embedding) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + w * y;
    }
    let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 && norm.is_finite() {
        out.iter_mut().for_each(|x| *x /= norm);
    } else {
        *out = *a;
    }
}

/// Whether the turn's results should be the context search's, given the turn's cues and
/// the confidence of each search ([`confidence`]). `Cues`: a strong cue (a pronoun, an
/// elliptic lead, a turn of three words or fewer) takes the context search unless the
/// turn alone was confident and the context search much less so (a question that names
/// its own topic keeps its own results). A weak cue alone (few content words: "where are
/// the toilets?") never does: the context search's confidence is raised by the topic's
/// own terms, so "what is the capital of France?" after a question about dogs would
/// trade an honest "low" for a confident wrong answer.
pub fn decide(decision: Decision, cues: &Cues, alone: Option<f32>, context: Option<f32>) -> bool {
    let (a, c) = (alone.unwrap_or(0.0), context.unwrap_or(0.0));
    match decision {
        Decision::Always => true,
        Decision::Evidence => c > a,
        Decision::Cues => cues.strong() && !(a >= CONFIDENT_ALONE && c < a - CONFIDENCE_MARGIN),
    }
}

/// How much more confident ([`confidence`]) the context search must be than the turn
/// alone for a turn without a strong cue ("How long do the shows last?" after the
/// planetarium) to take it. Dev (docs/conversations.md, support among the top 10):
/// 0.05 / 0.1 / 0.2 / 0.3 gave cue-less follow-ups 0.709 / 0.695 / 0.674 / 0.667 hit@1
/// (0.645 without), switches 0.700 / 0.700 / 0.703 / 0.703 (0.703 alone).
pub const CUELESS_MARGIN: f32 = 0.1;

/// Whether a turn without a strong cue takes the context search's results: that
/// search is more confident than the turn alone by [`CUELESS_MARGIN`], and its top
/// passage is among the turn's own top [`confidence::DEPTH`] (the turn's words support
/// it: a topic's terms alone inflate the confidence of the topic's own passage, which
/// is how an off-topic question would otherwise get a confident wrong answer; the
/// depth the confidence reads is ranked whatever `top_k` asks, so the rule does not
/// change with it).
pub fn cueless_takes_context(
    alone: &Ranked,
    context: &Ranked,
    alone_conf: Option<f32>,
    context_conf: Option<f32>,
) -> bool {
    let supported = context.first().is_some_and(|t| {
        alone
            .iter()
            .take(confidence::DEPTH)
            .any(|h| h.index == t.index)
    });
    supported && context_conf.unwrap_or(0.0) > alone_conf.unwrap_or(0.0) + CUELESS_MARGIN
}

/// A search alone at least this confident ([`confidence`]) is trusted over a much less
/// confident context search.
pub const CONFIDENT_ALONE: f32 = 0.8;
/// How much less confident the context search may be than a confident search alone.
pub const CONFIDENCE_MARGIN: f32 = 0.3;

/// Scratch of one context search (per thread, like the searchers).
pub struct ContextSearch {
    vector: Embedding,
    hits: Ranked,
}

impl Default for ContextSearch {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextSearch {
    pub fn new() -> Self {
        ContextSearch {
            vector: [0.0; DIM],
            hits: Ranked::new(),
        }
    }

    /// The context search's results (after [`search`](Self::search)).
    pub fn hits(&self) -> &Ranked {
        &self.hits
    }

    /// Searches `text` (embedded as `vector`, `None` for the lexical retriever) with the
    /// topic `topic` added: its terms at `cfg.topic_weight` in the lexical query, its
    /// vector at `cfg.vector_weight` in the dense one. Results in [`hits`](Self::hits).
    pub fn search(
        &mut self,
        searcher: &mut HybridSearcher<'_>,
        p: &SearchParams,
        cfg: &ConversationConfig,
        text: &str,
        vector: Option<&Embedding>,
        topic: (&str, Option<&Embedding>),
    ) {
        let (topic_text, topic_vector) = topic;
        let query = vector.map(|v| {
            match topic_vector {
                Some(t) => mix(v, t, cfg.vector_weight, &mut self.vector),
                None => self.vector = *v,
            }
            Query::new(&self.vector)
        });
        searcher.search_with(
            p,
            query.as_ref(),
            text,
            topic_text,
            cfg.topic_weight,
            &mut self.hits,
        );
    }
}

/// One turn of a conversation, end to end, judged by the retriever's confidence alone
/// (no reader): [`choose`], then [`remember`] with the results' [`confidence`].
#[allow(clippy::too_many_arguments)]
pub fn turn(
    conv: &mut Conversation,
    scratch: &mut ContextSearch,
    searcher: &mut HybridSearcher<'_>,
    p: &SearchParams,
    cfg: &ConversationConfig,
    enabled: bool,
    text: &str,
    vector: Option<&Embedding>,
    alone: &mut Ranked,
) -> Used {
    let used = choose(
        conv, scratch, searcher, p, cfg, enabled, text, vector, alone,
    );
    let conf = confidence::of_ranked(p.retriever, alone);
    remember(
        conv,
        searcher.index(),
        cfg,
        text,
        vector,
        alone,
        conf,
        &used,
    );
    used
}

/// A turn's choice: given its own results (`alone`) and its vector, runs the context
/// search when the turn may need it and replaces `alone` with the context results when
/// they win; says how the conversation was used. Records nothing: the caller judges the
/// results (with the reader, whether they answer the turn as resolved: [`resolved`]),
/// then [`remember`]s the turn with that confidence. `enabled = false` (the turn's
/// `"context": false`) leaves the results alone.
#[allow(clippy::too_many_arguments)]
pub fn choose(
    conv: &Conversation,
    scratch: &mut ContextSearch,
    searcher: &mut HybridSearcher<'_>,
    p: &SearchParams,
    cfg: &ConversationConfig,
    enabled: bool,
    text: &str,
    vector: Option<&Embedding>,
    alone: &mut Ranked,
) -> Used {
    let mut used = Used {
        used: false,
        turns: conv.remembered(),
        topic: None,
        tried: None,
    };
    if !enabled || !cfg.enabled {
        used.turns = 0;
        return used;
    }
    let alone_conf = confidence::of_ranked(p.retriever, alone);
    let c = cues(text);
    let repeat = conv.repeats(text);
    // `Cues`: every turn with a topic is searched with it too (one lexical query, one
    // scan, no embedding); a turn without a strong cue takes it only when it wins on
    // the turn's own evidence ([`cueless_takes_context`]).
    if !text.trim().is_empty()
        && let Some(topic) = if repeat {
            conv.topic_before()
        } else {
            conv.topic()
        }
    {
        scratch.search(searcher, p, cfg, text, vector, topic);
        let ctx_conf = confidence::of_ranked(p.retriever, &scratch.hits);
        let take = if cfg.decision == Decision::Cues && !c.strong() {
            cueless_takes_context(alone, &scratch.hits, alone_conf, ctx_conf)
        } else {
            decide(cfg.decision, &c, alone_conf, ctx_conf)
        };
        let mut t = TopicText::new();
        let _ = t.push_str(cut_topic(topic.0));
        if !scratch.hits.is_empty() && take {
            alone.clone_from(&scratch.hits);
            used.used = true;
            used.topic = Some(t);
        } else if !scratch.hits.is_empty() {
            used.tried = Some(t);
        }
    }
    used
}

/// The turn as its conversation resolved it, into `out`: the turn followed by the topic
/// its context search added (`used.topic`), else the turn as said. What the reader
/// judges a follow-up's sentences against: "how long do the shows last" has no answer
/// of its own, "how long do the shows last planetarium" has.
pub fn resolved<'a>(text: &str, used: &Used, out: &'a mut String) -> &'a str {
    with_topic(text, used.topic.as_deref(), out)
}

/// `text`, then `topic` after a space (when there is one), into `out`.
fn with_topic<'a>(text: &str, topic: Option<&str>, out: &'a mut String) -> &'a str {
    out.clear();
    out.push_str(text);
    if let Some(t) = topic.filter(|t| !t.is_empty()) {
        out.push(' ');
        out.push_str(t);
    }
    out
}

/// Scratch of [`read_turn`]: the turn as resolved, and the context of a second look.
#[derive(Default)]
pub struct TurnScratch {
    question: String,
    spare: crate::context::Context,
}

/// A turn's `context` and evidence, made alike by the daemon, `primd search` and `primd
/// eval`: the sentences of `hits` read against the turn as its conversation resolved it
/// ([`resolved`]; `used` is `None` outside a conversation), judged
/// ([`crate::context::judge`]: `conf`, the retrieval's, fused with the reader's logits,
/// the passage whose sentence answers best leading), then the turn's [`second_look`].
/// A budget of 0 makes no context and leaves `conf` as it is.
#[allow(clippy::too_many_arguments)]
pub fn read_turn(
    builder: &mut crate::context::ContextBuilder,
    index: &crate::index::Index,
    query: Option<&Query>,
    text: &str,
    retriever: crate::ranking::Retriever,
    low_evidence_threshold: f32,
    budget: usize,
    count: &mut dyn FnMut(&str) -> usize,
    search: &ContextSearch,
    used: Option<&mut Used>,
    hits: &mut Ranked,
    ctx: &mut crate::context::Context,
    conf: &mut Option<f32>,
    scratch: &mut TurnScratch,
) {
    ctx.clear();
    if budget == 0 {
        return;
    }
    let mut reading = Reading {
        builder,
        index,
        query,
        budget,
        count,
    };
    let topic = used.as_ref().and_then(|u| u.topic.as_deref());
    reading.read(text, topic, hits, ctx, &mut scratch.question);
    *conf = crate::context::judge(ctx, hits, *conf);
    if let Some(used) = used {
        let judging = (retriever, low_evidence_threshold);
        second_look(
            &mut reading,
            text,
            judging,
            search,
            used,
            hits,
            ctx,
            conf,
            scratch,
        );
    }
}

/// What [`read_turn`] reads a turn's passages with, for the turn's own results and its
/// [`second_look`] alike.
struct Reading<'a, 'c> {
    builder: &'a mut crate::context::ContextBuilder,
    index: &'a crate::index::Index,
    query: Option<&'a Query>,
    budget: usize,
    count: &'a mut (dyn FnMut(&str) -> usize + 'c),
}

impl Reading<'_, '_> {
    /// The context of `hits` read against `text` followed by `topic`, into `out`
    /// (`question`: scratch for that text).
    fn read(
        &mut self,
        text: &str,
        topic: Option<&str>,
        hits: &Ranked,
        out: &mut crate::context::Context,
        question: &mut String,
    ) {
        let question = with_topic(text, topic, question);
        let (index, query, budget) = (self.index, self.query, self.budget);
        self.builder
            .build(index, query, question, hits, budget, &mut *self.count, out);
    }
}

/// Below this logit for every sentence the reader read, a turn's own results do not
/// answer it ("the model holds no sentence more likely to answer than not"), and a turn
/// that kept them gets a [`second_look`].
pub const SECOND_LOOK_BELOW: f32 = 0.0;

/// How deep among the turn's own results the context search's top passage must be for
/// a [`second_look`].
pub const SECOND_LOOK_SUPPORT: usize = 10;

/// The reader's second look at a turn that kept its own results although the context
/// search ran (no strong cue, or the confidence gate overrode one): when no sentence of
/// them answers (the reader's best logit under [`SECOND_LOOK_BELOW`]), the context
/// search's results (`search`) are read against the turn as resolved, and replace
/// `hits`, `ctx` and `conf` when they are judged answered (not below
/// `low_evidence_threshold`) and better ([`crate::context::judge`]).
/// "Is it suitable for young children?" after the Glow exhibition kept the play zone
/// (the gate: its own search was confident) though nothing there answers it. Returns
/// whether the context search's results were taken.
#[allow(clippy::too_many_arguments)]
fn second_look(
    reading: &mut Reading<'_, '_>,
    text: &str,
    (retriever, low_evidence_threshold): (crate::ranking::Retriever, f32),
    search: &ContextSearch,
    used: &mut Used,
    hits: &mut Ranked,
    ctx: &mut crate::context::Context,
    conf: &mut Option<f32>,
    scratch: &mut TurnScratch,
) -> bool {
    let (Some(topic), Some(r)) = (used.tried.as_deref(), ctx.reader) else {
        return false;
    };
    // Supported by the turn's own words: the context search's top passage is among the
    // turn's own top results (an off-topic question's are not the topic's).
    let supported = search.hits.first().is_some_and(|t| {
        hits.iter()
            .take(SECOND_LOOK_SUPPORT)
            .any(|h| h.index == t.index)
    });
    if r.best >= SECOND_LOOK_BELOW || !supported {
        return false;
    }
    let retrieval = confidence::of_ranked(retriever, &search.hits);
    let spare = &mut scratch.spare;
    reading.read(
        text,
        Some(topic),
        &search.hits,
        spare,
        &mut scratch.question,
    );
    let mut alt = search.hits.clone();
    let alt_conf = crate::context::judge(spare, &mut alt, retrieval);
    // Taken when judged answered, and better: an off-topic question ("What is the wifi
    // password?") must not borrow the topic's passages because its own are worse.
    if confidence::is_low(alt_conf, low_evidence_threshold)
        || alt_conf.unwrap_or(0.0) <= conf.unwrap_or(0.0)
    {
        return false;
    }
    *hits = alt;
    std::mem::swap(ctx, spare);
    *conf = alt_conf;
    used.used = true;
    used.topic = used.tried.take();
    true
}

/// Records a finished turn: its text, vector, final results, their `confidence` (the
/// caller's judgement: with the reader, fused with its logits) and how it used the
/// conversation ([`choose`]). Only an answered turn moves the topic ([`TopicMove`]).
#[allow(clippy::too_many_arguments)]
pub fn remember(
    conv: &mut Conversation,
    index: &crate::index::Index,
    cfg: &ConversationConfig,
    text: &str,
    vector: Option<&Embedding>,
    hits: &Ranked,
    conf: Option<f32>,
    used: &Used,
) {
    if text.trim().is_empty() {
        return;
    }
    let title = hits
        .first()
        .and_then(|h| index.passage(h.index as usize).ok())
        .map_or("", |p| p.title);
    let moves = if conv.repeats(text) {
        TopicMove::Repeat
    } else if confidence::is_low(conf, cfg.low_evidence_threshold) && !names_title(text, title) {
        TopicMove::Keep
    } else {
        TopicMove::Replace
    };
    conv.record(
        text,
        vector,
        hits,
        conf,
        used.used,
        cfg.vector_weight,
        title,
        moves,
    );
}

/// Conversations by id, at most `max` at once: past it the least recently used is
/// forgotten (its next turn starts afresh). For `primd search` and `primd eval`, whose
/// input names conversations; the daemon keeps one per session instead.
pub struct Conversations {
    max: usize,
    clock: u64,
    by_id: std::collections::HashMap<String, (u64, Box<Conversation>)>,
}

impl Conversations {
    pub fn new(max: usize) -> Self {
        Conversations {
            max: max.max(1),
            clock: 0,
            by_id: std::collections::HashMap::new(),
        }
    }

    /// Conversations held.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The conversation `id` (a JSON string or any other JSON value, by its text), new
    /// when unknown.
    pub fn get(&mut self, id: &serde_json::Value) -> &mut Conversation {
        let key = match id {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.clock += 1;
        if !self.by_id.contains_key(&key) && self.by_id.len() >= self.max {
            let oldest = self
                .by_id
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.by_id.remove(&k);
            }
        }
        let e = self
            .by_id
            .entry(key)
            .or_insert_with(|| (0, Box::new(Conversation::new())));
        e.0 = self.clock;
        &mut e.1
    }
}

#[cfg(test)]
mod stream_tests;
#[cfg(test)]
pub(crate) mod tests;
