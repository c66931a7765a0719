//! What `primd bench` reports: the JSON document (`--json`, schema in `docs/bench.md`,
//! versioned by [`SCHEMA`]) and the table a person reads.

use std::path::PathBuf;

use serde::Serialize;

use super::{TOKEN_LENGTHS, TOP_K};
use crate::ranking::Retriever;

/// Version of the JSON output; bumped when a field changes meaning or goes away (new
/// fields may appear without a bump).
pub const SCHEMA: &str = "primd-bench/1";

#[derive(Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub primd_version: &'static str,
    pub quick: bool,
    pub cpu: Cpu,
    pub kernels: Kernels,
    pub model: Model,
    pub embed: Vec<EmbedRow>,
    pub index: IndexInfo,
    pub scan: Scan,
    pub step: Step,
    /// The reader's cost (absent without one: `--no-reader`, or not fetched).
    pub reader: Option<ReaderCost>,
    pub memory: Memory,
}

#[derive(Serialize)]
pub struct Cpu {
    pub arch: &'static str,
    pub model: String,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// The 1-minute load average when the run started (runnable threads; above `cores`
    /// the figures include waiting for a CPU). None without /proc.
    pub load_avg: Option<f64>,
    pub features: Features,
}

/// Instruction-set extensions primd's kernels (or tract's) can use; false on the other
/// architecture.
#[derive(Serialize, Default)]
pub struct Features {
    pub neon: bool,
    pub dotprod: bool,
    pub i8mm: bool,
    pub fp16: bool,
    pub avx2: bool,
    pub fma: bool,
    pub avxvnni: bool,
    pub avx512vnni: bool,
}

#[derive(Serialize)]
pub struct Kernels {
    /// 1-bit scan and int8 rerank (`primd::scan::kernel_name`).
    pub scan: &'static str,
    /// int8 GEMMs of the default embedder (`primd::qgemm::kernel_name`).
    pub int8_matmul: &'static str,
    /// posting decoding and BM25 scoring (`primd::lexical::kernel_name`).
    pub lexical: &'static str,
    /// tract's f32 kernels (the fp32 model).
    pub tract_f32: String,
    /// `primd::bench::kernel_report()`, as logged by the daemon.
    pub report: String,
}

#[derive(Serialize)]
pub struct Model {
    pub dir: PathBuf,
    pub precision: String,
    /// Loading the model with one thread (read, check, pack the weights).
    pub load_ms: f64,
}

#[derive(Serialize)]
pub struct EmbedRow {
    pub tokens: usize,
    pub threads: usize,
    pub runs: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

#[derive(Serialize)]
pub struct IndexInfo {
    /// The `--index` file; null for the synthetic index.
    pub path: Option<PathBuf>,
    pub synthetic: bool,
    pub passages: usize,
    pub lexical: bool,
    /// RAM taken by the lexical postings decoded at open (0: scored from the file).
    pub decoded_bytes: usize,
    pub file_bytes: u64,
    /// Whether the file's cached pages could be dropped first (`posix_fadvise
    /// DONTNEED`), so `page_in_ms` read it from storage rather than from the page cache.
    pub cold: bool,
    /// `Index::open_with(populate)`: validation and reading every page, as `primd run` starts.
    pub page_in_ms: f64,
    pub page_in_mib_s: f64,
    /// Opening again without populate (the cheap checks only, file cached).
    pub open_ms: f64,
}

#[derive(Serialize)]
pub struct Scan {
    pub passages: usize,
    pub bytes: usize,
    pub runs: usize,
    /// One binary scan of every code, top-`candidates` kept.
    pub p50_ms: f64,
    pub gib_s: f64,
    /// A plain read (sum of u64 words) of a buffer of the same size, in the same run.
    pub read_p50_ms: f64,
    pub read_gib_s: f64,
    /// Scan speed / read speed.
    pub ratio: f64,
}

#[derive(Serialize)]
pub struct Step {
    /// `hybrid` when the index has a lexical section, else `dense`.
    pub retriever: Retriever,
    pub queries: usize,
    pub runs: usize,
    pub candidates: usize,
    pub lexical_candidates: usize,
    /// Lexical query + binary scan + fused union (dense rerank, fusion, top-k), without
    /// the embed: what the daemon does per speculated partial after embedding it.
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub lexical_p50_ms: f64,
    pub scan_p50_ms: f64,
    pub fuse_p50_ms: f64,
    /// Embed (one thread) + step, once per query.
    pub with_embed_p50_ms: f64,
    pub with_embed_p95_ms: f64,
}

/// What the reader costs per utterance: one batch of [`crate::context::read`]'s
/// pairs timed here, scaled to the sentences it reads per question, and that work on a
/// Pi 4 and a Pi 5 estimated from its multiply-adds.
#[derive(Serialize)]
pub struct ReaderCost {
    pub dir: std::path::PathBuf,
    pub layers: usize,
    pub load_ms: f64,
    /// Word pieces of the measured pair (question + sentence + 3 special tokens).
    pub pair_tokens: usize,
    /// Pairs per batch (one step of reading ahead).
    pub batch: usize,
    pub runs: usize,
    pub batch_p50_ms: f64,
    pub batch_p95_ms: f64,
    pub pair_p50_ms: f64,
    /// Pairs read per question (the default `sentences`).
    pub pairs_per_utterance: usize,
    pub utterance_ms: f64,
    /// Int8 multiply-adds of one pair, and the rate they ran at here.
    pub pair_gmac: f64,
    pub gmac_s: f64,
    /// `utterance_ms` on a board, from `pair_gmac` and an assumed sustained int8 rate
    /// (docs/bench.md): estimates, not measurements; run `primd bench` on the board.
    pub pi4_utterance_ms_estimate: f64,
    pub pi5_utterance_ms_estimate: f64,
}

#[derive(Serialize)]
pub struct Memory {
    /// Peak resident set (VmHWM) after loading the model and the one-thread embed runs,
    /// before any other embedder is loaded or any index opened.
    pub peak_rss_after_embed_kib: Option<u64>,
    /// Peak resident set of the whole run: includes a second embedder (more threads)
    /// and, without `--index`, making the synthetic index.
    pub peak_rss_kib: Option<u64>,
    /// Resident set at the end (VmRSS), with what a daemon holds: one embedder, the
    /// index populated, a searcher.
    pub rss_end_kib: Option<u64>,
}

/// The human-readable report.
pub fn table(r: &Report) -> String {
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
    match &r.reader {
        Some(rd) => {
            let _ = writeln!(
                s,
                "reader    {} layers, {:?} (load {:.0} ms): batch of {} pairs of {} tokens p50 {:.1} ms, p95 {:.1} ms; {:.2} ms a pair ({:.1} GMAC/s)",
                rd.layers,
                rd.dir,
                rd.load_ms,
                rd.batch,
                rd.pair_tokens,
                rd.batch_p50_ms,
                rd.batch_p95_ms,
                rd.pair_p50_ms,
                rd.gmac_s
            );
            let _ = writeln!(
                s,
                "          per utterance ({} pairs, read while the user speaks): {:.0} ms here; estimated {:.0} ms on a Pi 4, {:.0} ms on a Pi 5",
                rd.pairs_per_utterance,
                rd.utterance_ms,
                rd.pi4_utterance_ms_estimate,
                rd.pi5_utterance_ms_estimate
            );
        }
        None => {
            let _ = writeln!(s, "reader    none (--no-reader, or not fetched)");
        }
    }
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

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}
