//! A small corpus's postings decoded once, at open, with their BM25 contributions.
//!
//! Why: on a kiosk-sized corpus (one MaxScore window) every query is scored term at a
//! time, and most of a posting's cost is decoding it (bit-unpacking, gaps to ids) and the
//! division of the BM25 formula, not adding it. Both depend only on the index, never on
//! the query, so an index that is opened for long can pay them once: each posting becomes
//! a document id and its contribution `idf · tf (k1 + 1) / (tf + norm)`, and a query term
//! adds `weight · contribution` (the same two roundings as the posting kernels, so the
//! same scores bit for bit). The price is 8 bytes of RAM a posting, so an open index
//! does it only for a corpus scored term at a time (one MaxScore window, ≤ 4,096
//! passages) and within [`BUDGET`]; a larger corpus keeps the compressed path, where
//! MaxScore's pruning and the hand-over matter more than decoding, and RAM would grow with
//! the corpus.
//!
//! A term in at least half the passages (a char n-gram such as "_the" or "tion": a few
//! dozen terms, but over half of a spoken query's postings) is kept as a dense row
//! instead, one contribution per passage, zero where it is absent: no more bytes than its
//! postings (4 a passage against 8 a posting), and a query adds the row to the
//! accumulators as one sequential, vectorised pass instead of one scattered add per
//! posting. Adding `weight · 0` leaves a sum unchanged, so the scores stay the same bit
//! for bit.
//!
//! This file is the data and its lookup, which the section view ([`Lexical`](super::Lexical))
//! carries; decoding a section into it is the searcher's (`search/decode.rs`), as is the
//! rule of which corpora are scored term at a time.

/// Most RAM an open index spends on decoded postings: 32 MiB, about 4M postings.
/// Spoken-SQuAD's 2,421 passages of 180 words in char 4-grams take 6.1 MiB; 4,096
/// passages of that length about 11 MiB, so only a corpus of very long passages is left
/// compressed.
pub const BUDGET: usize = 32 << 20;

/// Bytes a decoded posting takes.
pub(super) const POSTING_BYTES: usize = 8;

/// Every term's postings as flat arrays: term `ord`'s are `starts[ord]..starts[ord + 1]`,
/// or, for a term stored dense, row `i` of `rows` where `dense[i] == ord`.
#[derive(Debug, Default)]
pub struct Decoded {
    pub(super) starts: Box<[u32]>,
    pub(super) docs: Box<[u32]>,
    pub(super) contribs: Box<[f32]>,
    /// Ordinals of the terms stored dense, ascending.
    pub(super) dense: Box<[u32]>,
    /// Their rows, `doc_count` contributions each.
    pub(super) rows: Box<[f32]>,
    pub(super) doc_count: usize,
}

/// A term's decoded contributions.
#[derive(Clone, Copy, Debug)]
pub enum Contributions<'a> {
    /// Its postings: documents (ascending) and their contributions.
    Sparse(&'a [u32], &'a [f32]),
    /// One contribution per document of the corpus, zero where the term is absent.
    Dense(&'a [f32]),
}

/// Whether a term of `df` postings in `n` documents is stored dense: when its row takes
/// no more bytes than its postings would (`4 n ≤ 8 df`).
pub(super) fn is_dense(df: u32, n: usize) -> bool {
    2 * u64::from(df) >= n as u64
}

impl Decoded {
    /// Bytes of RAM it holds.
    pub fn bytes(&self) -> usize {
        self.starts.len() * 4
            + self.docs.len() * POSTING_BYTES
            + self.dense.len() * 4
            + self.rows.len() * 4
    }

    /// Number of terms it covers (the section's term count when built from it).
    pub fn term_count(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Term `ord`'s contributions (no postings for an unknown ordinal).
    #[inline]
    pub fn contributions(&self, ord: u32) -> Contributions<'_> {
        if let Ok(i) = self.dense.binary_search(&ord) {
            let start = i * self.doc_count;
            return Contributions::Dense(&self.rows[start..start + self.doc_count]);
        }
        let o = ord as usize;
        match (self.starts.get(o), self.starts.get(o + 1)) {
            (Some(&s), Some(&e)) => {
                let r = s as usize..e as usize;
                Contributions::Sparse(&self.docs[r.clone()], &self.contribs[r])
            }
            _ => Contributions::Sparse(&[], &[]),
        }
    }
}
