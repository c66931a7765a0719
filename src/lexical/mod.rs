//! Lexical retrieval: BM25 over an inverted index stored in the index file (format v2).
//!
//! SKELETON: the API shared by the lexical and hybrid work; bodies are filled in by
//! the lexical implementation before this reaches main.

use crate::index::PassageRecord;
use crate::search::Hits;

/// BM25 parameters, recorded in the index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25 {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25 {
    fn default() -> Self {
        Bm25 { k1: 1.2, b: 0.75 }
    }
}

/// How text becomes terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalyzerKind {
    /// Whole words.
    Words,
    /// Character n-grams within words, with boundary marks.
    CharNgrams { n: u8 },
}

/// The analyzer an index was built with (recorded in the index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalyzerSpec {
    pub kind: AnalyzerKind,
}

/// The default analyzer of `build-index`.
pub const DEFAULT_ANALYZER: AnalyzerSpec = AnalyzerSpec {
    kind: AnalyzerKind::CharNgrams { n: 4 },
};

/// Builds the lexical section's bytes for `passages` in index order (title + text).
pub fn build(
    passages: &[PassageRecord],
    spec: &AnalyzerSpec,
    bm25: Bm25,
) -> Result<Vec<u8>, String> {
    let _ = (passages, spec, bm25);
    todo!("lexical::build")
}

/// A validated, borrowed view of the lexical section of a mapped index.
#[derive(Clone, Debug)]
pub struct Lexical<'a> {
    bytes: &'a [u8],
}

impl<'a> Lexical<'a> {
    pub fn open(bytes: &'a [u8]) -> Result<Self, String> {
        let _ = bytes;
        todo!("Lexical::open")
    }

    pub fn doc_count(&self) -> usize {
        todo!("Lexical::doc_count {}", self.bytes.len())
    }

    pub fn spec(&self) -> &AnalyzerSpec {
        todo!()
    }

    pub fn bm25(&self) -> Bm25 {
        todo!()
    }
}

/// Per-thread scratch; after warm-up a search allocates nothing.
#[derive(Debug, Default)]
pub struct LexicalSearcher {}

impl LexicalSearcher {
    pub fn new() -> Self {
        LexicalSearcher {}
    }

    /// BM25 top-`k` of `query`; terms of `extra` count with weight `extra_weight`.
    pub fn search(
        &mut self,
        lex: &Lexical<'_>,
        query: &str,
        extra: &str,
        extra_weight: f32,
        k: usize,
        out: &mut Hits,
    ) {
        let _ = (lex, query, extra, extra_weight, k, out);
        todo!("LexicalSearcher::search")
    }
}
