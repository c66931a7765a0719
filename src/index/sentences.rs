//! The sentence section (index format v6, optional): where each passage's sentences are,
//! how many word pieces each is, and an int8 vector per sentence.
//!
//! Why: an agent hands primd's evidence to a small LLM whose prompt prefill is the wait
//! the user hears; the few sentences that answer cost a tenth of the passages they come
//! from (`crate::context`). Ranking a sentence by the question needs its meaning (the same
//! embedder's vector, int8 as the passages': one dot product each) and packing it to a
//! token budget needs its length in word pieces, counted once here at build time, so
//! nothing is tokenized at end of speech. The text itself is not repeated: a sentence is a
//! byte range of its passage's text.
//!
//! Layout (relative to the section's start; every sub-section 64-byte aligned):
//! `header` (64 bytes: `"PRIMDSEN"`, `version: u32` = 1, `dim: u32`, `passages: u64` = the
//! index's count, `sentences: u64` = S, zero to 64), `first` ((passages + 1) × u32: the
//! first sentence of each passage, `first[passages] = S`), `spans` (S × 12: `start: u32`,
//! `end: u32` byte offsets in the passage's text, `tokens: u32`), `vectors` (S × dim i8,
//! quantised as the passages'), `scales` (S × f32). `index/FORMAT.md` says the same.

use std::ops::Range;

use super::format::{align_up, quantize_i8};

pub(crate) const SEN_MAGIC: [u8; 8] = *b"PRIMDSEN";
pub(crate) const SEN_VERSION: u32 = 1;
const SEN_HEADER: usize = 64;

/// One sentence as the writer is given it and the reader hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SentenceSpan {
    /// Byte offsets of the sentence in its passage's `text` (on UTF-8 boundaries).
    pub start: u32,
    pub end: u32,
    /// Its length in the embedder's word pieces (no `[CLS]`/`[SEP]`).
    pub tokens: u32,
}

/// The sentences of every passage, for [`WriteOptions::sentences`](super::WriteOptions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SentenceTable {
    /// Per passage (all of them, in order), its sentences in text order.
    pub spans: Vec<Vec<SentenceSpan>>,
    /// One unit vector of the index's dimension per sentence, in the order of `spans`
    /// flattened.
    pub vectors: Vec<f32>,
}

/// Sub-section offsets for `passages` passages, `s` sentences of dimension `dim`:
/// `[first, spans, vectors, scales, end]`; `None` on overflow.
fn layout(passages: u64, s: u64, dim: u64) -> Option<[u64; 5]> {
    let first = SEN_HEADER as u64;
    let spans = align_up(first.checked_add(passages.checked_add(1)?.checked_mul(4)?)?)?;
    let vectors = align_up(spans.checked_add(s.checked_mul(12)?)?)?;
    let scales = align_up(vectors.checked_add(s.checked_mul(dim)?)?)?;
    let end = scales.checked_add(s.checked_mul(4)?)?;
    Some([first, spans, vectors, scales, end])
}

/// Checks `table` against the passages' texts and encodes it; the error says what is wrong.
pub(crate) fn encode(table: &SentenceTable, texts: &[&str], dim: usize) -> Result<Vec<u8>, String> {
    if table.spans.len() != texts.len() {
        return Err(format!(
            "sentences given for {} passages, the index has {}",
            table.spans.len(),
            texts.len()
        ));
    }
    let s: usize = table.spans.iter().map(Vec::len).sum();
    if u32::try_from(s).is_err() {
        return Err(format!("{s} sentences: more than 2^32"));
    }
    if table.vectors.len() != s.saturating_mul(dim) {
        return Err(format!(
            "{} sentence vector values for {s} sentences of dimension {dim}",
            table.vectors.len()
        ));
    }
    if table.vectors.iter().any(|x| !x.is_finite()) {
        return Err("a sentence vector has a non-finite value".into());
    }
    for (i, (spans, text)) in table.spans.iter().zip(texts).enumerate() {
        let mut prev = 0usize;
        for sp in spans {
            let (a, b) = (sp.start as usize, sp.end as usize);
            if a < prev || a > b || b > text.len() {
                return Err(format!(
                    "passage {i}: sentence {a}..{b} is out of order or outside its {} bytes",
                    text.len()
                ));
            }
            if !text.is_char_boundary(a) || !text.is_char_boundary(b) {
                return Err(format!("passage {i}: sentence {a}..{b} splits a character"));
            }
            prev = b;
        }
    }
    let [first_at, spans_at, vectors_at, scales_at, end] =
        layout(texts.len() as u64, s as u64, dim as u64).ok_or("sentence section too large")?;
    let mut out = vec![0u8; end as usize];
    out[..8].copy_from_slice(&SEN_MAGIC);
    out[8..12].copy_from_slice(&SEN_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(dim as u32).to_le_bytes());
    out[16..24].copy_from_slice(&(texts.len() as u64).to_le_bytes());
    out[24..32].copy_from_slice(&(s as u64).to_le_bytes());
    let mut at = first_at as usize;
    let mut n = 0u32;
    for spans in &table.spans {
        out[at..at + 4].copy_from_slice(&n.to_le_bytes());
        at += 4;
        n += spans.len() as u32;
    }
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    let mut at = spans_at as usize;
    for sp in table.spans.iter().flatten() {
        for v in [sp.start, sp.end, sp.tokens] {
            out[at..at + 4].copy_from_slice(&v.to_le_bytes());
            at += 4;
        }
    }
    let mut q = vec![0i8; dim];
    for (k, v) in table.vectors.chunks_exact(dim.max(1)).enumerate() {
        let scale = quantize_i8(v, &mut q);
        let at = vectors_at as usize + k * dim;
        for (b, &x) in out[at..at + dim].iter_mut().zip(&q) {
            *b = x as u8;
        }
        let at = scales_at as usize + 4 * k;
        out[at..at + 4].copy_from_slice(&scale.to_le_bytes());
    }
    Ok(out)
}

/// A validated view of the sentence section inside the mapping.
#[derive(Clone, Copy, Debug)]
pub struct Sentences<'a> {
    bytes: &'a [u8],
    passages: usize,
    count: usize,
    dim: usize,
    at: [usize; 4],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|x| x.first_chunk::<4>())
        .map_or(0, |x| u32::from_le_bytes(*x))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|x| x.first_chunk::<8>())
        .map_or(0, |x| u64::from_le_bytes(*x))
}

impl<'a> Sentences<'a> {
    /// Validates the section (O(passages + sentences)): magic, version, dimension, counts,
    /// sub-section lengths, `first` non-decreasing from 0 to S, every span `start ≤ end`.
    /// That a span lies inside its passage's text is checked when it is used.
    pub(crate) fn open(bytes: &'a [u8], passages: usize, dim: usize) -> Result<Self, String> {
        let view = Self::view(bytes, passages, dim)?;
        let count = view.count;
        let mut prev = 0;
        for i in 0..=passages {
            let f = u32_at(bytes, view.at[0] + 4 * i) as usize;
            if f < prev || f > count || (i == 0 && f != 0) {
                return Err(format!("sentence table entry {i} = {f} is out of order"));
            }
            prev = f;
        }
        if prev != count {
            return Err(format!(
                "sentence table ends at {prev}, the section holds {count}"
            ));
        }
        for k in 0..count {
            let sp = view.span(k);
            if sp.start > sp.end {
                return Err(format!("sentence {k}: start {} > end {}", sp.start, sp.end));
            }
        }
        Ok(view)
    }

    /// The header checks of [`Sentences::open`] only, O(1): for a section `open` passed.
    pub(crate) fn view(bytes: &'a [u8], passages: usize, dim: usize) -> Result<Self, String> {
        if bytes.len() < SEN_HEADER || bytes[..8] != SEN_MAGIC {
            return Err("no sentence section magic".into());
        }
        let version = u32_at(bytes, 8);
        if version != SEN_VERSION {
            return Err(format!(
                "sentence section version {version}, this primd reads 1"
            ));
        }
        if u32_at(bytes, 12) as usize != dim || u64_at(bytes, 16) != passages as u64 {
            return Err(format!(
                "sentence section is for {} passages of dimension {}, the index has {passages} of {dim}",
                u64_at(bytes, 16),
                u32_at(bytes, 12)
            ));
        }
        let s = u64_at(bytes, 24);
        let [first, spans, vectors, scales, end] = layout(passages as u64, s, dim as u64)
            .filter(|l| l[4] == bytes.len() as u64)
            .ok_or_else(|| {
                format!(
                    "sentence section is {} bytes, not the length {s} sentences need",
                    bytes.len()
                )
            })?;
        let _ = end;
        Ok(Sentences {
            bytes,
            passages,
            count: s as usize,
            dim,
            at: [
                first as usize,
                spans as usize,
                vectors as usize,
                scales as usize,
            ],
        })
    }

    /// Number of sentences.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sentence ids of passage `p` (empty for `p` out of range).
    pub fn of_passage(&self, p: usize) -> Range<usize> {
        if p >= self.passages {
            return 0..0;
        }
        let a = u32_at(self.bytes, self.at[0] + 4 * p) as usize;
        let b = u32_at(self.bytes, self.at[0] + 4 * (p + 1)) as usize;
        a..b.max(a)
    }

    /// Sentence `k`'s span (zeros for `k` out of range).
    pub fn span(&self, k: usize) -> SentenceSpan {
        if k >= self.count {
            return SentenceSpan::default();
        }
        let at = self.at[1] + 12 * k;
        SentenceSpan {
            start: u32_at(self.bytes, at),
            end: u32_at(self.bytes, at + 4),
            tokens: u32_at(self.bytes, at + 8),
        }
    }

    /// Sentence `k`'s int8 vector and scale (empty and 0 for `k` out of range).
    pub fn vector(&self, k: usize) -> (&'a [i8], f32) {
        if k >= self.count {
            return (&[], 0.0);
        }
        let at = self.at[2] + self.dim * k;
        let v = &self.bytes[at..at + self.dim];
        // SAFETY: u8 and i8 have the same size and alignment and every bit pattern is a
        // valid i8; the slice borrows the same immutable bytes for the same lifetime.
        let v = unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<i8>(), v.len()) };
        let scale = f32::from_bits(u32_at(self.bytes, self.at[3] + 4 * k));
        (v, scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (SentenceTable, Vec<&'static str>) {
        let texts = vec!["One two three four. Five six seven eight.", "", "ä b c d"];
        let spans = vec![
            vec![
                SentenceSpan {
                    start: 0,
                    end: 19,
                    tokens: 5,
                },
                SentenceSpan {
                    start: 20,
                    end: 41,
                    tokens: 5,
                },
            ],
            vec![],
            vec![SentenceSpan {
                start: 0,
                end: 8,
                tokens: 4,
            }],
        ];
        let vectors = (0..3 * 16).map(|i| (i as f32 - 20.0) / 50.0).collect();
        (SentenceTable { spans, vectors }, texts)
    }

    #[test]
    fn round_trip_and_damage() {
        let (t, texts) = table();
        let bytes = encode(&t, &texts, 16).unwrap();
        let s = Sentences::open(&bytes, 3, 16).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s.of_passage(0), s.of_passage(1), s.of_passage(2)),
            (0..2, 2..2, 2..3)
        );
        assert_eq!(s.of_passage(3), 0..0);
        assert_eq!(s.span(1), t.spans[0][1]);
        let (v, scale) = s.vector(2);
        assert!((v[0] as f32 * scale - 12.0 / 50.0).abs() < 0.01);
        assert_eq!(s.vector(3).0.len(), 0);
        // wrong counts, cut or damaged bytes: refused, never a panic
        assert!(Sentences::open(&bytes, 4, 16).is_err());
        assert!(Sentences::open(&bytes, 3, 8).is_err());
        for cut in [0, 10, 64, bytes.len() - 1] {
            assert!(Sentences::open(&bytes[..cut], 3, 16).is_err());
        }
        let mut bad = bytes.clone();
        bad[64 + 4] = 9; // first[1] = 9 > S
        assert!(Sentences::open(&bad, 3, 16).is_err());
    }

    #[test]
    fn bad_tables_are_refused() {
        let (t, texts) = table();
        let mut x = t.clone();
        x.spans[2][0].end = 9;
        assert!(encode(&x, &texts, 16).unwrap_err().contains("outside"));
        let mut x = t.clone();
        x.spans[2][0].end = 1; // inside "ä"
        assert!(encode(&x, &texts, 16).unwrap_err().contains("character"));
        let mut x = t.clone();
        x.vectors.pop();
        assert!(encode(&x, &texts, 16).is_err());
        assert!(encode(&t, &texts[..2], 16).is_err());
    }
}
