//! Hamming top-100 scan over 100k and 1M random 48-byte codes (384 sign bits), with the
//! kernel chosen at run time and with the scalar one, next to a plain read of the same
//! bytes: the scan is meant to be memory-bound, so that read is its ceiling. Compare with
//! faiss `IndexBinaryFlat` via `tools/bench/scan_faiss.py` (same sizes, one thread).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use primd::scan::{TopK, hamming_top_k, kernel_name, scalar_hamming_top_k};

const CODE_BYTES: usize = 48;
const K: usize = 100;

/// Seeded, so every run scans the same codes.
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = primd::testing::Rng::new(seed);
    (0..n).map(|_| rng.next() as u8).collect()
}

fn scan(c: &mut Criterion) {
    eprintln!("scan kernel: {}", kernel_name());
    let query = random_bytes(CODE_BYTES, 1);
    for n in [100_000usize, 1_000_000] {
        let codes = random_bytes(n * CODE_BYTES, 0x5eed + n as u64);
        let mut group = c.benchmark_group(format!("scan_{}k", n / 1000));
        group.sample_size(30);
        group.throughput(Throughput::Bytes(codes.len() as u64));
        let mut top = TopK::new();
        group.bench_function(BenchmarkId::new("hamming_top_k", kernel_name()), |b| {
            b.iter(|| {
                top.reset(K);
                hamming_top_k(black_box(&codes), black_box(&query), &mut top);
                black_box(top.threshold())
            })
        });
        group.bench_function(BenchmarkId::new("hamming_top_k", "scalar"), |b| {
            b.iter(|| {
                top.reset(K);
                scalar_hamming_top_k(black_box(&codes), black_box(&query), &mut top);
                black_box(top.threshold())
            })
        });
        group.bench_function("memory_read_u64_sum", |b| {
            b.iter(|| {
                let (words, _) = black_box(&codes[..]).as_chunks::<8>();
                words
                    .iter()
                    .fold(0u64, |s, w| s.wrapping_add(u64::from_ne_bytes(*w)))
            })
        });
        group.finish();
    }
}

criterion_group!(benches, scan);
criterion_main!(benches);
