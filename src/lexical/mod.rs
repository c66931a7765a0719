//! Lexical retrieval: BM25 over an inverted index stored in the index file (its lexical
//! section, `index/FORMAT.md`).
//!
//! Why it exists: names and rare words decide spoken questions, and the recognizer
//! misspells exactly those. Mean-pooled embeddings dilute one rare word among many common
//! ones; BM25 over character n-grams weighs it by its rarity and still matches most of a
//! misspelling's n-grams. Dense and lexical scores are fused elsewhere (`fusion`); this
//! module only answers "which passages share the query's terms, weighted by BM25".
//!
//! Layout of the module, from the floor up (each file uses only those above it in this
//! list; `tools/layers.py` checks it):
//! - `bm25`: the parameters, idf and the per-posting arithmetic ([`Bm25`]), shared by
//!   writer, kernels and searchers;
//! - `kernels`: the SIMD inner loops of a query (block decoding, scoring), each with its
//!   scalar twin;
//! - `format` and `bitpack`: the byte layout both sides agree on, and how a block's values
//!   are packed;
//! - [`analyze`] and `numbers`: text → terms (the word rules of [`crate::words`], numbers
//!   spelled out, then char n-grams);
//! - `decoded`: a small corpus's postings decoded once with their contributions (the data;
//!   RAM for time);
//! - `read`: [`Lexical`], the validated view over the mapped section (term dictionary and
//!   each term's raw blocks);
//! - `postings`: the cursor that decodes a term's blocks;
//! - `cache`: a searcher's memory of recent term-dictionary lookups;
//! - `search`: [`LexicalSearcher`]: query preparation, term at a time, MaxScore, two
//!   phases, the top-k, and the decoding of a small corpus for term at a time;
//! - `build`: documents → the section's bytes (term dictionary, postings, lengths).
//!
//! The analyzer and the BM25 parameters are recorded in the section: a query is always
//! analysed the way the corpus was, and changing the default ([`DEFAULT_ANALYZER`]) is a
//! one-line change that affects only indexes built afterwards.

pub mod analyze;
mod bitpack;
mod bm25;
mod build;
mod cache;
mod decoded;
mod format;
mod kernels;
mod numbers;
mod postings;
mod read;
mod search;

use std::fmt;
use std::str::FromStr;

pub use crate::words::WordRules;
pub use analyze::{ANALYZER_VERSION, Analyzer};
pub use bm25::{Bm25, idf};
pub use build::build;
pub use decoded::Decoded;
pub use format::{BLOCK, NGRAM_RANGE, check_params};
pub use kernels::kernel_name;
pub use read::Lexical;
pub use search::{LexicalSearcher, SearchStats};

/// How text becomes terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalyzerKind {
    /// Whole words.
    Words,
    /// Character n-grams with boundary marks (`n` in 3..=5): across words, or within each
    /// word in indexes of analyzer versions 1-2 ([`AnalyzerSpec::across_words`]).
    CharNgrams { n: u8 },
}

/// The analyzer an index was built with (recorded in the index: the kind, and the word
/// rules and n-gram cut as the analyzer version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalyzerSpec {
    pub kind: AnalyzerKind,
    /// How text is cut into words before the terms are made: the current rules for a new
    /// index, an older index's own.
    pub rules: WordRules,
    /// Whether character n-grams run across word boundaries (analyzer version 3 on), or
    /// stop at each word's end (versions 1-2). Whole words ignore it.
    pub across_words: bool,
    /// Whether numbers are spelled out as words before the terms are made ("1990" →
    /// "one thousand nine hundred ninety nineteen ninety": analyzer version 4 on).
    pub numbers: bool,
}

impl AnalyzerSpec {
    /// Names the terms this analysis makes, for a file that depends on them (a learned
    /// trigger's idf features): the `--analyzer` name, with `+across` when the n-grams run
    /// across words (analyzer version 3 on) and `+numbers` when numbers are spelled out
    /// (version 4). So a trigger trained on an index of within-word n-grams ("char4") is
    /// refused on one of n-grams across words ("char4+across+numbers").
    pub fn id(&self) -> String {
        let mut id = self.to_string();
        if self.across_words && matches!(self.kind, AnalyzerKind::CharNgrams { .. }) {
            id.push_str("+across");
        }
        if self.numbers {
            id.push_str("+numbers");
        }
        id
    }

    /// `kind` under the current analysis rules (what `build-index` writes).
    pub const fn new(kind: AnalyzerKind) -> Self {
        AnalyzerSpec {
            kind,
            rules: WordRules::V2,
            across_words: true,
            numbers: true,
        }
    }
}

/// The default analyzer of `build-index`: char 4-grams (best of words and 3/4/5-grams on
/// the dev set's typed questions and recognizer finals in the reference run; across
/// words since analyzer version 3, which gained on both).
pub const DEFAULT_ANALYZER: AnalyzerSpec = AnalyzerSpec::new(AnalyzerKind::CharNgrams { n: 4 });

/// `words`, `char3`, `char4`, `char5`: the names `build-index --analyzer` takes.
impl fmt::Display for AnalyzerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            AnalyzerKind::Words => f.write_str("words"),
            AnalyzerKind::CharNgrams { n } => write!(f, "char{n}"),
        }
    }
}

impl FromStr for AnalyzerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let kind = match s {
            "words" => AnalyzerKind::Words,
            _ => match s.strip_prefix("char").and_then(|n| n.parse::<u8>().ok()) {
                Some(n) if NGRAM_RANGE.contains(&n) => AnalyzerKind::CharNgrams { n },
                _ => {
                    return Err(format!(
                        "unknown analyzer {s:?}: expected words, char3, char4 or char5"
                    ));
                }
            },
        };
        Ok(AnalyzerSpec::new(kind))
    }
}

#[cfg(test)]
mod tests;
