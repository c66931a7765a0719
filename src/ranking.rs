//! Which retriever answers ([`Retriever`]: dense, lexical or both fused) and the shape of
//! every retriever's results ([`Ranked`]): the names the layers above share (the
//! confidence calibration per retriever, the streaming retriever, the config and the
//! command line), kept below the searchers so that knowing which retriever ran needs no
//! searcher. Running one is `retriever::HybridSearcher`; deciding which one an index
//! supports is `Retriever::resolve` there.

use heapless::Vec as FixedVec;

use crate::fusion::Scored;
use crate::scan::MAX_K;

/// Results of any retriever, best first, with each retriever's own score.
pub type Ranked = FixedVec<Scored, MAX_K>;

/// Which retriever answers. Parsed once, from the command line (`--retriever`:
/// `flags::choices`) or by serde (the `retriever` config key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    /// Embedding: 1-bit scan, int8 rerank.
    Dense,
    /// BM25 over the index's lexical section; no embedding.
    Lexical,
    /// Both, fused.
    Hybrid,
}

impl Retriever {
    pub const ALL: [Retriever; 3] = [Retriever::Dense, Retriever::Lexical, Retriever::Hybrid];

    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Dense => "dense",
            Retriever::Lexical => "lexical",
            Retriever::Hybrid => "hybrid",
        }
    }

    /// Needs query embeddings.
    pub fn uses_dense(self) -> bool {
        self != Retriever::Lexical
    }

    /// Needs the lexical section.
    pub fn uses_lexical(self) -> bool {
        self != Retriever::Dense
    }
}

impl std::fmt::Display for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
