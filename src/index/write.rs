//! The index writer, used by the offline `build-index` tool.
//!
//! Invariants, and why:
//! - **Atomic replacement.** The file is written under a temporary name next to the target
//!   (`<name>.tmp-<pid>`, same directory so the rename cannot cross filesystems), fsynced,
//!   renamed over the target, and the directory is fsynced. A running daemon that has the old
//!   index mapped keeps the old inode, so its mapping never changes under it (this is what the
//!   reader's `unsafe` mmap relies on), and a crash leaves either the old or the new index,
//!   never half of one.
//! - **Validate first, then stream.** All input checks (lengths, dimension, duplicate
//!   `(id, chunk)`, finite values, string sizes) run before the temporary file is created, so a
//!   bad corpus leaves nothing behind. The layout is computed up front (record sizes are known
//!   from the strings), so the header can be written first and the file is streamed out once,
//!   front to back, with the CRC updated as the bytes go by: no seeking back, no second pass.
//! - **Reproducible.** The output is a pure function of the input (no timestamps, no hash-map
//!   iteration order, deterministic quantisation), so identical input gives identical bytes.
//! - **Lexical by default.** [`write_index`] adds the BM25 section (format v2) with the
//!   default analyzer, so every caller gets hybrid search without asking;
//!   [`write_index_with`] chooses the analyzer and BM25 parameters, or leaves it out. The
//!   section is built in memory before the file is created (its errors are input errors).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::error::IndexError;
use super::format::{
    ALIGN, FOOTER_MAGIC, FORMAT_VERSION, Header, IndexMeta, MAGIC, MAX_DIM, MIN_DIM,
    MIN_READER_VERSION, MIN_READER_WITH_LEXICAL, PassageRecord, SEC_BLOB, SEC_LEXICAL,
    SEC_SENTENCES, encode_record, layout, quantize_i8, record_len, sign_code,
};
use super::passage_embed_text;
use super::sentences::{self, SentenceTable};
use crate::lexical::{self, AnalyzerSpec, Bm25, DEFAULT_ANALYZER};

/// What [`write_index_with`] writes besides the dense part.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteOptions {
    /// The lexical (BM25) section's analyzer and parameters; `None`: no lexical section
    /// (the file is still format 4, and opens dense-only).
    pub lexical: Option<(AnalyzerSpec, Bm25)>,
    /// The passages' sentences (format v6), for `context`; `None`: no sentence section
    /// (context then falls back to whole passages).
    pub sentences: Option<SentenceTable>,
}

impl Default for WriteOptions {
    /// A lexical section with [`DEFAULT_ANALYZER`] and BM25 k1 = 1.2, b = 0.75.
    fn default() -> Self {
        WriteOptions {
            lexical: Some((DEFAULT_ANALYZER, Bm25::default())),
            sentences: None,
        }
    }
}

/// Writes the whole index: to `path.tmp-<pid>` next to `path`, fsync, rename over `path`,
/// fsync the directory.
///
/// `vectors` holds `passages.len() * meta.dim` finite `f32`s (unit vectors), row `i` belonging to
/// `passages[i]`. Errors: empty corpus ([`IndexError::Empty`]), duplicate `(id, chunk)` pairs
/// ([`IndexError::DuplicateId`]), wrong lengths / bad dimension / non-finite values / oversized
/// strings ([`IndexError::Invalid`]), and I/O ([`IndexError::Io`], naming the file that failed).
/// Output is byte-identical for identical input. Writes the lexical section with the default
/// analyzer: `write_index_with(.., &WriteOptions::default())`.
pub fn write_index(
    path: &Path,
    meta: &IndexMeta,
    passages: &[PassageRecord],
    vectors: &[f32],
) -> Result<(), IndexError> {
    write_index_with(path, meta, passages, vectors, &WriteOptions::default())
}

/// [`write_index`] with a choice of lexical section (analyzer, BM25 parameters, or none).
/// A lexical section that cannot be built (bad parameters) is [`IndexError::Invalid`].
pub fn write_index_with(
    path: &Path,
    meta: &IndexMeta,
    passages: &[PassageRecord],
    vectors: &[f32],
    options: &WriteOptions,
) -> Result<(), IndexError> {
    let invalid = |what: String| IndexError::Invalid {
        path: path.to_path_buf(),
        what,
    };

    // ---- validate the input (nothing touches the disk before this passes) ----
    if passages.is_empty() {
        return Err(IndexError::Empty {
            path: path.to_path_buf(),
        });
    }
    if !meta.dim.is_multiple_of(8) || !(MIN_DIM..=MAX_DIM).contains(&meta.dim) {
        return Err(invalid(format!(
            "dimension {} is not a multiple of 8 in {MIN_DIM}..={MAX_DIM}",
            meta.dim
        )));
    }
    let dim = meta.dim as usize;
    let count = passages.len();
    if count.checked_mul(dim) != Some(vectors.len()) {
        return Err(invalid(format!(
            "{} vector values given for {count} passages of dimension {dim} (expected {})",
            vectors.len(),
            count.saturating_mul(dim)
        )));
    }
    if let Some(pos) = vectors.iter().position(|x| !x.is_finite()) {
        return Err(invalid(format!(
            "vector {} has a non-finite value at component {}",
            pos / dim,
            pos % dim
        )));
    }
    let mut seen: HashSet<(&str, u32)> = HashSet::with_capacity(count);
    let mut blob_len: u64 = 0;
    for (i, p) in passages.iter().enumerate() {
        if !seen.insert((p.id.as_str(), p.chunk)) {
            return Err(IndexError::DuplicateId {
                path: path.to_path_buf(),
                id: p.id.clone(),
                chunk: p.chunk,
            });
        }
        if p.word_start > p.word_end {
            return Err(invalid(format!(
                "passage {i} (id {:?} chunk {}): word_start {} > word_end {}",
                p.id, p.chunk, p.word_start, p.word_end
            )));
        }
        let len = record_len(p).ok_or_else(|| {
            invalid(format!(
                "passage {i} (id {:?}): a field is longer than 4 GiB",
                p.id
            ))
        })?;
        blob_len = blob_len
            .checked_add(len)
            .ok_or_else(|| invalid("passage text too large".to_string()))?;
    }
    let lexical = match &options.lexical {
        Some((spec, bm25)) => {
            let texts = passages
                .iter()
                .map(|p| passage_embed_text(&p.title, &p.text));
            lexical::build(texts, spec, *bm25)
        }
        .map_err(|e| invalid(format!("lexical section: {e}")))?,
        None => Vec::new(),
    };
    let sentences = match &options.sentences {
        Some(t) => {
            let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
            sentences::encode(t, &texts, dim).map_err(|e| invalid(format!("sentences: {e}")))?
        }
        None => Vec::new(),
    };
    let (sections, footer_at) = layout(
        count as u64,
        dim as u64,
        blob_len,
        lexical.len() as u64,
        sentences.len() as u64,
    )
    .ok_or_else(|| invalid("index too large for a 64-bit file offset".to_string()))?;
    let header = Header {
        magic: MAGIC,
        format_version: FORMAT_VERSION,
        min_reader_version: if lexical.is_empty() {
            MIN_READER_VERSION
        } else {
            MIN_READER_WITH_LEXICAL
        },
        count: count as u64,
        meta: meta.clone(),
        sections,
    };

    // ---- stream the file out under a temporary name ----
    let file_name = path
        .file_name()
        .ok_or_else(|| invalid("the path has no file name".to_string()))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = OsString::from(file_name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| IndexError::Io { path: p, source }
    };

    let result = (|| -> Result<(), IndexError> {
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        let mut w = CrcWriter::new(BufWriter::with_capacity(1 << 16, file));
        write_body(
            &mut w,
            &header,
            passages,
            vectors,
            dim,
            [&lexical, &sentences],
        )
        .map_err(io_err(&tmp))?;
        debug_assert_eq!(w.pos, footer_at, "layout and written bytes disagree");
        let crc = w.hasher.clone().finalize();
        let mut footer = [0u8; 16];
        footer[..4].copy_from_slice(&crc.to_le_bytes());
        footer[4..12].copy_from_slice(&FOOTER_MAGIC);
        w.write_all(&footer).map_err(io_err(&tmp))?;
        let file = w.inner.into_inner().map_err(|e| IndexError::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(io_err(path))
    })();
    if result.is_err() {
        // Best effort: after a successful rename the temporary name no longer exists.
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_dir(&dir).map_err(io_err(&dir))
}

/// Header, then each section padded to the next 64-byte boundary. Everything before the footer.
fn write_body<W: Write>(
    w: &mut CrcWriter<W>,
    header: &Header,
    passages: &[PassageRecord],
    vectors: &[f32],
    dim: usize,
    [lexical, sentences]: [&[u8]; 2],
) -> std::io::Result<()> {
    w.write_all(&header.encode())?;

    let mut code = vec![0u8; dim / 8];
    for v in vectors.chunks_exact(dim) {
        sign_code(v, &mut code);
        w.write_all(&code)?;
    }
    w.pad()?;

    let mut q = vec![0i8; dim];
    let mut qb = vec![0u8; dim];
    let mut scales = Vec::with_capacity(passages.len() * 4);
    for v in vectors.chunks_exact(dim) {
        let scale = quantize_i8(v, &mut q);
        scales.extend_from_slice(&scale.to_le_bytes());
        for (b, &x) in qb.iter_mut().zip(&q) {
            *b = x as u8; // two's complement bit pattern
        }
        w.write_all(&qb)?;
    }
    w.pad()?;

    w.write_all(&scales)?;
    w.pad()?;

    let mut off: u64 = 0;
    w.write_all(&off.to_le_bytes())?;
    for p in passages {
        // Checked by the caller (the sum fits in u64).
        off += record_len(p).unwrap_or(0);
        w.write_all(&off.to_le_bytes())?;
    }
    w.pad()?;

    debug_assert_eq!(w.pos, header.sections[SEC_BLOB].offset);
    let mut rec = Vec::new();
    for p in passages {
        rec.clear();
        encode_record(p, &mut rec);
        w.write_all(&rec)?;
    }
    w.pad()?;

    if !lexical.is_empty() {
        debug_assert_eq!(w.pos, header.sections[SEC_LEXICAL].offset);
        w.write_all(lexical)?;
        w.pad()?;
    }
    if !sentences.is_empty() {
        debug_assert_eq!(w.pos, header.sections[SEC_SENTENCES].offset);
        w.write_all(sentences)?;
        w.pad()?;
    }
    Ok(())
}

/// Counts bytes and folds them into the CRC on their way to the file.
struct CrcWriter<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    pos: u64,
}

impl<W: Write> CrcWriter<W> {
    fn new(inner: W) -> Self {
        CrcWriter {
            inner,
            hasher: crc32fast::Hasher::new(),
            pos: 0,
        }
    }

    /// Zero bytes up to the next multiple of `ALIGN`.
    fn pad(&mut self) -> std::io::Result<()> {
        let n = (ALIGN - self.pos % ALIGN) % ALIGN;
        self.write_all(&[0u8; ALIGN as usize][..n as usize])
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Makes the rename durable: on Linux the new directory entry is only on disk once the
/// directory itself is fsynced.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::test_support::{corpus, meta};

    #[test]
    fn identical_input_gives_identical_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (passages, vectors) = corpus(40, 64, 11);
        let (a, b) = (dir.path().join("a.idx"), dir.path().join("b.idx"));
        write_index(&a, &meta(64), &passages, &vectors).unwrap();
        write_index(&b, &meta(64), &passages, &vectors).unwrap();
        let (ba, bb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert_eq!(ba, bb);
        // and rewriting over an existing file replaces it with the same bytes
        write_index(&a, &meta(64), &passages, &vectors).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), bb);
        // no temporary file left behind
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn file_shape() {
        let dir = tempfile::tempdir().unwrap();
        let (passages, vectors) = corpus(5, 16, 3);
        let p = dir.path().join("x.idx");
        write_index(&p, &meta(16), &passages, &vectors).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"PRIMDIX\0");
        let n = bytes.len();
        assert_eq!((n - 16) % 64, 0);
        assert_eq!(&bytes[n - 12..n - 4], b"PRIMDEND");
        assert_eq!(&bytes[n - 4..], &[0, 0, 0, 0]);
        let stored = u32::from_le_bytes(bytes[n - 16..n - 12].try_into().unwrap());
        assert_eq!(stored, crc32fast::hash(&bytes[..n - 16]));
    }

    #[test]
    fn empty_corpus_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.idx");
        let err = write_index(&p, &meta(16), &[], &[]).unwrap_err();
        assert!(
            matches!(err, IndexError::Empty { ref path } if path == &p),
            "{err}"
        );
        assert!(!p.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn duplicate_id_chunk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.idx");
        let (mut passages, vectors) = corpus(6, 16, 5);
        // same id, different chunks: fine
        passages[1].id = passages[0].id.clone();
        passages[1].chunk = passages[0].chunk + 1;
        write_index(&p, &meta(16), &passages, &vectors).unwrap();
        // same (id, chunk): refused
        passages[4].id = passages[0].id.clone();
        passages[4].chunk = passages[0].chunk;
        let err = write_index(&p, &meta(16), &passages, &vectors).unwrap_err();
        match &err {
            IndexError::DuplicateId { path, id, chunk } => {
                assert_eq!(path, &p);
                assert_eq!(id, &passages[0].id);
                assert_eq!(*chunk, passages[0].chunk);
            }
            other => panic!("expected DuplicateId, got {other}"),
        }
        assert!(err.to_string().contains(&passages[0].id));
    }

    #[test]
    fn bad_input_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("i.idx");
        let (passages, vectors) = corpus(4, 16, 9);
        let is_invalid = |r: Result<(), IndexError>| matches!(r, Err(IndexError::Invalid { ref path, .. }) if path == &p);
        assert!(is_invalid(write_index(
            &p,
            &meta(16),
            &passages,
            &vectors[1..]
        )));
        assert!(is_invalid(write_index(
            &p,
            &meta(12),
            &passages,
            &vectors[..48]
        )));
        assert!(is_invalid(write_index(&p, &meta(0), &passages, &[])));
        assert!(is_invalid(write_index(
            &p,
            &meta(4104),
            &passages,
            &vectors
        )));
        let mut nan = vectors.clone();
        nan[17] = f32::NAN;
        assert!(is_invalid(write_index(&p, &meta(16), &passages, &nan)));
        let mut words = passages.clone();
        words[2].word_start = 9;
        words[2].word_end = 3;
        assert!(is_invalid(write_index(&p, &meta(16), &words, &vectors)));
        assert!(!p.exists());
        let err = write_index(Path::new("/"), &meta(16), &passages, &vectors).unwrap_err();
        assert!(matches!(err, IndexError::Invalid { .. }), "{err}");
    }

    #[test]
    fn io_error_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no-such-dir").join("x.idx");
        let (passages, vectors) = corpus(2, 8, 1);
        let err = write_index(&p, &meta(8), &passages, &vectors).unwrap_err();
        assert!(matches!(err, IndexError::Io { .. }), "{err}");
        assert!(err.to_string().contains("no-such-dir"), "{err}");
    }
}
