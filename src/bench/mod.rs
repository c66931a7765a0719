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
//!
//! The files, one job each: `report` (the JSON document and the table), `measure` (time
//! budgets, the scan against a memory read, the speculative step), `machine` (CPU name,
//! instruction sets, memory), `synthetic` (the index measured when none is given). The
//! command (`primd bench`, in the binary) only parses flags and prints.

mod machine;
mod measure;
mod report;
mod synthetic;

pub use machine::kernel_report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use self::machine::{cpu_model, drop_cached_pages, features, vm_kib};
use self::measure::{
    Budget, measure_scan, measure_step, ms, percentile, query_texts, text_of_tokens,
};
use self::report::{Cpu, EmbedRow, IndexInfo, Kernels, Memory, Model, ReaderCost};
pub use self::report::{Report, SCHEMA, table};
use self::synthetic::SyntheticIndex;
use crate::dense::Query;
use crate::embed::{DIM, Embed, Embedder, EmbedderOptions, Embedding};
use crate::index::{Index, Load};
use crate::retriever::HybridSearcher;

/// What to measure: `primd bench`'s flags.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Model directory.
    pub model: PathBuf,
    /// The user's index; `None`: a synthetic one.
    pub index: Option<PathBuf>,
    /// Most embedder threads to try (default: every core).
    pub threads: Option<u16>,
    /// Smaller budgets and a smaller synthetic index (CI, emulators).
    pub quick: bool,
    /// The reader's directory (`None`: no reader measured).
    pub reader: Option<PathBuf>,
}

/// Sustained int8 multiply-add rates assumed for the boards, one core, GMAC/s: a Pi 4's
/// Cortex-A72 (1.8 GHz, NEON without `sdot`: widening multiplies, ~8 MACs a cycle,
/// about 60 % sustained) and a Pi 5's Cortex-A76 (2.4 GHz, `sdot` on two pipes: 32 MACs
/// a cycle, about 50 % sustained). Estimates for planning; `primd bench` on the board
/// measures the real figure.
const PI4_GMAC_S: f64 = 8.6;
const PI5_GMAC_S: f64 = 38.0;

/// Multiply-adds of one pass of a BERT encoder of `layers` layers (384 wide, FFN 1536)
/// over `tokens` tokens: the linears and the attention's two products.
fn encoder_macs(layers: usize, tokens: usize) -> f64 {
    let (d, f, t) = (384.0, 1536.0, tokens as f64);
    layers as f64 * (t * (4.0 * d * d + 2.0 * d * f) + 2.0 * t * t * d)
}

/// The reader's cost: a question and a dev-like sentence, one batch of pairs timed.
fn reader_cost(dir: &Path, budget: &Budget) -> anyhow::Result<ReaderCost> {
    use crate::context::{ReadSettings, read::STEP};
    let t0 = Instant::now();
    let mut reader = crate::embed::reader::Reader::load(dir)?;
    let load_ms = ms(t0.elapsed());
    let question = "what time does the planetarium show start on thursdays";
    let sentence = "Shows start at 11:00, 12:30, 14:00 and 15:30 every open day, with an \
                    extra evening show on Thursdays at 19:00 during the summer months.";
    reader.set_question(question)?;
    let pair_tokens = reader.pair_tokens(sentence)?;
    let batch = [sentence; STEP];
    let mut out = [0.0f32; STEP];
    let s = budget.samples(|| {
        let t = Instant::now();
        reader.score(&batch, &mut out)?;
        Ok(ms(t.elapsed()))
    })?;
    let batch_p50_ms = percentile(&s, 50.0);
    let pair_p50_ms = batch_p50_ms / STEP as f64;
    let pairs = ReadSettings::default().sentences;
    let pair_gmac = encoder_macs(reader.depth(), pair_tokens) / 1e9;
    Ok(ReaderCost {
        dir: dir.to_path_buf(),
        layers: reader.depth(),
        load_ms,
        pair_tokens,
        batch: STEP,
        runs: s.len(),
        batch_p50_ms,
        batch_p95_ms: percentile(&s, 95.0),
        pair_p50_ms,
        pairs_per_utterance: pairs,
        utterance_ms: pair_p50_ms * pairs as f64,
        pair_gmac,
        gmac_s: pair_gmac / (pair_p50_ms / 1e3),
        pi4_utterance_ms_estimate: pair_gmac * pairs as f64 / PI4_GMAC_S * 1e3,
        pi5_utterance_ms_estimate: pair_gmac * pairs as f64 / PI5_GMAC_S * 1e3,
    })
}

/// Query lengths measured, in tokens as the model sees them ([CLS] and [SEP] included):
/// a few words, a sentence, a long question.
const TOKEN_LENGTHS: [usize; 3] = [8, 16, 32];

/// Results per step (as `top_k`'s default).
const TOP_K: usize = 10;

/// Runs every measurement. `embedder_for` loads the embedder for the user's index (its
/// own precision, as `primd run` would; the command layer's rule).
pub fn run(
    args: &Options,
    embedder_for: impl FnOnce(&Index) -> anyhow::Result<Embedder>,
) -> anyhow::Result<Report> {
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
        // The defaults: the index's own precision, one thread (threads are measured below).
        Some(index) => embedder_for(index)?,
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

    // ---- the reader (before the index: its peak is the models' alone) ----
    let reader = args
        .reader
        .as_deref()
        .map(|dir| reader_cost(dir, &budget))
        .transpose()?;

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
            scan: crate::scan::kernel_name(),
            int8_matmul: crate::qgemm::kernel_name(),
            lexical: crate::lexical::kernel_name(),
            tract_f32: format!(
                "{:?} ({})",
                tract_linalg::isa::native(),
                tract_linalg::isa::native().nickname()
            ),
            report: kernel_report(),
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
        reader,
        memory: Memory {
            peak_rss_after_embed_kib,
            peak_rss_kib: vm_kib("VmHWM"),
            rss_end_kib: vm_kib("VmRSS"),
        },
    };
    drop(searcher);
    drop(index);
    drop(synthetic);
    Ok(report)
}
