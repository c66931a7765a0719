//! BM25 as primd scores it: the parameters an index records, Lucene's idf, and the
//! per-posting arithmetic ([`Scorer`]) that the writer (block maxima), the reader's
//! kernels and the searchers all share, so that stored upper bounds are exact bounds of
//! computed scores (Lucene's `BM25Similarity`; tantivy's `query/bm25.rs`).
//!
//! The floor of the lexical module: it uses nothing else of primd, and the posting
//! kernels build on it.

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

/// Lucene's BM25 idf: `ln(1 + (N - df + 0.5) / (df + 0.5))`, always > 0 for `df ≤ N`.
pub fn idf(doc_count: u64, df: u64) -> f32 {
    let (n, df) = (doc_count as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
}

/// Average document length as BM25 uses it; 1 for a corpus without terms (no document
/// can match then, and this keeps the arithmetic finite).
pub fn avgdl(doc_count: u64, total_len: u64) -> f32 {
    if doc_count == 0 || total_len == 0 {
        1.0
    } else {
        (total_len as f64 / doc_count as f64) as f32
    }
}

/// BM25 arithmetic, one definition for writer (block maxima) and reader (scores):
/// `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`.
#[derive(Clone, Copy, Debug)]
pub struct Scorer {
    /// `k1 · (1 − b)`
    c0: f32,
    /// `k1 · b / avgdl`
    c1: f32,
    /// `k1 + 1`
    k1p1: f32,
}

impl Scorer {
    pub fn new(bm25: Bm25, avgdl: f32) -> Scorer {
        Scorer {
            c0: bm25.k1 * (1.0 - bm25.b),
            c1: bm25.k1 * bm25.b / avgdl,
            k1p1: bm25.k1 + 1.0,
        }
    }

    /// `k1 · (1 − b + b · dl / avgdl)` for a document of `dl` terms.
    #[inline]
    pub fn norm(&self, dl: u32) -> f32 {
        self.c0 + self.c1 * dl as f32
    }

    /// `k1 + 1`, for the SIMD twins of [`score`](Self::score) (`kernels`).
    #[inline]
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        allow(dead_code)
    )]
    pub fn k1p1(&self) -> f32 {
        self.k1p1
    }

    /// The contribution of one term to one document, at query weight 1.
    #[inline]
    pub fn score(&self, idf: f32, tf: u32, norm: f32) -> f32 {
        let tf = tf as f32;
        idf * (tf * self.k1p1 / (tf + norm))
    }
}
