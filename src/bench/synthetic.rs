//! The index `primd bench` measures when given none: seeded random vectors and
//! Zipf-distributed pronounceable words, written to the temporary directory and removed
//! when dropped.

use std::path::PathBuf;

use anyhow::Context;

use crate::embed::DIM;
use crate::index::{IndexMeta, PassageRecord, write_index};

/// A random index in the temporary directory, removed on drop: random unit vectors and
/// Zipf-distributed words (so BM25 posting lists are as skewed as a real corpus's).
pub(super) struct SyntheticIndex {
    pub(super) path: PathBuf,
}

impl SyntheticIndex {
    pub(super) fn write(
        passages: usize,
        words: usize,
        fingerprint: &[u8; 32],
    ) -> anyhow::Result<Self> {
        const VOCAB: usize = 20_000;
        let path = std::env::temp_dir().join(format!("primd-bench-{}.idx", std::process::id()));
        // Seeded: two runs bench the same synthetic index.
        let mut rng = crate::testing::Rng::new(1);
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
