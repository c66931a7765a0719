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

use super::format::Scorer;
use super::read::{Lexical, Postings};
use super::search::scored_term_at_a_time;

/// Most RAM an open index spends on decoded postings: 32 MiB, about 4M postings.
/// Spoken-SQuAD's 2,421 passages of 180 words in char 4-grams take 6.1 MiB; 4,096
/// passages of that length about 11 MiB, so only a corpus of very long passages is left
/// compressed.
pub const BUDGET: usize = 32 << 20;

/// Bytes a decoded posting takes.
const POSTING_BYTES: usize = 8;

/// Every term's postings as flat arrays: term `ord`'s are `starts[ord]..starts[ord + 1]`,
/// or, for a term stored dense, row `i` of `rows` where `dense[i] == ord`.
#[derive(Debug, Default)]
pub struct Decoded {
    starts: Box<[u32]>,
    docs: Box<[u32]>,
    contribs: Box<[f32]>,
    /// Ordinals of the terms stored dense, ascending.
    dense: Box<[u32]>,
    /// Their rows, `doc_count` contributions each.
    rows: Box<[f32]>,
    doc_count: usize,
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
fn is_dense(df: u32, n: usize) -> bool {
    2 * u64::from(df) >= n as u64
}

impl Decoded {
    /// What an open [`Index`](crate::index::Index) keeps: the decoded postings of a corpus
    /// scored term at a time, within [`BUDGET`]; `None` for any other.
    pub fn for_serving(lex: &Lexical<'_>) -> Option<Decoded> {
        if scored_term_at_a_time(lex.doc_count()) {
            Decoded::build(lex, BUDGET)
        } else {
            None
        }
    }

    /// Decodes every posting of `lex`, or `None` when that would take more than `budget`
    /// bytes (or the section indexes no document). `lex` must carry its norms for this to
    /// be quick; the contributions are the same either way.
    pub fn build(lex: &Lexical<'_>, budget: usize) -> Option<Decoded> {
        let n = lex.doc_count();
        let terms = lex.term_count();
        if n == 0 || terms >= u32::MAX as usize {
            return None;
        }
        // Sparse postings, and dense rows (counted in documents' worth of floats).
        let (mut total, mut dense) = (0u64, 0u64);
        for ord in 0..terms as u32 {
            let df = lex.df(ord).unwrap_or(0);
            if is_dense(df, n) {
                dense += 1;
            } else {
                total += u64::from(df);
            }
        }
        let bytes = total
            .checked_mul(POSTING_BYTES as u64)?
            .checked_add((terms as u64 + 1) * 4)?
            .checked_add(dense.checked_mul(n as u64 * 4 + 4)?)?;
        if bytes > budget as u64 || total >= u64::from(u32::MAX) {
            return None;
        }
        let scorer: Scorer = *lex.scorer();
        let mut starts = Vec::with_capacity(terms + 1);
        let mut docs = Vec::with_capacity(total as usize);
        let mut contribs = Vec::with_capacity(total as usize);
        let mut dense_ords = Vec::with_capacity(dense as usize);
        let mut rows = vec![0.0f32; dense as usize * n];
        let mut p = Postings::new();
        for ord in 0..terms as u32 {
            starts.push(docs.len() as u32);
            let Some(t) = lex.term(ord) else { continue };
            p.reset(&t, n);
            let contribution =
                |d: u32, tf: u32| scorer.score(t.idf, tf.saturating_add(1), lex.norm(d));
            // A corrupt list can name a document past the end: the kernels skip it, and
            // so does this.
            if is_dense(t.df, n) {
                let start = dense_ords.len() * n;
                let row = &mut rows[start..start + n];
                dense_ords.push(ord);
                p.for_each_block(|ds, tfs| {
                    for (&d, &tf) in ds.iter().zip(tfs) {
                        if let Some(c) = row.get_mut(d as usize) {
                            *c = contribution(d, tf);
                        }
                    }
                });
            } else {
                p.for_each_block(|ds, tfs| {
                    for (&d, &tf) in ds.iter().zip(tfs) {
                        if (d as usize) < n && docs.len() < total as usize {
                            docs.push(d);
                            contribs.push(contribution(d, tf));
                        }
                    }
                });
            }
        }
        starts.push(docs.len() as u32);
        Some(Decoded {
            starts: starts.into_boxed_slice(),
            docs: docs.into_boxed_slice(),
            contribs: contribs.into_boxed_slice(),
            dense: dense_ords.into_boxed_slice(),
            rows: rows.into_boxed_slice(),
            doc_count: n,
        })
    }

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
