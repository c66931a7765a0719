//! `build-index`: turns a corpus into a primd index, offline, on a workstation.
//!
//! Input is JSONL (`{"id", "title", "text"}` per line) or a folder of `.txt` / `.md`
//! files. Long documents are split into overlapping word windows that the model reads
//! whole, each chunk keeping its parent id. Embeds on all cores (one model loaded, one
//! forked run state per thread, `primd::parallel`), then writes the index to a temporary
//! file, fsyncs and renames it, so a crash never leaves half an index under the final
//! name. The same input and options always give a byte-identical index.
//!
//! By default the index also gets a lexical (BM25) section (format v2) with primd's default
//! analyzer (`--analyzer`), so the daemon can fuse lexical and dense retrieval;
//! `--no-lexical` writes a dense-only index.

mod corpus;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use primd::context::{sentence_spans, word_pieces};
use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Embedding, MAX_TOKENS, Precision};
use primd::flags::ModelArgs;
use primd::index::{
    Index, IndexMeta, PassageRecord, SentenceSpan, SentenceTable, WriteOptions, passage_embed_text,
    write_index_with,
};
use primd::lexical::{AnalyzerKind, AnalyzerSpec, Bm25, DEFAULT_ANALYZER, check_params};

/// Build a primd index from a corpus.
#[derive(Parser, Debug)]
#[command(name = "build-index", version)]
struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// JSONL file ({"id", "title", "text"} per line) or a folder of .txt/.md files
    #[arg(long, value_name = "PATH")]
    input: PathBuf,
    /// Index file to write (replaced atomically)
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Split documents into windows of at most this many words, each cut shorter where
    /// the model would not read it whole (256 word pieces, title included); 0: never
    /// split (the model reads only a document's first 256 word pieces)
    #[arg(long, value_name = "N", default_value_t = corpus::DEFAULT_CHUNK_WORDS)]
    chunk_words: u32,
    /// Words shared by consecutive windows
    #[arg(long, value_name = "N", default_value_t = corpus::DEFAULT_OVERLAP)]
    overlap: u32,
    /// Passages embedded in parallel, each worker with its own fork of the model
    /// (default: all cores)
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Leave out the lexical (BM25) section: a dense-only index
    #[arg(long)]
    no_lexical: bool,
    /// Leave out the sentence section (format v6): answers' `context` is then made of
    /// whole passages, and the index is smaller and built faster
    #[arg(long)]
    no_sentences: bool,
    /// Lexical analyzer: words, or char3 / char4 / char5 (character n-grams, across words)
    #[arg(long, value_name = "NAME", default_value_t = DEFAULT_ANALYZER)]
    analyzer: AnalyzerSpec,
    /// BM25 k1 (term frequency saturation), recorded in the index
    #[arg(long, value_name = "K1", default_value_t = Bm25::default().k1)]
    bm25_k1: f32,
    /// BM25 b (document length normalisation), recorded in the index
    #[arg(long, value_name = "B", default_value_t = Bm25::default().b)]
    bm25_b: f32,
    /// No progress bar
    #[arg(long, short)]
    quiet: bool,
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("build-index: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    if args.chunk_words > 0 && args.overlap >= args.chunk_words {
        bail!(
            "--overlap ({}) must be smaller than --chunk-words ({})",
            args.overlap,
            args.chunk_words
        );
    }
    let bm25 = Bm25 {
        k1: args.bm25_k1,
        b: args.bm25_b,
    };
    // Checked before the (long) embedding, not after it.
    check_params(&args.analyzer, bm25).map_err(anyhow::Error::msg)?;
    let mut options = WriteOptions {
        lexical: (!args.no_lexical).then_some((args.analyzer, bm25)),
        sentences: None,
    };
    let started = Instant::now();
    let docs = corpus::read(&args.input)?;
    if docs.is_empty() {
        bail!("{:?} holds no documents: nothing to index", args.input);
    }
    // An index is built with int8 unless told otherwise; primd then loads the same.
    let precision = args.model.precision().unwrap_or(Precision::Int8);
    let mut embedder = Embedder::load(
        &args.model.model,
        &EmbedderOptions {
            precision,
            threads: args.model.threads(),
        },
    )?;
    let (passages, truncated) = corpus::chunk(&docs, args.chunk_words, args.overlap, |t, x| {
        read_whole(&mut embedder, t, x)
    });
    if truncated > 0 {
        eprintln!(
            "build-index: {truncated} of {} passages are longer than the model reads ({MAX_TOKENS} \
             word pieces): only their beginning is embedded{}",
            passages.len(),
            if args.chunk_words == 0 {
                " (--chunk-words 0 keeps documents whole)"
            } else {
                " (a title, or a run of text without spaces, longer than that)"
            }
        );
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, passages.len());

    let embed_started = Instant::now();
    let texts: Vec<String> = passages
        .iter()
        .map(|p| passage_embed_text(&p.title, &p.text))
        .collect();
    let describe = |r: &std::ops::Range<usize>| {
        let (first, last) = (&passages[r.start], &passages[r.end - 1]);
        format!(
            "embedding passages {:?} chunk {} to {:?} chunk {}",
            first.id, first.chunk, last.id, last.chunk
        )
    };
    let vectors = embed_all(
        &embedder, &texts, threads, args.quiet, "passages", &describe,
    )?;
    drop(texts);
    let embed_secs = embed_started.elapsed().as_secs_f64();
    let sentences_started = Instant::now();
    if !args.no_sentences {
        options.sentences = Some(sentence_table(
            &mut embedder,
            &passages,
            threads,
            args.quiet,
        )?);
    }
    let sentence_secs = sentences_started.elapsed().as_secs_f64();

    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: embedder.fingerprint(),
        chunk_words: args.chunk_words,
        overlap_words: args.overlap,
    };
    let flat: Vec<f32> = vectors.iter().flatten().copied().collect();
    let write_started = Instant::now();
    write_index_with(&args.output, &meta, &passages, &flat, &options)
        .with_context(|| format!("writing {:?}", args.output))?;
    let write_secs = write_started.elapsed().as_secs_f64();
    let index =
        Index::open(&args.output).with_context(|| format!("reopening {:?}", args.output))?;
    let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    match index.lexical() {
        Some(lex) => {
            eprintln!(
                "build-index: lexical section: {} analyzer, BM25 k1 {} b {}, {} terms, {:.1} MiB \
                 of {:.1} MiB (index written in {write_secs:.1} s)",
                lex.spec(),
                bm25.k1,
                bm25.b,
                lex.term_count(),
                lex.section_bytes() as f64 / (1 << 20) as f64,
                size as f64 / (1 << 20) as f64,
            );
            if let Some(notice) = large_corpus_notice(lex.doc_count(), lex.spec(), &args.output) {
                eprintln!("{notice}");
            }
        }
        None => eprintln!(
            "build-index: no lexical section (--no-lexical): {:.1} MiB, dense search only",
            size as f64 / (1 << 20) as f64
        ),
    }
    if let Some(s) = index.sentences() {
        eprintln!(
            "build-index: sentence section: {} sentences ({:.1} per passage), embedded in {sentence_secs:.1} s",
            s.len(),
            s.len() as f64 / passages.len() as f64
        );
    }
    eprintln!(
        "build-index: {} documents → {} passages in {:?} ({:.1} passages/s embedding on {} threads, {} model, {:.1} s total)",
        docs.len(),
        passages.len(),
        args.output,
        passages.len() as f64 / embed_secs,
        threads,
        precision,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether the encoder reads a passage of `title` and `text` whole. `count_tokens` says
/// at most [`MAX_TOKENS`] (`[CLS]` and `[SEP]` included), so a passage of exactly that
/// many counts as cut: one word piece of caution. A text the tokenizer refuses counts as
/// whole here; embedding it reports the error.
fn read_whole(embedder: &mut Embedder, title: &str, text: &str) -> bool {
    match embedder.count_tokens(&passage_embed_text(title, text)) {
        Ok(n) => n < MAX_TOKENS,
        Err(_) => true,
    }
}

/// Words of passages per [`embed_batch`] call (~250 tokens): short passages are
/// embedded several at a time, their tokens the rows of one GEMM per linear, so each
/// weight panel is read once per batch instead of once per passage. A batch closes as
/// soon as it holds this many words, so long passages go alone or in pairs: beyond a
/// few hundred rows a GEMM gains nothing from more (the weights are already reused
/// across its rows) and its activations would fall out of cache while every weight
/// panel passes over them. Which passages share a batch does not change any vector
/// (each token's row is computed alone: `Int8Encoder::forward_batch`).
const BATCH_WORDS: usize = 192;
/// At most this many passages per batch (one-word passages).
const BATCH_MAX: usize = 16;

/// From this many passages on, a char n-gram query costs a good part of an embed or more
/// (top-100 over synthetic passages, in two phases: 0.5 ms at 100k, 1.5 ms at 500k, 3.6
/// ms at 1M, against about 2.3 ms for a 20-token int8 embed; 2026-12-04, AMD EPYC,
/// `cargo bench --bench lexical`; docs/benchmarks.md, lexical).
const LARGE_CORPUS: usize = 500_000;

/// What a user building a large char n-gram index should know before flashing it: the
/// query runs on every partial, and its cost grows with the corpus.
fn large_corpus_notice(passages: usize, spec: &AnalyzerSpec, output: &Path) -> Option<String> {
    if passages < LARGE_CORPUS || !matches!(spec.kind, AnalyzerKind::CharNgrams { .. }) {
        return None;
    }
    Some(format!(
        "build-index: note: {passages} passages with {spec}: a lexical query runs on every \
         partial and its cost grows with the corpus; at this size it can cost as much as an \
         embed. Measure it on the board with `primd bench --index {}`; `--analyzer words` \
         is several times faster, at a lower hit rate on names the recognizer misspells \
         (README, \"Large corpora\").",
        output.display()
    ))
}

/// Embeds every text on `threads` threads, each with its own fork of the model
/// ([`primd::parallel::map`] over batches of consecutive texts): every vector lands in
/// its text's slot, so the result does not depend on scheduling, and the first failure
/// stops the others. `unit` names the texts on the progress bar; `describe` names a
/// batch that failed.
fn embed_all(
    embedder: &Embedder,
    texts: &[String],
    threads: usize,
    quiet: bool,
    unit: &str,
    describe: &(dyn Fn(&std::ops::Range<usize>) -> String + Sync),
) -> anyhow::Result<Vec<Embedding>> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(texts.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    // Consecutive texts, a batch closing once it holds BATCH_WORDS words.
    let mut batches: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut words = 0;
    for (i, t) in texts.iter().enumerate() {
        words += t.split_whitespace().count();
        if words >= BATCH_WORDS || i + 1 - start >= BATCH_MAX {
            batches.push(start..i + 1);
            (start, words) = (i + 1, 0);
        }
    }
    if start < texts.len() {
        batches.push(start..texts.len());
    }
    let parts = primd::parallel::map(
        &batches,
        threads,
        || Ok(embedder.fork()?),
        |e, _, range| {
            let these: Vec<&str> = texts[range.clone()].iter().map(String::as_str).collect();
            let mut v = vec![[0.0; DIM]; these.len()];
            e.embed_batch(&these, &mut v)
                .with_context(|| describe(range))?;
            bar.inc(these.len() as u64);
            Ok(v)
        },
    );
    bar.finish_and_clear();
    Ok(parts?.into_iter().flatten().collect())
}

/// The passages' sentences ([`primd::context::sentence_spans`], counted by the model's
/// tokenizer) embedded on `threads` threads, as the index's sentence section stores them.
fn sentence_table(
    embedder: &mut Embedder,
    passages: &[PassageRecord],
    threads: usize,
    quiet: bool,
) -> anyhow::Result<SentenceTable> {
    let spans: Vec<Vec<SentenceSpan>> = passages
        .iter()
        .map(|p| {
            if u32::try_from(p.text.len()).is_err() {
                return Vec::new();
            }
            sentence_spans(&p.text, &mut |t| word_pieces(embedder, t))
        })
        .collect();
    let mut texts = Vec::new();
    let mut owner = Vec::new();
    for (i, (p, s)) in passages.iter().zip(&spans).enumerate() {
        for sp in s {
            texts.push(p.text[sp.start as usize..sp.end as usize].to_string());
            owner.push(i);
        }
    }
    let describe = |r: &std::ops::Range<usize>| {
        let (first, last) = (&passages[owner[r.start]], &passages[owner[r.end - 1]]);
        format!(
            "embedding the sentences of passages {:?} chunk {} to {:?} chunk {}",
            first.id, first.chunk, last.id, last.chunk
        )
    };
    let vectors = embed_all(embedder, &texts, threads, quiet, "sentences", &describe)?;
    Ok(SentenceTable {
        spans,
        vectors: vectors.iter().flatten().copied().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_char_ngram_corpus_gets_the_notice_and_others_do_not() {
        let out = Path::new("big.idx");
        let words: AnalyzerSpec = "words".parse().unwrap();
        let note = large_corpus_notice(LARGE_CORPUS, &DEFAULT_ANALYZER, out).unwrap();
        assert!(note.contains("primd bench --index big.idx"), "{note}");
        assert!(note.contains("--analyzer words"), "{note}");
        assert!(large_corpus_notice(LARGE_CORPUS - 1, &DEFAULT_ANALYZER, out).is_none());
        assert!(large_corpus_notice(1_000_000, &words, out).is_none());
    }
}
