//! How sure is the top-1? A calibrated probability, so an agent can say "I'm not sure"
//! instead of reading out a guess.
//!
//! A voice agent that always gets ten passages cannot tell a confident hit from a guess,
//! and Stream RAG insists it must expose that. The signal that separates them here is
//! the shape of the result list itself: a right top-1 usually stands clear of the
//! second and third passages, a wrong one ties with them. So the confidence is a
//! logistic function (Platt scaling) of two gaps of the returned scores s1 ≥ s2 ≥ s3:
//! `margin = s1 − s2` and `gap3 = s1 − s3`, divided by s1 for BM25 scores (they grow
//! with the query's length and the corpus; a relative gap does not), raw for cosines
//! and fused scores (fixed ranges). It costs three subtractions per utterance and needs
//! no model.
//!
//! The coefficients were fitted per retriever on the typed questions of this project's
//! dev set (Spoken-SQuAD) by `tools/eval/calibrate.py`, which also measures them on
//! recorded recognizer streams the fit never saw (AUROC and expected calibration error
//! in docs/benchmarks.md). Other corpora shift the calibration; the ranking (AUROC) is
//! what travels best, so the threshold is a setting (`low_evidence_threshold`).

use crate::ranking::{Ranked, Retriever};

/// Logistic coefficients (from `tools/eval/calibrate.py`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Platt {
    intercept: f32,
    margin: f32,
    gap3: f32,
    /// Of the top-1's dense cosine (0 for the lexical retriever, which has none).
    cosine: f32,
}

const DENSE: Platt = Platt {
    intercept: -4.9344,
    margin: 9.1802,
    gap3: 15.0134,
    cosine: 5.6761,
};
// Lexical and hybrid refitted on indexes of analyzer version 3 (n-grams across words).
const LEXICAL: Platt = Platt {
    intercept: -2.5474,
    margin: 5.4935,
    gap3: 7.3583,
    cosine: 0.0,
};
const HYBRID: Platt = Platt {
    intercept: -5.1363,
    margin: 6.0896,
    gap3: 5.7794,
    cosine: 6.5107,
};

/// How many results the confidence reads (best first): however few the caller asks
/// for, a search ranks at least this many, computes the confidence, then returns the `k`
/// asked for. With one result there would be no gap to measure, and every top-1 would
/// look like a clear winner.
pub const DEPTH: usize = 3;

/// The number of results to rank for a caller who asked for `k`.
pub fn depth(k: usize) -> usize {
    k.max(DEPTH)
}

/// Below this confidence a result is flagged `evidence: "low"` by default: the top-1 is
/// then more likely wrong than right.
pub const DEFAULT_LOW_EVIDENCE_THRESHOLD: f32 = 0.5;

/// Probability that the top-1 of `scores` (best first, as returned) is relevant, given
/// the top-1's dense cosine (`None` when it has none: counts as 0); `None` for an empty
/// list. Non-finite values count as 0, so the answer is always a number in [0, 1].
pub fn confidence(retriever: Retriever, scores: &[f32], top1_cosine: Option<f32>) -> Option<f32> {
    let s = |i: usize| {
        scores
            .get(i)
            .copied()
            .filter(|x| x.is_finite())
            .unwrap_or(0.0)
    };
    if scores.is_empty() {
        return None;
    }
    let (s1, s2, s3) = (s(0), s(1).min(s(0)), s(2).min(s(0)));
    let (p, scale) = match retriever {
        Retriever::Dense => (DENSE, 1.0),
        Retriever::Hybrid => (HYBRID, 1.0),
        Retriever::Lexical => (LEXICAL, if s1 > 0.0 { s1 } else { 1.0 }),
    };
    let cosine = top1_cosine.filter(|c| c.is_finite()).unwrap_or(0.0);
    let z =
        p.intercept + p.margin * (s1 - s2) / scale + p.gap3 * (s1 - s3) / scale + p.cosine * cosine;
    Some(1.0 / (1.0 + (-z).exp()))
}

/// [`confidence`] of a result list as the searchers return it (best first): its first
/// three scores and the top-1's dense cosine.
pub fn of_ranked(retriever: Retriever, hits: &Ranked) -> Option<f32> {
    let mut top = [0.0f32; 3];
    let n = hits.len().min(3);
    for (t, h) in top.iter_mut().zip(hits.iter()) {
        *t = h.score;
    }
    confidence(
        retriever,
        &top[..n],
        hits.iter().next().and_then(|h| h.dense),
    )
}

/// Logistic coefficients of the confidence with the reader: intercept, the retrieval
/// confidence's log-odds, the reader's best logit over the (final) top-1 passage's
/// sentences, its best logit over every sentence it read, and whether the reader moved
/// the top-1 ([`crate::context::promote`]). Fitted on 1,200 dev typed questions (hybrid
/// retriever; docs/confidence.md): the top-1's own best sentence raises it, a better
/// sentence elsewhere lowers it.
const READER: [f32; 5] = [0.8336, 0.4801, 0.616, -0.4857, -0.6097];
/// The reader's logit on the top-1's best sentence at which it alone bounds the
/// confidence at one half: the confidence is at most `σ(top1 − READER_BOUND)`, so that a
/// top-1 the reader finds nothing in is `low` even when the retrieval is sure of it: an
/// off-topic question whose words a passage shares ("How do I get to the train
/// station?", 0.71 `ok` without the bound), a follow-up the topic has no answer to.
/// Dev (2026-12-07, `primd search`), bound at none / −6 / −4 / −2: off-topic
/// interjections in conversations `low` 0.881 / 0.924 / 0.975 / 0.975; unanswerable
/// follow-ups 0.442 / 0.465 / 0.535 / 0.589; right first turns flagged `low` 0.113 /
/// 0.118 / 0.126 / 0.161; one-article (kiosk) corpora, off-topic questions passed `ok`
/// 0.021 / 0.004 / 0.002 / 0.002 and right answers flagged `low` 0.053 / 0.066 / 0.078 /
/// 0.102; recognizer finals' right answers flagged `low` 0.167 / 0.204 / 0.259 / 0.278
/// (a garbled question reads low against its own answer). −6: off-topic questions go
/// `low` at the least cost to right answers spoken through a recognizer.
const READER_BOUND: f32 = -6.0;
/// A logit for "nothing read" (no sentence of that passage read): the reader's range
/// is about -12..9.
const UNREAD: f32 = -12.0;

/// The confidence that the top-1 answers, from the retrieval confidence `retrieval`, what
/// the reader said of the top-1 passage's sentences (`top1`) and of all it read (`best`),
/// and whether it moved the top-1 (`promoted`: `top1` is then that passage's); NaN
/// logits count as [`UNREAD`]. `None` without a retrieval confidence (no results).
pub fn with_reader(retrieval: Option<f32>, top1: f32, best: f32, promoted: bool) -> Option<f32> {
    let c = retrieval?.clamp(1e-6, 1.0 - 1e-6);
    let read = |x: f32| if x.is_finite() { x } else { UNREAD };
    let z = READER[0]
        + READER[1] * (c / (1.0 - c)).ln()
        + READER[2] * read(top1)
        + READER[3] * read(best)
        + READER[4] * f32::from(u8::from(promoted));
    let fused = 1.0 / (1.0 + (-z).exp());
    // The reader alone bounds it: a top-1 none of whose sentences it reads as an answer
    // is not confident, however confident the retrieval (its terms may be the topic's).
    let bound = if top1.is_finite() {
        1.0 / (1.0 + (READER_BOUND - top1).exp())
    } else {
        1.0
    };
    Some(fused.min(bound))
}

/// Whether the top-1 should not be presented as the answer: below `threshold`, or no
/// result at all.
pub fn is_low(confidence: Option<f32>, threshold: f32) -> bool {
    !confidence.is_some_and(|c| c >= threshold)
}

/// `"ok"` or `"low"`: what the agent should do with the top-1 (the JSON value).
pub fn label(low: bool) -> &'static str {
    if low { "low" } else { "ok" }
}

/// [`label`] of [`is_low`].
pub fn evidence(confidence: Option<f32>, threshold: f32) -> &'static str {
    label(is_low(confidence, threshold))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_lifts_an_answered_top1_and_sinks_an_unanswered_one() {
        // A borderline retrieval (0.35, "low" alone), as "When does the museum open?"
        // on the demo: the top-1's sentence answers it (logit 6), nothing else better.
        let up = with_reader(Some(0.35), 6.0, 6.0, false).unwrap();
        assert!(up > 0.5, "{up}");
        // A confident retrieval whose passages the reader finds nothing in.
        let down = with_reader(Some(0.9), -11.0, -10.0, false).unwrap();
        assert!(down < 0.5, "{down}");
        // A better sentence in another passage than in the top-1: less sure of it.
        let a = with_reader(Some(0.6), 1.0, 1.0, false).unwrap();
        let b = with_reader(Some(0.6), 1.0, 7.0, false).unwrap();
        assert!(b < a, "{b} vs {a}");
        assert_eq!(with_reader(None, 5.0, 5.0, false), None);
        let unread = with_reader(Some(0.7), f32::NAN, f32::NAN, true).unwrap();
        assert!(unread.is_finite() && (0.0..=1.0).contains(&unread));
        // A retrieval sure of a passage the reader finds no answer in ("How do I get to
        // the train station?" to an encyclopedia): low, whatever else it read.
        let off = with_reader(Some(0.97), -7.3, -6.7, false).unwrap();
        assert!(off < 0.5, "{off}");
        // The bound leaves an answering top-1 alone.
        let fused = with_reader(Some(0.9), 5.0, 5.0, false).unwrap();
        assert!(fused > 0.9, "{fused}");
    }

    #[test]
    fn a_clear_winner_is_confident_and_a_three_way_tie_is_not() {
        for r in Retriever::ALL {
            let (clear, tie) = match r {
                Retriever::Lexical => ([40.0, 12.0, 10.0], [20.0, 19.9, 19.8]),
                _ => ([0.9, 0.5, 0.45], [0.6, 0.59, 0.58]),
            };
            let c = confidence(r, &clear, Some(0.7)).unwrap();
            let t = confidence(r, &tie, Some(0.5)).unwrap();
            assert!(c > 0.9, "{r:?}: clear winner {c}");
            assert!(t < 0.3, "{r:?}: tie {t}");
            assert_eq!(evidence(Some(c), DEFAULT_LOW_EVIDENCE_THRESHOLD), "ok");
            assert_eq!(evidence(Some(t), DEFAULT_LOW_EVIDENCE_THRESHOLD), "low");
        }
    }

    #[test]
    fn confidence_grows_with_the_margin_and_with_the_cosine() {
        let mut last = 0.0;
        for m in [0.0f32, 0.02, 0.05, 0.1, 0.2, 0.4] {
            let c = confidence(Retriever::Hybrid, &[0.8, 0.8 - m, 0.8 - m], Some(0.5)).unwrap();
            assert!(c > last, "margin {m}: {c} after {last}");
            last = c;
        }
        let mut last = 0.0;
        for cos in [0.0f32, 0.2, 0.4, 0.6, 0.8] {
            let c = confidence(Retriever::Hybrid, &[1.0, 0.7, 0.6], Some(cos)).unwrap();
            assert!(c > last, "cosine {cos}: {c} after {last}");
            last = c;
        }
    }

    #[test]
    fn a_clear_winner_far_in_meaning_is_flagged() {
        // The hybrid's min-max fusion gives an off-topic question a clear winner too;
        // its low cosine is what flags it.
        // (The scores and cosine `primd search` gave on the demo index for "what is the
        // boiling point of tungsten"; with a museum question's cosine the same list is ok.)
        let scores = [0.89, 0.75, 0.65];
        let off = confidence(Retriever::Hybrid, &scores, Some(0.055)).unwrap();
        let on = confidence(Retriever::Hybrid, &scores, Some(0.6)).unwrap();
        assert_eq!(
            evidence(Some(off), DEFAULT_LOW_EVIDENCE_THRESHOLD),
            "low",
            "{off}"
        );
        assert_eq!(
            evidence(Some(on), DEFAULT_LOW_EVIDENCE_THRESHOLD),
            "ok",
            "{on}"
        );
    }

    #[test]
    fn lexical_confidence_ignores_the_scale_of_bm25() {
        let a = confidence(Retriever::Lexical, &[10.0, 6.0, 5.0], None).unwrap();
        let b = confidence(Retriever::Lexical, &[100.0, 60.0, 50.0], None).unwrap();
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }

    #[test]
    fn short_empty_and_non_finite_lists_give_a_probability_or_none() {
        assert_eq!(confidence(Retriever::Hybrid, &[], Some(0.5)), None);
        assert_eq!(evidence(None, 0.5), "low");
        for scores in [
            &[0.7][..],
            &[0.7, 0.6],
            &[f32::NAN, 0.5, 0.4],
            &[f32::INFINITY, f32::NEG_INFINITY, 0.1],
            &[-3.0, -4.0, -5.0],
        ] {
            for r in Retriever::ALL {
                for cos in [None, Some(f32::NAN), Some(0.3), Some(-1.0)] {
                    let c = confidence(r, scores, cos).unwrap();
                    assert!((0.0..=1.0).contains(&c), "{r:?} {scores:?} {cos:?}: {c}");
                }
                let c = confidence(r, scores, None).unwrap();
                assert!((0.0..=1.0).contains(&c), "{r:?} {scores:?}: {c}");
            }
        }
    }
}
