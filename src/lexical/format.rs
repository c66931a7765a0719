//! The byte layout of the lexical section (index format v2): constants, its header, the
//! per-term record, the posting blocks, and BM25 arithmetic shared by writer and reader.
//!
//! Single source of truth for the layout; `index/FORMAT.md` ("Lexical section") describes
//! the same for humans and changes with it. Invariants:
//! - little-endian, decoded byte by byte, all offsets relative to the section's start, so
//!   the section is a position-independent blob that [`super::Lexical::open`] checks alone;
//! - the term dictionary is an `fst::Map` (term bytes → term ordinal, ordinals in byte
//!   order), opened in place over the mapped bytes as tantivy does;
//! - postings come in blocks of [`BLOCK`] documents, each block with its last document id
//!   and its maximum score in a small directory in front of the term's data, so a query can
//!   skip whole blocks (MaxScore / block-max) without decoding them;
//! - scores are computed by one function ([`Scorer`]) on both sides, so the stored upper
//!   bounds are exact bounds of what the searcher computes.

use super::kernels;
use super::{AnalyzerKind, AnalyzerSpec, Bm25, WordRules};

/// First 8 bytes of the lexical section.
pub(crate) const LEX_MAGIC: [u8; 8] = *b"PRIMDLEX";
/// Version of the lexical section layout. A reader refuses other versions (the index as a
/// whole still opens only if this one is understood: a newer layout needs a newer primd).
pub(crate) const LEX_VERSION: u32 = 1;
/// Fixed size of the lexical section's header.
pub(crate) const LEX_HEADER: usize = 128;
/// Sub-sections start at multiples of this (section-relative) offset.
pub(crate) const LEX_ALIGN: usize = 64;
/// Documents per posting block.
pub const BLOCK: usize = 128;
/// Bytes of one term record: postings offset u64, doc freq u32, max score f32.
pub(crate) const TERM_RECORD: usize = 16;
/// Bytes of one block-directory entry: last doc u32, data end u32, block max score f32.
pub(crate) const BLOCK_ENTRY: usize = 12;

// Header fields (see FORMAT.md).
pub(crate) const OFF_MAGIC: usize = 0;
pub(crate) const OFF_VERSION: usize = 8;
pub(crate) const OFF_ANALYZER_VERSION: usize = 12;
pub(crate) const OFF_ANALYZER_KIND: usize = 16;
pub(crate) const OFF_ANALYZER_N: usize = 17;
// 18..24 reserved
pub(crate) const OFF_K1: usize = 24;
pub(crate) const OFF_B: usize = 28;
pub(crate) const OFF_DOC_COUNT: usize = 32;
pub(crate) const OFF_TERM_COUNT: usize = 40;
pub(crate) const OFF_TOTAL_LEN: usize = 48;
// 56..64 reserved
/// Sub-section table: [`SUB_COUNT`] × `(offset: u64, length: u64)`, section-relative.
pub(crate) const OFF_SUBS: usize = 64;
pub(crate) const SUB_FST: usize = 0;
pub(crate) const SUB_TERMS: usize = 1;
pub(crate) const SUB_DOCLENS: usize = 2;
pub(crate) const SUB_POSTINGS: usize = 3;
pub(crate) const SUB_COUNT: usize = 4;
pub(crate) const SUB_NAMES: [&str; SUB_COUNT] = [
    "term dictionary",
    "term records",
    "document lengths",
    "postings",
];

const _: () = assert!(OFF_SUBS + 16 * SUB_COUNT == LEX_HEADER);

/// Analyzer kind codes in the header.
pub(crate) const KIND_WORDS: u8 = 0;
pub(crate) const KIND_CHAR_NGRAMS: u8 = 1;

/// Accepted n of char n-grams.
pub const NGRAM_RANGE: std::ops::RangeInclusive<u8> = 3..=5;

pub(crate) fn encode_spec(spec: &AnalyzerSpec) -> (u8, u8) {
    match spec.kind {
        AnalyzerKind::Words => (KIND_WORDS, 0),
        AnalyzerKind::CharNgrams { n } => (KIND_CHAR_NGRAMS, n),
    }
}

pub(crate) fn decode_spec(
    kind: u8,
    n: u8,
    rules: WordRules,
    across_words: bool,
    numbers: bool,
) -> Result<AnalyzerSpec, String> {
    let kind = match (kind, n) {
        (KIND_WORDS, 0) => AnalyzerKind::Words,
        (KIND_CHAR_NGRAMS, n) if NGRAM_RANGE.contains(&n) => AnalyzerKind::CharNgrams { n },
        _ => return Err(format!("unknown analyzer (kind {kind}, n {n})")),
    };
    Ok(AnalyzerSpec {
        kind,
        rules,
        across_words,
        numbers,
    })
}

/// The decoded lexical header. `decode` does no semantic checks (the reader's job).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LexHeader {
    pub magic: [u8; 8],
    pub version: u32,
    pub analyzer_version: u32,
    pub kind: u8,
    pub n: u8,
    pub bm25: Bm25,
    pub doc_count: u64,
    pub term_count: u64,
    pub total_len: u64,
    /// `(offset, len)` of each sub-section, relative to the section start.
    pub subs: [(u64, u64); SUB_COUNT],
}

impl LexHeader {
    pub fn encode(&self) -> [u8; LEX_HEADER] {
        let mut b = [0u8; LEX_HEADER];
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&self.magic);
        put(&mut b, OFF_VERSION, &self.version.to_le_bytes());
        put(
            &mut b,
            OFF_ANALYZER_VERSION,
            &self.analyzer_version.to_le_bytes(),
        );
        b[OFF_ANALYZER_KIND] = self.kind;
        b[OFF_ANALYZER_N] = self.n;
        put(&mut b, OFF_K1, &self.bm25.k1.to_le_bytes());
        put(&mut b, OFF_B, &self.bm25.b.to_le_bytes());
        put(&mut b, OFF_DOC_COUNT, &self.doc_count.to_le_bytes());
        put(&mut b, OFF_TERM_COUNT, &self.term_count.to_le_bytes());
        put(&mut b, OFF_TOTAL_LEN, &self.total_len.to_le_bytes());
        for (i, (off, len)) in self.subs.iter().enumerate() {
            put(&mut b, OFF_SUBS + 16 * i, &off.to_le_bytes());
            put(&mut b, OFF_SUBS + 16 * i + 8, &len.to_le_bytes());
        }
        b
    }

    pub fn decode(b: &[u8; LEX_HEADER]) -> LexHeader {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[OFF_MAGIC..OFF_MAGIC + 8]);
        let mut subs = [(0, 0); SUB_COUNT];
        for (i, s) in subs.iter_mut().enumerate() {
            *s = (
                u64_at(b, OFF_SUBS + 16 * i).unwrap_or(0),
                u64_at(b, OFF_SUBS + 16 * i + 8).unwrap_or(0),
            );
        }
        LexHeader {
            magic,
            version: u32_at(b, OFF_VERSION).unwrap_or(0),
            analyzer_version: u32_at(b, OFF_ANALYZER_VERSION).unwrap_or(0),
            kind: b[OFF_ANALYZER_KIND],
            n: b[OFF_ANALYZER_N],
            bm25: Bm25 {
                k1: f32::from_bits(u32_at(b, OFF_K1).unwrap_or(0)),
                b: f32::from_bits(u32_at(b, OFF_B).unwrap_or(0)),
            },
            doc_count: u64_at(b, OFF_DOC_COUNT).unwrap_or(0),
            term_count: u64_at(b, OFF_TERM_COUNT).unwrap_or(0),
            total_len: u64_at(b, OFF_TOTAL_LEN).unwrap_or(0),
            subs,
        }
    }
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// Little-endian u32 at `at`, `None` if out of bounds.
#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Little-endian u64 at `at`, `None` if out of bounds.
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// One term's record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TermRecord {
    /// Start of the term's postings, relative to the postings sub-section. The term's
    /// postings end where the next term's start (the last term's at the sub-section's end).
    pub offset: u64,
    /// Documents containing the term (≥ 1).
    pub df: u32,
    /// Largest BM25 contribution of this term to any document at query weight 1.
    pub max_score: f32,
}

impl TermRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.df.to_le_bytes());
        out.extend_from_slice(&self.max_score.to_le_bytes());
    }

    /// Record `ord` of the term table, `None` if out of bounds.
    #[inline]
    pub fn read(terms: &[u8], ord: usize) -> Option<TermRecord> {
        let at = ord.checked_mul(TERM_RECORD)?;
        Some(TermRecord {
            offset: u64_at(terms, at)?,
            df: u32_at(terms, at + 8)?,
            max_score: f32::from_bits(u32_at(terms, at + 12)?),
        })
    }
}

/// Blocks of a posting list of `df` documents.
#[inline]
pub(crate) fn block_count(df: u32) -> usize {
    (df as usize).div_ceil(BLOCK)
}

/// One entry of a term's block directory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockEntry {
    /// Largest document id in the block.
    pub last_doc: u32,
    /// End of the block's bytes, relative to the start of the term's block data (which
    /// follows the directory); the block starts where the previous one ends (0 for the first).
    pub end: u32,
    /// Largest BM25 contribution (query weight 1) of the block's documents.
    pub max_score: f32,
}

impl BlockEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.last_doc.to_le_bytes());
        out.extend_from_slice(&self.end.to_le_bytes());
        out.extend_from_slice(&self.max_score.to_le_bytes());
    }

    #[inline]
    pub fn read(dir: &[u8], i: usize) -> Option<BlockEntry> {
        let at = i.checked_mul(BLOCK_ENTRY)?;
        Some(BlockEntry {
            last_doc: u32_at(dir, at)?,
            end: u32_at(dir, at + 4)?,
            max_score: f32::from_bits(u32_at(dir, at + 8)?),
        })
    }
}

/// Bytes of `n` values packed at `width` bits.
#[inline]
pub(crate) fn packed_len(n: usize, width: u32) -> usize {
    (n * width as usize).div_ceil(8)
}

/// Bits needed for the largest of `values` (0 when all are 0).
pub(crate) fn bit_width(values: &[u32]) -> u32 {
    32 - values.iter().fold(0, |a, &v| a | v).leading_zeros()
}

/// Appends `values` packed at `width` bits each: value `i` is bits `i·width ..
/// (i+1)·width` of a little-endian bit stream (LSB first), padded with zero bits to a
/// whole byte. `width` 0 writes nothing (all values 0).
pub(crate) fn pack(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &v in values {
        acc |= u64::from(v) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

/// Spare bytes after the packed values that let every kernel read each group in place
/// (the SIMD loads reach up to 16 bytes past a group's middle).
const UNPACK_SPARE: usize = 16;

/// Largest packed block (128 values of 32 bits) plus the spare bytes.
const UNPACK_BUF: usize = BLOCK * 4 + UNPACK_SPARE;

/// Unpacks `out.len()` (≤ [`BLOCK`]) values of `width` bits from the start of `src`;
/// missing bytes read as zero, `width` > 32 gives zeros (a corrupt block: garbage, never a
/// panic). Bytes of `src` past the packed values are read but masked off: callers pass
/// the rest of the list when they have it, so the common case reads in place (with the
/// `kernels`: SIMD where the CPU has it).
pub(crate) fn unpack(src: &[u8], width: u32, out: &mut [u32]) {
    let n = out.len().min(BLOCK);
    let out = &mut out[..n];
    if width == 0 || width > 32 {
        out.fill(0);
        return;
    }
    padded(src, packed_len(n, width), |b| {
        kernels::unpack(b, width, out)
    });
}

/// [`unpack`] of a block's gaps, turned into ids from `next` on (`doc = next + gap`,
/// `next = doc + 1`, wrapping); returns the final `next`.
pub(crate) fn unpack_docs(src: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    let n = out.len().min(BLOCK);
    let out = &mut out[..n];
    if width == 0 || width > 32 {
        out.fill(0);
        return kernels::gaps_to_docs(out, next);
    }
    padded(src, packed_len(n, width), |b| {
        kernels::unpack_docs(b, width, next, out)
    })
}

/// Calls `f` with `src` when [`UNPACK_SPARE`] bytes follow its first `need`, else with a
/// zero-padded copy of them (near the end of a list), so every kernel load is in place.
#[inline]
fn padded<R>(src: &[u8], need: usize, f: impl FnOnce(&[u8]) -> R) -> R {
    if src.len() >= need + UNPACK_SPARE {
        f(src)
    } else {
        let mut buf = [0u8; UNPACK_BUF];
        let len = src.len().min(need).min(BLOCK * 4);
        buf[..len].copy_from_slice(&src[..len]);
        f(&buf)
    }
}

/// LEB128 varint (7 bits per byte, low first).
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it. `None` at the end of `b` or after 5 bytes
/// without a terminator (corrupt): the caller stops decoding. Bits past 32 are dropped.
#[inline]
pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u32::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Lucene's BM25 idf: `ln(1 + (N - df + 0.5) / (df + 0.5))`, always > 0 for `df ≤ N`.
pub fn idf(doc_count: u64, df: u64) -> f32 {
    let (n, df) = (doc_count as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
}

/// Average document length as BM25 uses it; 1 for a corpus without terms (no document
/// can match then, and this keeps the arithmetic finite).
pub fn avgdl(doc_count: u64, total_len: u64) -> f32 {
    if doc_count == 0 || total_len == 0 {
        1.0
    } else {
        (total_len as f64 / doc_count as f64) as f32
    }
}

/// BM25 arithmetic, one definition for writer (block maxima) and reader (scores):
/// `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`.
#[derive(Clone, Copy, Debug)]
pub struct Scorer {
    /// `k1 · (1 − b)`
    c0: f32,
    /// `k1 · b / avgdl`
    c1: f32,
    /// `k1 + 1`
    k1p1: f32,
}

impl Scorer {
    pub fn new(bm25: Bm25, avgdl: f32) -> Scorer {
        Scorer {
            c0: bm25.k1 * (1.0 - bm25.b),
            c1: bm25.k1 * bm25.b / avgdl,
            k1p1: bm25.k1 + 1.0,
        }
    }

    /// `k1 · (1 − b + b · dl / avgdl)` for a document of `dl` terms.
    #[inline]
    pub fn norm(&self, dl: u32) -> f32 {
        self.c0 + self.c1 * dl as f32
    }

    /// `k1 + 1`, for the SIMD twins of [`score`](Self::score) (`kernels`).
    #[inline]
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "aarch64")),
        allow(dead_code)
    )]
    pub fn k1p1(&self) -> f32 {
        self.k1p1
    }

    /// The contribution of one term to one document, at query weight 1.
    #[inline]
    pub fn score(&self, idf: f32, tf: u32, norm: f32) -> f32 {
        let tf = tf as f32;
        idf * (tf * self.k1p1 / (tf + norm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_stop_on_garbage() {
        let vals = [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX];
        let mut b = Vec::new();
        for v in vals {
            put_varint(&mut b, v);
        }
        let mut pos = 0;
        for v in vals {
            assert_eq!(get_varint(&b, &mut pos), Some(v));
        }
        assert_eq!(get_varint(&b, &mut pos), None);
        assert_eq!(get_varint(&[0xff; 9], &mut 0), None);
        assert_eq!(get_varint(&[0x80], &mut 0), None);
    }

    #[test]
    fn bit_packing_round_trips_at_every_width() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for width in 0..=32u32 {
            for n in [0usize, 1, 7, 64, 127, 128] {
                let vals: Vec<u32> = (0..n)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        if width == 0 {
                            0
                        } else {
                            (rng as u32) >> (32 - width)
                        }
                    })
                    .collect();
                assert!(bit_width(&vals) <= width);
                let mut b = vec![0xee];
                pack(&vals, width, &mut b);
                assert_eq!(b.len(), 1 + packed_len(n, width), "width {width} n {n}");
                let mut got = vec![9u32; n];
                unpack(&b[1..], width, &mut got);
                assert_eq!(got, vals, "width {width} n {n}");
                // short input reads zeros instead of failing
                let mut short = vec![9u32; n];
                unpack(&b[1..(b.len() / 2).max(1)], width, &mut short);
            }
        }
        assert_eq!(bit_width(&[0, 0]), 0);
        assert_eq!(bit_width(&[1, 4]), 3);
        assert_eq!(bit_width(&[u32::MAX]), 32);
        let mut out = [7u32; 3];
        unpack(&[0xff; 20], 33, &mut out);
        assert_eq!(out, [0, 0, 0]);
    }

    #[test]
    fn header_round_trip() {
        let h = LexHeader {
            magic: LEX_MAGIC,
            version: LEX_VERSION,
            analyzer_version: 1,
            kind: KIND_CHAR_NGRAMS,
            n: 4,
            bm25: Bm25 { k1: 1.2, b: 0.75 },
            doc_count: 3,
            term_count: 7,
            total_len: 20,
            subs: [(128, 40), (192, 112), (320, 12), (384, 99)],
        };
        assert_eq!(LexHeader::decode(&h.encode()), h);
        for (kind, n) in [(0u8, 0u8), (1, 3), (1, 4), (1, 5)] {
            let s = decode_spec(kind, n, WordRules::V1, false, false).unwrap();
            assert_eq!(encode_spec(&s), (kind, n));
        }
        for (kind, n) in [(0u8, 1u8), (1, 2), (1, 6), (2, 0)] {
            assert!(decode_spec(kind, n, WordRules::V2, true, true).is_err());
        }
    }
}
