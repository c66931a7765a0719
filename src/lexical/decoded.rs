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

use super::format::Scorer;
use super::read::{Lexical, Postings};
use super::search::scored_term_at_a_time;

/// Most RAM an open index spends on decoded postings: 32 MiB, about 4M postings.
/// Spoken-SQuAD's 2,421 passages of 180 words in char 4-grams take 6.2 MiB; 4,096
/// passages of that length about 11 MiB, so only a corpus of very long passages is left
/// compressed.
pub const BUDGET: usize = 32 << 20;

/// Bytes a decoded posting takes.
const POSTING_BYTES: usize = 8;

/// Every term's postings as flat arrays: term `ord`'s are `starts[ord]..starts[ord + 1]`.
#[derive(Debug, Default)]
pub struct Decoded {
    starts: Box<[u32]>,
    docs: Box<[u32]>,
    contribs: Box<[f32]>,
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
        let mut total: u64 = 0;
        for ord in 0..terms as u32 {
            total += u64::from(lex.df(ord).unwrap_or(0));
        }
        let bytes = total
            .checked_mul(POSTING_BYTES as u64)?
            .checked_add((terms as u64 + 1) * 4)?;
        if bytes > budget as u64 || total >= u64::from(u32::MAX) {
            return None;
        }
        let scorer: Scorer = *lex.scorer();
        let mut starts = Vec::with_capacity(terms + 1);
        let mut docs = Vec::with_capacity(total as usize);
        let mut contribs = Vec::with_capacity(total as usize);
        let mut p = Postings::new();
        for ord in 0..terms as u32 {
            starts.push(docs.len() as u32);
            let Some(t) = lex.term(ord) else { continue };
            p.reset(&t, n);
            p.for_each_block(|ds, tfs| {
                for (&d, &tf) in ds.iter().zip(tfs) {
                    // A corrupt list can name a document past the end: the kernels skip
                    // it, and so does this.
                    if (d as usize) < n && docs.len() < total as usize {
                        docs.push(d);
                        contribs.push(scorer.score(t.idf, tf.saturating_add(1), lex.norm(d)));
                    }
                }
            });
        }
        starts.push(docs.len() as u32);
        Some(Decoded {
            starts: starts.into_boxed_slice(),
            docs: docs.into_boxed_slice(),
            contribs: contribs.into_boxed_slice(),
        })
    }

    /// Bytes of RAM it holds.
    pub fn bytes(&self) -> usize {
        self.starts.len() * 4 + self.docs.len() * POSTING_BYTES
    }

    /// Number of terms it covers (the section's term count when built from it).
    pub fn term_count(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Term `ord`'s documents and contributions (empty for an unknown ordinal).
    #[inline]
    pub fn postings(&self, ord: u32) -> (&[u32], &[f32]) {
        let o = ord as usize;
        match (self.starts.get(o), self.starts.get(o + 1)) {
            (Some(&s), Some(&e)) => {
                let r = s as usize..e as usize;
                (&self.docs[r.clone()], &self.contribs[r])
            }
            _ => (&[], &[]),
        }
    }
}
