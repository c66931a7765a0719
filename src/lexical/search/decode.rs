//! Decoding a small corpus's postings once ([`Decoded`]: why, and what it costs, is in
//! its own module doc): the term-at-a-time path's precomputed contributions, built from
//! the section by the same cursor and the same BM25 arithmetic the kernels use.

use super::scored_term_at_a_time;
use crate::lexical::bm25::Scorer;
use crate::lexical::decoded::{BUDGET, Decoded, POSTING_BYTES, is_dense};
use crate::lexical::postings::Postings;
use crate::lexical::read::Lexical;

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
}
