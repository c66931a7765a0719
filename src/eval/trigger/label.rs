//! Labelling (the rule is in the parent module's doc): each prefix of a typed question
//! NEW_QUERY or NO_QUERY, by comparing the top-10 of querying now with that of keeping
//! the previous useful query; plus the negative samples with a stale previous query.

use super::{CHANGED, Row};
use crate::dense::{Candidates, Query};
use crate::embed::{Embed, EmbedError, Embedding, cosine};
use crate::hits::Hits;
use crate::index::Index;
use crate::retriever::{HybridSearcher, Ranked};
use crate::stream::StreamConfig;
use crate::stream::trigger::TriggerState;

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
