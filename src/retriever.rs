//! The retriever a query goes through: dense, lexical, or both fused.
//!
//! Hybrid search is one candidate set and one fusion: lexical top-C (BM25 from the
//! index's lexical section) ∪ binary top-C (1-bit codes), every candidate scored with
//! its int8 cosine (the dense rerank), then [`fusion`](crate::fusion) of the two
//! scores and the top-k. The streaming retriever builds the same union from the
//! speculative candidates; `primd search` and the prefix replay of `primd eval` call
//! [`HybridSearcher::search`]. Dense alone is exactly [`Searcher`]'s binary scan +
//! rerank; lexical alone needs no embedding at all.
//!
//! Which retriever runs is decided once per index ([`Retriever::resolve`]): hybrid
//! when the index has a lexical section, dense for an index without one (format v1,
//! with a notice that rebuilding adds lexical search); asking for lexical search on
//! such an index is an error rather than a silent fallback.
//!
//! Like [`Searcher`], a [`HybridSearcher`] owns fixed-capacity scratch space (one per
//! thread): after warm-up a search allocates nothing.

use std::time::Instant;

use heapless::Vec as FixedVec;

pub use crate::ranking::{Ranked, Retriever};

use crate::dense::{Candidates, Query, Searcher};
use crate::fusion::{Fuser, Fusion, MAX_UNION, Scored, sort_best_first};
use crate::hits::{Hit, Hits};
use crate::index::{Index, IndexError};
use crate::lexical::{Lexical, LexicalSearcher};
use crate::scan::{MAX_K, Neighbor};

/// Lexical candidates of a hybrid search by default (as the binary scan's).
pub const DEFAULT_LEXICAL_CANDIDATES: usize = 100;

impl Retriever {
    /// The retriever to run on `index`: the one asked for, or by default hybrid when
    /// the index has a lexical section and dense (with a notice) when it has none.
    /// Asking for lexical or hybrid search on an index without one is an error.
    pub fn resolve(asked: Option<Retriever>, index: &Index) -> Result<Retriever, RetrieverError> {
        let has_lexical = index.lexical().is_some();
        match asked {
            Some(r) if r.uses_lexical() && !has_lexical => Err(RetrieverError::NoLexical {
                path: index.path().display().to_string(),
                asked: r,
            }),
            Some(r) => Ok(r),
            None if has_lexical => Ok(Retriever::Hybrid),
            None => {
                log::warn!(
                    "notice: index {} has no lexical section (made before index format v2): \
                     dense search only; rebuilding it with build-index adds lexical search",
                    index.path().display()
                );
                Ok(Retriever::Dense)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RetrieverError {
    #[error(
        "index {path} has no lexical section (made before index format v2), so it cannot \
         do {asked} search: rebuild it with build-index, or use --retriever dense"
    )]
    NoLexical { path: String, asked: Retriever },
}

/// What one search is asked to do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchParams {
    pub retriever: Retriever,
    /// Results.
    pub k: usize,
    /// Candidates of the binary scan.
    pub candidates: usize,
    /// Candidates of the lexical search.
    pub lexical_candidates: usize,
    pub fusion: Fusion,
}

/// Where the time of one search went, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchTimings {
    pub lexical_ms: f64,
    pub scan_ms: f64,
    /// Dense rerank and fusion.
    pub rerank_ms: f64,
}

/// Searches one index with any retriever; owns its scratch space, so make one per thread.
pub struct HybridSearcher<'a> {
    dense: Searcher<'a>,
    lexical: Option<Lexical<'a>>,
    lex: LexicalSearcher,
    lex_hits: Hits,
    cands: Candidates,
    hits: Hits,
    union: FixedVec<Scored, MAX_UNION>,
    fuser: Fuser,
}

impl<'a> HybridSearcher<'a> {
    /// Fails if the index was not built for this primd's embedding width.
    pub fn new(index: &'a Index) -> Result<Self, IndexError> {
        Ok(HybridSearcher {
            dense: Searcher::new(index)?,
            lexical: index.lexical(),
            lex: LexicalSearcher::new(),
            lex_hits: Hits::new(),
            cands: Candidates::new(),
            hits: Hits::new(),
            union: FixedVec::new(),
            fuser: Fuser::new(),
        })
    }

    pub fn index(&self) -> &'a Index {
        self.dense.index()
    }

    /// The dense searcher (binary scan, rerank, exact).
    pub fn dense(&mut self) -> &mut Searcher<'a> {
        &mut self.dense
    }

    /// The index has a lexical section.
    pub fn has_lexical(&self) -> bool {
        self.lexical.is_some()
    }

    /// BM25 top-`k` of `text`, terms of `extra` weighted `extra_weight`, into `out`
    /// (best first); empty when the index has no lexical section or no term is known.
    pub fn lexical(
        &mut self,
        text: &str,
        extra: &str,
        extra_weight: f32,
        k: usize,
        out: &mut Hits,
    ) {
        out.clear();
        if let Some(lex) = &self.lexical {
            self.lex
                .search(lex, text, extra, extra_weight, k.min(MAX_K), out);
        }
    }

    /// Sum and number of the idfs of `text`'s known terms in the lexical section
    /// ([`LexicalSearcher::idf_mass`]); `None` without a lexical section.
    pub fn idf_mass(&mut self, text: &str) -> Option<(f32, u32)> {
        let lex = self.lexical.as_ref()?;
        Some(self.lex.idf_mass(lex, text))
    }

    /// Dense rerank of `candidates` (score = cosine).
    pub fn rerank(&mut self, candidates: &[Neighbor], query: &Query, k: usize, out: &mut Ranked) {
        self.dense.rerank(candidates, query, k, &mut self.hits);
        ranked_from(&self.hits, true, out);
    }

    /// The union of `lexical` (with their BM25) and `dense` candidates, each scored with
    /// its int8 cosine when there is a `query` embedding, fused; the best `k` into `out`.
    pub fn fuse(
        &mut self,
        query: Option<&Query>,
        lexical: &[Hit],
        dense: &[Neighbor],
        fusion: Fusion,
        k: usize,
        out: &mut Ranked,
    ) {
        let n = self.dense.index().len() as u32;
        self.union.clear();
        for h in lexical.iter().take(MAX_K).filter(|h| h.index < n) {
            // Cannot fail: at most MAX_K of each list.
            let _ = self.union.push(Scored::new(h.index, None, Some(h.score)));
        }
        for c in dense.iter().take(MAX_K).filter(|c| c.index < n) {
            let _ = self.union.push(Scored::new(c.index, None, None));
        }
        // One entry per passage, the one with a BM25 score when both lists have it.
        self.union.sort_unstable_by(|a, b| {
            a.index
                .cmp(&b.index)
                .then(b.bm25.is_some().cmp(&a.bm25.is_some()))
        });
        let mut kept = 0;
        for i in 0..self.union.len() {
            if kept == 0 || self.union[i].index != self.union[kept - 1].index {
                self.union[kept] = self.union[i];
                kept += 1;
            }
        }
        self.union.truncate(kept);
        if let Some(q) = query {
            for c in self.union.iter_mut() {
                c.dense = Some(self.dense.cosine(q, c.index as usize));
            }
        }
        self.fuser.fuse(fusion, &mut self.union);
        sort_best_first(&mut self.union);
        out.clear();
        for c in self.union.iter().take(k.min(MAX_K)) {
            let _ = out.push(*c);
        }
    }

    /// One search of `text` (embedded as `query`; `None` is fine for the lexical
    /// retriever, and makes hybrid lexical-only).
    pub fn search(
        &mut self,
        p: &SearchParams,
        query: Option<&Query>,
        text: &str,
        out: &mut Ranked,
    ) -> SearchTimings {
        self.search_with(p, query, text, "", 0.0, out)
    }

    /// [`search`](Self::search) with the terms of `extra` added to the lexical query at
    /// weight `extra_weight` (a conversation's topic: [`crate::conversation`]).
    pub fn search_with(
        &mut self,
        p: &SearchParams,
        query: Option<&Query>,
        text: &str,
        extra: &str,
        extra_weight: f32,
        out: &mut Ranked,
    ) -> SearchTimings {
        let mut t = SearchTimings::default();
        out.clear();
        let mut lex_hits = std::mem::take(&mut self.lex_hits);
        let mut cands = std::mem::take(&mut self.cands);
        lex_hits.clear();
        cands.clear();
        if p.retriever.uses_lexical() {
            let t0 = Instant::now();
            let k = match p.retriever {
                Retriever::Lexical => p.k,
                _ => p.lexical_candidates,
            };
            self.lexical(text, extra, extra_weight, k, &mut lex_hits);
            t.lexical_ms = ms_since(t0);
        }
        match (p.retriever, query) {
            (Retriever::Lexical, _) => ranked_from(&lex_hits, false, out),
            (Retriever::Dense, Some(q)) => {
                let t0 = Instant::now();
                self.dense.binary_scan(q, p.candidates.max(p.k), &mut cands);
                t.scan_ms = ms_since(t0);
                let t0 = Instant::now();
                self.rerank(&cands, q, p.k, out);
                t.rerank_ms = ms_since(t0);
            }
            (Retriever::Dense, None) => {}
            (Retriever::Hybrid, q) => {
                let t0 = Instant::now();
                if let Some(q) = q {
                    self.dense.binary_scan(q, p.candidates.max(p.k), &mut cands);
                }
                t.scan_ms = ms_since(t0);
                let t0 = Instant::now();
                self.fuse(q, &lex_hits, &cands, p.fusion, p.k, out);
                t.rerank_ms = ms_since(t0);
            }
        }
        self.lex_hits = lex_hits;
        self.cands = cands;
        t
    }
}

/// Copies one retriever's hits as ranked results: `dense` says which score they hold.
pub fn ranked_from(hits: &[Hit], dense: bool, out: &mut Ranked) {
    out.clear();
    for h in hits {
        let s = Some(h.score);
        let (d, b) = if dense { (s, None) } else { (None, s) };
        let _ = out.push(Scored {
            index: h.index,
            score: h.score,
            dense: d,
            bm25: b,
        });
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
