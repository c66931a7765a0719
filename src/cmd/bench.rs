//! `primd bench`: the self-benchmark a user runs on the board in their hand.
//!
//! Why it exists: primd's figures in the README come from one x86 machine, but it runs on
//! a Pi 4 (no `sdot`), a Pi 5, a Jetson, next to a speech recognizer that wants the same
//! cores. Which kernels primd picked, how long an embed takes at the lengths partial
//! transcripts have, whether a second thread helps, how close the 1-bit scan runs to the
//! memory's read speed, what one speculative step costs on the user's own index and how
//! long the index takes to page in — these answer "will it keep up here?" and make a
//! useful bug report. A readable table by default, `--json` for scripts (schema in
//! `docs/bench.md`; `schema` names its version).
//!
//! Everything measured is the code the daemon runs: [`Embedder`] (tokenizer + encoder,
//! pooling), [`HybridSearcher`]'s lexical query, binary scan and fused union (what
//! `stream` does per speculated partial), [`Index::open_with`] with `populate` (what
//! `primd run` does at start). Timings are medians and 95th percentiles of repeated runs
//! within a small time budget per figure, so the default run takes a few seconds and
//! `--quick` (CI, emulators) well under that in real time.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Embedding};
use primd::fusion::Fusion;
use primd::hybrid::{DEFAULT_LEXICAL_CANDIDATES, HybridSearcher, Ranked, Retriever};
use primd::index::{Index, IndexMeta, Load, PassageRecord, write_index};
use primd::search::{Candidates, DEFAULT_CANDIDATES, Hits, Query};
use serde::Serialize;

use crate::cli::BenchArgs;

/// Version of the JSON output; bumped when a field changes meaning or goes away (new
/// fields may appear without a bump).
pub const SCHEMA: &str = "primd-bench/1";

/// Query lengths measured, in tokens as the model sees them ([CLS] and [SEP] included):
/// a few words, a sentence, a long question.
const TOKEN_LENGTHS: [usize; 3] = [8, 16, 32];

/// Results per step (as `top_k`'s default).
const TOP_K: usize = 10;

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    primd_version: &'static str,
    quick: bool,
    cpu: Cpu,
    kernels: Kernels,
    model: Model,
    embed: Vec<EmbedRow>,
    index: IndexInfo,
    scan: Scan,
    step: Step,
    memory: Memory,
}

#[derive(Serialize)]
struct Cpu {
    arch: &'static str,
    model: String,
    /// Logical CPUs this process may run on.
    cores: usize,
    /// The 1-minute load average when the run started (runnable threads; above `cores`
    /// the figures include waiting for a CPU). None without /proc.
    load_avg: Option<f64>,
    features: Features,
}

/// Instruction-set extensions primd's kernels (or tract's) can use; false on the other
/// architecture.
#[derive(Serialize, Default)]
struct Features {
    neon: bool,
    dotprod: bool,
    i8mm: bool,
    fp16: bool,
    avx2: bool,
    fma: bool,
    avxvnni: bool,
    avx512vnni: bool,
}

#[derive(Serialize)]
struct Kernels {
    /// 1-bit scan and int8 rerank (`primd::scan::kernel_name`).
    scan: &'static str,
    /// int8 GEMMs of the default embedder (`primd::qgemm::kernel_name`).
    int8_matmul: &'static str,
    /// posting decoding and BM25 scoring (`primd::lexical::kernel_name`).
    lexical: &'static str,
    /// tract's f32 kernels (the fp32 model).
    tract_f32: String,
    /// `primd::kernel_report()`, as logged by the daemon.
    report: String,
}

#[derive(Serialize)]
struct Model {
    dir: PathBuf,
    precision: String,
    /// Loading the model with one thread (read, check, pack the weights).
    load_ms: f64,
}

#[derive(Serialize)]
struct EmbedRow {
    tokens: usize,
    threads: usize,
    runs: usize,
    p50_ms: f64,
    p95_ms: f64,
}

#[derive(Serialize)]
struct IndexInfo {
    /// The `--index` file; null for the synthetic index.
    path: Option<PathBuf>,
    synthetic: bool,
    passages: usize,
    lexical: bool,
    /// RAM taken by the lexical postings decoded at open (0: scored from the file).
    decoded_bytes: usize,
    file_bytes: u64,
    /// Whether the file's cached pages could be dropped first (`posix_fadvise
    /// DONTNEED`), so `page_in_ms` read it from storage rather than from the page cache.
    cold: bool,
    /// `Index::open_with(populate)`: validation and reading every page, as `primd run` starts.
    page_in_ms: f64,
    page_in_mib_s: f64,
    /// Opening again without populate (the cheap checks only, file cached).
    open_ms: f64,
}

#[derive(Serialize)]
struct Scan {
    passages: usize,
    bytes: usize,
    runs: usize,
    /// One binary scan of every code, top-`candidates` kept.
    p50_ms: f64,
    gib_s: f64,
    /// A plain read (sum of u64 words) of a buffer of the same size, in the same run.
    read_p50_ms: f64,
    read_gib_s: f64,
    /// Scan speed / read speed.
    ratio: f64,
}

#[derive(Serialize)]
struct Step {
    /// `hybrid` when the index has a lexical section, else `dense`.
    retriever: Retriever,
    queries: usize,
    runs: usize,
    candidates: usize,
    lexical_candidates: usize,
    /// Lexical query + binary scan + fused union (dense rerank, fusion, top-k), without
    /// the embed: what the daemon does per speculated partial after embedding it.
    p50_ms: f64,
    p95_ms: f64,
    lexical_p50_ms: f64,
    scan_p50_ms: f64,
    fuse_p50_ms: f64,
    /// Embed (one thread) + step, once per query.
    with_embed_p50_ms: f64,
    with_embed_p95_ms: f64,
}

#[derive(Serialize)]
struct Memory {
    /// Peak resident set (VmHWM) after loading the model and the one-thread embed runs,
    /// before any other embedder is loaded or any index opened.
    peak_rss_after_embed_kib: Option<u64>,
    /// Peak resident set of the whole run: includes a second embedder (more threads)
    /// and, without `--index`, making the synthetic index.
    peak_rss_kib: Option<u64>,
    /// Resident set at the end (VmRSS), with what a daemon holds: one embedder, the
    /// index populated, a searcher.
    rss_end_kib: Option<u64>,
}

/// How long to repeat each measurement.
#[derive(Clone, Copy)]
struct Budget {
    time: Duration,
    min_runs: usize,
    max_runs: usize,
    warmup: usize,
}

impl Budget {
    fn new(quick: bool) -> Self {
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
    fn samples(&self, mut f: impl FnMut() -> anyhow::Result<f64>) -> anyhow::Result<Vec<f64>> {
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

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let budget = Budget::new(args.quick);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max_threads = args.threads.map_or(cores, usize::from).max(1);
    let load_avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok());

    // The user's index is opened first only to learn which model made it (the header;
    // its pages are measured later).
    let user_index = match &args.index {
        Some(p) => Some(Index::open(p).with_context(|| format!("opening {}", p.display()))?),
        None => None,
    };

    // ---- model and embeds ----
    let started = Instant::now();
    let mut embedder = match &user_index {
        Some(index) => {
            // The defaults: the index's own precision, one thread (threads are measured below).
            let cfg = primd::config::load(None, Default::default())?;
            super::embedder_for(index, &args.model, &cfg)?
        }
        None => Embedder::load(&args.model, &EmbedderOptions::default())?,
    };
    let load_ms = ms(started.elapsed());
    let precision = embedder.precision();
    let fingerprint = embedder.fingerprint();
    let texts = TOKEN_LENGTHS
        .iter()
        .map(|&n| text_of_tokens(&mut embedder, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut embed = Vec::new();
    let mut peak_rss_after_embed_kib = None;
    for threads in 1..=max_threads {
        let mut e = if threads == 1 {
            embedder.fork()?
        } else {
            Embedder::load(&args.model, &EmbedderOptions { precision, threads })?
        };
        let mut v = [0.0f32; DIM];
        for (text, tokens) in &texts {
            let s = budget.samples(|| {
                let t0 = Instant::now();
                e.embed_into(text, &mut v)?;
                Ok(ms(t0.elapsed()))
            })?;
            embed.push(EmbedRow {
                tokens: *tokens,
                threads,
                runs: s.len(),
                p50_ms: percentile(&s, 50.0),
                p95_ms: percentile(&s, 95.0),
            });
        }
        if threads == 1 {
            // Before a second embedder (the one with more threads) is loaded beside it.
            peak_rss_after_embed_kib = vm_kib("VmHWM");
        }
    }

    // ---- the index: page-in, scan vs memory read, speculative step ----
    let synthetic = match &args.index {
        Some(_) => None,
        None => Some(SyntheticIndex::write(
            if args.quick { 2_000 } else { 20_000 },
            if args.quick { 30 } else { 80 },
            &fingerprint,
        )?),
    };
    drop(user_index);
    let path: &Path = match (&args.index, &synthetic) {
        (Some(p), _) => p,
        (None, Some(s)) => &s.path,
        (None, None) => unreachable!("a synthetic index is made when none is given"),
    };
    let file_bytes = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let cold = drop_cached_pages(path);
    let t0 = Instant::now();
    let index = Index::open_with(
        path,
        Load {
            populate: true,
            in_ram: false,
        },
    )
    .with_context(|| format!("opening {}", path.display()))?;
    let page_in_ms = ms(t0.elapsed());
    let t0 = Instant::now();
    drop(Index::open(path)?);
    let open_ms = ms(t0.elapsed());
    let index_info = IndexInfo {
        path: args.index.clone(),
        synthetic: synthetic.is_some(),
        passages: index.len(),
        lexical: index.lexical().is_some(),
        decoded_bytes: index.decoded_bytes(),
        file_bytes,
        cold,
        page_in_ms,
        page_in_mib_s: file_bytes as f64 / (1 << 20) as f64 / (page_in_ms / 1e3),
        open_ms,
    };

    let mut searcher = HybridSearcher::new(&index)?;
    let queries = query_texts(&index, if args.quick { 4 } else { 16 })?;
    let mut vectors: Vec<Embedding> = Vec::with_capacity(queries.len());
    let mut e = embedder;
    for q in &queries {
        let mut v = [0.0f32; DIM];
        e.embed_into(q, &mut v)?;
        vectors.push(v);
    }
    let scan = measure_scan(&mut searcher, &Query::new(&vectors[0]), &budget)?;
    let step = measure_step(&mut searcher, &mut e, &queries, &vectors, &budget)?;

    let report = Report {
        schema: SCHEMA,
        primd_version: env!("CARGO_PKG_VERSION"),
        quick: args.quick,
        cpu: Cpu {
            arch: std::env::consts::ARCH,
            model: cpu_model(),
            cores,
            load_avg,
            features: features(),
        },
        kernels: Kernels {
            scan: primd::scan::kernel_name(),
            int8_matmul: primd::qgemm::kernel_name(),
            lexical: primd::lexical::kernel_name(),
            tract_f32: format!(
                "{:?} ({})",
                tract_linalg::isa::native(),
                tract_linalg::isa::native().nickname()
            ),
            report: primd::kernel_report(),
        },
        model: Model {
            dir: args.model.clone(),
            precision: precision.to_string(),
            load_ms,
        },
        embed,
        index: index_info,
        scan,
        step,
        memory: Memory {
            peak_rss_after_embed_kib,
            peak_rss_kib: vm_kib("VmHWM"),
            rss_end_kib: vm_kib("VmRSS"),
        },
    };
    drop(searcher);
    drop(index);
    drop(synthetic);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

/// A text the embedder sees as exactly `n` tokens (or the nearest it can reach), and
/// that count.
fn text_of_tokens(e: &mut Embedder, n: usize) -> anyhow::Result<(String, usize)> {
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
fn query_texts(index: &Index, n: usize) -> anyhow::Result<Vec<String>> {
    let len = index.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n.min(len) {
        let p = index.passage(i * len / n.min(len))?;
        let words: Vec<&str> = p.text.split_whitespace().take(10).collect();
        out.push(words.join(" "));
    }
    Ok(out)
}

fn measure_scan(
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
fn read_all(words: &[u64]) -> u64 {
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

fn measure_step(
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

/// A random index in the temporary directory, removed on drop: random unit vectors and
/// Zipf-distributed words (so BM25 posting lists are as skewed as a real corpus's).
struct SyntheticIndex {
    path: PathBuf,
}

impl SyntheticIndex {
    fn write(passages: usize, words: usize, fingerprint: &[u8; 32]) -> anyhow::Result<Self> {
        const VOCAB: usize = 20_000;
        let path = std::env::temp_dir().join(format!("primd-bench-{}.idx", std::process::id()));
        // Seeded: two runs bench the same synthetic index.
        let mut rng = primd::testing::Rng::new(1);
        // Zipf(1) over VOCAB ranks by inverse CDF on the harmonic numbers.
        let harmonic: Vec<f64> = (1..=VOCAB)
            .scan(0.0, |h, r| {
                *h += 1.0 / r as f64;
                Some(*h)
            })
            .collect();
        let total = harmonic[VOCAB - 1];
        let mut records = Vec::with_capacity(passages);
        let mut vectors = Vec::with_capacity(passages * DIM);
        for i in 0..passages {
            let mut text = String::with_capacity(words * 7);
            for w in 0..words {
                let u = rng.unit() * total;
                let rank = harmonic.partition_point(|&h| h < u);
                if w > 0 {
                    text.push(' ');
                }
                text.push_str(&word(rank));
            }
            records.push(PassageRecord {
                id: format!("synthetic-{i}"),
                title: String::new(),
                text,
                chunk: 0,
                word_start: 0,
                word_end: words as u32,
            });
            let v: Vec<f32> = (0..DIM).map(|_| rng.gauss()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            vectors.extend(v.iter().map(|x| x / norm));
        }
        let meta = IndexMeta {
            dim: DIM as u32,
            fingerprint: *fingerprint,
            chunk_words: words as u32,
            overlap_words: 0,
        };
        write_index(&path, &meta, &records, &vectors)
            .with_context(|| format!("writing the synthetic index {}", path.display()))?;
        Ok(SyntheticIndex { path })
    }
}

impl Drop for SyntheticIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A pronounceable word for a rank: consonant-vowel syllables of its base-100 digits.
fn word(rank: usize) -> String {
    const C: &[u8] = b"bdfgklmnprstvwz";
    const V: &[u8] = b"aeiou";
    let mut s = String::new();
    let mut r = rank + 1;
    while r > 0 {
        let d = r % 75;
        s.push(C[d / 5] as char);
        s.push(V[d % 5] as char);
        r /= 75;
    }
    s
}

/// Asks the kernel to drop `path`'s cached pages, so the next open reads it from
/// storage; true if it accepted. Pages mapped by a running daemon stay (the kernel
/// never drops mapped pages this way), so this costs a running daemon nothing.
fn drop_cached_pages(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let Ok(file) = std::fs::File::open(path) else {
            return false;
        };
        // SAFETY: `file` is open for the duration of the call; posix_fadvise only reads
        // its arguments and touches no memory of ours.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// A `Vm*` line of /proc/self/status, in KiB (None where there is no procfs).
fn vm_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The CPU's name: x86's "model name"; on ARM the board ("Model", e.g. "Raspberry Pi 4
/// Model B") and the core, named from its "CPU part".
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    if let Some(m) = field("model name") {
        return m;
    }
    let core = field("CPU part").map(|part| {
        let name = match part.as_str() {
            "0xd03" => "Cortex-A53",
            "0xd04" => "Cortex-A35",
            "0xd05" => "Cortex-A55",
            "0xd07" => "Cortex-A57",
            "0xd08" => "Cortex-A72",
            "0xd09" => "Cortex-A73",
            "0xd0a" => "Cortex-A75",
            "0xd0b" => "Cortex-A76",
            "0xd0c" => "Neoverse-N1",
            "0xd0d" => "Cortex-A77",
            "0xd41" => "Cortex-A78",
            "0xd42" => "Cortex-A78AE",
            "0xd40" => "Neoverse-V1",
            "0xd46" => "Cortex-A510",
            "0xd47" => "Cortex-A710",
            "0xd49" => "Neoverse-N2",
            "0xd4f" => "Neoverse-V2",
            _ => "",
        };
        if name.is_empty() {
            format!("CPU part {part}")
        } else {
            name.to_string()
        }
    });
    let board = field("Model").or_else(|| {
        std::fs::read_to_string("/proc/device-tree/model")
            .ok()
            .map(|s| s.trim_end_matches('\0').trim().to_string())
    });
    match (board, core) {
        (Some(b), Some(c)) => format!("{b} ({c})"),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => "unknown".into(),
    }
}

fn features() -> Features {
    #[allow(unused_mut)]
    let mut f = Features::default();
    #[cfg(target_arch = "x86_64")]
    {
        f.avx2 = std::arch::is_x86_feature_detected!("avx2");
        f.fma = std::arch::is_x86_feature_detected!("fma");
        f.avxvnni = std::arch::is_x86_feature_detected!("avxvnni");
        f.avx512vnni = std::arch::is_x86_feature_detected!("avx512vnni");
    }
    #[cfg(target_arch = "aarch64")]
    {
        f.neon = std::arch::is_aarch64_feature_detected!("neon");
        f.dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
        f.i8mm = std::arch::is_aarch64_feature_detected!("i8mm");
        f.fp16 = std::arch::is_aarch64_feature_detected!("fp16");
    }
    f
}

/// Nearest-rank percentile of unsorted samples (NaN for none).
fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

/// The human-readable report.
fn table(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let f = &r.cpu.features;
    let flags: Vec<&str> = [
        ("neon", f.neon),
        ("dotprod", f.dotprod),
        ("i8mm", f.i8mm),
        ("fp16", f.fp16),
        ("avx2", f.avx2),
        ("fma", f.fma),
        ("avxvnni", f.avxvnni),
        ("avx512vnni", f.avx512vnni),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(n, _)| *n)
    .collect();
    let _ = writeln!(
        s,
        "primd bench {}{}",
        r.primd_version,
        if r.quick { " (--quick)" } else { "" }
    );
    let _ = writeln!(
        s,
        "cpu       {} ({}, {} cores, load {})",
        r.cpu.model,
        r.cpu.arch,
        r.cpu.cores,
        r.cpu.load_avg.map_or("n/a".into(), |l| format!("{l:.2}"))
    );
    let _ = writeln!(
        s,
        "features  {}",
        if flags.is_empty() {
            "none of neon dotprod i8mm fp16 avx2 fma avxvnni avx512vnni".to_string()
        } else {
            flags.join(" ")
        }
    );
    let _ = writeln!(
        s,
        "kernels   scan/rerank {}, int8 matmul {}, BM25 postings {}, tract f32 {}",
        r.kernels.scan, r.kernels.int8_matmul, r.kernels.lexical, r.kernels.tract_f32
    );
    let _ = writeln!(
        s,
        "model     {} {} (loaded in {:.1} ms)",
        r.model.precision,
        r.model.dir.display(),
        r.model.load_ms
    );
    let _ = writeln!(s, "\nembed, ms (p50 / p95)");
    let max_threads = r.embed.iter().map(|e| e.threads).max().unwrap_or(1);
    let _ = write!(s, "  tokens");
    for t in 1..=max_threads {
        let _ = write!(
            s,
            " {:>17}",
            format!("{t} thread{}", if t > 1 { "s" } else { "" })
        );
    }
    let _ = writeln!(s);
    let mut lengths: Vec<usize> = r.embed.iter().map(|e| e.tokens).collect();
    lengths.dedup();
    lengths.truncate(TOKEN_LENGTHS.len());
    for n in lengths {
        let _ = write!(s, "  {n:>6}");
        for row in r.embed.iter().filter(|e| e.tokens == n) {
            let _ = write!(s, " {:>8.2} / {:>6.2}", row.p50_ms, row.p95_ms);
        }
        let _ = writeln!(s);
    }
    let ix = &r.index;
    let _ = writeln!(
        s,
        "\nindex     {}: {} passages, {:.1} MiB{}",
        ix.path
            .as_ref()
            .map_or("synthetic".to_string(), |p| p.display().to_string()),
        ix.passages,
        mib(ix.file_bytes as f64),
        match (ix.lexical, ix.decoded_bytes) {
            (false, _) => ", no lexical section".to_string(),
            (true, 0) => ", lexical section".to_string(),
            (true, b) => format!(
                ", lexical section (postings decoded in RAM: {:.1} MiB)",
                mib(b as f64)
            ),
        }
    );
    let _ = writeln!(
        s,
        "page-in   {:.1} ms ({:.0} MiB/s, {}); open without populate {:.2} ms",
        ix.page_in_ms,
        ix.page_in_mib_s,
        if ix.cold {
            "cache dropped first"
        } else {
            "file possibly cached"
        },
        ix.open_ms
    );
    let sc = &r.scan;
    let _ = writeln!(
        s,
        "scan      {:.3} ms p50 over {:.2} MiB of codes = {:.1} GiB/s; plain read {:.3} ms = {:.1} GiB/s (scan at {:.2}x read)",
        sc.p50_ms,
        mib(sc.bytes as f64),
        sc.gib_s,
        sc.read_p50_ms,
        sc.read_gib_s,
        sc.ratio
    );
    let st = &r.step;
    let _ = writeln!(
        s,
        "step      {} (lexical top-{} + scan top-{} + fused union, top-{TOP_K}): p50 {:.3} ms, p95 {:.3} ms",
        st.retriever, st.lexical_candidates, st.candidates, st.p50_ms, st.p95_ms
    );
    let _ = writeln!(
        s,
        "          lexical {:.3} + scan {:.3} + fuse {:.3} ms (p50s); with the embed: p50 {:.2} ms, p95 {:.2} ms ({} queries)",
        st.lexical_p50_ms,
        st.scan_p50_ms,
        st.fuse_p50_ms,
        st.with_embed_p50_ms,
        st.with_embed_p95_ms,
        st.queries
    );
    let kib = |k: Option<u64>| {
        k.map_or("n/a".to_string(), |k| {
            format!("{:.1} MiB", k as f64 / 1024.0)
        })
    };
    let _ = writeln!(
        s,
        "memory    peak RSS {} after model load + embeds, {} in the whole run; RSS {} at the end (model + index)",
        kib(r.memory.peak_rss_after_embed_kib),
        kib(r.memory.peak_rss_kib),
        kib(r.memory.rss_end_kib)
    );
    s
}
