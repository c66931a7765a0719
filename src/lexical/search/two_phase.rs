//! Two phases for a query too large to score exactly in time (more than
//! [`EXACT_POSTINGS`](super::EXACT_POSTINGS) postings on a corpus of more than one window):
//! its rarest terms choose the candidates by the exact paths, every other term then
//! completes their scores. Every score returned is exact; only which passages are
//! candidates is approximate.

use super::LexicalSearcher;
use crate::hits::Hits;
use crate::lexical::postings::{END, Postings};
use crate::lexical::read::Lexical;

/// Two-phase queries select candidates with their rarest terms whose document frequencies
/// add up to at most this share of the query's postings (at least one term). On the dev
/// set (`tools/eval/two_phase.py`, the candidates' scores then completed exactly), with
/// n-grams within words (analyzer 2) every share from 0.1 up gave the same hit@1 / hit@10
/// as the exact query and 0.05 lost up to 0.020 (recognizer finals' hit@10 0.833 → 0.813);
/// across words (analyzer 3) 0.1 loses 0.002 of typed hit@10 (0.903 → 0.901; finals
/// equal) and 0.05 up to 0.009.
const SELECT_SHARE: f64 = 0.1;

/// Two-phase queries rescore at least this many candidates with every term (more when
/// the caller asks for a larger top-k): the lexical candidates a hybrid query takes.
const RESCORE_CANDIDATES: usize = 100;

impl LexicalSearcher {
    /// A query too large to score exactly in time (a char-n-gram query over 100k+
    /// passages: most of its postings are common n-grams, which MaxScore cannot prune
    /// because their scores are flat). Its rarest terms, up to [`SELECT_SHARE`] of its
    /// postings, choose the [`RESCORE_CANDIDATES`] best candidates exactly; each
    /// candidate's score is then completed with every other term (a cursor per term
    /// walked once through the candidates in document order, skipping blocks by their
    /// last id), and the top-`k` is taken from those complete scores. So every returned
    /// score is the passage's exact BM25 score (summed in another order: equal up to
    /// float rounding); what may differ from the exact query is which passages are
    /// returned, only when the passage that should win shares none of the query's rare
    /// terms' evidence with the top candidates (on the dev set: never at the top-10).
    pub(super) fn select_and_rescore(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        self.terms.sort_unstable_by_key(|q| (q.df, q.ord));
        let budget = (SELECT_SHARE * self.stats.postings as f64) as u64;
        let (mut sum, mut keep) = (0u64, 0usize);
        for q in &self.terms {
            if keep > 0 && sum + u64::from(q.df) > budget {
                break;
            }
            sum += u64::from(q.df);
            keep += 1;
        }
        self.rest.clear();
        self.rest.extend_from_slice(&self.terms[keep..]);
        self.terms.truncate(keep);
        let c = k.max(RESCORE_CANDIDATES).min(out.capacity());
        self.top_k(lex, c, out);
        self.stats.selecting_terms = keep;

        self.candidates.clear();
        self.candidates
            .extend(out.iter().map(|h| (h.index, h.score)));
        self.candidates.sort_unstable_by_key(|&(d, _)| d);
        self.stats.rescored = self.candidates.len() as u64;
        let (n, scorer) = (lex.doc_count(), *lex.scorer());
        let mut p = Postings::new();
        for q in &self.rest {
            let Some(t) = lex.term(q.ord) else { continue };
            p.reset(&t, n);
            for (d, score) in self.candidates.iter_mut() {
                p.advance(*d);
                if p.doc() == *d {
                    *score += q.weight * scorer.score(q.idf, p.tf(), lex.norm(*d));
                } else if p.doc() == END {
                    break;
                }
            }
        }
        self.top.reset(k.min(out.capacity()));
        for &(d, score) in &self.candidates {
            self.top.push(score, d);
        }
        self.top.drain_into(out);
    }
}
