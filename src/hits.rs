//! Search results as every retriever returns them ([`Hit`], [`Hits`]) and the score keys
//! their top-k structures sort by. A module of its own, apart from `dense`, because the
//! lexical searcher needs these and nothing else of the dense search (and `fuzz/`
//! compiles the index and lexical readers without the embedder).

use heapless::Vec as FixedVec;

use crate::scan::MAX_K;

/// One result: a passage position in the index and its score (higher is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub index: u32,
    pub score: f32,
}

/// Reranked results, best first.
pub type Hits = FixedVec<Hit, MAX_K>;

/// Maps a score to a `u32` that sorts the other way round (higher score → smaller key),
/// so the hamming top-k structure also keeps the best scores (and the BM25 top-k its
/// own). Order-preserving for all floats: flip all bits of negatives, set the sign bit
/// of positives, invert (a NaN from a corrupt file sorts somewhere, never panics).
#[inline]
pub(crate) fn score_key(score: f32) -> u32 {
    let bits = score.to_bits();
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    !ordered
}

#[inline]
pub(crate) fn key_score(key: u32) -> f32 {
    let ordered = !key;
    let bits = if ordered >> 31 == 1 {
        ordered & 0x7fff_ffff
    } else {
        !ordered
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_keys_sort_scores_descending_and_round_trip() {
        let scores = [-1.0f32, -0.5, -0.0, 0.0, 1e-9, 0.25, 0.9999, 1.0];
        for w in scores.windows(2) {
            assert!(score_key(w[0]) >= score_key(w[1]), "{w:?}");
        }
        for s in scores {
            assert_eq!(key_score(score_key(s)).to_bits(), s.to_bits());
        }
    }
}
