//! BM25 top-k over a [`Lexical`] section.
//!
//! Two scorers over the same arithmetic ([`Scorer`](super::format::Scorer)):
//! - **term at a time** ([`LexicalSearcher::search_exhaustive`]): every posting of every
//!   query term is added into a per-document accumulator, then the top-k is taken. Simple,
//!   obviously right, and the reference the fast path is tested against; also the better
//!   plan for a very long query (thousands of distinct terms), where it is used. When the
//!   view carries decoded postings ([`Decoded`](super::decoded::Decoded): a small corpus in
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
//!   hit@10 ([`SELECT_SHARE`]). 3-4x faster at 100k-1M passages
//!   (2026-12-04, AMD EPYC, `cargo bench --bench lexical`; docs/benchmarks.md, lexical).
//!
//! A query term's weight is its count in the query plus `extra_weight` times its count in
//! `extra` (Counter-style query term frequency, as the reference Python BM25).
//!
//! Nothing allocates once the searcher has seen its largest query and corpus: query terms,
//! cursors, accumulators and the top-k live in its buffers.

use std::collections::BinaryHeap;

use super::analyze::Analyzer;
use super::cache::TermCache;
use super::decoded::Contributions;
use super::format::{BLOCK, Scorer};
use super::kernels::{self, TermScore};
use super::read::{END, Lexical, Postings};
use crate::search::{Hit, Hits, key_score, score_key};

/// Above this many distinct query terms, plain term at a time: MaxScore's per-window
/// bookkeeping (a bound and a sort over all terms) no longer pays, and an absurd query
/// keeps a simple, bounded cost.
const MAXSCORE_MAX_TERMS: usize = 256;

/// Documents per MaxScore window: essential terms are scored term at a time into this many
/// accumulators (16 KiB: stays in L1/L2), and each term's bound is recomputed per window
/// from its block maxima, which are far tighter than its global maximum.
const WINDOW: usize = 4096;

/// MaxScore hands the rest of the corpus to term at a time when a window (not the first,
/// whose θ is still low) cost more than this share of its postings: scored essential
/// postings, candidates and probes, against the postings term at a time would score
/// there (the query's postings times the window's share of the corpus). Each of those
/// steps costs several times a posting of the SIMD term-at-a-time loop, so a window
/// that prunes this little loses to it. Char n-gram queries over a large corpus are
/// that case (many mid-frequency n-grams, few prunable: 100k synthetic passages,
/// top-100: 43% of the postings, term at a time 1.6x faster); word queries mostly prune
/// to a few percent and stay on MaxScore (there: 96% of top-10, 75% of top-100 queries,
/// at unchanged speed). 0.3 switches only where the gain is clear on x86_64.
const SWITCH_WORK: f64 = 0.3;

/// Documents per chunk when MaxScore goes on term at a time: 64 KiB of accumulators,
/// which stay in the L2 cache of any board while every term adds into them. (Tests cut
/// their small corpora into many chunks.)
const TAAT_CHUNK: u32 = if cfg!(test) { 256 } else { 16_384 };

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

/// Two-phase queries select candidates with their rarest terms whose document frequencies
/// add up to at most this share of the query's postings (at least one term). On the dev
/// set (`tools/eval/two_phase.py`, the candidates' scores then completed exactly), with
/// n-grams within words (analyzer 2) every share from 0.1 up gave the same hit@1 / hit@10
/// as the exact query and 0.05 lost up to 0.020 (recognizer finals' hit@10 0.833 → 0.813);
/// across words (analyzer 3) 0.1 loses 0.002 of typed hit@10 (0.903 → 0.901; finals
/// equal) and 0.05 up to 0.009.
const SELECT_SHARE: f64 = 0.1;

/// Two-phase queries rescore at least this many candidates with every term (more when
/// the caller asks for a larger top-k): the lexical candidates a hybrid query takes.
const RESCORE_CANDIDATES: usize = 100;

/// Upper bounds are inflated by this relative margin before pruning, so that float
/// rounding in a different summation order can never prune a document that belongs in
/// the top-k.
const BOUND_SLACK: f32 = 1e-4;

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

    /// A query too large to score exactly in time (a char-n-gram query over 100k+
    /// passages: most of its postings are common n-grams, which MaxScore cannot prune
    /// because their scores are flat). Its rarest terms, up to [`SELECT_SHARE`] of its
    /// postings, choose the [`RESCORE_CANDIDATES`] best candidates exactly; each
    /// candidate's score is then completed with every other term (a cursor per term
    /// walked once through the candidates in document order, skipping blocks by their
    /// last id), and the top-`k` is taken from those complete scores. So every returned
    /// score is the passage's exact BM25 score (summed in another order: equal up to
    /// float rounding); what may differ from the exact query is which passages are
    /// returned, only when the passage that should win shares none of the query's rare
    /// terms' evidence with the top candidates (on the dev set: never at the top-10).
    fn select_and_rescore(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        self.terms.sort_unstable_by_key(|q| (q.df, q.ord));
        let budget = (SELECT_SHARE * self.stats.postings as f64) as u64;
        let (mut sum, mut keep) = (0u64, 0usize);
        for q in &self.terms {
            if keep > 0 && sum + u64::from(q.df) > budget {
                break;
            }
            sum += u64::from(q.df);
            keep += 1;
        }
        self.rest.clear();
        self.rest.extend_from_slice(&self.terms[keep..]);
        self.terms.truncate(keep);
        let c = k.max(RESCORE_CANDIDATES).min(out.capacity());
        self.top_k(lex, c, out);
        self.stats.selecting_terms = keep;

        self.candidates.clear();
        self.candidates
            .extend(out.iter().map(|h| (h.index, h.score)));
        self.candidates.sort_unstable_by_key(|&(d, _)| d);
        self.stats.rescored = self.candidates.len() as u64;
        let (n, scorer) = (lex.doc_count(), *lex.scorer());
        let mut p = Postings::new();
        for q in &self.rest {
            let Some(t) = lex.term(q.ord) else { continue };
            p.reset(&t, n);
            for (d, score) in self.candidates.iter_mut() {
                p.advance(*d);
                if p.doc() == *d {
                    *score += q.weight * scorer.score(q.idf, p.tf(), lex.norm(*d));
                } else if p.doc() == END {
                    break;
                }
            }
        }
        self.top.reset(k.min(out.capacity()));
        for &(d, score) in &self.candidates {
            self.top.push(score, d);
        }
        self.top.drain_into(out);
    }

    /// Sum and number of the BM25 idfs of the terms of `text` the corpus knows: how
    /// rare, so how telling, a few words are. Allocates nothing after warm-up.
    pub fn idf_mass(&mut self, lex: &Lexical<'_>, text: &str) -> (f32, u32) {
        let spec = *lex.spec();
        let (mut sum, mut n) = (0.0f32, 0u32);
        let dict = &mut self.dict;
        self.analyzer.analyze(&spec, text, |t| {
            if let Some(v) = dict.lookup(lex, t).and_then(|ord| lex.term(ord)) {
                sum += v.idf;
                n += 1;
            }
        });
        (sum, n)
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
        self.stats = SearchStats::default();
        if k == 0 || out.capacity() == 0 {
            return false;
        }
        let spec = *lex.spec();
        let (raw, dict) = (&mut self.raw, &mut self.dict);
        self.analyzer.analyze(&spec, query, |t| {
            if let Some(ord) = dict.lookup(lex, t) {
                raw.push((ord, 1.0));
            }
        });
        if extra_weight > 0.0 && extra_weight.is_finite() {
            self.analyzer.analyze(&spec, extra, |t| {
                if let Some(ord) = dict.lookup(lex, t) {
                    raw.push((ord, extra_weight));
                }
            });
        }
        self.raw.sort_unstable_by_key(|&(ord, _)| ord);
        for run in self.raw.chunk_by(|a, b| a.0 == b.0) {
            let ord = run[0].0;
            let weight: f32 = run.iter().map(|&(_, w)| w).sum();
            let Some(t) = lex.term(ord) else { continue };
            self.stats.terms += 1;
            self.stats.postings += u64::from(t.df);
            self.terms.push(QTerm {
                ord,
                weight,
                idf: t.idf,
                df: t.df,
            });
        }
        !self.terms.is_empty()
    }

    fn term_at_a_time(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        let n = lex.doc_count();
        if self.acc.len() < n {
            self.acc.resize(n, 0.0);
        }
        let acc = &mut self.acc[..n];
        if let Some(decoded) = lex.decoded() {
            for q in &self.terms {
                match decoded.contributions(q.ord) {
                    Contributions::Sparse(docs, contribs) => {
                        kernels::add(docs, contribs, q.weight, acc)
                    }
                    Contributions::Dense(row) => kernels::add_row(row, q.weight, acc),
                }
            }
        } else {
            self.score_postings(lex, n);
        }
        self.stats.scored = self.stats.postings;
        self.top.reset(k.min(out.capacity()));
        self.top.take_from(&mut self.acc[..n], 0, f32::NEG_INFINITY);
        self.top.drain_into(out);
    }

    /// Term at a time from the section's compressed postings into `self.acc[..n]`.
    fn score_postings(&mut self, lex: &Lexical<'_>, n: usize) {
        let scorer = *lex.scorer();
        let norms = norms_of(lex, &mut self.norms);
        let mut p = Postings::new();
        let acc = &mut self.acc[..n];
        for q in &self.terms {
            let Some(t) = lex.term(q.ord) else { continue };
            p.reset(&t, n);
            let term = q.scoring(scorer);
            p.for_each_block(|docs, tfs| kernels::score(docs, tfs, norms, acc, term));
        }
    }

    fn maxscore(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        let n = lex.doc_count();
        let scorer = *lex.scorer();
        let mut cursors: Vec<Postings<'_>> = recycle(std::mem::take(&mut self.cursors));
        for q in &self.terms {
            let mut c = Postings::new();
            if let Some(t) = lex.term(q.ord) {
                c.reset(&t, n);
            }
            cursors.push(c);
        }
        let m = self.terms.len();
        self.hint.clear();
        self.hint.resize(m, 0);
        self.wmax.clear();
        self.wmax.resize(m, 0.0);
        self.order.clear();
        self.order.extend(0..m);
        self.upper.clear();
        self.upper.resize(m, 0.0);
        // A corpus smaller than a window: one window of its size (rounded up to 64).
        let window = match self.window {
            0 => WINDOW,
            w => w.next_multiple_of(64),
        }
        .min(n.next_multiple_of(64));
        self.wacc.clear();
        self.wacc.resize(window, 0.0);
        self.bits.clear();
        self.bits.resize(window / 64, 0);

        self.top.reset(k.min(out.capacity()));
        let mut theta = f32::NEG_INFINITY;
        let mut w0 = 0u32;
        // This query's postings (a two-phase query's selecting terms only).
        let postings: f64 = self.terms.iter().map(|q| f64::from(q.df)).sum();
        while (w0 as usize) < n {
            let w1 = w0.saturating_add(window as u32).min(n as u32);
            // This window's bound per term: its block maxima here, not its global maximum.
            for (i, c) in cursors.iter().enumerate() {
                let bm = c.window_max(&mut self.hint[i], w0, w1);
                self.wmax[i] = self.terms[i].weight * bm * (1.0 + BOUND_SLACK);
            }
            let wmax = &self.wmax;
            self.order
                .sort_unstable_by(|&a, &b| wmax[a].total_cmp(&wmax[b]).then(a.cmp(&b)));
            let mut sum = 0.0f32;
            for (j, &i) in self.order.iter().enumerate() {
                sum += wmax[i];
                self.upper[j] = sum;
            }
            // Terms order[..first] are non-essential: together they cannot lift a document
            // past θ, so documents only they contain are not even looked at (and when all
            // are, the window is skipped without decoding anything).
            let mut cut = theta;
            let mut first = self.upper.iter().take_while(|&&u| u <= cut).count();
            self.stats.windows += 1;
            self.stats.skipped_windows += u32::from(first == m);
            if first < m {
                // Essential terms, strongest first, term at a time into the window's
                // accumulators. Until the top-k is full there is no θ to prune with;
                // then the k-th best partial score of the window seeds one (partial
                // scores only grow, so k documents end at least that high), and the
                // weakest terms not yet scored may turn non-essential (first window of
                // 100k Zipf passages: 11% of the postings scored instead of 14% at top-10,
                // 14% faster).
                let k_top = self.top.k;
                let mut p = m;
                let (mut win_scored, mut estimate_at) = (0u64, k_top.max(1) as u64);
                while p > first {
                    p -= 1;
                    let i = self.order[p];
                    let (q, c) = (&self.terms[i], &mut cursors[i]);
                    let (wacc, bits) = (&mut self.wacc, &mut self.bits);
                    let mut scored = 0;
                    c.advance(w0);
                    c.for_each_below(w1, |d, tf| {
                        // d is in w0..w1 (the cursor's contract); `get_mut` keeps a slip
                        // from panicking.
                        let at = d.wrapping_sub(w0) as usize;
                        if let (Some(a), Some(b)) = (wacc.get_mut(at), bits.get_mut(at / 64)) {
                            let norm = lex.norm(d);
                            *a += q.weight * scorer.score(q.idf, tf, norm);
                            *b |= 1 << (at % 64);
                        }
                        scored += 1;
                    });
                    self.stats.scored += scored;
                    win_scored += scored;
                    if theta == f32::NEG_INFINITY && p > first && win_scored >= estimate_at {
                        estimate_at = win_scored.saturating_mul(4);
                        if let Some(lb) =
                            kth_partial(&self.bits, &self.wacc, k_top, &mut self.partials)
                        {
                            // Strictly below the seed: a document tied with it may still
                            // win its tie.
                            cut = cut.max(next_below(lb));
                            first = self.upper[..p].iter().take_while(|&&u| u <= cut).count();
                            self.stats.seeded += 1;
                        }
                    }
                }
                // Terms order[..p] were not scored: each candidate probes them.
                let first = p;
                // Candidates in document order; probe the non-essential terms, strongest
                // first, while the document can still make the top-k.
                let (upper, order) = (&self.upper[..first], &self.order[..first]);
                let non_essential = upper.last().copied().unwrap_or(0.0);
                let (mut candidates, mut probes) = (0u64, 0u64);
                for (word, bits) in self.bits.iter_mut().enumerate() {
                    let mut bits = std::mem::take(bits);
                    while bits != 0 {
                        let at = word * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let Some(acc) = self.wacc.get_mut(at) else {
                            break;
                        };
                        let mut score = std::mem::take(acc);
                        candidates += 1;
                        if score + non_essential <= theta.max(cut) {
                            continue;
                        }
                        let d = w0 + at as u32;
                        let mut norm = None;
                        for (&bound, &i) in upper.iter().zip(order).rev() {
                            if score + bound <= theta.max(cut) {
                                break;
                            }
                            let c = &mut cursors[i];
                            c.advance(d);
                            probes += 1;
                            if c.doc() == d {
                                let norm = *norm.get_or_insert_with(|| lex.norm(d));
                                let q = &self.terms[i];
                                score += q.weight * scorer.score(q.idf, c.tf(), norm);
                            }
                        }
                        // θ is −∞ until the top-k is full; after that a document at θ loses
                        // the tie to the (smaller) ones already kept.
                        if score > theta && self.top.push(score, d) {
                            theta = self.top.threshold();
                        }
                    }
                }
                self.stats.candidates += candidates;
                self.stats.probes += probes;
                // Pruning too little (and not just because θ is still low in the first
                // window): the rest of the corpus term at a time.
                let work = (win_scored + candidates + probes) as f64;
                let share = postings * f64::from(w1 - w0) / n as f64;
                if w0 > 0 && (w1 as usize) < n && work > SWITCH_WORK * share {
                    self.stats.switched_at = Some(w1);
                    self.rest_term_at_a_time(lex, &mut cursors, w1, theta);
                    break;
                }
            }
            w0 = w1;
        }
        self.top.drain_into(out);
        self.cursors = recycle(cursors);
    }

    /// Term at a time from document `from` to the end, into the top-k MaxScore has built
    /// from the documents before it (θ its current threshold): every cursor from `from`
    /// on, through the SIMD kernels, a chunk of documents at a time.
    fn rest_term_at_a_time(
        &mut self,
        lex: &Lexical<'_>,
        cursors: &mut [Postings<'_>],
        from: u32,
        theta: f32,
    ) {
        let n = lex.doc_count();
        let chunk = (TAAT_CHUNK as usize).min(n);
        if self.acc.len() < chunk {
            self.acc.resize(chunk, 0.0);
        }
        let scorer = *lex.scorer();
        let norms = norms_of(lex, &mut self.norms);
        let mut scored = 0u64;
        let mut theta = theta;
        // A block's ids made relative to the chunk's first document.
        let mut local = [0u32; BLOCK];
        // A chunk of documents at a time, every term, into accumulators for that chunk
        // only, which stay in the L2 cache from one chunk to the next; one per document
        // (4 MiB for 1M passages) had each chunk's come from memory and go back (1M
        // passages: ~10% faster; 2026-12-04, AMD EPYC, `cargo bench --profile measure --bench
        // lexical`; docs/benchmarks.md, lexical).
        let mut c0 = from;
        while (c0 as usize) < n {
            let c1 = c0.saturating_add(TAAT_CHUNK).min(n as u32);
            // (A norm table shorter than the corpus, only from a corrupt file, scores
            // nothing rather than panicking.)
            let (acc, norms) = (
                &mut self.acc[..(c1 - c0) as usize],
                norms.get(c0 as usize..c1 as usize).unwrap_or(&[]),
            );
            warm(norms);
            for (q, c) in self.terms.iter().zip(cursors.iter_mut()) {
                let term = q.scoring(scorer);
                c.advance(c0);
                c.for_each_run_below(c1, |docs, tfs| {
                    scored += docs.len() as u64;
                    // Ids are in c0..c1 (the cursor's contract); one that is not wraps
                    // past the chunk, and the kernel skips it.
                    let local = &mut local[..docs.len().min(BLOCK)];
                    for (l, &d) in local.iter_mut().zip(docs) {
                        *l = d.wrapping_sub(c0);
                    }
                    kernels::score(local, tfs, norms, acc, term);
                });
            }
            self.top.take_from(acc, c0, theta);
            theta = self.top.threshold();
            c0 = c1;
        }
        self.stats.scored += scored;
    }
}

/// The length norms of every document: the index's precomputed ones, or computed into
/// `spare` for a view opened without them.
fn norms_of<'a>(lex: &Lexical<'a>, spare: &'a mut Vec<f32>) -> &'a [f32] {
    match lex.norms() {
        Some(norms) => norms,
        None => {
            let n = lex.doc_count();
            spare.clear();
            spare.extend((0..n as u32).map(|d| lex.norm(d)));
            &spare[..]
        }
    }
}

/// Reads one length norm per cache line of `norms`, in order, so that the chunk's norms
/// are in cache before its postings look them up in random order: a sequential sweep
/// the hardware prefetcher streams, instead of a wait for memory at each line's first
/// lookup (1M passages: the hand-over ~15% faster, 100k unchanged; 2026-12-04, AMD EPYC,
/// `cargo bench --profile measure --bench lexical`; docs/benchmarks.md, lexical).
fn warm(norms: &[f32]) {
    let line = 64 / std::mem::size_of::<f32>();
    let seen = norms.iter().step_by(line).fold(0, |x, n| x ^ n.to_bits());
    std::hint::black_box(seen);
}

/// The `k`-th largest accumulator among the documents set in `bits` (`None` if fewer
/// than `k`), using `scratch`.
fn kth_partial(bits: &[u64], acc: &[f32], k: usize, scratch: &mut Vec<f32>) -> Option<f32> {
    scratch.clear();
    for (word, &b) in bits.iter().enumerate() {
        let mut b = b;
        while b != 0 {
            let at = word * 64 + b.trailing_zeros() as usize;
            b &= b - 1;
            scratch.extend(acc.get(at));
        }
    }
    if k == 0 || scratch.len() < k {
        return None;
    }
    let (_, kth, _) = scratch.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    Some(*kth)
}

/// The largest float strictly below `x` (for finite positive `x`; `x` itself otherwise).
fn next_below(x: f32) -> f32 {
    if x.is_finite() && x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        x
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

/// Sums [`TopScores::take_from`] compares with θ at once before looking at any one.
const TAKE_BLOCK: usize = 16;

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
        // `take_from` collects up to 2k before it selects.
        self.heap.reserve(2 * k);
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

    /// Keeps the best of the term-at-a-time sums `acc` (document `base + position`) over
    /// `theta` and the top-k so far, and zeroes them. Every contribution is > 0 (idf > 0,
    /// tf ≥ 1, weight > 0), so a document was touched exactly when its sum is: no
    /// separate "seen" mark per posting. Documents come in ascending order, after any
    /// already kept, so one tied with the k-th best loses the tie: only a strictly
    /// higher sum can enter, and most are rejected sixteen at a time, by one vector
    /// compare with θ ([`TAKE_BLOCK`]: a two-phase query over 1M passages, which takes
    /// a million sums, 15-25% faster; 2026-12-04, AMD EPYC, `cargo bench --bench lexical`;
    /// docs/benchmarks.md, lexical).
    ///
    /// The ones that pass are collected unordered, and each time 2k have gathered the
    /// best k are selected (`select_nth_unstable`, linear) and θ rises to the k-th: O(1)
    /// a document instead of a heap update (log k) for each, which mattered at top-100
    /// over short partials, whose sums pass θ often (a third of such a query's time
    /// went to the heap).
    fn take_from(&mut self, acc: &mut [f32], base: u32, theta: f32) {
        let k = self.k;
        let mut theta = theta.max(self.threshold()).max(0.0);
        let mut items = std::mem::take(&mut self.heap).into_vec();
        if k > 0 {
            let mut keep = |at: usize, a: f32, theta: &mut f32| {
                if a > *theta {
                    items.push((score_key(a), base.wrapping_add(at as u32)));
                    if items.len() >= 2 * k {
                        *theta = best_k(&mut items, k).max(0.0);
                    }
                }
            };
            // Sixteen sums at a time, one vector compare (the fold has no early exit, so
            // it vectorises on every target): most blocks hold none over θ.
            let blocks = acc.chunks_exact(TAKE_BLOCK);
            let rest = blocks.len() * TAKE_BLOCK;
            for (b, block) in blocks.enumerate() {
                if block.iter().fold(false, |any, &a| any | (a > theta)) {
                    for (j, &a) in block.iter().enumerate() {
                        keep(b * TAKE_BLOCK + j, a, &mut theta);
                    }
                }
            }
            for (at, &a) in acc.iter().enumerate().skip(rest) {
                keep(at, a, &mut theta);
            }
            if items.len() > k {
                best_k(&mut items, k);
            }
        }
        self.heap = BinaryHeap::from(items);
        acc.fill(0.0);
    }

    /// Best first into `out`; leaves the heap empty (its allocation kept).
    fn drain_into(&mut self, out: &mut Hits) {
        out.clear();
        let mut items = std::mem::take(&mut self.heap).into_vec();
        items.sort_unstable();
        for (key, doc) in items.drain(..) {
            let _ = out.push(Hit {
                index: doc,
                score: key_score(key),
            });
        }
        self.heap = BinaryHeap::from(items);
    }
}

/// Keeps the best `k` (smallest `(key, doc)`) of `items`, unordered, and returns the
/// score of the k-th. `items` holds more than `k` > 0.
fn best_k(items: &mut Vec<(u32, u32)>, k: usize) -> f32 {
    let (_, kth, _) = items.select_nth_unstable(k - 1);
    let kth = key_score(kth.0);
    items.truncate(k);
    kth
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// The top-k of `sums` by the rule `take_from` keeps: higher sum first, then lower
    /// document; zero sums (untouched documents) never.
    fn reference(sums: &[f32], k: usize) -> Vec<(u32, u32)> {
        let mut all: Vec<(u32, u32)> = (0u32..)
            .zip(sums)
            .filter(|&(_, &s)| s > 0.0)
            .map(|(d, &s)| (d, s.to_bits()))
            .collect();
        all.sort_by(|a, b| {
            f32::from_bits(b.1)
                .total_cmp(&f32::from_bits(a.1))
                .then(a.0.cmp(&b.0))
        });
        all.truncate(k);
        all
    }

    #[test]
    fn the_top_k_of_accumulators_is_exact_with_ties_and_in_chunks() {
        let mut rng = Rng::new(0x70b5);
        let mut top = TopScores::default();
        let mut out = Hits::new();
        for round in 0..200 {
            let n = 1 + rng.below(3000) as usize;
            // Few distinct values (many ties), rising sums (θ passed often: every
            // selection step runs), or zeros with a few hits.
            let sums: Vec<f32> = (0..n)
                .map(|d| match round % 3 {
                    0 => rng.below(6) as f32 * 0.5,
                    1 => d as f32 * 0.01 + rng.below(3) as f32,
                    _ => (rng.below(50) == 0) as u32 as f32 * (1.0 + rng.below(4) as f32),
                })
                .collect();
            let k = [1usize, 3, 10, 100, 200][round % 5];
            // Whole, or in chunks after a head start (as MaxScore hands over).
            let mut acc = sums.clone();
            top.reset(k);
            let mut from = 0;
            while from < n {
                let to = if round % 2 == 0 {
                    n
                } else {
                    (from + 1 + rng.below(700) as usize).min(n)
                };
                let theta = top.threshold();
                top.take_from(&mut acc[from..to], from as u32, theta);
                from = to;
            }
            assert!(
                acc.iter().all(|&a| a == 0.0),
                "round {round}: sums left behind"
            );
            top.drain_into(&mut out);
            let got: Vec<(u32, u32)> = out.iter().map(|h| (h.index, h.score.to_bits())).collect();
            assert_eq!(
                got,
                reference(&sums, k),
                "round {round}, {n} documents, k {k}"
            );
        }
    }
}
