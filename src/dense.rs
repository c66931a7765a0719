//! Dense search over an open index: candidates from the 1-bit codes, reranked with the
//! int8 vectors; and an exact brute force over the int8 vectors to compare against.
//!
//! Nothing here allocates: candidates and hits live in fixed-capacity vectors that the
//! caller owns and reuses, and the top-k is [`TopK`]. The streaming retriever calls
//! [`Searcher::binary_scan`] while the user speaks and [`Searcher::rerank`] at the end.
//!
//! Scores are cosines estimated from the int8 forms: `scale_q · scale_p · (q8 · p8)`.

use heapless::Vec as FixedVec;

use crate::embed::{DIM, Embedding};
use crate::hits::{Hit, Hits, key_score, score_key};
use crate::index::{Index, IndexError, quantize_i8, sign_code};
use crate::scan::{self, MAX_K, Neighbor, TopK};

/// Candidates the 1-bit scan hands to the rerank by default (measured on Spoken-SQuAD:
/// README, "Search quality").
pub const DEFAULT_CANDIDATES: usize = 100;

/// Bytes of a sign code.
const CODE_BYTES: usize = DIM / 8;

/// Candidates of a binary scan, nearest first (hamming distance in `distance`).
pub type Candidates = FixedVec<Neighbor, MAX_K>;

/// A query embedding in the index's compact forms, made once per embedding.
#[derive(Clone, Debug)]
pub struct Query {
    code: [u8; CODE_BYTES],
    int8: [i8; DIM],
    scale: f32,
}

impl Query {
    pub fn new(embedding: &Embedding) -> Self {
        let mut q = Query {
            code: [0; CODE_BYTES],
            int8: [0; DIM],
            scale: 0.0,
        };
        sign_code(embedding, &mut q.code);
        q.scale = quantize_i8(embedding, &mut q.int8);
        q
    }

    /// The int8 cosine estimate of the query and a stored int8 vector `v` with its
    /// `scale` (a sentence's: `crate::context`); 0 for a vector of another width.
    pub fn cosine_i8(&self, v: &[i8], scale: f32) -> f32 {
        if v.len() != DIM {
            return 0.0;
        }
        scan::dot_i8(&self.int8, v) as f32 * self.scale * scale
    }
}

/// Searches one index; owns the top-k scratch space, so make one per thread.
pub struct Searcher<'a> {
    index: &'a Index,
    top: TopK,
    scratch: Candidates,
}

impl<'a> Searcher<'a> {
    /// Fails if the index was not built for `DIM`-wide embeddings.
    pub fn new(index: &'a Index) -> Result<Self, IndexError> {
        if index.dim() != DIM {
            return Err(IndexError::Invalid {
                path: index.path().into(),
                what: format!(
                    "vectors are {}-wide; this primd embeds {DIM}-wide",
                    index.dim()
                ),
            });
        }
        Ok(Searcher {
            index,
            top: TopK::new(),
            scratch: Candidates::new(),
        })
    }

    pub fn index(&self) -> &'a Index {
        self.index
    }

    /// The `k` passages whose sign codes are nearest to the query's (hamming).
    pub fn binary_scan(&mut self, query: &Query, k: usize, out: &mut Candidates) {
        self.top.reset(k);
        scan::hamming_top_k(self.index.codes(), &query.code, &mut self.top);
        self.top.drain_sorted(out);
    }

    /// Scores `candidates` with the int8 vectors and keeps the best `k`.
    pub fn rerank(&mut self, candidates: &[Neighbor], query: &Query, k: usize, out: &mut Hits) {
        self.top.reset(k);
        for c in candidates {
            let score = self.cosine(query, c.index as usize);
            self.top.push(score_key(score), c.index);
        }
        self.drain_hits(out);
    }

    /// Binary top-`candidates`, then rerank to the best `k`.
    pub fn search(&mut self, query: &Query, k: usize, candidates: usize, out: &mut Hits) {
        let mut cands = std::mem::take(&mut self.scratch);
        self.binary_scan(query, candidates.max(k), &mut cands);
        self.rerank(&cands, query, k, out);
        self.scratch = cands;
    }

    /// Brute force: scores every passage with its int8 vector. The reference that the
    /// binary scan + rerank is measured against.
    pub fn exact(&mut self, query: &Query, k: usize, out: &mut Hits) {
        self.top.reset(k);
        for i in 0..self.index.len() {
            let score = self.cosine(query, i);
            self.top.push(score_key(score), i as u32);
        }
        self.drain_hits(out);
    }

    /// The int8 cosine estimate of the query and passage `i` (`i < index.len()`).
    pub fn cosine(&self, query: &Query, i: usize) -> f32 {
        let dot = scan::dot_i8(&query.int8, self.index.vector(i));
        dot as f32 * query.scale * self.index.scale(i)
    }

    fn drain_hits(&mut self, out: &mut Hits) {
        self.top.drain_sorted(&mut self.scratch);
        out.clear();
        for n in &self.scratch {
            // Capacities are equal (MAX_K), so this cannot overflow.
            let _ = out.push(Hit {
                index: n.index,
                score: key_score(n.distance),
            });
        }
    }
}
