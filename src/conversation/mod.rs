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
//! Per turn ([`decide`]): the turn is always searched alone (as without a
//! conversation). When there is a topic and the turn's words lean on earlier ones
//! ([`cues`]: a pronoun, "there", "that", an elliptic "and ..."/"what about ...", a
//! turn of three words or fewer), a second search runs with the topic added: its text's
//! terms in the lexical query at weight `topic_weight`, and a dense query that is the
//! turn's vector plus `vector_weight` times the topic's vector (normalised) — no extra
//! embedding. The context results are kept unless the turn alone was confident and the
//! context search is not ([`decide`]), so a question that names its own topic (a
//! switch) keeps its own results. Measured alternatives and the dev figures are in
//! `docs/conversations.md`.
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
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig {
            enabled: true,
            gap_ms: DEFAULT_GAP_MS,
            topic_weight: DEFAULT_TOPIC_WEIGHT,
            vector_weight: DEFAULT_VECTOR_WEIGHT,
            decision: Decision::default(),
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
    /// Scratch for building the next topic text.
    spare: String,
}

impl Default for Conversation {
    fn default() -> Self {
        Self::new()
    }
}

/// How a turn used its conversation (the result's `"conversation"` field).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Used {
    /// The results came from the search with context.
    pub used: bool,
    /// Earlier turns of the conversation it could lean on (at most [`MAX_TURNS`]).
    pub turns: u32,
}

impl Conversation {
    pub fn new() -> Conversation {
        Conversation {
            turns: std::array::from_fn(|_| Turn::new()),
            count: 0,
            topic: String::with_capacity(TEXT_BYTES),
            topic_vector: [0.0; DIM],
            has_topic_vector: false,
            spare: String::with_capacity(TEXT_BYTES),
        }
    }

    /// Forgets every turn (keeps the space).
    pub fn reset(&mut self) {
        self.count = 0;
        self.topic.clear();
        self.has_topic_vector = false;
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
        (self.count > 0 && !self.topic.is_empty()).then(|| {
            (
                self.topic.as_str(),
                self.has_topic_vector.then_some(&self.topic_vector),
            )
        })
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

/// Appends `s` to `out`, at most `max` bytes of it, cut at a character boundary.
fn push_cut(out: &mut String, s: &str, max: usize) {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&s[..end]);
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

/// One turn of a conversation, end to end: given the turn's own results (`alone`) and
/// its vector, decides, runs the context search when the turn may need it, replaces
/// `alone` with the context results when they win, records the turn, and says how the
/// conversation was used. `enabled = false` (the turn's `"context": false`) records
/// the turn without using the conversation.
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
    let mut used = Used {
        used: false,
        turns: conv.remembered(),
    };
    let alone_conf = confidence::of_ranked(p.retriever, alone);
    let c = cues(text);
    let want = match cfg.decision {
        Decision::Cues => c.strong(),
        Decision::Always | Decision::Evidence => true,
    };
    if enabled
        && cfg.enabled
        && want
        && !text.trim().is_empty()
        && let Some(topic) = conv.topic()
    {
        scratch.search(searcher, p, cfg, text, vector, topic);
        let ctx_conf = confidence::of_ranked(p.retriever, &scratch.hits);
        if !scratch.hits.is_empty() && decide(cfg.decision, &c, alone_conf, ctx_conf) {
            alone.clone_from(&scratch.hits);
            used.used = true;
        }
    }
    if !enabled || !cfg.enabled {
        used.turns = 0;
    }
    let conf = confidence::of_ranked(p.retriever, alone);
    if !text.trim().is_empty() {
        let index = searcher.index();
        let title = alone
            .first()
            .and_then(|h| index.passage(h.index as usize).ok())
            .map_or("", |p| p.title);
        conv.record(
            text,
            vector,
            alone,
            conf,
            used.used,
            cfg.vector_weight,
            title,
        );
    }
    used
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
