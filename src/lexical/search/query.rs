//! Query preparation: the query text (and the extra text at its weight) analysed the way
//! the corpus was, each term looked up once (through the searcher's [`TermCache`](super::super::cache)),
//! repeats merged into one weighted term ([`QTerm`]); and the idf mass of a text, the
//! same lookups summed.

use super::{LexicalSearcher, QTerm, SearchStats};
use crate::hits::Hits;
use crate::lexical::read::Lexical;

impl LexicalSearcher {
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

    /// Analyses and looks up the query into `self.terms` (distinct, with weights). False
    /// when there is nothing to search.
    pub(super) fn prepare(
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
}
