//! The byte layout of the lexical section (the index's lexical section): constants, its
//! header, the per-term record and the posting blocks' directory, shared by writer and
//! reader. The bit packing of a block's values is `bitpack`, the BM25 arithmetic `bm25`.
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
//! - scores are computed by one function ([`Scorer`](super::bm25::Scorer)) on both sides,
//!   so the stored upper bounds are exact bounds of what the searcher computes.

use super::bm25::Bm25;
use super::{AnalyzerKind, AnalyzerSpec, WordRules};

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

/// Checks an analyzer spec and BM25 parameters before they are written into an index
/// (n in 3..=5, k1 in 0..=100, b in 0..=1, all finite; numbers spelled out only with
/// n-grams across words, as no analyzer version has the other).
pub fn check_params(spec: &AnalyzerSpec, bm25: Bm25) -> Result<(), String> {
    if spec.numbers && !spec.across_words {
        return Err("numbers are spelled out only with n-grams across words".into());
    }
    if let AnalyzerKind::CharNgrams { n } = spec.kind
        && !NGRAM_RANGE.contains(&n)
    {
        return Err(format!(
            "char n-grams need n in {}..={}, not {n}",
            NGRAM_RANGE.start(),
            NGRAM_RANGE.end()
        ));
    }
    if !(bm25.k1.is_finite() && (0.0..=100.0).contains(&bm25.k1)) {
        return Err(format!("BM25 k1 must be in 0..=100, not {}", bm25.k1));
    }
    if !(bm25.b.is_finite() && (0.0..=1.0).contains(&bm25.b)) {
        return Err(format!("BM25 b must be in 0..=1, not {}", bm25.b));
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
