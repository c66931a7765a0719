//! MaxScore over windows of documents (Turtle & Flood 1995, in the form of Lucene's
//! `MaxScoreBulkScorer`; the plan is in the parent module's doc): per window, each term's
//! bound from its block maxima, the essential terms scored term at a time, the candidates
//! probing the non-essential ones while they can still beat θ, and the hand-over to term
//! at a time when a window prunes too little ([`SWITCH_WORK`]).

use super::{LexicalSearcher, WINDOW};
use crate::hits::Hits;
use crate::lexical::postings::Postings;
use crate::lexical::read::Lexical;

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

/// Upper bounds are inflated by this relative margin before pruning, so that float
/// rounding in a different summation order can never prune a document that belongs in
/// the top-k.
const BOUND_SLACK: f32 = 1e-4;

impl LexicalSearcher {
    pub(super) fn maxscore(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
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
