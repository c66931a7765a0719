//! The index reader: a read-only memory map plus the section ranges validated at open.
//!
//! Invariants, and why:
//! - **No copy, no allocation while searching.** The file is mapped, and `codes`, `vector`,
//!   `scale` and `passage` hand out borrowed slices of the mapping; the OS pages in only what a
//!   search touches, which is what lets a Pi hold a corpus larger than its free RAM.
//! - **Validate once, cheaply, then slice freely.** `open` checks everything that slicing
//!   depends on: header, versions, dimension, every section in bounds / aligned /
//!   non-overlapping / of the length implied by `count` and `dim`, the footer magic, and the
//!   passage offsets table (monotonic, records at least the minimum size, ending at the blob's
//!   end). After that the accessors cannot index out of bounds for `i < len()`. All offset
//!   arithmetic is checked, so no input file can make `open` or an accessor panic; what the
//!   cheap checks cannot see (a flipped bit inside a vector, say) is the CRC's job in
//!   [`Index::verify`], which reads the whole file and so runs only on request (`--verify`).
//! - **Forward compatible.** A file from a newer format version is read if its
//!   `min_reader_version` says this reader understands it: reserved header bytes, footer
//!   reserved bytes and bytes after a record's last known field are ignored.
//! - **The lexical section (v2) is optional.** A v1 file, or a v2 file built with
//!   `--no-lexical`, opens as a dense-only index ([`Index::lexical`] is `None`). When the
//!   section is there, `open` validates it as well (`Lexical::open`: O(terms + passages),
//!   postings untouched), and a corrupt one refuses the whole file: silently dropping to
//!   dense-only would hide a damaged index.

use std::fmt;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapOptions};

use super::error::{IndexError, hex_prefix};
use super::format::{
    ALIGN, FOOTER_MAGIC, FOOTER_SIZE, FORMAT_VERSION, Fingerprint, HEADER_SIZE, Header, IndexMeta,
    LEXICAL_SINCE, MAGIC, MAX_DIM, MIN_DIM, MIN_RECORD, OLDEST_SUPPORTED, PassageRef, SEC_BLOB,
    SEC_CODES, SEC_LEXICAL, SEC_OFFSETS, SEC_SCALES, SEC_SENTENCES, SEC_VECTORS, SECTION_COUNT,
    SECTION_NAMES, SENTENCES_SINCE, Section, align_up, decode_record, expected_lengths,
};
use super::sentences::Sentences;
use crate::lexical::{Decoded, Lexical, WordRules};

/// An open, validated, memory-mapped index.
pub struct Index {
    map: Mmap,
    path: PathBuf,
    meta: IndexMeta,
    count: usize,
    dim: usize,
    code_bytes: usize,
    /// Byte ranges of the sections inside `map`, validated by `open` (the lexical one is
    /// empty when absent).
    sections: [Range<usize>; SECTION_COUNT],
    /// Whether the file has a (validated) lexical section.
    has_lexical: bool,
    /// Whether the file has a (validated) sentence section (format v6).
    has_sentences: bool,
    /// Its documents' BM25 length norms, computed once here so that no query computes
    /// them per posting ([`Lexical::with_norms`]); empty without a lexical section.
    norms: Box<[f32]>,
    /// Its postings decoded with their contributions, for a corpus scored term at a
    /// time, within a RAM budget ([`Decoded`]); `None` otherwise.
    decoded: Option<Box<Decoded>>,
    /// Start of the footer = end of the CRC-covered bytes.
    footer: usize,
}

/// How [`Index::open_with`] holds the file's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Read the whole file into private anonymous memory instead of mapping it: costs
    /// the file's size in RAM, and no write to the file can reach the daemon.
    pub in_ram: bool,
    /// Map with `MAP_POPULATE` and `madvise(WILLNEED)`: the file is read and its pages
    /// mapped at open, so the first search after boot does not page-fault the scan.
    pub populate: bool,
}

/// Fills `buf` from `file` at offset 0 (a shorter file is an `UnexpectedEof` error).
fn read_exact_at(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, 0)
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("path", &self.path)
            .field("meta", &self.meta)
            .field("len", &self.count)
            .field("file_size", &self.map.len())
            .field("lexical", &self.has_lexical)
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Maps `path` and runs the cheap checks (see the module doc); O(count) for the offsets
    /// table, otherwise O(1). Does not check the CRC: call [`Index::verify`] for that.
    ///
    /// **The mapping contract.** The file is memory-mapped, not read: whoever publishes a
    /// new index must write it elsewhere (in the same directory) and `rename(2)` it over
    /// the old name (`write_index` and `primd install-index` do), never write into the
    /// file in place. A rename leaves this mapping on the old inode, whose bytes no one
    /// changes; writing in place (`cp new.idx live.idx`, an editor, `>`) changes the
    /// bytes under a running search, and truncating the file turns the next read of a
    /// page past the new end into SIGBUS, which kills the process. `primd run` guards
    /// against such writers (a read lease, or `--index-in-ram`; `index::live`), nothing
    /// else does.
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        Index::open_with(path, Load::default())
    }

    /// [`Index::open`] with a choice of how the bytes are held ([`Load`]).
    pub fn open_with(path: &Path, load: Load) -> Result<Index, IndexError> {
        let file = File::open(path).map_err(|source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Index::from_file(&file, path, load)
    }

    /// [`Index::open_with`] over a file the caller opened (and may keep open, e.g. to
    /// hold a lease on the very inode that is mapped); `path` names it in errors.
    pub fn from_file(file: &File, path: &Path, load: Load) -> Result<Index, IndexError> {
        let io = |source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        };
        let size = file.metadata().map_err(io)?.len();
        let min = (HEADER_SIZE + FOOTER_SIZE) as u64;
        if size < min {
            // Also keeps us from mapping an empty file.
            return Err(IndexError::Truncated {
                path: path.to_path_buf(),
                size,
                needed: min,
            });
        }
        let map = if load.in_ram {
            // A private anonymous copy: no later write to the file can reach it.
            let len =
                usize::try_from(size).map_err(|_| io(std::io::ErrorKind::OutOfMemory.into()))?;
            let mut anon = memmap2::MmapMut::map_anon(len).map_err(io)?;
            read_exact_at(file, &mut anon).map_err(io)?;
            anon.make_read_only().map_err(io)?
        } else {
            let mut opts = MmapOptions::new();
            if load.populate {
                opts.populate();
            }
            // SAFETY: `Mmap` is unsafe because the bytes behind it may change if another
            // process writes to the file while it is mapped (and a truncation would turn our
            // reads into SIGBUS). Index files are written only by `write_index` and
            // `install-index`, which never modify a file in place: they write a new file
            // under a temporary name and rename it over the old one, so a mapping made here
            // keeps referring to the old inode, whose contents no one changes. Replacing an
            // index any other way is outside the contract stated on [`Index::open`]; the
            // daemon additionally holds a read lease (`index::live`) to survive it. The map
            // is read-only and private to this struct; every slice we hand out borrows
            // `self`, so none outlives the mapping.
            let map = unsafe { opts.map(file) }.map_err(io)?;
            if load.populate {
                // Read-ahead of the whole file; only a hint, so its failure is ignored.
                let _ = map.advise(memmap2::Advice::WillNeed);
            }
            map
        };
        let mut index = Index {
            path: path.to_path_buf(),
            meta: IndexMeta {
                dim: 0,
                fingerprint: [0; 32],
                chunk_words: 0,
                overlap_words: 0,
            },
            count: 0,
            dim: 0,
            code_bytes: 0,
            sections: Default::default(),
            has_lexical: false,
            has_sentences: false,
            norms: Box::default(),
            decoded: None,
            footer: 0,
            map,
        };
        index.validate()?;
        Ok(index)
    }

    fn corrupt(&self, what: impl Into<String>) -> IndexError {
        IndexError::Corrupt {
            path: self.path.clone(),
            what: what.into(),
        }
    }

    /// Fills in the parsed fields of a freshly mapped index, or says why the file is unusable.
    fn validate(&mut self) -> Result<(), IndexError> {
        let path = || self.path.clone();
        let bytes: &[u8] = &self.map;
        let size = bytes.len() as u64;
        let Some(head) = bytes.first_chunk::<HEADER_SIZE>() else {
            let needed = (HEADER_SIZE + FOOTER_SIZE) as u64;
            return Err(IndexError::Truncated {
                path: path(),
                size,
                needed,
            });
        };
        let h = Header::decode(head);
        if h.magic != MAGIC {
            return Err(IndexError::BadMagic { path: path() });
        }
        let supported = (OLDEST_SUPPORTED, FORMAT_VERSION);
        if h.min_reader_version > FORMAT_VERSION {
            let found = h.format_version.max(h.min_reader_version);
            return Err(IndexError::UnsupportedVersion {
                path: path(),
                found,
                supported,
            });
        }
        if h.format_version < OLDEST_SUPPORTED {
            let found = h.format_version;
            return Err(IndexError::UnsupportedVersion {
                path: path(),
                found,
                supported,
            });
        }
        let dim = h.meta.dim;
        if !dim.is_multiple_of(8) || !(MIN_DIM..=MAX_DIM).contains(&dim) {
            return Err(self.corrupt(format!(
                "dimension {dim} is not a multiple of 8 in {MIN_DIM}..={MAX_DIM}"
            )));
        }
        if h.count == 0 {
            return Err(IndexError::Empty { path: path() });
        }
        let Some(lens) = expected_lengths(h.count, u64::from(dim)) else {
            return Err(self.corrupt(format!("passage count {} is impossibly large", h.count)));
        };

        // The lexical entry counts from v2 on, and (0, 0) there means "none".
        let lex = h.sections[SEC_LEXICAL];
        let has_lexical = h.format_version >= LEXICAL_SINCE && (lex.offset, lex.len) != (0, 0);
        let sen = h.sections[SEC_SENTENCES];
        let has_sentences = h.format_version >= SENTENCES_SINCE && (sen.offset, sen.len) != (0, 0);
        let present = |i: usize| match i {
            SEC_LEXICAL => has_lexical,
            SEC_SENTENCES => has_sentences,
            _ => true,
        };

        // Section table: aligned, after the header, in bounds, lengths as implied.
        let mut max_end = HEADER_SIZE as u64;
        for (i, s) in h.sections.iter().enumerate() {
            if !present(i) {
                continue;
            }
            let name = SECTION_NAMES[i];
            if !s.offset.is_multiple_of(ALIGN) || s.offset < HEADER_SIZE as u64 {
                return Err(self.corrupt(format!(
                    "{name} section offset {} is not 64-byte aligned after the header",
                    s.offset
                )));
            }
            if i < SEC_BLOB && s.len != lens[i] {
                return Err(self.corrupt(format!(
                    "{name} section is {} bytes, expected {} for {} passages of dimension {dim}",
                    s.len, lens[i], h.count
                )));
            }
            let Some(end) = s.end() else {
                return Err(self.corrupt(format!("{name} section extends past 2^64")));
            };
            max_end = max_end.max(end);
        }
        for (i, a) in h.sections.iter().enumerate().filter(|&(i, _)| present(i)) {
            for (j, b) in h
                .sections
                .iter()
                .enumerate()
                .skip(i + 1)
                .filter(|&(j, _)| present(j))
            {
                // Ends cannot overflow: checked above.
                let (a_end, b_end) = (a.offset + a.len, b.offset + b.len);
                if a.offset < b_end && b.offset < a_end {
                    return Err(self.corrupt(format!(
                        "{} and {} sections overlap",
                        SECTION_NAMES[i], SECTION_NAMES[j]
                    )));
                }
            }
        }
        let needed = align_up(max_end)
            .and_then(|e| e.checked_add(FOOTER_SIZE as u64))
            .ok_or_else(|| self.corrupt("section table points past 2^64"))?;
        if size < needed {
            return Err(IndexError::Truncated {
                path: path(),
                size,
                needed,
            });
        }
        // size >= needed >= HEADER_SIZE + FOOTER_SIZE, so this cannot underflow.
        let footer = bytes.len() - FOOTER_SIZE;
        if bytes[footer + 4..footer + 12] != FOOTER_MAGIC {
            return Err(self.corrupt("footer magic PRIMDEND missing (truncated or overwritten?)"));
        }

        // Every section end is <= needed <= size = bytes.len(), so these fit in usize.
        let mut sections: [Range<usize>; SECTION_COUNT] = Default::default();
        for (i, (r, s)) in sections.iter_mut().zip(&h.sections).enumerate() {
            let s: &Section = if present(i) {
                s
            } else {
                &Section { offset: 0, len: 0 }
            };
            let to_usize = |x: u64| usize::try_from(x).ok();
            match (to_usize(s.offset), to_usize(s.offset + s.len)) {
                (Some(a), Some(b)) => *r = a..b,
                _ => return Err(self.corrupt("section does not fit in memory")),
            }
        }
        let count = usize::try_from(h.count)
            .map_err(|_| self.corrupt("passage count does not fit in memory"))?;

        // Passage offsets: start at 0, each record at least MIN_RECORD bytes (so strictly
        // increasing), the last one ending exactly at the blob's end.
        let blob_len = h.sections[SEC_BLOB].len;
        let offsets = &bytes[sections[SEC_OFFSETS].clone()];
        let mut prev: Option<u64> = None;
        for (i, b) in offsets.chunks_exact(8).enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            let off = u64::from_le_bytes(a);
            let ok = match prev {
                None => off == 0,
                Some(p) => p.checked_add(MIN_RECORD).is_some_and(|min| off >= min),
            } && off <= blob_len;
            if !ok {
                return Err(self.corrupt(format!(
                    "passage offset {i} = {off} is out of order or outside the blob ({blob_len} bytes)"
                )));
            }
            prev = Some(off);
        }
        if prev != Some(blob_len) {
            return Err(self.corrupt(format!(
                "passage offsets end at {prev:?}, the blob is {blob_len} bytes"
            )));
        }

        let mut norms = Box::default();
        let mut decoded = None;
        if has_lexical {
            let lex = Lexical::open(&bytes[sections[SEC_LEXICAL].clone()])
                .map_err(|e| self.corrupt(format!("lexical section: {e}")))?;
            if lex.doc_count() != count {
                return Err(self.corrupt(format!(
                    "lexical section indexes {} passages, the index has {count}",
                    lex.doc_count()
                )));
            }
            norms = lex.doc_norms();
            let t0 = std::time::Instant::now();
            decoded = Decoded::for_serving(&lex.clone().with_norms(&norms)).map(Box::new);
            if let Some(d) = &decoded {
                log::debug!(
                    "{:?}: lexical postings decoded into {} bytes in {:.1} ms",
                    self.path,
                    d.bytes(),
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
        }

        if has_sentences {
            Sentences::open(&bytes[sections[SEC_SENTENCES].clone()], count, dim as usize)
                .map_err(|e| self.corrupt(format!("sentence section: {e}")))?;
        }

        self.dim = dim as usize;
        self.code_bytes = self.dim / 8;
        self.has_lexical = has_lexical;
        self.has_sentences = has_sentences;
        self.norms = norms;
        self.decoded = decoded;
        self.count = count;
        self.meta = h.meta;
        self.sections = sections;
        self.footer = footer;
        Ok(())
    }

    /// Full check: CRC-32 of every byte before the footer against the stored one. Reads (and so
    /// pages in) the whole file, which is slow on a Pi's SD card: run it behind `--verify`.
    pub fn verify(&self) -> Result<(), IndexError> {
        let (data, footer) = self.map.split_at(self.footer);
        let stored = u32::from_le_bytes([footer[0], footer[1], footer[2], footer[3]]);
        let computed = crc32fast::hash(data);
        if stored != computed {
            return Err(IndexError::Checksum {
                path: self.path.clone(),
                stored,
                computed,
            });
        }
        Ok(())
    }

    /// Refuses an index whose vectors came from another model or tokenizer.
    pub fn check_fingerprint(&self, expected: &Fingerprint) -> Result<(), IndexError> {
        if &self.meta.fingerprint != expected {
            return Err(IndexError::ModelMismatch {
                path: self.path.clone(),
                index: hex_prefix(&self.meta.fingerprint),
                model: hex_prefix(expected),
            });
        }
        Ok(())
    }

    /// The lexical section (format v2), or `None` for an index without one (a v1 file, or
    /// one built with `build-index --no-lexical`). Cheap (O(1)): `open` validated it.
    pub fn lexical(&self) -> Option<Lexical<'_>> {
        if !self.has_lexical {
            return None;
        }
        Lexical::parse(&self.map[self.sections[SEC_LEXICAL].clone()])
            .ok()
            .map(|l| {
                let l = l.with_norms(&self.norms);
                match &self.decoded {
                    Some(d) => l.with_decoded(d),
                    None => l,
                }
            })
    }

    /// The sentence section (format v6): each passage's sentences, their word-piece
    /// counts and vectors; `None` for an index built without one (before v6). O(1).
    pub fn sentences(&self) -> Option<Sentences<'_>> {
        if !self.has_sentences {
            return None;
        }
        Sentences::view(
            &self.map[self.sections[SEC_SENTENCES].clone()],
            self.count,
            self.dim,
        )
        .ok()
    }

    /// RAM held by the lexical postings decoded at open ([`Decoded`]; 0: none, the
    /// corpus is scored from the mapped file).
    pub fn decoded_bytes(&self) -> usize {
        self.decoded.as_ref().map_or(0, |d| d.bytes())
    }

    /// The word rules a query of this index must be cut by: its lexical section's (the
    /// analyzer version it was built with), the current ones without a section.
    pub fn word_rules(&self) -> WordRules {
        self.lexical()
            .map_or(WordRules::default(), |l| l.spec().rules)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file as held (mapped or copied), for `index::live`, which may move a
    /// mapping's pages off the file (`live::detach`).
    pub(super) fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn meta(&self) -> &IndexMeta {
        &self.meta
    }

    /// Number of passages (never 0 for an opened index).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Always false for an opened index (`open` refuses an empty one); here for API hygiene.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bytes per sign code: `dim / 8`.
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }

    /// All sign codes, contiguous: code `i` is `codes()[i * code_bytes() .. (i + 1) * code_bytes()]`.
    pub fn codes(&self) -> &[u8] {
        &self.map[self.sections[SEC_CODES].clone()]
    }

    /// The int8 vector of passage `i` (dequantise with `scale(i)`).
    ///
    /// # Panics
    /// If `i >= len()`, like slice indexing (a caller bug; no file content can cause it).
    pub fn vector(&self, i: usize) -> &[i8] {
        assert!(
            i < self.count,
            "vector {i} out of range (len {})",
            self.count
        );
        let start = self.sections[SEC_VECTORS].start + i * self.dim;
        bytes_as_i8(&self.map[start..start + self.dim])
    }

    /// The quantisation scale of vector `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn scale(&self, i: usize) -> f32 {
        assert!(
            i < self.count,
            "scale {i} out of range (len {})",
            self.count
        );
        let at = self.sections[SEC_SCALES].start + 4 * i;
        let b = &self.map[at..at + 4];
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Passage `i`, borrowed from the mapping. A record that does not decode (bad length,
    /// invalid UTF-8) is [`IndexError::Corrupt`]; nothing in the file can make this panic.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn passage(&self, i: usize) -> Result<PassageRef<'_>, IndexError> {
        assert!(
            i < self.count,
            "passage {i} out of range (len {})",
            self.count
        );
        // Validated by `open`, but re-checked with `get` so a logic slip is an error, not a panic.
        let offsets = &self.map[self.sections[SEC_OFFSETS].clone()];
        let blob = &self.map[self.sections[SEC_BLOB].clone()];
        let read = |k: usize| -> Option<usize> {
            let b = offsets.get(k.checked_mul(8)?..)?.first_chunk::<8>()?;
            usize::try_from(u64::from_le_bytes(*b)).ok()
        };
        let rec = read(i)
            .zip(read(i + 1))
            .and_then(|(a, b)| blob.get(a..b))
            .ok_or_else(|| self.corrupt(format!("passage {i}: record outside the blob")))?;
        decode_record(rec).map_err(|e| self.corrupt(format!("passage {i}: {e}")))
    }
}

/// Reinterprets bytes as `i8`s without copying.
fn bytes_as_i8(b: &[u8]) -> &[i8] {
    // SAFETY: `u8` and `i8` have the same size and alignment (1) and every bit pattern is a
    // valid `i8`; the pointer and length come from a valid `&[u8]`, and the returned slice has
    // the same lifetime, so it covers exactly the same borrowed, immutable memory.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<i8>(), b.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::format::SEC_LEXICAL;
    use crate::index::format::{
        MIN_READER_WITH_LEXICAL, OFF_COUNT, OFF_DIM, OFF_FORMAT_VERSION, OFF_MIN_READER_VERSION,
        OFF_SECTIONS, PassageRecord, quantize_i8, sign_code,
    };
    use crate::index::test_support::{XorShift, corpus, meta};
    use crate::index::{WriteOptions, write_index, write_index_with};
    use crate::lexical::{AnalyzerKind, AnalyzerSpec, Bm25};

    fn build(
        dir: &Path,
        count: usize,
        dim: usize,
        seed: u64,
    ) -> (PathBuf, Vec<PassageRecord>, Vec<f32>) {
        let (passages, vectors) = corpus(count, dim, seed);
        let p = dir.join("t.idx");
        write_index(&p, &meta(dim as u32), &passages, &vectors).unwrap();
        (p, passages, vectors)
    }

    fn section(bytes: &[u8], i: usize) -> (usize, usize) {
        let at = OFF_SECTIONS + 16 * i;
        let off = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let len = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        (off as usize, len as usize)
    }

    fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
        bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
        bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes `bytes` to a fresh file and opens it.
    fn open_bytes(dir: &Path, bytes: &[u8]) -> Result<Index, IndexError> {
        let p = dir.join("m.idx");
        // Unlink first: ext4 flushes a file truncated and rewritten in place on close
        // (auto_da_alloc), which made these loops I/O bound.
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, bytes).unwrap();
        Index::open(&p)
    }

    /// Touches everything an index hands out; must never panic.
    fn touch_all(ix: &Index) -> usize {
        let mut acc = ix.codes().iter().map(|&b| b as usize).sum::<usize>();
        for i in 0..ix.len() {
            acc += ix
                .vector(i)
                .iter()
                .map(|&x| x as u8 as usize)
                .sum::<usize>();
            acc += ix.scale(i).to_bits() as usize & 1;
            if let Ok(p) = ix.passage(i) {
                acc += p.id.len() + p.title.len() + p.text.len() + p.chunk as usize;
            }
        }
        if let Some(lex) = ix.lexical() {
            let mut s = crate::lexical::LexicalSearcher::new();
            let mut hits = crate::hits::Hits::new();
            for q in ["voice agent board", "retrieval während 模型 arm", "title"] {
                s.search(&lex, q, "pi", 0.5, 10, &mut hits);
                acc += hits.iter().map(|h| h.index as usize).sum::<usize>();
                s.search_exhaustive(&lex, q, "", 0.0, 100, &mut hits);
                assert!(hits.iter().all(|h| (h.index as usize) < ix.len()));
            }
        }
        let _ = ix.verify();
        acc
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 384;
        let (p, passages, vectors) = build(dir.path(), 37, dim, 42);
        let ix = Index::open(&p).unwrap();
        ix.verify().unwrap();
        assert_eq!(ix.meta(), &meta(dim as u32));
        assert_eq!(ix.path(), p.as_path());
        assert_eq!(
            (ix.len(), ix.is_empty(), ix.dim(), ix.code_bytes()),
            (37, false, dim, dim / 8)
        );
        assert_eq!(ix.codes().len(), 37 * dim / 8);
        ix.check_fingerprint(&meta(dim as u32).fingerprint).unwrap();
        for (i, (v, want)) in vectors.chunks_exact(dim).zip(&passages).enumerate() {
            let mut code = vec![0u8; dim / 8];
            sign_code(v, &mut code);
            assert_eq!(&ix.codes()[i * dim / 8..(i + 1) * dim / 8], &code[..]);
            let mut q = vec![0i8; dim];
            let s = quantize_i8(v, &mut q);
            assert_eq!(ix.vector(i), &q[..]);
            assert_eq!(ix.scale(i).to_bits(), s.to_bits());
            let got = ix.passage(i).unwrap();
            assert_eq!(got.id, want.id);
            assert_eq!(got.title, want.title);
            assert_eq!(got.text, want.text);
            assert_eq!(
                (got.chunk, got.word_start, got.word_end),
                (want.chunk, want.word_start, want.word_end)
            );
        }
        // every section is 64-byte aligned
        let bytes = std::fs::read(&p).unwrap();
        for s in 0..SECTION_COUNT {
            assert_eq!(section(&bytes, s).0 % 64, 0);
        }
        assert!(format!("{ix:?}").contains("t.idx"));
    }

    #[test]
    fn open_survives_the_writer_replacing_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (p, passages, _) = build(dir.path(), 5, 16, 1);
        let old = Index::open(&p).unwrap();
        let (other, vectors) = corpus(9, 32, 2);
        write_index(&p, &meta(32), &other, &vectors).unwrap();
        // the old mapping still sees the old inode
        assert_eq!(old.len(), 5);
        assert_eq!(old.passage(4).unwrap().text, passages[4].text);
        old.verify().unwrap();
        assert_eq!(Index::open(&p).unwrap().len(), 9);
    }

    #[test]
    fn truncated_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 20, 64, 3);
        let bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        let (vec_off, _) = section(&bytes, SEC_VECTORS);
        let (blob_off, blob_len) = section(&bytes, SEC_BLOB);
        let cuts = [
            0,
            1,
            7,
            100,         // mid-header
            HEADER_SIZE, // header only
            HEADER_SIZE + FOOTER_SIZE,
            vec_off + 10,            // mid-section
            blob_off + blob_len / 2, // mid-blob
            n - FOOTER_SIZE,         // footer missing
            n - 1,                   // footer cut short
        ];
        for cut in cuts {
            let err = open_bytes(dir.path(), &bytes[..cut]).unwrap_err();
            assert!(
                matches!(
                    err,
                    IndexError::Truncated { .. } | IndexError::Corrupt { .. }
                ),
                "cut at {cut}: {err}"
            );
            if cut < n - FOOTER_SIZE {
                assert!(
                    matches!(err, IndexError::Truncated { size, .. } if size == cut as u64),
                    "cut at {cut}: {err}"
                );
            }
        }
        // every other cut point too: never a panic, never Ok
        for cut in 0..n {
            assert!(
                open_bytes(dir.path(), &bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn wrong_magic() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 3, 16, 4);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[0] = b'X';
        let err = open_bytes(dir.path(), &bytes).unwrap_err();
        assert!(matches!(err, IndexError::BadMagic { .. }), "{err}");
        assert!(err.to_string().contains("is not a primd index"));
        // a random non-index file of a plausible size
        let err = open_bytes(dir.path(), &[b'#'; 4096]).unwrap_err();
        assert!(matches!(err, IndexError::BadMagic { .. }), "{err}");
    }

    #[test]
    fn versions() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 3, 16, 5);
        let orig = std::fs::read(&p).unwrap();

        // newer format that old readers must not read
        let mut b = orig.clone();
        put_u32(&mut b, OFF_FORMAT_VERSION, FORMAT_VERSION + 1);
        put_u32(&mut b, OFF_MIN_READER_VERSION, FORMAT_VERSION + 1);
        let err = open_bytes(dir.path(), &b).unwrap_err();
        match &err {
            IndexError::UnsupportedVersion {
                found, supported, ..
            } => {
                assert_eq!(
                    (*found, *supported),
                    (FORMAT_VERSION + 1, (OLDEST_SUPPORTED, FORMAT_VERSION))
                );
            }
            other => panic!("expected UnsupportedVersion, got {other}"),
        }
        assert!(err.to_string().contains("newer primd"), "{err}");

        // newer format with forward-compatible additions: still readable
        let mut b = orig.clone();
        put_u32(&mut b, OFF_FORMAT_VERSION, FORMAT_VERSION + 1);
        put_u32(&mut b, OFF_MIN_READER_VERSION, 1);
        b[200] = 0xaa; // a field in the reserved tail that we do not know
        let ix = open_bytes(dir.path(), &b).unwrap();
        assert_eq!(ix.len(), 3);

        // too old
        let mut b = orig.clone();
        put_u32(&mut b, OFF_FORMAT_VERSION, 0);
        let err = open_bytes(dir.path(), &b).unwrap_err();
        assert!(
            matches!(err, IndexError::UnsupportedVersion { found: 0, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("rebuild it with build-index"),
            "{err}"
        );
    }

    #[test]
    fn flipped_vector_byte_passes_open_fails_verify() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 10, 32, 6);
        let mut bytes = std::fs::read(&p).unwrap();
        let (off, len) = section(&bytes, SEC_VECTORS);
        bytes[off + len / 2] ^= 0x10;
        let ix = open_bytes(dir.path(), &bytes).unwrap();
        let err = ix.verify().unwrap_err();
        assert!(matches!(err, IndexError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("rebuild"), "{err}");
    }

    #[test]
    fn foreign_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 3, 16, 7);
        let ix = Index::open(&p).unwrap();
        let mut other = meta(16).fingerprint;
        other[0] ^= 0xff;
        let err = ix.check_fingerprint(&other).unwrap_err();
        match &err {
            IndexError::ModelMismatch { index, model, .. } => {
                assert_eq!(index, &hex_prefix(&meta(16).fingerprint));
                assert_eq!(model, &hex_prefix(&other));
                assert_ne!(index, model);
            }
            other => panic!("expected ModelMismatch, got {other}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains("rebuild the index") && msg.contains("different model"),
            "{msg}"
        );
    }

    #[test]
    fn corrupt_passage_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 6, 16, 8);
        let orig = std::fs::read(&p).unwrap();
        let (off, _) = section(&orig, SEC_OFFSETS);
        let (_, blob_len) = section(&orig, SEC_BLOB);
        let cases: [(usize, u64); 5] = [
            (0, 8),                   // first offset not 0
            (2, 1),                   // goes backwards
            (3, u64::MAX),            // far outside the blob
            (6, blob_len as u64 + 1), // last past the blob's end
            (6, blob_len as u64 - 1), // last short of the blob's end
        ];
        for (k, v) in cases {
            let mut b = orig.clone();
            put_u64(&mut b, off + 8 * k, v);
            let err = open_bytes(dir.path(), &b).unwrap_err();
            assert!(
                matches!(err, IndexError::Corrupt { .. }),
                "offset {k} = {v}: {err}"
            );
        }
    }

    #[test]
    fn corrupt_header_fields() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 6, 16, 9);
        let orig = std::fs::read(&p).unwrap();
        let is_err = |b: &[u8]| open_bytes(dir.path(), b).is_err();
        for dim in [0u32, 4, 12, 24, 4104, u32::MAX] {
            let mut b = orig.clone();
            put_u32(&mut b, OFF_DIM, dim);
            assert!(is_err(&b), "dim {dim}");
        }
        for count in [0u64, 5, 7, u64::MAX, u64::MAX / 8] {
            let mut b = orig.clone();
            put_u64(&mut b, OFF_COUNT, count);
            assert!(is_err(&b), "count {count}");
        }
        let mut b = orig.clone();
        put_u64(&mut b, OFF_COUNT, 0);
        assert!(matches!(
            open_bytes(dir.path(), &b),
            Err(IndexError::Empty { .. })
        ));
        // misaligned, overlapping, out-of-bounds, overflowing sections
        let (vec_off, _) = section(&orig, SEC_VECTORS);
        for (field, v) in [
            (OFF_SECTIONS + 16, vec_off as u64 + 1),
            (OFF_SECTIONS + 16, 256),
            (OFF_SECTIONS + 16, 0),
            (OFF_SECTIONS + 16, 1 << 40),
            (OFF_SECTIONS + 16 * 4, u64::MAX - 63),
            (OFF_SECTIONS + 16 * 4 + 8, u64::MAX),
        ] {
            let mut b = orig.clone();
            put_u64(&mut b, field, v);
            assert!(is_err(&b), "field {field} = {v}");
        }
        // bad footer magic
        let mut b = orig.clone();
        let n = b.len();
        b[n - 10] ^= 1;
        assert!(matches!(
            open_bytes(dir.path(), &b),
            Err(IndexError::Corrupt { .. })
        ));
    }

    #[test]
    fn bad_record_is_corrupt_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 4, 16, 10);
        let mut b = std::fs::read(&p).unwrap();
        let (blob, _) = section(&b, SEC_BLOB);
        // record 0's id length: huge
        put_u32(&mut b, blob, u32::MAX);
        let ix = open_bytes(dir.path(), &b).unwrap();
        assert!(matches!(ix.passage(0), Err(IndexError::Corrupt { .. })));
        assert!(ix.passage(1).is_ok());
        // invalid UTF-8 in record 0's id
        let mut b = std::fs::read(&p).unwrap();
        let id_len = u32::from_le_bytes(b[blob..blob + 4].try_into().unwrap());
        assert!(id_len > 0);
        b[blob + 4] = 0xff;
        let ix = open_bytes(dir.path(), &b).unwrap();
        let err = ix.passage(0).unwrap_err();
        assert!(matches!(err, IndexError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn random_mutations_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 7, 16, 12);
        let orig = std::fs::read(&p).unwrap();
        let n = orig.len();
        let mut rng = XorShift::new(0x5eed);
        let (mut opened, mut verified) = (0, 0);
        for _ in 0..2000 {
            let mut b = orig.clone();
            match rng.below(6) {
                // a few random byte flips anywhere
                0 | 1 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(n as u64) as usize;
                        b[at] ^= 1 + rng.below(255) as u8;
                    }
                }
                // flips in the header (where the section table lives)
                2 => {
                    for _ in 0..1 + rng.below(3) {
                        let at = rng.below(HEADER_SIZE as u64) as usize;
                        b[at] ^= 1 << rng.below(8);
                    }
                }
                // a random u64 in a header field or in the offsets table
                3 => {
                    let v = match rng.below(3) {
                        0 => rng.next(),
                        1 => rng.below(n as u64 * 2),
                        _ => u64::MAX - rng.below(128),
                    };
                    let at = if rng.below(2) == 0 {
                        8 * rng.below(HEADER_SIZE as u64 / 8) as usize
                    } else {
                        let (off, len) = section(&orig, SEC_OFFSETS);
                        off + 8 * rng.below(len as u64 / 8) as usize
                    };
                    put_u64(&mut b, at, v);
                }
                // truncation
                4 => b.truncate(rng.below(n as u64) as usize),
                // a few byte flips in the lexical section
                5 if rng.below(2) == 0 => {
                    let (off, len) = section(&orig, SEC_LEXICAL);
                    for _ in 0..1 + rng.below(4) {
                        let at = off + rng.below(len as u64) as usize;
                        b[at] ^= 1 + rng.below(255) as u8;
                    }
                }
                // garbage appended / a byte flip in the blob
                _ => {
                    let (off, len) = section(&orig, SEC_BLOB);
                    let at = off + rng.below(len as u64) as usize;
                    b[at] = rng.next() as u8;
                    if rng.below(2) == 0 {
                        b.extend_from_slice(&[rng.next() as u8; 64]);
                    }
                }
            }
            if let Ok(ix) = open_bytes(dir.path(), &b) {
                opened += 1;
                std::hint::black_box(touch_all(&ix));
                if ix.verify().is_ok() {
                    verified += 1;
                }
            }
        }
        // Sanity: the mutations exercise both paths.
        assert!(opened > 100, "only {opened} of 2000 mutants opened");
        assert!(verified < opened);
    }

    #[test]
    fn lexical_section_by_default_none_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let (p, passages, _) = build(dir.path(), 12, 16, 21);
        let ix = Index::open(&p).unwrap();
        let lex = ix.lexical().expect("write_index adds a lexical section");
        assert_eq!(lex.doc_count(), 12);
        assert_eq!(lex.spec(), &crate::lexical::DEFAULT_ANALYZER);
        let bytes = std::fs::read(&p).unwrap();
        let (lex_off, lex_len) = section(&bytes, SEC_LEXICAL);
        let (blob_off, blob_len) = section(&bytes, SEC_BLOB);
        assert_eq!(lex_off, (blob_off + blob_len).next_multiple_of(64));
        assert_eq!(
            bytes.len(),
            (lex_off + lex_len).next_multiple_of(64) + FOOTER_SIZE
        );
        assert!(format!("{ix:?}").contains("lexical: true"));

        let (_, vectors) = corpus(12, 16, 21);
        let none = WriteOptions {
            lexical: None,
            sentences: None,
        };
        write_index_with(&p, &meta(16), &passages, &vectors, &none).unwrap();
        let ix = Index::open(&p).unwrap();
        ix.verify().unwrap();
        assert!(ix.lexical().is_none());
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(section(&bytes, SEC_LEXICAL), (0, 0));
        assert_eq!(
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
            FORMAT_VERSION
        );

        let words = WriteOptions {
            lexical: Some((
                AnalyzerSpec::new(AnalyzerKind::Words),
                Bm25 { k1: 0.8, b: 0.3 },
            )),
            sentences: None,
        };
        write_index_with(&p, &meta(16), &passages, &vectors, &words).unwrap();
        let ix = Index::open(&p).unwrap();
        let lex = ix.lexical().unwrap();
        assert_eq!(
            (lex.spec().kind, lex.bm25()),
            (AnalyzerKind::Words, Bm25 { k1: 0.8, b: 0.3 })
        );
        let bad = WriteOptions {
            lexical: Some((
                AnalyzerSpec::new(AnalyzerKind::CharNgrams { n: 9 }),
                Bm25::default(),
            )),
            sentences: None,
        };
        let err = write_index_with(&p, &meta(16), &passages, &vectors, &bad).unwrap_err();
        assert!(matches!(err, IndexError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("lexical"), "{err}");
    }

    #[test]
    fn a_v1_reader_view_of_a_v2_file() {
        // What a v1 reader does with a format-2 file: min_reader_version is 1, the lexical
        // entry is in its reserved bytes and the section sits between the blob and the
        // footer, which v1 allows. Here: a file relabelled as format 1 opens dense-only,
        // the same way. (A file with a lexical section now asks for a format-5 reader.)
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 9, 16, 22);
        let mut b = std::fs::read(&p).unwrap();
        assert_eq!(
            u32::from_le_bytes(b[12..16].try_into().unwrap()),
            MIN_READER_WITH_LEXICAL
        );
        put_u32(&mut b, OFF_MIN_READER_VERSION, 1);
        put_u32(&mut b, OFF_FORMAT_VERSION, 1);
        let ix = open_bytes(dir.path(), &b).unwrap();
        assert!(ix.lexical().is_none());
        assert_eq!(ix.len(), 9);
        // and a v1 file's reserved bytes, where v2 keeps the lexical entry, are not read
        let (off, _) = section(&b, SEC_LEXICAL);
        put_u64(&mut b, OFF_SECTIONS + 16 * SEC_LEXICAL, off as u64 + 1);
        assert!(open_bytes(dir.path(), &b).unwrap().lexical().is_none());
        put_u32(&mut b, OFF_FORMAT_VERSION, 2);
        assert!(open_bytes(dir.path(), &b).is_err(), "misaligned in v2");
    }

    #[test]
    fn corrupt_lexical_section_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _, _) = build(dir.path(), 8, 16, 23);
        let orig = std::fs::read(&p).unwrap();
        let (off, len) = section(&orig, SEC_LEXICAL);
        let n = orig.len();
        let check = |b: &[u8], what: &str| {
            let err = open_bytes(dir.path(), b).unwrap_err();
            assert!(
                matches!(
                    err,
                    IndexError::Corrupt { .. } | IndexError::Truncated { .. }
                ),
                "{what}: {err}"
            );
            let msg = err.to_string();
            assert!(msg.contains("m.idx"), "{what}: {msg}");
            msg
        };
        // its magic
        let mut b = orig.clone();
        b[off] ^= 0xff;
        assert!(check(&b, "magic").contains("lexical section"));
        // its document count disagrees with the index's
        let mut b = orig.clone();
        put_u64(&mut b, off + 32, 9);
        check(&b, "doc count");
        // its table entry: past the footer, overlapping the blob, overflowing
        for (field, v) in [
            (8usize, n as u64),
            (0, section(&orig, SEC_BLOB).0 as u64),
            (8, u64::MAX),
            (0, u64::MAX - 63),
        ] {
            let mut b = orig.clone();
            put_u64(&mut b, OFF_SECTIONS + 16 * SEC_LEXICAL + field, v);
            check(&b, &format!("entry field {field} = {v}"));
        }
        // every cut inside it
        for cut in (off..off + len).step_by(7) {
            assert!(
                open_bytes(dir.path(), &orig[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn corpus_of_empty_passages_gets_an_empty_lexical_section() {
        let dir = tempfile::tempdir().unwrap();
        let (mut passages, vectors) = corpus(5, 16, 24);
        for p in &mut passages {
            p.title.clear();
            p.text = if p.chunk == 1 {
                "… — !".into()
            } else {
                String::new()
            };
        }
        let p = dir.path().join("e.idx");
        write_index(&p, &meta(16), &passages, &vectors).unwrap();
        let ix = Index::open(&p).unwrap();
        let lex = ix.lexical().unwrap();
        assert_eq!((lex.doc_count(), lex.term_count()), (5, 0));
        let mut hits = crate::hits::Hits::new();
        crate::lexical::LexicalSearcher::new().search(&lex, "anything", "", 0.0, 10, &mut hits);
        assert!(hits.is_empty());
    }
}
