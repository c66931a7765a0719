//! BM25 top-k over a [`Lexical`] section.
//!
//! Two scorers over the same arithmetic ([`Scorer`](super::bm25::Scorer)):
//! - **term at a time** ([`LexicalSearcher::search_exhaustive`]): every posting of every
//!   query term is added into a per-document accumulator, then the top-k is taken. Simple,
//!   obviously right, and the reference the fast path is tested against; also the better
//!   plan for a very long query (thousands of distinct terms), where it is used. When the
//!   view carries decoded postings ([`Decoded`](super::Decoded): a small corpus in
//!   an open index) it adds their precomputed contributions instead of decoding and
//!   scoring blocks: the same sums bit for bit, 1.1-1.9x faster on the dev set.
//! - **MaxScore over windows** ([`LexicalSearcher::search`]; Turtle & Flood 1995, in the
//!   form of Lucene's `MaxScoreBulkScorer`): documents are taken in windows of
//!   [`WINDOW`]; in each, every term's bound is the largest block maximum it has there
//!   (tighter than its global maximum), and the terms whose bounds add up to no more than
//!   θ, the k-th best score so far, are "non-essential": no document that only they
//!   contain can enter the top-k. The essential (rarer, higher-idf) terms are scored term
//!   at a time into the window's accumulators; each document they touch then probes the
//!   non-essential lists, strongest first, only while it can still beat θ, skipping whole
//!   blocks by their last id; a window whose terms all are non-essential is skipped
//!   without decoding anything. Char n-gram queries are many terms of which most are
//!   very common ("_the", "tion"), which is exactly what this prunes; and scoring a
//!   window term at a time avoids the per-document minimum over dozens of cursors that
//!   classic document-at-a-time MaxScore pays. Before the top-k is full (the first
//!   window), θ is seeded from the k-th best partial score once the strongest terms are
//!   scored. A corpus of one window is scored term at a time: there the probes cost more
//!   than the postings they save. And when a window (after the first) prunes too little,
//!   the rest of the corpus is scored term at a time into the same top-k: with SIMD
//!   posting kernels, that beats candidates and probes that cover a large share of the
//!   postings anyway (a char n-gram query over a large corpus).
//! - **Two phases** for a query too large for either (more than [`EXACT_POSTINGS`]
//!   postings: a char n-gram query over ~100k passages or more, whose common n-grams
//!   MaxScore cannot prune because their scores are flat): its rarest terms, a tenth of
//!   its postings, choose 100 candidates by the exact paths above, and every other term
//!   then completes those candidates' scores. Every score returned is exact; only which
//!   passages are candidates is approximate: on the dev set (`tools/eval/two_phase.py`,
//!   primd forced onto this path) it gave the exact query's hit@1 / hit@10 with n-grams
//!   within words, and with n-grams across words the same hit@1 and 0.002 less typed
//!   hit@10 ([`SELECT_SHARE`](two_phase::SELECT_SHARE)). 3-4x faster at 100k-1M passages
//!   (2026-12-04, AMD EPYC, `cargo bench --bench lexical`; docs/benchmarks.md, lexical).
//!
//! The files, one job each: `query` (analysis and lookup into weighted terms), `taat`
//! (term at a time, and MaxScore's hand-over), `maxscore`, `two_phase`, `topk` (the
//! heap and θ), `decode` (a small corpus's postings decoded once, for `taat`).
//!
//! A query term's weight is its count in the query plus `extra_weight` times its count in
//! `extra` (Counter-style query term frequency, as the reference Python BM25).
//!
//! Nothing allocates once the searcher has seen its largest query and corpus: query terms,
//! cursors, accumulators and the top-k live in its buffers.

mod decode;
mod maxscore;
mod query;
mod taat;
mod topk;
mod two_phase;

use self::topk::TopScores;
use super::analyze::Analyzer;
use super::bm25::Scorer;
use super::cache::TermCache;
use super::kernels::TermScore;
use super::postings::Postings;
use super::read::Lexical;
use crate::hits::Hits;

/// Above this many distinct query terms, plain term at a time: MaxScore's per-window
/// bookkeeping (a bound and a sort over all terms) no longer pays, and an absurd query
/// keeps a simple, bounded cost.
const MAXSCORE_MAX_TERMS: usize = 256;

/// Documents per MaxScore window: essential terms are scored term at a time into this many
/// accumulators (16 KiB: stays in L1/L2), and each term's bound is recomputed per window
/// from its block maxima, which are far tighter than its global maximum.
const WINDOW: usize = 4096;

/// Whether a corpus of `docs` documents is one MaxScore window, which [`LexicalSearcher::
/// search`] scores term at a time (the corpora whose postings an open index decodes).
pub(crate) fn scored_term_at_a_time(docs: usize) -> bool {
    docs <= WINDOW
}

/// A query over more postings than this (summed document frequencies of its terms), on a
/// corpus of more than one window, is answered in two phases ([`LexicalSearcher::
/// select_and_rescore`]) instead of exactly: about what an exact query scores in half a
/// millisecond on a desktop core. Kiosk-sized corpora never reach it (Spoken-SQuAD's
/// 2,421 passages: 18k postings for a typed question's char 4-grams; one window anyway);
/// a char-4-gram query over 100k passages is ~0.7M postings, over 1M ~5M.
const EXACT_POSTINGS: u64 = 1 << 18;

/// What the last search did (diagnostics: benchmarks report it; nothing depends on it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Distinct query terms found in the index.
    pub terms: usize,
    /// Their summed document frequencies: what an exhaustive scorer walks.
    pub postings: u64,
    /// Postings scored term at a time (all of them for the exhaustive path; the essential
    /// terms' for MaxScore).
    pub scored: u64,
    /// MaxScore: documents considered (touched by an essential term).
    pub candidates: u64,
    /// MaxScore: non-essential terms looked up for a candidate.
    pub probes: u64,
    /// MaxScore: windows, and windows skipped (no term could lift a document past θ).
    pub windows: u32,
    pub skipped_windows: u32,
    /// MaxScore: times θ was seeded from a window's partial scores.
    pub seeded: u32,
    /// MaxScore: the document from which the rest was scored term at a time, because
    /// the windows pruned too little ([`SWITCH_WORK`]); `None` if it never switched.
    pub switched_at: Option<u32>,
    /// Two-phase query ([`EXACT_POSTINGS`]): the terms that selected the candidates, and
    /// the candidates rescored with the others (0 and 0 for an exact query).
    pub selecting_terms: usize,
    pub rescored: u64,
}

/// One query term after lookup.
#[derive(Clone, Copy, Debug)]
struct QTerm {
    ord: u32,
    weight: f32,
    idf: f32,
    df: u32,
}

impl QTerm {
    /// What the posting kernels need to score this term.
    fn scoring(&self, scorer: Scorer) -> TermScore {
        TermScore {
            scorer,
            idf: self.idf,
            weight: self.weight,
        }
    }
}

/// Per-thread scratch; after warm-up a search allocates nothing.
#[derive(Debug, Default)]
pub struct LexicalSearcher {
    analyzer: Analyzer,
    /// Recent term → ordinal lookups.
    dict: TermCache,
    /// `(term ordinal, weight)` of every analysed query term, repeats included.
    raw: Vec<(u32, f32)>,
    terms: Vec<QTerm>,
    /// Two-phase queries: the terms left out of the selection, and the candidates
    /// `(document, score)` being completed.
    rest: Vec<QTerm>,
    candidates: Vec<(u32, f32)>,
    /// Postings above which a query takes two phases; 0 means [`EXACT_POSTINGS`] (tests
    /// lower it to reach that path on small corpora).
    exact_postings: u64,
    /// MaxScore, per window: each term's bound, terms by bound (ascending), prefix sums of
    /// the bounds in that order, each term's directory position.
    wmax: Vec<f32>,
    order: Vec<usize>,
    upper: Vec<f32>,
    hint: Vec<usize>,
    /// MaxScore window accumulators and the bitset of documents touched in the window.
    wacc: Vec<f32>,
    bits: Vec<u64>,
    /// Partial scores of a window, to seed θ before the top-k is full.
    partials: Vec<f32>,
    /// Window size; 0 means [`WINDOW`] (tests use small ones to cross many windows).
    window: usize,
    /// Cursors, reused across searches (stored empty between them; see `recycle`).
    cursors: Vec<Postings<'static>>,
    /// Term-at-a-time accumulators, all zero between searches: one per document (plain
    /// term at a time), or one per document of a chunk (MaxScore's hand-over).
    acc: Vec<f32>,
    /// Length norms for a view opened without them (an `Index` always has them).
    norms: Vec<f32>,
    top: TopScores,
    stats: SearchStats,
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
            self.rest.capacity(),
            self.candidates.capacity(),
            self.upper.capacity(),
            self.wmax.capacity(),
            self.order.capacity(),
            self.hint.capacity(),
            self.wacc.capacity(),
            self.bits.capacity(),
            self.partials.capacity(),
            self.cursors.capacity(),
            self.acc.capacity(),
            self.norms.capacity(),
            self.top.heap.capacity(),
            self.dict.capacity(),
        ]);
        c
    }

    /// What the last search did.
    pub fn stats(&self) -> SearchStats {
        self.stats
    }

    /// A searcher with MaxScore windows of `window` documents (rounded up to 64).
    #[cfg(test)]
    pub(crate) fn with_window(window: usize) -> Self {
        LexicalSearcher {
            window,
            ..LexicalSearcher::default()
        }
    }

    /// A searcher that answers queries of more than `postings` postings in two phases
    /// (rarest terms select, every term rescores).
    #[cfg(test)]
    pub(crate) fn with_exact_postings(mut self, postings: u64) -> Self {
        self.exact_postings = postings.max(1);
        self
    }

    /// BM25 top-`k` of `query` (raw text; analysed with the index's analyzer). Terms of
    /// `extra` count with weight `extra_weight` (0, negative or NaN: ignored). Results go
    /// into `out` best first (ties: lower passage first); no known term → empty. Exact,
    /// except for a query of more than [`EXACT_POSTINGS`] postings over a corpus of more
    /// than one window: its candidates come from its rarest terms (every score returned
    /// is still its exact BM25 score; see [`Self::select_and_rescore`]).
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
        // One window (a small corpus): term at a time. MaxScore could prune there too,
        // from a θ seeded by the strongest terms' partial scores, but its probes (a
        // cursor step per candidate and non-essential term) cost more than scoring the
        // few thousand postings they avoid (measured on Spoken-SQuAD: 2x slower).
        let one_window = match self.window {
            0 => scored_term_at_a_time(lex.doc_count()),
            w => lex.doc_count() <= w.next_multiple_of(64),
        };
        let exact_postings = match self.exact_postings {
            0 => EXACT_POSTINGS,
            p => p,
        };
        if one_window {
            self.term_at_a_time(lex, k, out);
        } else if self.stats.postings > exact_postings {
            self.select_and_rescore(lex, k, out);
        } else {
            self.top_k(lex, k, out);
        }
    }

    /// The exact top-`k` of `self.terms` on a corpus of more than one window.
    fn top_k(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
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
}
