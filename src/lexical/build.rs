//! The lexical section writer: passages → the section's bytes (`index/FORMAT.md`).
//!
//! One pass over the passages analyses each one (title and text as one text, as the
//! embedder reads it, so n-grams run on from the title into the text), counts its terms and
//! appends `(doc gap, tf)` varints to the term's in-memory list, so memory stays near the
//! size of the compressed postings even for a million passages. Then terms are sorted by
//! their bytes (the fst needs sorted keys, and sorting makes the output independent of hash
//! order: same input, same bytes), and each term's list is re-cut into blocks of
//! [`BLOCK`] with their directory, now that the average document length (and so every
//! block's maximum score) is known. Each term's in-memory list is freed as soon as it has
//! been written out. Blocks are bit-packed (doc gaps and `tf − 1` each at the block's
//! widest value's width), which decodes several times faster than varints: MaxScore's
//! probes into the common terms' lists decode whole blocks.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::AnalyzerSpec;
use super::analyze::{Analyzer, analyzer_version};
use super::bitpack::{bit_width, get_varint, pack, put_varint};
use super::bm25::{Bm25, Scorer, avgdl, idf};
use super::format::{
    BLOCK, BlockEntry, LEX_ALIGN, LEX_HEADER, LEX_MAGIC, LEX_VERSION, LexHeader, SUB_COUNT,
    SUB_DOCLENS, SUB_FST, SUB_POSTINGS, SUB_TERMS, TERM_RECORD, TermRecord, check_params,
    encode_spec,
};

/// A term's postings while the passages are read: `(doc - next, tf)` varint pairs.
#[derive(Default)]
struct TermAcc {
    data: Vec<u8>,
    /// One past the last document appended (the gap base).
    next: u32,
    df: u32,
}

/// Builds the lexical section's bytes for the documents' `texts` in index order (for an
/// index, each passage's title and text as the embedder reads them:
/// `index::passage_embed_text`). One text at a time is analysed, so an iterator that
/// makes them on the fly keeps memory near the postings' size.
pub fn build<T: AsRef<str>>(
    texts: impl ExactSizeIterator<Item = T>,
    spec: &AnalyzerSpec,
    bm25: Bm25,
) -> Result<Vec<u8>, String> {
    check_params(spec, bm25)?;
    let count = texts.len();
    if count == 0 {
        return Err("no passages to index".into());
    }
    let n_docs = u32::try_from(count).map_err(|_| format!("{count} passages: at most 2^32 - 1"))?;

    // ---- pass 1: analyse, count, append postings ----
    let mut dict: HashMap<Box<[u8]>, u32, BuildHasherDefault<FxHasher>> = HashMap::default();
    let mut terms: Vec<TermAcc> = Vec::new();
    let mut doclens: Vec<u32> = Vec::with_capacity(count);
    let mut doc_terms: Vec<u32> = Vec::new();
    let mut analyzer = Analyzer::new();
    let mut total_len: u64 = 0;
    for (doc, text) in (0u32..).zip(texts) {
        doc_terms.clear();
        analyzer.analyze(spec, text.as_ref(), |t| {
            let tid = match dict.get(t) {
                Some(&tid) => tid,
                None => {
                    let tid = terms.len() as u32;
                    dict.insert(t.into(), tid);
                    terms.push(TermAcc::default());
                    tid
                }
            };
            doc_terms.push(tid);
        });
        let dl = u32::try_from(doc_terms.len())
            .map_err(|_| format!("passage {doc} has more than 2^32 - 1 terms"))?;
        doclens.push(dl);
        total_len += u64::from(dl);
        doc_terms.sort_unstable();
        for run in doc_terms.chunk_by(|a, b| a == b) {
            let acc = &mut terms[run[0] as usize];
            put_varint(&mut acc.data, doc - acc.next);
            put_varint(&mut acc.data, run.len() as u32);
            acc.next = doc + 1;
            acc.df += 1;
        }
    }
    if terms.len() > u32::MAX as usize {
        return Err("more than 2^32 - 1 distinct terms".into());
    }

    // ---- term dictionary: sorted term bytes → ordinal ----
    let mut sorted: Vec<(Box<[u8]>, u32)> = dict.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut fst = fst::MapBuilder::memory();
    for (ord, (term, _)) in sorted.iter().enumerate() {
        fst.insert(term, ord as u64)
            .map_err(|e| format!("term dictionary: {e}"))?;
    }
    let fst = fst
        .into_inner()
        .map_err(|e| format!("term dictionary: {e}"))?;

    // ---- lay out: header, fst, term records, doc lengths, postings ----
    let pad = |out: &mut Vec<u8>| out.resize(out.len().next_multiple_of(LEX_ALIGN), 0);
    let mut subs = [(0u64, 0u64); SUB_COUNT];
    let mut out = vec![0u8; LEX_HEADER];
    subs[SUB_FST] = (out.len() as u64, fst.len() as u64);
    out.extend_from_slice(&fst);
    drop(fst);
    pad(&mut out);
    let terms_at = out.len();
    subs[SUB_TERMS] = (terms_at as u64, (sorted.len() * TERM_RECORD) as u64);
    out.resize(terms_at + sorted.len() * TERM_RECORD, 0); // filled in below
    pad(&mut out);
    subs[SUB_DOCLENS] = (out.len() as u64, doclens.len() as u64 * 4);
    for dl in &doclens {
        out.extend_from_slice(&dl.to_le_bytes());
    }
    pad(&mut out);
    let postings_at = out.len();

    let avg = avgdl(u64::from(n_docs), total_len);
    let scorer = Scorer::new(bm25, avg);
    let mut records = Vec::with_capacity(sorted.len() * TERM_RECORD);
    let mut data = Vec::new();
    let mut dir = Vec::new();
    for (term, tid) in &sorted {
        let acc = std::mem::take(&mut terms[*tid as usize]);
        let term_idf = idf(u64::from(n_docs), u64::from(acc.df));
        dir.clear();
        data.clear();
        let mut term_max = 0.0f32;
        // Decode the accumulated list and re-cut it into blocks.
        let (mut pos, mut next) = (0usize, 0u32);
        let mut left = acc.df as usize;
        let (mut gaps, mut tfs) = ([0u32; BLOCK], [0u32; BLOCK]);
        while left > 0 {
            let count = left.min(BLOCK);
            let (mut block_max, mut last) = (0.0f32, 0u32);
            for i in 0..count {
                // Our own encoding, just written: cannot fail.
                let gap = get_varint(&acc.data, &mut pos).unwrap_or(0);
                let tf = get_varint(&acc.data, &mut pos).unwrap_or(1);
                let doc = next + gap;
                (gaps[i], tfs[i]) = (gap, tf - 1);
                let s = scorer.score(term_idf, tf, scorer.norm(doclens[doc as usize]));
                block_max = block_max.max(s);
                last = doc;
                next = doc + 1;
            }
            left -= count;
            let (doc_width, tf_width) = (bit_width(&gaps[..count]), bit_width(&tfs[..count]));
            data.push(doc_width as u8);
            data.push(tf_width as u8);
            pack(&gaps[..count], doc_width, &mut data);
            pack(&tfs[..count], tf_width, &mut data);
            let end = u32::try_from(data.len()).map_err(|_| {
                format!(
                    "postings of term {:?} exceed 4 GiB",
                    String::from_utf8_lossy(term)
                )
            })?;
            BlockEntry {
                last_doc: last,
                end,
                max_score: block_max,
            }
            .encode(&mut dir);
            term_max = term_max.max(block_max);
        }
        TermRecord {
            offset: (out.len() - postings_at) as u64,
            df: acc.df,
            max_score: term_max,
        }
        .encode(&mut records);
        out.extend_from_slice(&dir);
        out.extend_from_slice(&data);
    }
    subs[SUB_POSTINGS] = (postings_at as u64, (out.len() - postings_at) as u64);
    out[terms_at..terms_at + records.len()].copy_from_slice(&records);
    pad(&mut out);

    let (kind, n) = encode_spec(spec);
    let header = LexHeader {
        magic: LEX_MAGIC,
        version: LEX_VERSION,
        analyzer_version: analyzer_version(spec),
        kind,
        n,
        bm25,
        doc_count: u64::from(n_docs),
        term_count: sorted.len() as u64,
        total_len,
        subs,
    };
    out[..LEX_HEADER].copy_from_slice(&header.encode());
    Ok(out)
}

/// rustc's Fx hash: a multiply and a rotate per word. Term bytes are short and not chosen
/// by an adversary at build time, and the output never depends on hash order (terms are
/// sorted), so a fast non-cryptographic hash is the right trade here.
#[derive(Clone, Copy, Default)]
struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let (words, rest) = bytes.as_chunks::<8>();
        for w in words {
            self.add(u64::from_le_bytes(*w));
        }
        if !rest.is_empty() {
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(a));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}
