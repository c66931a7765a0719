//! Per-embed latency of the real model at 5, 10, 20 and 30 tokens ([CLS] and [SEP]
//! included), tokenisation and pooling included: what one speculative re-embed of a
//! partial costs, for tract fp32 (`model.onnx`) and primd int8 (`model-int8.onnx`, the
//! weight matmuls on `primd::qgemm`). `tools/bench/embed.py` runs this and onnxruntime
//! (fp32, and dynamic int8 of the same graph) on the same texts, and prints the
//! comparison table of the README.
//!
//! PRIMD_MODEL_DIR overrides the model folder (default `models/`).

use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Precision};

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
    eprintln!("qgemm kernel: {}", primd::qgemm::kernel_name());
    let runs = [
        (Precision::Fp32, 1usize),
        (Precision::Int8, 1),
        (Precision::Fp32, 2),
        (Precision::Int8, 2),
    ];
    for (precision, threads) in runs {
        let opts = EmbedderOptions { precision, threads };
        let mut e = Embedder::load(&model_dir(), &opts).expect("run models/fetch first");
        let mut out = [0.0f32; DIM];
        for tokens in [5usize, 10, 20, 30] {
            if threads > 1 && tokens != 20 && (precision, tokens) != (Precision::Int8, 5) {
                continue; // threads are measured at 20 tokens (and int8 at 5)
            }
            let text = text_with_tokens(&mut e, tokens);
            let name = match precision {
                Precision::Fp32 => "tract-fp32",
                Precision::Int8 => "primd-int8",
            };
            let id = BenchmarkId::new(format!("{name}-{threads}t"), tokens);
            group.bench_with_input(id, &text, |b, text| {
                b.iter(|| e.embed_into(text, &mut out).unwrap())
            });
        }
    }
    group.finish();
}

/// The int8 kernel alone on the encoder's three linear shapes (N × K: q/k/v/attention
/// output 384×384, FFN in 1536×384, FFN out 384×1536), activation quantization included;
/// throughput in multiply-adds. Six layers of one embed = 6 × (4 × first + second + third).
fn qgemm_shapes(c: &mut Criterion) {
    use criterion::Throughput;
    use primd::qgemm::{PackedWeights, Scratch, linear};
    let mut group = c.benchmark_group(format!("qgemm-{}", primd::qgemm::kernel_name()));
    for (n, k) in [(384usize, 384usize), (1536, 384), (384, 1536)] {
        let w: Vec<i8> = (0..n * k).map(|i| (i * 7919 % 255) as i8).collect();
        let packed = PackedWeights::new(&w, n, k, &vec![0.01; n], &vec![0.0; n]);
        let mut scratch = Scratch::default();
        for m in [5usize, 20] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 31 % 97) as f32 - 48.0) / 7.0)
                .collect();
            let mut out = vec![0.0f32; m * n];
            group.throughput(Throughput::Elements((m * n * k) as u64));
            let id = BenchmarkId::new(format!("{n}x{k}"), m);
            group.bench_function(id, |b| {
                b.iter(|| linear(&x, m, &packed, &mut scratch, &mut out))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(60).measurement_time(std::time::Duration::from_secs(4));
    targets = embed_latency, qgemm_shapes
}
criterion_main!(benches);
