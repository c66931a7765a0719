//! The top-k of a query: a bounded max-heap by score (ties to the smaller document),
//! filled document by document (MaxScore, two phases) or from term-at-a-time sums in
//! bulk ([`TopScores::take_from`]), and θ, the score a document must beat to enter.

use std::collections::BinaryHeap;

use crate::hits::{Hit, Hits, key_score, score_key};

/// Sums [`TopScores::take_from`] compares with θ at once before looking at any one.
const TAKE_BLOCK: usize = 16;

/// Top-k by score, ties broken by smaller document id (so the result does not depend on
/// the order documents are pushed in). A max-heap of `(key, doc)`: the root is the worst.
#[derive(Debug, Default)]
pub(super) struct TopScores {
    pub(super) heap: BinaryHeap<(u32, u32)>,
    pub(super) k: usize,
}

impl TopScores {
    pub(super) fn reset(&mut self, k: usize) {
        self.heap.clear();
        self.k = k;
        // `take_from` collects up to 2k before it selects.
        self.heap.reserve(2 * k);
    }

    /// Keeps `(score, doc)` if it is among the k best so far; true if kept.
    #[inline]
    pub(super) fn push(&mut self, score: f32, doc: u32) -> bool {
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
    pub(super) fn threshold(&self) -> f32 {
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
    pub(super) fn take_from(&mut self, acc: &mut [f32], base: u32, theta: f32) {
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
    pub(super) fn drain_into(&mut self, out: &mut Hits) {
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
