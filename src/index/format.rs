//! The byte layout of index format v5 (v2's, with analyzer version 4 in the lexical
//! section): constants, the fixed header, the passage record, and the quantisers that
//! turn float vectors into the stored codes. (The lexical section has its own layout, in
//! `lexical::format`; here it is one more section of the table.)
//!
//! This file is the single source of truth for the layout; `index/FORMAT.md` describes the
//! same thing for humans and must change with it. Invariants the rest of the module relies on:
//! - everything is little-endian and decoded byte by byte (`from_le_bytes`), so the reader never
//!   depends on the host's endianness or on the alignment of the mapping;
//! - the header has a fixed size ([`HEADER_SIZE`]) and a fixed field placement in every format
//!   version a v1 reader may accept: later versions only add fields in the reserved tail or new
//!   sections, and raise `min_reader_version` when an old reader could misread the file;
//! - every section starts at a multiple of [`ALIGN`], so a section can be handed out as a
//!   borrowed slice of the mapping (and SIMD loads of codes and vectors start cache-aligned);
//! - the quantisers are pure functions of their input (no randomness, no platform-dependent
//!   rounding beyond IEEE `f32`), which is what makes `write_index` byte-for-byte reproducible
//!   and lets the query side encode queries exactly as the corpus was encoded.

/// First 8 bytes of every index file.
pub const MAGIC: [u8; 8] = *b"PRIMDIX\0";
/// The format version this code writes, and the newest one it knows. 3: the same layout as
/// 2, with the lexical section analysed by the version-2 word rules (Latin diacritics
/// folded), which a format-2 reader would apply wrongly. 4: the same layout again, with
/// character n-grams across word boundaries (analyzer version 3), which a format-3 reader
/// would not cut. 5: the same layout, with numbers spelled out as words (analyzer version
/// 4), which a format-4 reader would leave as digits. 6: an optional sentence section
/// after the lexical one (`sentences`), which a format-5 reader ignores (it reads a v6
/// file as the v5 file it also is).
pub const FORMAT_VERSION: u32 = 6;
/// The oldest format version this reader still accepts.
pub const OLDEST_SUPPORTED: u32 = 1;

/// Identifies the model + tokenizer that produced the vectors: the xxh3-128 of the model
/// file (bytes 0..16) and of the tokenizer file (16..32).
pub type Fingerprint = [u8; 32];

/// `min_reader_version` written into new files without a lexical section: the oldest
/// reader able to read them. Still 1: a v1 reader finds every v1 field where it was,
/// ignores the lexical section's table entry (reserved bytes to it) and the section
/// itself (between the blob and the footer).
pub(crate) const MIN_READER_VERSION: u32 = 1;
/// `min_reader_version` of a file with a lexical section: a format-2, -3 or -4 reader
/// knows only analyzer versions up to 1, 2 or 3 and would refuse the section as corrupt, a
/// v1 reader would search dense only without a word; all say "built by a newer primd"
/// instead.
pub(crate) const MIN_READER_WITH_LEXICAL: u32 = 5;
/// Last 16 bytes of the file start with the CRC and then this.
pub(crate) const FOOTER_MAGIC: [u8; 8] = *b"PRIMDEND";
/// Fixed header size; the first section starts right after it.
pub(crate) const HEADER_SIZE: usize = 256;
/// `crc32: u32`, `FOOTER_MAGIC`, 4 reserved zero bytes.
pub(crate) const FOOTER_SIZE: usize = 16;
/// Every section starts at a multiple of this file offset.
pub(crate) const ALIGN: u64 = 64;
/// Accepted embedding dimensions: a multiple of 8 (whole code bytes) in this range.
pub(crate) const MIN_DIM: u32 = 8;
pub(crate) const MAX_DIM: u32 = 4096;

// Header field offsets (see FORMAT.md). Bytes not named here are reserved and written as zero.
pub(crate) const OFF_MAGIC: usize = 0;
pub(crate) const OFF_FORMAT_VERSION: usize = 8;
pub(crate) const OFF_MIN_READER_VERSION: usize = 12;
pub(crate) const OFF_DIM: usize = 16;
// 20..24: reserved, keeps `count` 8-byte aligned.
pub(crate) const OFF_COUNT: usize = 24;
pub(crate) const OFF_FINGERPRINT: usize = 32;
pub(crate) const OFF_CHUNK_WORDS: usize = 64;
pub(crate) const OFF_OVERLAP_WORDS: usize = 68;
/// Section table: `SECTION_COUNT` entries of `(offset: u64, length: u64)`. The sixth
/// (lexical, 152..168) exists from format v2 on; `(0, 0)` there means "no lexical section".
/// The seventh (sentences, 168..184) from format v6 on, likewise.
pub(crate) const OFF_SECTIONS: usize = 72;
// 184..256: reserved.

/// Section indices, in file order.
pub(crate) const SEC_CODES: usize = 0;
pub(crate) const SEC_VECTORS: usize = 1;
pub(crate) const SEC_SCALES: usize = 2;
pub(crate) const SEC_OFFSETS: usize = 3;
pub(crate) const SEC_BLOB: usize = 4;
/// Format v2: BM25 term dictionary and postings (`lexical::format`); optional.
pub(crate) const SEC_LEXICAL: usize = 5;
/// Format v6: sentence spans, token counts and vectors (`sentences`); optional.
pub(crate) const SEC_SENTENCES: usize = 6;
pub(crate) const SECTION_COUNT: usize = 7;
pub(crate) const SECTION_NAMES: [&str; SECTION_COUNT] = [
    "codes",
    "vectors",
    "scales",
    "passage offsets",
    "passage blob",
    "lexical",
    "sentences",
];
/// The first format version with a lexical section entry in the table.
pub(crate) const LEXICAL_SINCE: u32 = 2;
/// The first format version with a sentence section entry in the table.
pub(crate) const SENTENCES_SINCE: u32 = 6;

/// Smallest passage record: three empty strings (3 × u32 length) + chunk, word_start, word_end.
pub(crate) const MIN_RECORD: u64 = 24;

const _: () = assert!(OFF_SECTIONS + SECTION_COUNT * 16 <= HEADER_SIZE);
const _: () = assert!((HEADER_SIZE as u64).is_multiple_of(ALIGN));

/// What the index was built with; everything in the header that is not layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexMeta {
    /// Embedding dimension (a multiple of 8, 8..=4096).
    pub dim: u32,
    /// Model + tokenizer that produced the vectors; checked against the loaded model.
    pub fingerprint: Fingerprint,
    /// Chunking used by build-index, recorded so the daemon can report it.
    pub chunk_words: u32,
    pub overlap_words: u32,
}

/// One passage as given to the writer (owned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassageRecord {
    /// External id of the parent document (shared by all its chunks).
    pub id: String,
    pub title: String,
    pub text: String,
    /// 0-based chunk number inside the parent document.
    pub chunk: u32,
    /// Word offsets of the chunk in the parent text.
    pub word_start: u32,
    pub word_end: u32,
}

/// One passage as read from the mapping (borrowed, no copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassageRef<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub text: &'a str,
    pub chunk: u32,
    pub word_start: u32,
    pub word_end: u32,
}

/// Writes the 1-bit sign code of `v`: bit `i` (byte `i / 8`, bit `i % 8`, LSB first) is set
/// iff `v[i] > 0` (so zeros and NaN give 0). Padding bits of a last partial byte are 0.
///
/// # Panics
/// If `out.len() != v.len().div_ceil(8)` (a caller bug, not a data error).
pub fn sign_code(v: &[f32], out: &mut [u8]) {
    assert_eq!(out.len(), v.len().div_ceil(8), "sign_code: output length");
    for (byte, xs) in out.iter_mut().zip(v.chunks(8)) {
        let mut b = 0u8;
        for (bit, &x) in xs.iter().enumerate() {
            if x > 0.0 {
                b |= 1 << bit;
            }
        }
        *byte = b;
    }
}

/// Symmetric int8 quantisation with one scale per vector: `scale = max|x| / 127`,
/// `q[i] = round(x[i] / scale)` clamped to `[-127, 127]`; returns `scale`. A zero vector (or one
/// whose scale underflows to 0) gives scale 0 and all-zero codes. `x[i] ≈ q[i] * scale`.
/// Inputs are expected finite (the writer rejects non-finite vectors); an infinite component
/// also gives scale 0 and zeros, and a NaN component maps to 0.
///
/// # Panics
/// If `out.len() != v.len()` (a caller bug, not a data error).
pub fn quantize_i8(v: &[f32], out: &mut [i8]) -> f32 {
    assert_eq!(out.len(), v.len(), "quantize_i8: output length");
    let max_abs = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = max_abs / 127.0;
    if scale == 0.0 || !scale.is_finite() {
        out.fill(0);
        return 0.0;
    }
    for (q, &x) in out.iter_mut().zip(v) {
        // `as` saturates and maps NaN to 0; the clamp keeps the code symmetric (never -128).
        *q = (x / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// `x` rounded up to a multiple of [`ALIGN`], or `None` on overflow.
pub(crate) fn align_up(x: u64) -> Option<u64> {
    Some(x.checked_add(ALIGN - 1)? / ALIGN * ALIGN)
}

/// A section's place in the file, as stored in the section table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Section {
    pub offset: u64,
    pub len: u64,
}

impl Section {
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// The decoded fixed header. `decode` never fails: semantic checks belong to the reader, which
/// needs to report them with the file's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub magic: [u8; 8],
    pub format_version: u32,
    pub min_reader_version: u32,
    pub count: u64,
    pub meta: IndexMeta,
    pub sections: [Section; SECTION_COUNT],
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&self.magic);
        put_u32(&mut b, OFF_FORMAT_VERSION, self.format_version);
        put_u32(&mut b, OFF_MIN_READER_VERSION, self.min_reader_version);
        put_u32(&mut b, OFF_DIM, self.meta.dim);
        put_u64(&mut b, OFF_COUNT, self.count);
        b[OFF_FINGERPRINT..OFF_FINGERPRINT + 32].copy_from_slice(&self.meta.fingerprint);
        put_u32(&mut b, OFF_CHUNK_WORDS, self.meta.chunk_words);
        put_u32(&mut b, OFF_OVERLAP_WORDS, self.meta.overlap_words);
        for (i, s) in self.sections.iter().enumerate() {
            put_u64(&mut b, OFF_SECTIONS + 16 * i, s.offset);
            put_u64(&mut b, OFF_SECTIONS + 16 * i + 8, s.len);
        }
        b
    }

    pub fn decode(b: &[u8; HEADER_SIZE]) -> Header {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[OFF_MAGIC..OFF_MAGIC + 8]);
        let mut fingerprint = [0u8; 32];
        fingerprint.copy_from_slice(&b[OFF_FINGERPRINT..OFF_FINGERPRINT + 32]);
        let mut sections = [Section::default(); SECTION_COUNT];
        for (i, s) in sections.iter_mut().enumerate() {
            s.offset = get_u64(b, OFF_SECTIONS + 16 * i);
            s.len = get_u64(b, OFF_SECTIONS + 16 * i + 8);
        }
        Header {
            magic,
            format_version: get_u32(b, OFF_FORMAT_VERSION),
            min_reader_version: get_u32(b, OFF_MIN_READER_VERSION),
            count: get_u64(b, OFF_COUNT),
            meta: IndexMeta {
                dim: get_u32(b, OFF_DIM),
                fingerprint,
                chunk_words: get_u32(b, OFF_CHUNK_WORDS),
                overlap_words: get_u32(b, OFF_OVERLAP_WORDS),
            },
            sections,
        }
    }
}

/// Expected section lengths for `count` passages of dimension `dim` (the blob's length is free).
/// `None` if any of them overflows `u64`.
pub(crate) fn expected_lengths(count: u64, dim: u64) -> Option<[u64; SEC_BLOB]> {
    let codes = count.checked_mul(dim / 8)?;
    let vectors = count.checked_mul(dim)?;
    let scales = count.checked_mul(4)?;
    let offsets = count.checked_add(1)?.checked_mul(8)?;
    Some([codes, vectors, scales, offsets])
}

/// Places the sections one after another from the end of the header, each 64-byte aligned;
/// the lexical section (if `lexical_len > 0`) after the blob, else its entry is `(0, 0)`,
/// and the sentence section (if `sentences_len > 0`) after that, likewise.
/// Returns the table and the file offset of the footer; `None` on overflow.
pub(crate) fn layout(
    count: u64,
    dim: u64,
    blob_len: u64,
    lexical_len: u64,
    sentences_len: u64,
) -> Option<([Section; SECTION_COUNT], u64)> {
    let lens = expected_lengths(count, dim)?;
    let mut sections = [Section::default(); SECTION_COUNT];
    let mut pos = HEADER_SIZE as u64;
    for (i, s) in sections.iter_mut().enumerate() {
        let len = match i {
            SEC_BLOB => blob_len,
            SEC_LEXICAL if lexical_len == 0 => continue,
            SEC_LEXICAL => lexical_len,
            SEC_SENTENCES if sentences_len == 0 => continue,
            SEC_SENTENCES => sentences_len,
            _ => lens[i],
        };
        *s = Section { offset: pos, len };
        pos = align_up(pos.checked_add(len)?)?;
    }
    Some((sections, pos))
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

// Only called with the constant offsets above on a `[u8; HEADER_SIZE]`: always in bounds.
fn get_u32(b: &[u8; HEADER_SIZE], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn get_u64(b: &[u8; HEADER_SIZE], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Encoded size of a record, or `None` if a string is longer than `u32::MAX` bytes.
pub(crate) fn record_len(p: &PassageRecord) -> Option<u64> {
    let mut n = MIN_RECORD;
    for s in [&p.id, &p.title, &p.text] {
        u32::try_from(s.len()).ok()?;
        n = n.checked_add(s.len() as u64)?;
    }
    Some(n)
}

/// Appends the record's bytes; the caller has checked `record_len` (string lengths fit u32).
pub(crate) fn encode_record(p: &PassageRecord, out: &mut Vec<u8>) {
    for s in [&p.id, &p.title, &p.text] {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out.extend_from_slice(&p.chunk.to_le_bytes());
    out.extend_from_slice(&p.word_start.to_le_bytes());
    out.extend_from_slice(&p.word_end.to_le_bytes());
}

/// Decodes one record from exactly its bytes. Bytes after `word_end` are ignored (room for
/// fields a later, still v1-readable format version may append). The error is a description
/// for `IndexError::Corrupt`; it allocates only on failure.
pub(crate) fn decode_record(rec: &[u8]) -> Result<PassageRef<'_>, String> {
    let mut cur = Cursor { rest: rec };
    let id = cur.str("id")?;
    let title = cur.str("title")?;
    let text = cur.str("text")?;
    let chunk = cur.u32("chunk")?;
    let word_start = cur.u32("word_start")?;
    let word_end = cur.u32("word_end")?;
    Ok(PassageRef {
        id,
        title,
        text,
        chunk,
        word_start,
        word_end,
    })
}

struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
        if n > self.rest.len() {
            return Err(format!(
                "passage record field `{field}` needs {n} bytes, only {} left",
                self.rest.len()
            ));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u32(&mut self, field: &str) -> Result<u32, String> {
        let b = self.take(4, field)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn str(&mut self, field: &str) -> Result<&'a str, String> {
        let n = self.u32(field)?;
        let n = usize::try_from(n).map_err(|_| format!("`{field}` length {n} too large"))?;
        let b = self.take(n, field)?;
        std::str::from_utf8(b).map_err(|e| format!("passage record field `{field}`: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::test_support::{XorShift, unit_vector};

    #[test]
    fn sign_code_bit_order() {
        // bit i -> byte i/8, bit i%8, LSB first; zero is not positive.
        let mut v = [0.0f32; 16];
        v[0] = 1.0;
        v[3] = 0.5;
        v[7] = 2.0;
        v[8] = -1.0;
        v[9] = 1e-30;
        v[15] = 3.0;
        let mut out = [0u8; 2];
        sign_code(&v, &mut out);
        assert_eq!(out, [0b1000_1001, 0b1000_0010]);
    }

    #[test]
    fn sign_code_partial_last_byte() {
        let v = [1.0f32, -1.0, 1.0, 0.0, f32::NAN, 1.0, 1.0, 1.0, 1.0, -2.0];
        let mut out = [0xffu8; 2];
        sign_code(&v, &mut out);
        assert_eq!(out, [0b1110_0101, 0b0000_0001]);
    }

    #[test]
    fn quantize_i8_basics() {
        let v = [0.5f32, -1.0, 0.25, 0.0];
        let mut q = [0i8; 4];
        let s = quantize_i8(&v, &mut q);
        assert_eq!(s, 1.0 / 127.0);
        assert_eq!(q, [64, -127, 32, 0]); // 63.5 rounds away from zero
        let mut z = [5i8; 3];
        assert_eq!(quantize_i8(&[0.0, -0.0, 0.0], &mut z), 0.0);
        assert_eq!(z, [0, 0, 0]);
        // extreme values never produce -128
        let mut e = [0i8; 2];
        quantize_i8(&[-f32::MAX, f32::MAX], &mut e);
        assert_eq!(e, [-127, 127]);
    }

    #[test]
    fn quantize_i8_cosine_on_random_unit_vectors() {
        let mut rng = XorShift::new(7);
        for dim in [8usize, 64, 384, 768, 4096] {
            for _ in 0..50 {
                let v = unit_vector(&mut rng, dim);
                let mut q = vec![0i8; dim];
                let s = quantize_i8(&v, &mut q);
                assert!(q.iter().all(|&x| x != i8::MIN));
                let dq: Vec<f32> = q.iter().map(|&x| f32::from(x) * s).collect();
                let dot: f32 = v.iter().zip(&dq).map(|(a, b)| a * b).sum();
                let n: f32 = dq.iter().map(|x| x * x).sum::<f32>().sqrt();
                let cos = dot / n;
                assert!(cos >= 0.99, "dim {dim}: cosine {cos}");
                // and the element-wise error is at most half a step
                for (a, b) in v.iter().zip(&dq) {
                    assert!((a - b).abs() <= s * 0.5 + 1e-6);
                }
            }
        }
    }

    #[test]
    fn header_round_trip_and_layout() {
        let (sections, footer) = layout(3, 16, 100, 0, 0).unwrap();
        assert_eq!(
            sections[SEC_CODES],
            Section {
                offset: 256,
                len: 6
            }
        );
        assert_eq!(
            sections[SEC_VECTORS],
            Section {
                offset: 320,
                len: 48
            }
        );
        assert_eq!(
            sections[SEC_SCALES],
            Section {
                offset: 384,
                len: 12
            }
        );
        assert_eq!(
            sections[SEC_OFFSETS],
            Section {
                offset: 448,
                len: 32
            }
        );
        assert_eq!(
            sections[SEC_BLOB],
            Section {
                offset: 512,
                len: 100
            }
        );
        assert_eq!(sections[SEC_LEXICAL], Section::default());
        assert_eq!(footer, 640);
        let (with_lex, footer) = layout(3, 16, 100, 130, 0).unwrap();
        assert_eq!(
            with_lex[SEC_LEXICAL],
            Section {
                offset: 640,
                len: 130
            }
        );
        assert_eq!(footer, 832);
        let h = Header {
            magic: MAGIC,
            format_version: 7,
            min_reader_version: 1,
            count: 3,
            meta: IndexMeta {
                dim: 16,
                fingerprint: [9; 32],
                chunk_words: 120,
                overlap_words: 20,
            },
            sections,
        };
        let b = h.encode();
        assert_eq!(&b[..8], b"PRIMDIX\0");
        assert!(b[OFF_SECTIONS + 80..].iter().all(|&x| x == 0));
        let h2 = Header {
            sections: with_lex,
            ..h.clone()
        };
        assert_eq!(Header::decode(&h2.encode()), h2);
        assert!(h2.encode()[OFF_SECTIONS + 96..].iter().all(|&x| x == 0));
        assert_eq!(Header::decode(&b), h);
        assert!(layout(u64::MAX / 2, 4096, 0, 0, 0).is_none());
        assert!(layout(3, 16, 100, u64::MAX - 100, 0).is_none());
        assert_eq!(align_up(u64::MAX), None);
    }

    #[test]
    fn record_round_trip_and_errors() {
        let p = PassageRecord {
            id: "doc-é".into(),
            title: "".into(),
            text: "héllo wörld".into(),
            chunk: 3,
            word_start: 10,
            word_end: 12,
        };
        let mut buf = Vec::new();
        encode_record(&p, &mut buf);
        assert_eq!(buf.len() as u64, record_len(&p).unwrap());
        let r = decode_record(&buf).unwrap();
        assert_eq!((r.id, r.title, r.text), ("doc-é", "", "héllo wörld"));
        assert_eq!((r.chunk, r.word_start, r.word_end), (3, 10, 12));
        for cut in 0..buf.len() {
            assert!(decode_record(&buf[..cut]).is_err());
        }
        let mut bad = buf.clone();
        bad[4] = 0xff; // first byte of the id: invalid UTF-8
        assert!(decode_record(&bad).unwrap_err().contains("id"));
        let mut huge = buf.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_record(&huge).is_err());
    }
}
