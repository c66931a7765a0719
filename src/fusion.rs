//! Fusion of two rankings of the same candidates: BM25 (lexical) and int8 cosine (dense).
//!
//! Why two rules: names and rare words decide spoken questions and BM25 over character
//! n-grams catches them, misspelt; the dense model catches paraphrase. Neither score
//! scale means anything to the other (BM25 is unbounded, cosines sit in a narrow band),
//! so they are fused either on min-max-normalised scores (convex combination, weight
//! `lexical_weight`) or on ranks only (reciprocal-rank fusion, which needs no weight).
//!
//! Rules, on one candidate set (lexical top-C ∪ binary top-C of one query):
//! - **convex**: each score is min-max normalised over the candidates that have it
//!   (dense: every candidate with a cosine; lexical: the candidates in the lexical
//!   top-C); a candidate without a lexical score gets 0; when all scores of a list are
//!   equal, each normalises to 1 (they are all the best), so nothing is ever NaN.
//!   fused = w · lexical + (1 − w) · dense.
//! - **rrf**: fused = Σ over the lists holding the candidate of 1 / ([`RRF_K`] + rank),
//!   rank 1-based by descending score, tied scores sharing the best rank of their group.
//!
//! Ties in the fused score are broken by the dense score, then BM25, then passage
//! position, so results are deterministic. Pure functions on fixed-capacity buffers:
//! nothing here allocates.

use heapless::Vec as FixedVec;

use crate::scan::MAX_K;

/// The `k` of reciprocal-rank fusion (Cormack et al. 2009's constant).
pub const RRF_K: f32 = 60.0;

/// Most candidates one fusion handles: a lexical top-[`MAX_K`] and a binary top-[`MAX_K`].
pub const MAX_UNION: usize = 2 * MAX_K;

/// How the two rankings are combined. Parsed once, from the command line (`--fusion`:
/// `flags::choices`) or by serde (the `fusion` config key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionRule {
    /// Convex combination of min-max-normalised scores (weight `lexical_weight`).
    #[default]
    Convex,
    /// Reciprocal-rank fusion (ranks only; `lexical_weight` is not used).
    Rrf,
}

impl FusionRule {
    pub fn as_str(self) -> &'static str {
        match self {
            FusionRule::Convex => "convex",
            FusionRule::Rrf => "rrf",
        }
    }
}

/// A fusion rule and its weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusion {
    pub rule: FusionRule,
    /// Weight of the lexical score in the convex combination, in `0..=1`.
    pub lexical_weight: f32,
}

/// Default weight of the lexical score. Chosen on the dev set (Spoken-SQuAD, 5,351
/// typed questions and the finals of 150 recorded recognizer streams): hit@1 and
/// hit@10 stay within 0.01-0.02 of their best from 0.3 to 0.6 on both sets; 0.5 is
/// the middle of that plateau (0.4 is ahead by less than the noise on the typed set,
/// behind on the finals). Convex beat RRF by 0.08 hit@1 on both sets.
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 0.5;

impl Default for Fusion {
    fn default() -> Self {
        Fusion {
            rule: FusionRule::Convex,
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
        }
    }
}

/// One candidate: its scores from each retriever that has it, and the fused score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// Passage position in the index.
    pub index: u32,
    /// The score results are ranked by (fused, or the single retriever's own score).
    pub score: f32,
    /// int8 cosine, when the dense side scored it.
    pub dense: Option<f32>,
    /// BM25, when the candidate is in the lexical top-C.
    pub bm25: Option<f32>,
}

impl Scored {
    pub fn new(index: u32, dense: Option<f32>, bm25: Option<f32>) -> Self {
        Scored {
            index,
            score: 0.0,
            dense,
            bm25,
        }
    }
}

/// Scratch of [`fuse`]: the rank order of one list (positions into the candidates).
#[derive(Debug, Default)]
pub struct Fuser {
    order: FixedVec<u16, MAX_UNION>,
}

impl Fuser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes every candidate's fused score into its `score` (at most [`MAX_UNION`]
    /// candidates are fused; any beyond that get `score` −∞).
    pub fn fuse(&mut self, fusion: Fusion, cands: &mut [Scored]) {
        let n = cands.len().min(MAX_UNION);
        for c in cands.iter_mut() {
            c.score = 0.0;
        }
        for c in cands.iter_mut().skip(n) {
            c.score = f32::NEG_INFINITY;
        }
        let cands = &mut cands[..n];
        match fusion.rule {
            FusionRule::Convex => {
                let w = fusion.lexical_weight;
                add_normalised(cands, |c| c.dense, 1.0 - w);
                add_normalised(cands, |c| c.bm25, w);
            }
            FusionRule::Rrf => {
                self.add_rrf(cands, |c| c.dense);
                self.add_rrf(cands, |c| c.bm25);
            }
        }
    }

    /// Adds 1 / (RRF_K + rank) of the list `get` picks out of the candidates.
    fn add_rrf(&mut self, cands: &mut [Scored], get: impl Fn(&Scored) -> Option<f32>) {
        self.order.clear();
        for (i, c) in cands.iter().enumerate() {
            if get(c).is_some_and(f32::is_finite) {
                // Cannot fail: at most MAX_UNION candidates are fused.
                let _ = self.order.push(i as u16);
            }
        }
        {
            let score = |i: u16| get(&cands[i as usize]).unwrap_or(f32::NEG_INFINITY);
            self.order
                .sort_unstable_by(|&a, &b| score(b).total_cmp(&score(a)));
        }
        let mut rank = 0;
        let mut prev = f32::NAN;
        for (pos, &i) in self.order.iter().enumerate() {
            let c = &mut cands[i as usize];
            let s = get(c).unwrap_or(f32::NEG_INFINITY);
            if s != prev {
                rank = pos + 1; // ties share the best rank of their group
                prev = s;
            }
            c.score += 1.0 / (RRF_K + rank as f32);
        }
    }
}

/// Adds `weight` · the min-max-normalised score of the list `get` picks out (absent: 0).
fn add_normalised(cands: &mut [Scored], get: impl Fn(&Scored) -> Option<f32>, weight: f32) {
    if weight == 0.0 {
        return;
    }
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for s in cands.iter().filter_map(&get).filter(|s| s.is_finite()) {
        lo = lo.min(s);
        hi = hi.max(s);
    }
    let range = hi - lo;
    for c in cands.iter_mut() {
        if let Some(s) = get(c).filter(|s| s.is_finite()) {
            let norm = if range > 0.0 && range.is_finite() {
                (s - lo) / range
            } else {
                1.0 // all equal: every one of them is the best
            };
            c.score += weight * norm;
        }
    }
}

/// Orders candidates best first: fused score, then dense, then BM25, then position.
pub fn sort_best_first(cands: &mut [Scored]) {
    let key = |v: Option<f32>| v.unwrap_or(f32::NEG_INFINITY);
    cands.sort_unstable_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(key(b.dense).total_cmp(&key(a.dense)))
            .then(key(b.bm25).total_cmp(&key(a.bm25)))
            .then(a.index.cmp(&b.index))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f32 = 1e-6;

    fn fused(fusion: Fusion, input: &[(u32, Option<f32>, Option<f32>)]) -> Vec<Scored> {
        let mut c: Vec<Scored> = input
            .iter()
            .map(|&(i, d, b)| Scored::new(i, d, b))
            .collect();
        Fuser::new().fuse(fusion, &mut c);
        sort_best_first(&mut c);
        c
    }

    fn convex(w: f32) -> Fusion {
        Fusion {
            rule: FusionRule::Convex,
            lexical_weight: w,
        }
    }

    const RRF: Fusion = Fusion {
        rule: FusionRule::Rrf,
        lexical_weight: 0.5,
    };

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < EPS
    }

    #[test]
    fn convex_normalises_each_list_and_absent_lexical_counts_zero() {
        // dense 0.2..0.6 → 0, 0.5, 1; bm25 over the two that have it: 10 → 1, 4 → 0.
        let out = fused(
            convex(0.5),
            &[
                (7, Some(0.6), None),
                (3, Some(0.4), Some(10.0)),
                (9, Some(0.2), Some(4.0)),
            ],
        );
        let ids: Vec<u32> = out.iter().map(|c| c.index).collect();
        assert_eq!(ids, [3, 7, 9]);
        assert!(close(out[0].score, 0.5 * 0.5 + 0.5 * 1.0), "{out:?}");
        assert!(close(out[1].score, 0.5), "{out:?}");
        assert!(close(out[2].score, 0.0), "{out:?}");
        // The raw scores ride along untouched.
        assert_eq!((out[0].dense, out[0].bm25), (Some(0.4), Some(10.0)));
    }

    #[test]
    fn convex_weight_zero_is_dense_order_and_one_is_lexical_order() {
        let input = [
            (1, Some(0.9), Some(1.0)),
            (2, Some(0.5), Some(8.0)),
            (3, Some(0.1), Some(5.0)),
        ];
        let ids = |f| fused(f, &input).iter().map(|c| c.index).collect::<Vec<_>>();
        assert_eq!(ids(convex(0.0)), [1, 2, 3]);
        assert_eq!(ids(convex(1.0)), [2, 3, 1]);
        // Weight 1 with candidates absent from the lexical list: they tie at 0 and
        // the dense score orders them.
        let out = fused(
            convex(1.0),
            &[
                (4, Some(0.1), None),
                (5, Some(0.7), None),
                (6, Some(0.3), Some(2.0)),
            ],
        );
        let got: Vec<u32> = out.iter().map(|c| c.index).collect();
        assert_eq!(got, [6, 5, 4]);
    }

    #[test]
    fn single_candidate_and_all_equal_scores_give_no_nan() {
        for f in [convex(0.3), RRF] {
            let out = fused(f, &[(5, Some(0.42), Some(3.0))]);
            assert_eq!(out.len(), 1);
            assert!(out[0].score.is_finite(), "{f:?}: {out:?}");
            let out = fused(
                f,
                &[
                    (1, Some(0.5), Some(2.0)),
                    (2, Some(0.5), Some(2.0)),
                    (3, Some(0.5), Some(2.0)),
                ],
            );
            assert!(out.iter().all(|c| c.score.is_finite()), "{f:?}: {out:?}");
            assert!(out.iter().all(|c| close(c.score, out[0].score)));
            let ids: Vec<u32> = out.iter().map(|c| c.index).collect();
            assert_eq!(ids, [1, 2, 3], "full ties: by position");
        }
        // All-equal scores normalise to 1 each (convex): w·1 + (1−w)·1 = 1.
        let out = fused(
            convex(0.3),
            &[(1, Some(0.5), Some(2.0)), (2, Some(0.5), Some(2.0))],
        );
        assert!(close(out[0].score, 1.0), "{out:?}");
    }

    #[test]
    fn empty_lists_and_one_empty_list() {
        for f in [convex(0.5), RRF] {
            assert!(fused(f, &[]).is_empty());
            // No lexical scores at all (no term known): the dense order alone.
            let out = fused(f, &[(1, Some(0.2), None), (2, Some(0.8), None)]);
            let ids: Vec<u32> = out.iter().map(|c| c.index).collect();
            assert_eq!(ids, [2, 1], "{f:?}");
            assert!(out.iter().all(|c| c.score.is_finite()));
            // No dense scores (no embedding yet): the lexical order alone.
            let out = fused(f, &[(1, None, Some(1.0)), (2, None, Some(9.0))]);
            let ids: Vec<u32> = out.iter().map(|c| c.index).collect();
            assert_eq!(ids, [2, 1], "{f:?}");
        }
    }

    #[test]
    fn rrf_sums_reciprocal_ranks_and_ties_share_a_rank() {
        // dense ranks: 1→1, 2→2, 3→3; lexical: 3→1, 2 and 1 tie → both rank 2.
        let out = fused(
            RRF,
            &[
                (1, Some(0.9), Some(1.0)),
                (2, Some(0.8), Some(1.0)),
                (3, Some(0.1), Some(7.0)),
                (4, Some(0.0), None),
            ],
        );
        let score = |i: u32| out.iter().find(|c| c.index == i).unwrap().score;
        let r = |rank: f32| 1.0 / (RRF_K + rank);
        assert!(close(score(1), r(1.0) + r(2.0)));
        assert!(close(score(2), r(2.0) + r(2.0)));
        assert!(close(score(3), r(3.0) + r(1.0)));
        assert!(close(score(4), r(4.0)), "absent from one list: one term");
        let ids: Vec<u32> = out.iter().map(|c| c.index).collect();
        assert_eq!(ids, [1, 3, 2, 4]);
        // The weight does not change RRF.
        let other = fused(
            Fusion {
                lexical_weight: 0.9,
                ..RRF
            },
            &[(1, Some(0.9), Some(1.0)), (3, Some(0.1), Some(7.0))],
        );
        assert!(close(other[0].score, other[1].score));
    }

    #[test]
    fn non_finite_inputs_never_make_nan() {
        for f in [convex(0.5), RRF] {
            let out = fused(
                f,
                &[
                    (1, Some(f32::NAN), Some(f32::INFINITY)),
                    (2, Some(0.3), Some(1.0)),
                ],
            );
            assert!(out.iter().all(|c| !c.score.is_nan()), "{f:?}: {out:?}");
            assert_eq!(out[0].index, 2);
        }
    }
}
