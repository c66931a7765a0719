//! Per-embed latency of the real model at 5, 10, 20 and 30 tokens ([CLS] and [SEP]
//! included), tokenisation and pooling included: what one speculative re-embed of a
//! partial costs. `tools/bench/embed.py` runs this and onnxruntime on the same graph
//! and texts, and prints the comparison table of the README.
//!
//! PRIMD_MODEL_DIR overrides the model folder (default `models/`).

use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use primd::embed::{DIM, Embed, Embedder, EmbedderOptions};

/// Prefixes of natural questions, cut so the model sees exactly `tokens` tokens.
pub fn text_with_tokens(e: &mut Embedder, tokens: usize) -> String {
    // Shared with tools/bench/embed.py, which must cut the same prefixes.
    const SOURCE: &str = include_str!("data/bench_text.txt");
    let mut text = String::new();
    for w in SOURCE.split_whitespace() {
        let candidate = if text.is_empty() {
            w.to_string()
        } else {
            format!("{text} {w}")
        };
        if e.count_tokens(&candidate).unwrap() > tokens {
            break;
        }
        text = candidate;
    }
    assert_eq!(
        e.count_tokens(&text).unwrap(),
        tokens,
        "no prefix has {tokens} tokens"
    );
    text
}

fn model_dir() -> PathBuf {
    std::env::var_os("PRIMD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"))
}

fn embed_latency(c: &mut Criterion) {
    let mut group = c.benchmark_group("embed");
    for threads in [1usize, 2] {
        let opts = EmbedderOptions {
            threads,
            ..Default::default()
        };
        let mut e = Embedder::load(&model_dir(), &opts).expect("run models/fetch first");
        let mut out = [0.0f32; DIM];
        for tokens in [5usize, 10, 20, 30] {
            if threads > 1 && tokens != 20 {
                continue; // threads are measured at one length only
            }
            let text = text_with_tokens(&mut e, tokens);
            let id = BenchmarkId::new(format!("tract-fp32-{threads}t"), tokens);
            group.bench_with_input(id, &text, |b, text| {
                b.iter(|| e.embed_into(text, &mut out).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(60).measurement_time(std::time::Duration::from_secs(4));
    targets = embed_latency
}
criterion_main!(benches);
