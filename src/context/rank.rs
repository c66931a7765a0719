//! Scores the candidate sentences by the question.
//!
//! A sentence's score is `cosine + LEXICAL_WEIGHT · coverage + PASSAGE_WEIGHT ·
//! retrieval − RANK_PENALTY · rank`:
//! - `cosine`: the question's embedding against the sentence's int8 vector (the meaning,
//!   robust to rewording);
//! - `coverage`: the share of the question's idf mass (its terms in the index's lexical
//!   analysis, char n-grams by default, weighted by their idf in the corpus) that the
//!   sentence contains: the names and rare words a question is about, and, n-grams, their
//!   misspellings by the recognizer;
//! - `retrieval`: its passage's retrieval score, min-max normalised over the ranked
//!   passages (1 for the best): a sentence is read in its passage, and a passage that
//!   matches the whole question is where the answer most often is;
//! - `rank`: the sentence's passage's position in the results (0 for the top-1), so a
//!   sentence of the passage retrieval trusts most wins a tie.
//!
//! Weights chosen on the Spoken-SQuAD dev questions from a small grid of round values
//! (docs/context.md): neighbours of the best values differ by less than half a point;
//! no term of the question known to the index (or no lexical section) leaves the cosine.

use xxhash_rust::xxh3::xxh3_64;

use super::pack::Cand;
use crate::dense::Query;
use crate::index::{Index, Sentences};
use crate::lexical::{Analyzer, idf};

/// Weight of the idf-weighted term coverage (0..1) against the cosine.
pub(crate) const LEXICAL_WEIGHT: f32 = 1.0;
/// Weight of the passage's normalised retrieval score.
pub(crate) const PASSAGE_WEIGHT: f32 = 0.2;
/// Score taken off per passage rank.
pub(crate) const RANK_PENALTY: f32 = 0.03;

/// The question's terms and scratch space, reused from question to question.
pub(super) struct Ranker {
    analyzer: Analyzer,
    /// (hash of a distinct term of the question, its idf), sorted by hash.
    terms: Vec<(u64, f32)>,
    total: f32,
    /// `seen[i] == stamp`: term `i` already counted for the sentence being scored.
    seen: Vec<u32>,
    stamp: u32,
}

impl Ranker {
    pub fn new() -> Self {
        Ranker {
            analyzer: Analyzer::new(),
            terms: Vec::with_capacity(1024),
            total: 0.0,
            seen: Vec::with_capacity(1024),
            stamp: 0,
        }
    }

    /// Sets every candidate's `score`.
    pub fn score(
        &mut self,
        index: &Index,
        sentences: &Sentences<'_>,
        query: Option<&Query>,
        question: &str,
        cands: &mut [Cand],
    ) {
        let lex = index.lexical();
        self.terms.clear();
        self.total = 0.0;
        if let Some(lex) = &lex {
            let n = lex.doc_count() as u64;
            let terms = &mut self.terms;
            self.analyzer.analyze(lex.spec(), question, |t| {
                let df = lex.lookup(t).and_then(|ord| lex.df(ord));
                if let Some(df) = df {
                    terms.push((xxh3_64(t), idf(n, u64::from(df))));
                }
            });
            self.terms.sort_unstable_by_key(|t| t.0);
            self.terms.dedup_by_key(|t| t.0);
            self.total = self.terms.iter().map(|t| t.1).sum();
            self.seen.clear();
            self.seen.resize(self.terms.len(), 0);
        }
        for c in cands.iter_mut() {
            let cosine = query.map_or(0.0, |q| {
                let (v, scale) = sentences.vector(c.sentence as usize);
                q.cosine_i8(v, scale)
            });
            let coverage = match &lex {
                Some(lex) if self.total > 0.0 => self.coverage(lex.spec(), c.text(index)),
                _ => 0.0,
            };
            c.score = cosine + LEXICAL_WEIGHT * coverage + PASSAGE_WEIGHT * c.retrieval
                - RANK_PENALTY * c.rank as f32;
        }
    }

    /// Share of the question's idf mass whose terms `text` contains.
    fn coverage(&mut self, spec: &crate::lexical::AnalyzerSpec, text: &str) -> f32 {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        let (terms, seen, stamp) = (&self.terms, &mut self.seen, self.stamp);
        let mut sum = 0.0;
        self.analyzer.analyze(spec, text, |t| {
            let h = xxh3_64(t);
            if let Ok(i) = terms.binary_search_by_key(&h, |x| x.0)
                && seen[i] != stamp
            {
                seen[i] = stamp;
                sum += terms[i].1;
            }
        });
        sum / self.total
    }
}
