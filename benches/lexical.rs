//! Lexical (BM25) query latency and build cost, on a reproducible synthetic corpus.
//!
//! Corpus: a seeded Zipf vocabulary (50,000 pseudo-words made of syllables, the frequent
//! ones shorter, word rank drawn with exponent s = 1.1), passages of 100..=180 words with a
//! 1-3 word title of rarer words; queries: 10 words, 3 of them drawn from one passage's
//! rarer words (what a question names) and 7 from the Zipf distribution (its function
//! words), so each query has an answer and plenty of very common n-grams. Sizes 2.4k
//! (the dev set's passage count), 100k and, with `PRIMD_BENCH_1M=1`, 1M passages (its
//! section takes minutes and ~GBs to build: it is built once and cached, like the others,
//! under `<target>/lexical-bench/`). With `../shared/data/spoken-squad` present, the
//! real dev corpus and its typed questions too.
//!
//! Reported per size, single thread, top-100 (the hybrid's lexical candidates):
//! `maxscore` (`LexicalSearcher::search`, the path primd uses; `_k10`: top-10),
//! `exhaustive` (term-at-a-time over every posting, the reference), for the
//! default char 4-gram analyzer and for words; and once, on stderr, build time and
//! section / index sizes with and without the lexical section.
//!
//!     cargo bench --bench lexical                     # 2.4k, 100k (+ Spoken-SQuAD)
//!     PRIMD_BENCH_1M=1 cargo bench --bench lexical    # + 1M
//!     PRIMD_BENCH_QUICK=1 ...                         # char4 queries only (no build cost, no words)
//!     PRIMD_BENCH_WORDS=1 ...                         # word queries at every size, 1M and QUICK too
//!     PRIMD_BENCH_SIZES=100000 ...                    # only these synthetic sizes ("": none)
//!     PRIMD_BENCH_INDEX=ss.idx PRIMD_BENCH_QUERIES=queries.jsonl ...
//!         # + an index built by build-index (its own lexical section, exactly what primd
//!         # serves) and every "text" of a query JSONL: the same corpus and questions a
//!         # peer (tools/bench/bm25_peer.py) is given
//!     PRIMD_BENCH_INDEX=ss.idx PRIMD_BENCH_STREAMS=stt.jsonl ...
//!         # + `lexical_partials`: every partial (and final) of recorded recognizer
//!         # streams (`../shared/data/stt`), in stream order, through one searcher: the
//!         # query `primd run` makes on each partial, with its repeats and revisions
//!
//! The queries on an index opened as primd opens it (`PRIMD_BENCH_INDEX`, and the
//! speculative step) take its decoded postings when the corpus has ≤ 4,096 passages
//! (`lexical::Decoded`), and so do the synthetic sizes (2.4k); `lexical_spoken_squad`
//! (the dev corpus's whole passages, its first 1,000 questions) queries the compressed
//! section, the path of a corpus of more than 4,096 passages.
//!
//! Also, at 2.4k and 100k (not with PRIMD_BENCH_QUICK): `speculative_step`, what
//! `primd run` does per partial in hybrid mode besides embedding (lexical top-100, 1-bit
//! scan top-100, the union fused as `--emit-speculative`'s guess). With PRIMD_BENCH_INDEX
//! its 100k index carries that index's model fingerprint, and PRIMD_BENCH_KEEP_INDEX=FILE
//! keeps it, so `primd run --index FILE` can serve it (the daemon's memory figure).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use primd::hits::Hits;
use primd::index::{IndexMeta, PassageRecord, WriteOptions, passage_embed_text, write_index_with};
use primd::lexical::{
    AnalyzerKind, AnalyzerSpec, Bm25, DEFAULT_ANALYZER, Decoded, Lexical, LexicalSearcher, build,
};
// Seeded: the same corpus on every machine and run.
use primd::testing::Rng;

const VOCAB: usize = 50_000;
const ZIPF_S: f64 = 1.1;
const QUERIES: usize = 256;
const K: usize = 100;
const SEED: u64 = 0x00b2_5eed;

/// The texts the lexical section indexes for `passages`, as an index writes them.
fn texts(passages: &[PassageRecord]) -> impl ExactSizeIterator<Item = String> + '_ {
    passages
        .iter()
        .map(|p| passage_embed_text(&p.title, &p.text))
}

/// Part of the cache file names: change it when the section layout changes.
const CACHE_TAG: &str = "bitpacked1";

const WORDS: AnalyzerSpec = AnalyzerSpec::new(AnalyzerKind::Words);

struct Zipf {
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(rng: &mut Rng) -> Zipf {
        const ONSETS: [&str; 18] = [
            "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st",
            "tr",
        ];
        const VOWELS: [&str; 7] = ["a", "e", "i", "o", "u", "ai", "ou"];
        const CODAS: [&str; 8] = ["", "", "n", "r", "s", "l", "nd", "t"];
        let mut seen = std::collections::HashSet::new();
        let mut words = Vec::with_capacity(VOCAB);
        while words.len() < VOCAB {
            let syllables = 1 + rng.index(4);
            let w: String = (0..syllables)
                .map(|_| {
                    format!(
                        "{}{}{}",
                        ONSETS[rng.index(ONSETS.len())],
                        VOWELS[rng.index(VOWELS.len())],
                        CODAS[rng.index(CODAS.len())]
                    )
                })
                .collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        // Frequent words are short (as in natural language); stable for equal lengths.
        words.sort_by_key(String::len);
        let mut cdf = Vec::with_capacity(VOCAB);
        let mut sum = 0.0;
        for r in 1..=VOCAB {
            sum += 1.0 / (r as f64).powf(ZIPF_S);
            cdf.push(sum);
        }
        cdf.iter_mut().for_each(|c| *c /= sum);
        Zipf { words, cdf }
    }

    fn rank(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(VOCAB - 1)
    }

    fn word(&self, rng: &mut Rng) -> &str {
        &self.words[self.rank(rng)]
    }
}

/// The passages, the queries, and for each query the passage its rare words came from.
fn corpus(n: usize) -> (Vec<PassageRecord>, Vec<String>, Vec<u32>) {
    let mut rng = Rng::new(SEED);
    let zipf = Zipf::new(&mut rng);
    let mut passages = Vec::with_capacity(n);
    for i in 0..n {
        let len = 100 + rng.index(81);
        let text: Vec<&str> = (0..len).map(|_| zipf.word(&mut rng)).collect();
        let title: Vec<&str> = (0..1 + rng.index(3))
            .map(|_| zipf.words[1000 + rng.index(VOCAB - 1000)].as_str())
            .collect();
        passages.push(PassageRecord {
            id: format!("z{i}"),
            title: title.join(" "),
            text: text.join(" "),
            chunk: 0,
            word_start: 0,
            word_end: len as u32,
        });
    }
    // Queries from their own stream, so they do not shift with n.
    let mut qrng = Rng::new(SEED ^ 0xface);
    let mut answers = Vec::with_capacity(QUERIES);
    let queries = (0..QUERIES)
        .map(|_| {
            let at = qrng.index(n);
            answers.push(at as u32);
            let p = &passages[at];
            let mut words: Vec<&str> = p.text.split(' ').collect();
            // its rarer words: the question's names
            words.sort_by_key(|w| std::cmp::Reverse(w.len()));
            let mut q: Vec<&str> = (0..3).map(|_| words[qrng.index(12)]).collect();
            q.extend((0..7).map(|_| zipf.word(&mut qrng)));
            q.join(" ")
        })
        .collect();
    (passages, queries, answers)
}

fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("lexical-bench")
}

/// The section for `n` passages with `spec`, from the cache or built (and cached).
fn section(n: usize, spec: &AnalyzerSpec, passages: &[PassageRecord]) -> Vec<u8> {
    let dir = cache_dir();
    let path = dir.join(format!(
        "zipf-{n}-{spec}-a{}-{CACHE_TAG}.lex",
        primd::lexical::ANALYZER_VERSION
    ));
    if let Ok(bytes) = std::fs::read(&path)
        && Lexical::open(&bytes).is_ok_and(|l| l.doc_count() == n)
    {
        return bytes;
    }
    let started = Instant::now();
    let bytes = build(texts(passages), spec, Bm25::default()).unwrap();
    eprintln!(
        "lexical build, {n} passages, {spec}: {:.2} s, section {:.1} MiB",
        started.elapsed().as_secs_f64(),
        bytes.len() as f64 / (1 << 20) as f64
    );
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, &bytes);
    bytes
}

fn bench_queries(
    c: &mut Criterion,
    group: &str,
    lex: &Lexical<'_>,
    queries: &[String],
    answers: &[u32],
    exhaustive: bool,
) {
    let mut g = c.benchmark_group(group);
    g.sample_size(if lex.doc_count() >= 500_000 { 20 } else { 50 });
    let mut searcher = LexicalSearcher::new();
    let mut hits = Hits::new();
    // Every query once first (warm-up: buffers at their largest, pages mapped in), with
    // what MaxScore did, on average, at top-100 and top-10.
    let spec = lex.spec().to_string();
    for k in [K, 10] {
        let mut sum = [0f64; 10];
        // Each query timed on its own (the peer, bm25_peer.py, reports per-query medians:
        // criterion's figure below is a mean over a cycle of queries).
        let mut lat: Vec<f64> = Vec::with_capacity(queries.len());
        for q in queries {
            let t = std::time::Instant::now();
            searcher.search(lex, q, "", 0.0, k, &mut hits);
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            let s = searcher.stats();
            let skipped = f64::from(s.skipped_windows) / f64::from(s.windows.max(1));
            for (a, x) in sum.iter_mut().zip([
                s.terms as f64,
                s.postings as f64,
                s.scored as f64,
                s.candidates as f64,
                s.probes as f64,
                skipped,
                f64::from(s.windows),
                f64::from(u8::from(s.switched_at.is_some())),
                f64::from(u8::from(s.rescored > 0)),
                s.selecting_terms as f64,
            ]) {
                *a += x / queries.len() as f64;
            }
        }
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| lat.get(((lat.len() as f64 - 1.0) * p) as usize).copied();
        eprintln!(
            "{group} {spec} top-{k}: per query {:.0} terms, {:.0} postings, MaxScore scored \
             {:.0} ({:.0}%), {:.0} candidates, {:.0} probes, {:.0} windows ({:.0}% skipped), \
             {:.0}% handed over to term at a time, {:.0}% in two phases ({:.1} selecting \
             terms); one pass, each query timed: p50 {:.1} µs, p90 {:.1} µs",
            sum[0],
            sum[1],
            sum[2],
            100.0 * sum[2] / sum[1].max(1.0),
            sum[3],
            sum[4],
            sum[6],
            100.0 * sum[5],
            100.0 * sum[7],
            100.0 * sum[8],
            sum[9] / sum[8].max(1e-9),
            pct(0.5).unwrap_or(0.0),
            pct(0.9).unwrap_or(0.0),
        );
    }
    agreement(group, lex, queries, answers, &mut searcher);
    let mut i = 0;
    g.bench_function(format!("maxscore_{spec}"), |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            searcher.search(lex, black_box(&queries[i]), "", 0.0, K, &mut hits);
            black_box(hits.len())
        })
    });
    g.bench_function(format!("maxscore_{spec}_k10"), |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            searcher.search(lex, black_box(&queries[i]), "", 0.0, 10, &mut hits);
            black_box(hits.len())
        })
    });
    if exhaustive {
        g.bench_function(format!("exhaustive_{spec}"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                searcher.search_exhaustive(lex, black_box(&queries[i]), "", 0.0, K, &mut hits);
                black_box(hits.len())
            })
        });
    }
    g.finish();
}

/// How often `search` (two phases for a large query) returns what exhaustive scoring
/// does: the same top-1, the same top-10 (as a set), and the share of the exhaustive
/// top-10 found in its top-10; and, with `answers` (the passage each synthetic query was
/// cut from), how often each finds it first and in its top-10. Printed once per group.
fn agreement(
    group: &str,
    lex: &Lexical<'_>,
    queries: &[String],
    answers: &[u32],
    searcher: &mut LexicalSearcher,
) {
    let (mut fast, mut exact) = (Hits::new(), Hits::new());
    let (mut top1, mut top10, mut found) = (0usize, 0usize, 0usize);
    // hit@1 and hit@10 of the answer: [fast, exhaustive]
    let mut hit = [[0usize; 2]; 2];
    for (i, q) in queries.iter().enumerate() {
        searcher.search(lex, q, "", 0.0, 10, &mut fast);
        searcher.search_exhaustive(lex, q, "", 0.0, 10, &mut exact);
        top1 += usize::from(fast.first().map(|h| h.index) == exact.first().map(|h| h.index));
        let mut a: Vec<u32> = fast.iter().map(|h| h.index).collect();
        let mut b: Vec<u32> = exact.iter().map(|h| h.index).collect();
        found += b.iter().filter(|d| a.contains(d)).count();
        if let Some(&answer) = answers.get(i) {
            for (j, hits) in [&fast, &exact].into_iter().enumerate() {
                let rank = hits.iter().position(|h| h.index == answer);
                hit[j][0] += usize::from(rank == Some(0));
                hit[j][1] += usize::from(rank.is_some());
            }
        }
        a.sort_unstable();
        b.sort_unstable();
        top10 += usize::from(a == b);
    }
    let n = queries.len().max(1) as f64;
    eprintln!(
        "{group} {} against exhaustive scoring, {} queries: same top-1 {:.1}%, same top-10 \
         {:.1}%, exhaustive top-10 found {:.1}%",
        lex.spec(),
        queries.len(),
        100.0 * top1 as f64 / n,
        100.0 * top10 as f64 / n,
        100.0 * found as f64 / (10.0 * n),
    );
    if answers.len() == queries.len() {
        eprintln!(
            "{group} {} the passage each query was cut from, hit@1 / hit@10: search {:.3} / \
             {:.3}, exhaustive {:.3} / {:.3}",
            lex.spec(),
            hit[0][0] as f64 / n,
            hit[0][1] as f64 / n,
            hit[1][0] as f64 / n,
            hit[1][1] as f64 / n,
        );
    }
}

/// Index sizes with and without the lexical section (random unit vectors, dim 384), and the
/// time `write_index_with` takes for each: printed once.
fn build_cost(passages: &[PassageRecord]) {
    let dim = 384usize;
    let mut rng = Rng::new(7);
    let vectors: Vec<f32> = (0..passages.len() * dim)
        .map(|_| rng.unit() as f32 - 0.5)
        .collect();
    let meta = IndexMeta {
        dim: dim as u32,
        fingerprint: [0; 32],
        chunk_words: 0,
        overlap_words: 0,
    };
    let dir = cache_dir();
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("build-cost.idx");
    for (name, opts) in [
        (
            "dense only",
            WriteOptions {
                lexical: None,
                sentences: None,
            },
        ),
        (
            "dense + lexical char4",
            WriteOptions {
                lexical: Some((DEFAULT_ANALYZER, Bm25::default())),
                sentences: None,
            },
        ),
        (
            "dense + lexical words",
            WriteOptions {
                lexical: Some((WORDS, Bm25::default())),
                sentences: None,
            },
        ),
    ] {
        let started = Instant::now();
        write_index_with(&path, &meta, passages, &vectors, &opts).unwrap();
        let secs = started.elapsed().as_secs_f64();
        let size = std::fs::metadata(&path).unwrap().len();
        eprintln!(
            "write_index_with, {} passages, {name}: {secs:.2} s, {:.1} MiB",
            passages.len(),
            size as f64 / (1 << 20) as f64
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// The speculative step `primd run` takes per partial in hybrid mode (`src/stream`): the
/// lexical top-C of the partial, the 1-bit scan's top-C of its embedding, and their union
/// scored and fused as `--emit-speculative`'s best guess is (`HybridSearcher::fuse`: the
/// union, int8 cosines, min-max fusion). The embedding itself is not part of it (it runs
/// only on a trigger, and costs what `benches/embed.rs` says); random unit vectors stand
/// in for passages and partials, which changes nothing in the cost of a scan.
fn speculative_step(c: &mut Criterion, name: &str, passages: &[PassageRecord], queries: &[String]) {
    use primd::dense::{Candidates, DEFAULT_CANDIDATES, Query};
    use primd::fusion::Fusion;
    use primd::retriever::{DEFAULT_LEXICAL_CANDIDATES, HybridSearcher, Ranked};

    let dim = primd::embed::DIM;
    let mut rng = Rng::new(11);
    let mut unit = |n: usize| -> Vec<f32> {
        let v: Vec<f32> = (0..n * dim).map(|_| rng.unit() as f32 - 0.5).collect();
        v.chunks(dim)
            .flat_map(|c| {
                let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt();
                c.iter().map(move |x| x / norm)
            })
            .collect()
    };
    let vectors = unit(passages.len());
    // With PRIMD_BENCH_INDEX (built by build-index), its model fingerprint, so that the
    // synthetic index can be served by `primd run` (PRIMD_BENCH_KEEP_INDEX: where the
    // 100k one is kept; for the daemon's memory figure).
    let fingerprint = std::env::var_os("PRIMD_BENCH_INDEX")
        .and_then(|p| primd::index::Index::open(std::path::Path::new(&p)).ok())
        .map_or([0; 32], |ix| ix.meta().fingerprint);
    let meta = IndexMeta {
        dim: dim as u32,
        fingerprint,
        chunk_words: 0,
        overlap_words: 0,
    };
    let dir = cache_dir();
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("speculative-{}.idx", passages.len()));
    let opts = WriteOptions {
        lexical: Some((DEFAULT_ANALYZER, Bm25::default())),
        sentences: None,
    };
    write_index_with(&path, &meta, passages, &vectors, &opts).unwrap();
    drop(vectors);
    let index = primd::index::Index::open(&path).unwrap();
    let mut searcher = HybridSearcher::new(&index).unwrap();
    // Partials: the first 4, 7 and 10 words of each query, each with its own embedding.
    let partials: Vec<String> = queries
        .iter()
        .flat_map(|q| {
            let w: Vec<&str> = q.split(' ').collect();
            [4, 7, 10].map(|n| w[..n.min(w.len())].join(" "))
        })
        .collect();
    let embeddings = unit(partials.len());
    let queries: Vec<Query> = embeddings
        .chunks(dim)
        .map(|e| Query::new(e.try_into().unwrap()))
        .collect();
    let (mut lexical, mut dense, mut guess) = (Hits::new(), Candidates::new(), Ranked::new());
    let mut g = c.benchmark_group(name);
    g.sample_size(50);
    let mut i = 0;
    g.bench_function("speculative_step", |b| {
        b.iter(|| {
            i = (i + 1) % partials.len();
            searcher.lexical(
                &partials[i],
                "",
                0.0,
                DEFAULT_LEXICAL_CANDIDATES,
                &mut lexical,
            );
            searcher
                .dense()
                .binary_scan(&queries[i], DEFAULT_CANDIDATES, &mut dense);
            searcher.fuse(
                Some(&queries[i]),
                &lexical,
                &dense,
                Fusion::default(),
                10,
                &mut guess,
            );
            black_box(guess.len())
        })
    });
    g.bench_function("speculative_lexical_and_scan", |b| {
        b.iter(|| {
            i = (i + 1) % partials.len();
            searcher.lexical(
                &partials[i],
                "",
                0.0,
                DEFAULT_LEXICAL_CANDIDATES,
                &mut lexical,
            );
            searcher
                .dense()
                .binary_scan(&queries[i], DEFAULT_CANDIDATES, &mut dense);
            black_box(lexical.len() + dense.len())
        })
    });
    g.finish();
    drop(searcher);
    drop(index);
    match std::env::var_os("PRIMD_BENCH_KEEP_INDEX") {
        Some(keep) if passages.len() == 100_000 => {
            std::fs::rename(&path, &keep).unwrap();
            eprintln!("kept the 100k-passage index as {}", keep.to_string_lossy());
        }
        _ => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn spoken_squad() -> Option<(Vec<PassageRecord>, Vec<String>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/spoken-squad");
    let corpus = std::fs::read_to_string(root.join("corpus.jsonl")).ok()?;
    let queries = std::fs::read_to_string(root.join("queries.jsonl")).ok()?;
    let field = |line: &str, key: &str| -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        Some(v.get(key)?.as_str()?.to_string())
    };
    let passages = corpus
        .lines()
        .enumerate()
        .map(|(i, l)| PassageRecord {
            id: format!("s{i}"),
            title: field(l, "title").unwrap_or_default(),
            text: field(l, "text").unwrap_or_default(),
            chunk: 0,
            word_start: 0,
            word_end: 0,
        })
        .collect();
    let queries = queries
        .lines()
        .take(1000)
        .filter_map(|l| field(l, "text"))
        .collect();
    Some((passages, queries))
}

/// The index `PRIMD_BENCH_INDEX` names and the text of the file `var` names, if both are set.
fn index_and_file(var: &str) -> Option<(primd::index::Index, String)> {
    let index = std::env::var_os("PRIMD_BENCH_INDEX")?;
    let file = std::env::var_os(var)?;
    let index = primd::index::Index::open(std::path::Path::new(&index)).unwrap();
    Some((index, std::fs::read_to_string(file).unwrap()))
}

/// The lexical section of `PRIMD_BENCH_INDEX` and the questions of `PRIMD_BENCH_QUERIES`.
fn built_index(c: &mut Criterion) {
    let Some((index, text)) = index_and_file("PRIMD_BENCH_QUERIES") else {
        return;
    };
    let queries: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some(v.get("text")?.as_str()?.to_string())
        })
        .collect();
    let lex = index
        .lexical()
        .expect("PRIMD_BENCH_INDEX has no lexical section");
    eprintln!(
        "lexical_index: {} passages, {} queries",
        lex.doc_count(),
        queries.len()
    );
    bench_queries(c, "lexical_index", &lex, &queries, &[], true);
}

/// Every partial and final of `PRIMD_BENCH_STREAMS` (recorded streams, `{"partials":
/// [{"text"}], "final"}` per line), in order, over `PRIMD_BENCH_INDEX`'s section.
fn stream_partials(c: &mut Criterion) {
    let Some((index, text)) = index_and_file("PRIMD_BENCH_STREAMS") else {
        return;
    };
    let mut partials = Vec::new();
    for l in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let texts = v.get("partials").and_then(|p| p.as_array());
        for p in texts.into_iter().flatten() {
            partials.extend(p.get("text").and_then(|t| t.as_str()).map(String::from));
        }
        partials.extend(v.get("final").and_then(|t| t.as_str()).map(String::from));
    }
    let lex = index
        .lexical()
        .expect("PRIMD_BENCH_INDEX has no lexical section");
    eprintln!("lexical_partials: {} partials and finals", partials.len());
    bench_queries(c, "lexical_partials", &lex, &partials, &[], false);
}

fn lexical(c: &mut Criterion) {
    built_index(c);
    stream_partials(c);
    let mut sizes = vec![2_400usize, 100_000];
    if std::env::var_os("PRIMD_BENCH_1M").is_some() {
        sizes.push(1_000_000);
    }
    // PRIMD_BENCH_SIZES=100000 (comma-separated; empty: none) replaces the list, for
    // A/B runs of one size without building the others.
    if let Ok(list) = std::env::var("PRIMD_BENCH_SIZES") {
        sizes = list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    for &n in &sizes {
        let (passages, queries, answers) = corpus(n);
        let name = if n >= 1_000_000 {
            format!("lexical_{}m", n / 1_000_000)
        } else {
            format!("lexical_{:.1}k", n as f64 / 1000.0)
        };
        let char4 = section(n, &DEFAULT_ANALYZER, &passages);
        let quick = std::env::var_os("PRIMD_BENCH_QUICK").is_some();
        if n <= 100_000 && !quick {
            speculative_step(c, &name, &passages, &queries);
            build_cost(&passages);
        }
        // Word queries: the analyzer to weigh against char 4-grams where a corpus is large.
        if (n <= 100_000 && !quick) || std::env::var_os("PRIMD_BENCH_WORDS").is_some() {
            let words = section(n, &WORDS, &passages);
            let norms = Lexical::open(&words).unwrap().doc_norms();
            let lex = Lexical::open(&words).unwrap().with_norms(&norms);
            bench_queries(c, &name, &lex, &queries, &answers, true);
        }
        drop(passages);
        // Norms precomputed and a small corpus's postings decoded, as an open `Index`
        // serves the section.
        let norms = Lexical::open(&char4).unwrap().doc_norms();
        let lex = Lexical::open(&char4).unwrap().with_norms(&norms);
        let decoded = Decoded::for_serving(&lex);
        let lex = match &decoded {
            Some(d) => lex.with_decoded(d),
            None => lex,
        };
        bench_queries(c, &name, &lex, &queries, &answers, true);
    }
    if let Some((passages, queries)) = spoken_squad() {
        let bytes = build(texts(&passages), &DEFAULT_ANALYZER, Bm25::default()).unwrap();
        let norms = Lexical::open(&bytes).unwrap().doc_norms();
        // Compressed postings, not decoded: the path of a corpus of more than 4,096
        // passages, here on the dev corpus (against `lexical_index` on the same corpus).
        let lex = Lexical::open(&bytes).unwrap().with_norms(&norms);
        bench_queries(c, "lexical_spoken_squad", &lex, &queries, &[], true);
    }
}

criterion_group!(benches, lexical);
criterion_main!(benches);
