//! How `primd bench` measures: a time budget per figure ([`Budget`]), the binary scan
//! against a plain memory read of the same size, and one speculative step (lexical
//! query, binary scan, fused union) as the daemon runs it per partial.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::TOP_K;
use super::report::{Scan, Step};
use crate::dense::{Candidates, DEFAULT_CANDIDATES, Query};
use crate::embed::{DIM, Embed, Embedder, Embedding};
use crate::fusion::Fusion;
use crate::hits::Hits;
use crate::index::Index;
use crate::ranking::{Ranked, Retriever};
use crate::retriever::{DEFAULT_LEXICAL_CANDIDATES, HybridSearcher};

/// How long to repeat each measurement.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    time: Duration,
    min_runs: usize,
    max_runs: usize,
    warmup: usize,
}

impl Budget {
    pub(super) fn new(quick: bool) -> Self {
        if quick {
            Budget {
                time: Duration::from_millis(20),
                min_runs: 3,
                max_runs: 50,
                warmup: 1,
            }
        } else {
            Budget {
                time: Duration::from_millis(300),
                min_runs: 10,
                max_runs: 2000,
                warmup: 3,
            }
        }
    }

    /// Runs `f` (which returns its own duration in ms) until the budget is spent.
    pub(super) fn samples(
        &self,
        mut f: impl FnMut() -> anyhow::Result<f64>,
    ) -> anyhow::Result<Vec<f64>> {
        for _ in 0..self.warmup {
            f()?;
        }
        let start = Instant::now();
        let mut out = Vec::with_capacity(self.min_runs);
        while out.len() < self.min_runs
            || (out.len() < self.max_runs && start.elapsed() < self.time)
        {
            out.push(f()?);
        }
        Ok(out)
    }
}

/// A text the embedder sees as exactly `n` tokens (or the nearest it can reach), and
/// that count.
pub(super) fn text_of_tokens(e: &mut Embedder, n: usize) -> anyhow::Result<(String, usize)> {
    const WORDS: &[&str] = &[
        "what", "is", "the", "name", "of", "river", "that", "runs", "through", "city", "where",
        "first", "school", "was", "built", "in", "year", "and", "who", "paid", "for", "it", "how",
        "many", "people", "live", "there", "now", "after", "war", "ended", "by",
    ];
    let mut text = String::new();
    let mut tokens = e.count_tokens(&text)?;
    for w in WORDS.iter().cycle().take(4 * n) {
        if tokens >= n {
            break;
        }
        let len = text.len();
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(w);
        let t = e.count_tokens(&text)?;
        if t > n {
            text.truncate(len);
        } else {
            tokens = t;
        }
    }
    Ok((text, tokens))
}

/// Partial-transcript-like queries from the index itself: the first words of passages
/// spread over it (a synthetic index's are its random words).
pub(super) fn query_texts(index: &Index, n: usize) -> anyhow::Result<Vec<String>> {
    let len = index.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n.min(len) {
        let p = index.passage(i * len / n.min(len))?;
        let words: Vec<&str> = p.text.split_whitespace().take(10).collect();
        out.push(words.join(" "));
    }
    Ok(out)
}

pub(super) fn measure_scan(
    searcher: &mut HybridSearcher<'_>,
    query: &Query,
    budget: &Budget,
) -> anyhow::Result<Scan> {
    let codes = searcher.index().codes();
    let bytes = codes.len();
    let words = vec![0x0101_0101_0101_0101u64; bytes.div_ceil(8)];
    let mut cands = Candidates::new();
    // Alternate scan and read so both see the same machine state.
    let mut read = Vec::new();
    let scan = budget.samples(|| {
        let t0 = Instant::now();
        black_box(read_all(black_box(&words)));
        read.push(ms(t0.elapsed()));
        let t0 = Instant::now();
        searcher
            .dense()
            .binary_scan(query, DEFAULT_CANDIDATES, &mut cands);
        black_box(&cands);
        Ok(ms(t0.elapsed()))
    })?;
    let (p50, read_p50) = (percentile(&scan, 50.0), percentile(&read, 50.0));
    let gib_s = |ms: f64| bytes as f64 / (1u64 << 30) as f64 / (ms / 1e3);
    Ok(Scan {
        passages: searcher.index().len(),
        bytes,
        runs: scan.len(),
        p50_ms: p50,
        gib_s: gib_s(p50),
        read_p50_ms: read_p50,
        read_gib_s: gib_s(read_p50),
        ratio: read_p50 / p50,
    })
}

/// Sums every word: the plain memory read the scan is compared with (four independent
/// sums so the loop is bound by loads, not by one addition chain).
pub(super) fn read_all(words: &[u64]) -> u64 {
    let mut s = [0u64; 4];
    let chunks = words.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for (acc, w) in s.iter_mut().zip(c) {
            *acc = acc.wrapping_add(*w);
        }
    }
    rest.iter().fold(s[0] ^ s[1] ^ s[2] ^ s[3], |a, w| a ^ w)
}

pub(super) fn measure_step(
    searcher: &mut HybridSearcher<'_>,
    embedder: &mut Embedder,
    queries: &[String],
    vectors: &[Embedding],
    budget: &Budget,
) -> anyhow::Result<Step> {
    let retriever = if searcher.has_lexical() {
        Retriever::Hybrid
    } else {
        Retriever::Dense
    };
    let fusion = Fusion::default();
    let mut lex = Hits::new();
    let mut cands = Candidates::new();
    let mut out = Ranked::new();
    let mut parts = [Vec::new(), Vec::new(), Vec::new()];
    let mut step = |text: &str, q: &Query, parts: &mut [Vec<f64>; 3]| -> f64 {
        let t0 = Instant::now();
        if retriever.uses_lexical() {
            searcher.lexical(text, "", 0.0, DEFAULT_LEXICAL_CANDIDATES, &mut lex);
        }
        let t1 = Instant::now();
        searcher
            .dense()
            .binary_scan(q, DEFAULT_CANDIDATES, &mut cands);
        let t2 = Instant::now();
        match retriever {
            Retriever::Hybrid => searcher.fuse(Some(q), &lex, &cands, fusion, TOP_K, &mut out),
            _ => searcher.rerank(&cands, q, TOP_K, &mut out),
        }
        let t3 = Instant::now();
        black_box(&out);
        parts[0].push(ms(t1 - t0));
        parts[1].push(ms(t2 - t1));
        parts[2].push(ms(t3 - t2));
        ms(t3 - t0)
    };
    // End to end once per query: embed (as the daemon, one thread) then the step.
    let mut with_embed = Vec::with_capacity(queries.len());
    let mut v = [0.0f32; DIM];
    let mut scratch = [Vec::new(), Vec::new(), Vec::new()];
    for text in queries {
        let t0 = Instant::now();
        embedder.embed_into(text, &mut v)?;
        step(text, &Query::new(&v), &mut scratch);
        with_embed.push(ms(t0.elapsed()));
    }
    let qs: Vec<Query> = vectors.iter().map(Query::new).collect();
    let mut i = 0;
    let samples = budget.samples(|| {
        let k = i % queries.len();
        i += 1;
        Ok(step(&queries[k], &qs[k], &mut parts))
    })?;
    Ok(Step {
        retriever,
        queries: queries.len(),
        runs: samples.len(),
        candidates: DEFAULT_CANDIDATES,
        lexical_candidates: DEFAULT_LEXICAL_CANDIDATES,
        p50_ms: percentile(&samples, 50.0),
        p95_ms: percentile(&samples, 95.0),
        lexical_p50_ms: percentile(&parts[0], 50.0),
        scan_p50_ms: percentile(&parts[1], 50.0),
        fuse_p50_ms: percentile(&parts[2], 50.0),
        with_embed_p50_ms: percentile(&with_embed, 50.0),
        with_embed_p95_ms: percentile(&with_embed, 95.0),
    })
}

/// Nearest-rank percentile of unsorted samples (NaN for none).
pub(super) fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
