//! BM25 top-k over a [`Lexical`] section.
//!
//! Two scorers over the same arithmetic ([`Scorer`](super::format::Scorer)):
//! - **term at a time** ([`LexicalSearcher::search_exhaustive`]): every posting of every
//!   query term is added into a per-document accumulator, then the top-k is taken. Simple,
//!   obviously right, and the reference the fast path is tested against; also the better
//!   plan for a very long query (thousands of distinct terms), where it is used.
//! - **MaxScore, document at a time** ([`LexicalSearcher::search`], Turtle & Flood 1995, as
//!   in PISA and Lucene): terms sorted by their upper-bound score; once the k-th best score
//!   θ exceeds the summed bounds of the weakest terms, those become "non-essential": no
//!   document that only they contain can enter the top-k, so only the essential (rare,
//!   high-idf) lists are walked, and the non-essential ones are merely probed, by skipping
//!   whole blocks, for the documents that the essential ones bring up. Char n-gram queries
//!   are many terms of which most are very common ("_the", "tion"), which is exactly
//!   what this prunes.
//!
//! A query term's weight is its count in the query plus `extra_weight` times its count in
//! `extra` (Counter-style query term frequency, as the reference Python BM25).
//!
//! Nothing allocates once the searcher has seen its largest query and corpus: query terms,
//! cursors, accumulators and the top-k live in its buffers.

use std::collections::BinaryHeap;

use super::analyze::Analyzer;
use super::read::{END, Lexical, Postings};
use crate::search::{Hit, Hits};

/// Above this many distinct query terms, term-at-a-time is cheaper than MaxScore's
/// per-document minimum over the lists (and bounds its cost on absurd queries).
const MAXSCORE_MAX_TERMS: usize = 256;

/// Upper bounds are inflated by this relative margin before pruning, so that float
/// rounding in a different summation order can never prune a document that belongs in
/// the top-k.
const BOUND_SLACK: f32 = 1e-4;

/// One query term after lookup.
#[derive(Clone, Copy, Debug)]
struct QTerm {
    ord: u32,
    weight: f32,
    idf: f32,
    /// `weight · max_score`, inflated by [`BOUND_SLACK`].
    ub: f32,
}

/// Per-thread scratch; after warm-up a search allocates nothing.
#[derive(Debug, Default)]
pub struct LexicalSearcher {
    analyzer: Analyzer,
    /// `(term ordinal, weight)` of every analysed query term, repeats included.
    raw: Vec<(u32, f32)>,
    terms: Vec<QTerm>,
    /// Prefix sums of the terms' bounds (MaxScore).
    upper: Vec<f32>,
    /// Cursors, reused across searches (stored empty between them; see `recycle`).
    cursors: Vec<Postings<'static>>,
    /// Term-at-a-time accumulators, one per document, all zero between searches.
    acc: Vec<f32>,
    seen: Vec<bool>,
    touched: Vec<u32>,
    top: TopScores,
}

impl LexicalSearcher {
    pub fn new() -> Self {
        LexicalSearcher::default()
    }

    /// Capacities of every buffer: a warm searcher's never change (tests).
    #[cfg(test)]
    pub(crate) fn capacities(&self) -> Vec<usize> {
        let mut c = self.analyzer.capacities();
        c.extend([
            self.raw.capacity(),
            self.terms.capacity(),
            self.upper.capacity(),
            self.cursors.capacity(),
            self.acc.capacity(),
            self.seen.capacity(),
            self.touched.capacity(),
            self.top.heap.capacity(),
        ]);
        c
    }

    /// BM25 top-`k` of `query` (raw text; analysed with the index's analyzer). Terms of
    /// `extra` count with weight `extra_weight` (0, negative or NaN: ignored). Results go
    /// into `out` best first (ties: lower passage first); no known term → empty.
    pub fn search(
        &mut self,
        lex: &Lexical<'_>,
        query: &str,
        extra: &str,
        extra_weight: f32,
        k: usize,
        out: &mut Hits,
    ) {
        out.clear();
        if !self.prepare(lex, query, extra, extra_weight, k, out) {
            return;
        }
        if self.terms.len() > MAXSCORE_MAX_TERMS {
            self.term_at_a_time(lex, k, out);
        } else {
            self.maxscore(lex, k, out);
        }
    }

    /// The same top-`k` by exhaustive term-at-a-time scoring: the reference for
    /// [`search`](Self::search). Equal results up to float rounding of the sums.
    pub fn search_exhaustive(
        &mut self,
        lex: &Lexical<'_>,
        query: &str,
        extra: &str,
        extra_weight: f32,
        k: usize,
        out: &mut Hits,
    ) {
        out.clear();
        if self.prepare(lex, query, extra, extra_weight, k, out) {
            self.term_at_a_time(lex, k, out);
        }
    }

    /// Analyses and looks up the query into `self.terms` (distinct, with weights). False
    /// when there is nothing to search.
    fn prepare(
        &mut self,
        lex: &Lexical<'_>,
        query: &str,
        extra: &str,
        extra_weight: f32,
        k: usize,
        out: &Hits,
    ) -> bool {
        self.raw.clear();
        self.terms.clear();
        if k == 0 || out.capacity() == 0 {
            return false;
        }
        let spec = *lex.spec();
        let raw = &mut self.raw;
        self.analyzer.analyze(&spec, query, |t| {
            if let Some(ord) = lex.lookup(t) {
                raw.push((ord, 1.0));
            }
        });
        if extra_weight > 0.0 && extra_weight.is_finite() {
            self.analyzer.analyze(&spec, extra, |t| {
                if let Some(ord) = lex.lookup(t) {
                    raw.push((ord, extra_weight));
                }
            });
        }
        self.raw.sort_unstable_by_key(|&(ord, _)| ord);
        for run in self.raw.chunk_by(|a, b| a.0 == b.0) {
            let ord = run[0].0;
            let weight: f32 = run.iter().map(|&(_, w)| w).sum();
            let Some(t) = lex.term(ord) else { continue };
            let ub = weight * t.max_score * (1.0 + BOUND_SLACK);
            self.terms.push(QTerm {
                ord,
                weight,
                idf: t.idf,
                ub,
            });
        }
        !self.terms.is_empty()
    }

    fn term_at_a_time(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        let n = lex.doc_count();
        if self.acc.len() < n {
            self.acc.resize(n, 0.0);
            self.seen.resize(n, false);
        }
        self.touched.clear();
        let scorer = *lex.scorer();
        let mut p = Postings::new();
        for q in &self.terms {
            let Some(t) = lex.term(q.ord) else { continue };
            p.reset(&t, n);
            while p.doc() != END {
                let d = p.doc() as usize;
                let norm = scorer.norm(lex.doc_len(p.doc()));
                let s = q.weight * scorer.score(q.idf, p.tf(), norm);
                // `d < n` by the cursor's contract; `get_mut` keeps a slip from panicking.
                if let (Some(a), Some(seen)) = (self.acc.get_mut(d), self.seen.get_mut(d)) {
                    if !*seen {
                        *seen = true;
                        self.touched.push(d as u32);
                    }
                    *a += s;
                }
                p.next();
            }
        }
        self.top.reset(k.min(out.capacity()));
        for &d in &self.touched {
            let d = d as usize;
            self.top.push(self.acc[d], d as u32);
            self.acc[d] = 0.0;
            self.seen[d] = false;
        }
        self.top.drain_into(out);
    }

    fn maxscore(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        let n = lex.doc_count();
        let scorer = *lex.scorer();
        // Weakest bound first; ties by ordinal, so the plan is deterministic.
        self.terms
            .sort_unstable_by(|a, b| a.ub.total_cmp(&b.ub).then(a.ord.cmp(&b.ord)));
        let mut cursors: Vec<Postings<'_>> = recycle(std::mem::take(&mut self.cursors));
        self.upper.clear();
        let mut sum = 0.0f32;
        for q in &self.terms {
            let mut c = Postings::new();
            if let Some(t) = lex.term(q.ord) {
                c.reset(&t, n);
            }
            cursors.push(c);
            sum += q.ub;
            self.upper.push(sum);
        }
        let m = self.terms.len();

        self.top.reset(k.min(out.capacity()));
        let mut theta = f32::NEG_INFINITY;
        let mut first_essential = 0;
        loop {
            let mut d = END;
            for c in &cursors[first_essential..m] {
                d = d.min(c.doc());
            }
            if d == END {
                break;
            }
            let norm = scorer.norm(lex.doc_len(d));
            let mut score = 0.0f32;
            for (i, c) in cursors.iter_mut().enumerate().skip(first_essential) {
                if c.doc() == d {
                    score += self.terms[i].weight * scorer.score(self.terms[i].idf, c.tf(), norm);
                    c.next();
                }
            }
            for i in (0..first_essential).rev() {
                if score + self.upper[i] <= theta {
                    break;
                }
                let c = &mut cursors[i];
                c.advance(d);
                if c.doc() == d {
                    score += self.terms[i].weight * scorer.score(self.terms[i].idf, c.tf(), norm);
                }
            }
            if self.top.push(score, d) {
                theta = self.top.threshold();
                while first_essential < m && self.upper[first_essential] <= theta {
                    first_essential += 1;
                }
            }
        }
        self.top.drain_into(out);
        self.cursors = recycle(cursors);
    }
}

/// An empty vector of cursors with another lifetime, reusing the allocation: cursors
/// borrow the section being searched, so they cannot be kept between searches, but their
/// buffer can (`collect` on an emptied `vec::IntoIter` of a same-sized type reuses it).
// `filter` would keep the item type: the point here is a new lifetime, same allocation.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'x, 'y>(mut v: Vec<Postings<'x>>) -> Vec<Postings<'y>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Maps a score to a key that sorts the other way round (higher score → smaller key),
/// order-preserving for all floats (NaN included, so a corrupt file cannot upset the heap).
#[inline]
fn score_key(score: f32) -> u32 {
    let bits = score.to_bits();
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    !ordered
}

#[inline]
fn key_score(key: u32) -> f32 {
    let ordered = !key;
    let bits = if ordered >> 31 == 1 {
        ordered & 0x7fff_ffff
    } else {
        !ordered
    };
    f32::from_bits(bits)
}

/// Top-k by score, ties broken by smaller document id (so the result does not depend on
/// the order documents are pushed in). A max-heap of `(key, doc)`: the root is the worst.
#[derive(Debug, Default)]
struct TopScores {
    heap: BinaryHeap<(u32, u32)>,
    k: usize,
}

impl TopScores {
    fn reset(&mut self, k: usize) {
        self.heap.clear();
        self.k = k;
        self.heap.reserve(k);
    }

    /// Keeps `(score, doc)` if it is among the k best so far; true if kept.
    #[inline]
    fn push(&mut self, score: f32, doc: u32) -> bool {
        let item = (score_key(score), doc);
        if self.heap.len() < self.k {
            self.heap.push(item);
            true
        } else if let Some(mut worst) = self.heap.peek_mut()
            && item < *worst
        {
            *worst = item;
            true
        } else {
            false
        }
    }

    /// The score to beat once full (−∞ before).
    #[inline]
    fn threshold(&self) -> f32 {
        match self.heap.peek() {
            Some(&(key, _)) if self.heap.len() >= self.k => key_score(key),
            _ => f32::NEG_INFINITY,
        }
    }

    /// Best first into `out`; leaves the heap empty (its allocation kept).
    fn drain_into(&mut self, out: &mut Hits) {
        out.clear();
        while let Some((key, doc)) = self.heap.pop() {
            let _ = out.push(Hit {
                index: doc,
                score: key_score(key),
            });
        }
        out.reverse();
    }
}
