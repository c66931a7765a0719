//! Per-call latency of the reader (`models/reader/`, the int8 cross-encoder on primd's
//! own encoder): [`Reader::score`] on fixed question/sentence pairs of 24, 48 and 96
//! word pieces (`[CLS] question [SEP] sentence [SEP]`; pairs in use average ~53, the caps
//! are 48 + 96), one pair a call and four (one step of `src/context/read.rs`), one
//! thread, the sentences' tokenisation and the head included (the question is set once,
//! as the retriever does per question). `tools/bench/reader.py` runs this and
//! onnxruntime on the same token ids, and prints the comparison of docs/benchmarks.md.
//!
//! The texts are cut from `benches/data/bench_text.txt` (the embed bench's), its words
//! read in a cycle: the question is its first words, sentence `k` of a batch starts at
//! word `5 (2k + 1)`; each is the longest run of words that makes the pair exactly the
//! tokens wanted (reader.py cuts the same texts, and asserts it).
//!
//! PRIMD_MODEL_DIR overrides the model folder (default `models/`, the reader in its
//! `reader/`). Two modes for reader.py, instead of the benchmarks:
//! PRIMD_READER_PAIRS=FILE writes the pairs and their logits as JSON;
//! PRIMD_READER_LOAD=1 loads the reader, scores one pair and prints the load time
//! (its peak RSS is measured from outside, in a fresh process).

use std::path::PathBuf;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, criterion_group};
use primd::embed::reader::{READER_DIR, Reader};

/// (pair tokens, question tokens), `[CLS]` and `[SEP]`s included. Shared with
/// tools/bench/reader.py.
const SHAPES: [(usize, usize); 3] = [(24, 10), (48, 14), (96, 20)];
/// Pairs a call.
const BATCHES: [usize; 2] = [1, 4];

fn model_dir() -> PathBuf {
    std::env::var_os("PRIMD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"))
}

/// The longest run of the text's words (cycled) from word `start` whose `count` is at
/// most `tokens`; panics unless it is exactly `tokens`.
fn cut(start: usize, tokens: usize, mut count: impl FnMut(&str) -> usize) -> String {
    const SOURCE: &str = include_str!("data/bench_text.txt");
    let mut text = String::new();
    for w in SOURCE.split_whitespace().cycle().skip(start) {
        let candidate = if text.is_empty() {
            w.to_string()
        } else {
            format!("{text} {w}")
        };
        if count(&candidate) > tokens {
            break;
        }
        text = candidate;
    }
    assert_eq!(
        count(&text),
        tokens,
        "no run of words from {start} makes {tokens}"
    );
    text
}

/// A question of `q` tokens, set on `r`, and `batch` sentences that each make a pair of
/// `pair` tokens with it.
fn pairs(r: &mut Reader, pair: usize, q: usize, batch: usize) -> (String, Vec<String>) {
    // A pair with an empty sentence is the question and one [SEP].
    let question = cut(0, q, |t| {
        r.set_question(t).unwrap();
        r.pair_tokens("").unwrap() - 1
    });
    r.set_question(&question).unwrap();
    let sentences = (0..batch)
        .map(|k| cut(5 * (2 * k + 1), pair, |t| r.pair_tokens(t).unwrap()))
        .collect();
    (question, sentences)
}

fn load() -> Reader {
    Reader::load(&model_dir().join(READER_DIR)).expect("run models/fetch first")
}

fn reader_latency(c: &mut Criterion) {
    eprintln!("qgemm kernel: {}", primd::qgemm::kernel_name());
    let mut r = load();
    let mut group = c.benchmark_group("reader");
    for (pair, q) in SHAPES {
        for batch in BATCHES {
            let (question, sentences) = pairs(&mut r, pair, q, batch);
            r.set_question(&question).unwrap();
            let sentences: Vec<&str> = sentences.iter().map(String::as_str).collect();
            let mut out = vec![0.0f32; batch];
            let id = BenchmarkId::new(format!("primd-b{batch}"), pair);
            group.bench_function(id, |b| b.iter(|| r.score(&sentences, &mut out).unwrap()));
        }
    }
    group.finish();
}

/// PRIMD_READER_PAIRS: every measured pair, its texts and primd's logits (one batch of
/// four, and each pair alone), for reader.py to check its cut and its logits against.
fn write_pairs(path: &std::ffi::OsStr) {
    let mut r = load();
    let mut rows = Vec::new();
    for (pair, q) in SHAPES {
        let (question, sentences) = pairs(&mut r, pair, q, 4);
        r.set_question(&question).unwrap();
        let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
        let mut batched = vec![0.0f32; refs.len()];
        r.score(&refs, &mut batched).unwrap();
        let alone: Vec<f32> = refs
            .iter()
            .map(|s| {
                let mut out = [0.0f32];
                r.score(&[s], &mut out).unwrap();
                out[0]
            })
            .collect();
        rows.push(serde_json::json!({
            "pair_tokens": pair, "question_tokens": q, "question": question,
            "sentences": sentences, "logits_batch4": batched, "logits_batch1": alone,
        }));
    }
    std::fs::write(path, serde_json::to_string_pretty(&rows).unwrap()).unwrap();
}

/// PRIMD_READER_LOAD: load time of a fresh reader, then one pair scored (so that the
/// peak RSS measured from outside includes its buffers).
fn load_only() {
    let t0 = Instant::now();
    let mut r = load();
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (question, sentences) = pairs(&mut r, SHAPES[1].0, SHAPES[1].1, 1);
    r.set_question(&question).unwrap();
    let mut out = [0.0f32];
    r.score(&[sentences[0].as_str()], &mut out).unwrap();
    println!(
        "load_ms {load_ms:.1} kernel {}",
        primd::qgemm::kernel_name()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(60).measurement_time(std::time::Duration::from_secs(4));
    targets = reader_latency
}

// criterion_main!, with reader.py's two modes in front.
fn main() {
    if let Some(path) = std::env::var_os("PRIMD_READER_PAIRS") {
        return write_pairs(&path);
    }
    if std::env::var_os("PRIMD_READER_LOAD").is_some_and(|v| v == "1") {
        return load_only();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
