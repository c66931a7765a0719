//! The lexical section reader: a validated, borrowed view ([`Lexical`]) and a posting-list
//! cursor ([`Postings`]) over the mapped bytes.
//!
//! `open` runs the cheap checks once (header, analyzer, BM25 parameters, sub-sections in
//! bounds and apart, the fst's own checksum, term records in order and inside the postings,
//! document lengths adding up): O(terms + documents), no postings touched, so start-up does
//! not page in the postings. Everything after that reads with bounds-checked accessors:
//! a corrupt posting block yields garbage (documents dropped, odd scores) or nothing, but
//! never a panic and never an out-of-bounds read. Cursors only move forward and every
//! document they yield is `< doc_count` and larger than the one before, which is what the
//! searchers' loops rely on to terminate and to index their per-document arrays.
//!
//! The fst crate does not validate a map's nodes when it opens one (a malformed node can
//! make its lookups panic); its checksum, verified here at open (CRC32C over the dictionary
//! only, which is small next to the postings), turns every accidental corruption into a
//! refusal. A file forged to carry a valid checksum over malformed nodes is outside what
//! this check can catch.

use std::fmt;

use super::analyze::{ANALYZER_VERSION, OLDEST_ANALYZER_VERSION, version_rules};
use super::build::check_params;
use super::decoded::Decoded;
use super::format::{
    BLOCK, BLOCK_ENTRY, BlockEntry, LEX_ALIGN, LEX_HEADER, LEX_MAGIC, LEX_VERSION, LexHeader,
    SUB_COUNT, SUB_DOCLENS, SUB_FST, SUB_NAMES, SUB_POSTINGS, SUB_TERMS, Scorer, TERM_RECORD,
    TermRecord, avgdl, block_count, decode_spec, idf, packed_len, u32_at, unpack, unpack_docs,
};
use super::{AnalyzerSpec, Bm25};

/// Which term dictionary a [`Lexical`] reads (what a lookup's ordinal is valid for): the
/// address and length of its bytes and the CRC32C the fst stores over them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DictId {
    addr: usize,
    len: usize,
    crc: u32,
}

/// A validated, borrowed view of the lexical section of a mapped index.
#[derive(Clone)]
pub struct Lexical<'a> {
    fst: fst::Map<&'a [u8]>,
    terms: &'a [u8],
    doclens: &'a [u8],
    postings: &'a [u8],
    spec: AnalyzerSpec,
    bm25: Bm25,
    doc_count: usize,
    term_count: usize,
    total_len: u64,
    scorer: Scorer,
    /// Each document's BM25 length norm, precomputed by whoever holds the section for
    /// long (an open [`Index`](crate::index::Index)); empty: computed from the document
    /// lengths at each use. Equal either way: both come from [`Scorer::norm`].
    norms: &'a [f32],
    /// The section's postings decoded with their contributions, when whoever holds it
    /// for long decoded them ([`Decoded`]); `None`: read from the section.
    decoded: Option<&'a Decoded>,
    /// Size of the whole section.
    section_bytes: usize,
}

impl fmt::Debug for Lexical<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lexical")
            .field("spec", &self.spec)
            .field("bm25", &self.bm25)
            .field("doc_count", &self.doc_count)
            .field("term_count", &self.term_count)
            .field("postings_bytes", &self.postings.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Lexical<'a> {
    /// Validates the section (see the module doc) and opens its term dictionary in place.
    /// The error says what is wrong, for `IndexError::Corrupt`.
    pub fn open(bytes: &'a [u8]) -> Result<Self, String> {
        let lex = Self::parse(bytes)?;
        lex.fst
            .as_fst()
            .verify()
            .map_err(|e| format!("term dictionary fails its checksum: {e}"))?;
        if lex.fst.len() != lex.term_count {
            return Err(format!(
                "term dictionary holds {} terms, the header says {}",
                lex.fst.len(),
                lex.term_count
            ));
        }
        // Term records: postings offsets non-decreasing, inside the postings, each term's
        // range at least as long as its block directory; 1 ≤ df ≤ N.
        let mut prev = 0u64;
        for ord in 0..lex.term_count {
            let Some(t) = TermRecord::read(lex.terms, ord) else {
                return Err(format!("term record {ord} outside its table"));
            };
            let end = lex.term_end(ord);
            if t.offset < prev || t.offset > end {
                return Err(format!(
                    "term {ord}: postings offset {} out of order or past {end}",
                    t.offset
                ));
            }
            if t.df == 0 || t.df as usize > lex.doc_count {
                return Err(format!(
                    "term {ord}: document frequency {} outside 1..={}",
                    t.df, lex.doc_count
                ));
            }
            let dir = (block_count(t.df) * BLOCK_ENTRY) as u64;
            if end - t.offset < dir {
                return Err(format!(
                    "term {ord}: {} postings bytes cannot hold {} blocks",
                    end - t.offset,
                    block_count(t.df)
                ));
            }
            if !t.max_score.is_finite() || t.max_score < 0.0 {
                return Err(format!("term {ord}: bad maximum score {}", t.max_score));
            }
            prev = t.offset;
        }
        let sum: u64 = lex
            .doclens
            .chunks_exact(4)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .sum();
        if sum != lex.total_len {
            return Err(format!(
                "document lengths add up to {sum}, the header says {}",
                lex.total_len
            ));
        }
        Ok(lex)
    }

    /// The O(1) part of `open`: header, sub-section bounds, fst header. What
    /// `Index::lexical` runs on a section that `open` has already accepted.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let Some(head) = bytes.first_chunk::<LEX_HEADER>() else {
            return Err(format!(
                "{} bytes, shorter than its {LEX_HEADER}-byte header",
                bytes.len()
            ));
        };
        let h = LexHeader::decode(head);
        if h.magic != LEX_MAGIC {
            return Err("wrong magic (expected PRIMDLEX)".into());
        }
        if h.version != LEX_VERSION {
            return Err(format!(
                "layout version {} (this primd reads {LEX_VERSION}): rebuild with this \
                 version's build-index",
                h.version
            ));
        }
        let Some((rules, across_words, numbers)) = version_rules(h.analyzer_version) else {
            return Err(format!(
                "analyzer version {} (this primd analyses text with versions \
                 {OLDEST_ANALYZER_VERSION}..={ANALYZER_VERSION})",
                h.analyzer_version
            ));
        };
        let spec = decode_spec(h.kind, h.n, rules, across_words, numbers)?;
        check_params(&spec, h.bm25)?;
        let doc_count = usize::try_from(h.doc_count)
            .ok()
            .filter(|&n| n >= 1 && n <= u32::MAX as usize)
            .ok_or_else(|| format!("document count {} outside 1..2^32", h.doc_count))?;
        let term_count = usize::try_from(h.term_count)
            .ok()
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| format!("term count {} too large", h.term_count))?;
        let expect = [
            None,
            Some(h.term_count.checked_mul(TERM_RECORD as u64)),
            Some(h.doc_count.checked_mul(4)),
            None,
        ];
        let mut slices: [&[u8]; SUB_COUNT] = [&[]; SUB_COUNT];
        let mut prev_end = LEX_HEADER as u64;
        for (i, &(off, len)) in h.subs.iter().enumerate() {
            let name = SUB_NAMES[i];
            if let Some(want) = expect[i]
                && want != Some(len)
            {
                return Err(format!("{name}: {len} bytes, expected {want:?}"));
            }
            let end = off.checked_add(len);
            // In file order, each after the previous one and 64-byte aligned: no overlap.
            if off < prev_end || !off.is_multiple_of(LEX_ALIGN as u64) {
                return Err(format!("{name} at {off}: out of order or not aligned"));
            }
            let slice = end
                .and_then(|e| Some(usize::try_from(off).ok()?..usize::try_from(e).ok()?))
                .and_then(|r| bytes.get(r))
                .ok_or_else(|| {
                    format!(
                        "{name} ({off}+{len}) past the section's end ({})",
                        bytes.len()
                    )
                })?;
            slices[i] = slice;
            prev_end = off + len;
        }
        let fst = fst::Map::new(slices[SUB_FST])
            .map_err(|e| format!("term dictionary does not open: {e}"))?;
        Ok(Lexical {
            fst,
            terms: slices[SUB_TERMS],
            doclens: slices[SUB_DOCLENS],
            postings: slices[SUB_POSTINGS],
            spec,
            bm25: h.bm25,
            doc_count,
            term_count,
            total_len: h.total_len,
            scorer: Scorer::new(h.bm25, avgdl(h.doc_count, h.total_len)),
            norms: &[],
            decoded: None,
            section_bytes: bytes.len(),
        })
    }

    /// Every document's length norm ([`Scorer::norm`]), for [`with_norms`](Self::with_norms):
    /// 4 bytes a document, computed once where the section is opened for long.
    pub fn doc_norms(&self) -> Box<[f32]> {
        (0..self.doc_count as u32)
            .map(|d| self.scorer.norm(self.doc_len(d)))
            .collect()
    }

    /// This view reading its length norms from `norms` ([`doc_norms`](Self::doc_norms) of
    /// the same section) instead of computing them per posting: a load instead of a
    /// bounds-checked read, a conversion and a multiply-add in the scoring loops. Ignored
    /// unless there is one norm per document.
    pub fn with_norms(mut self, norms: &'a [f32]) -> Self {
        if norms.len() == self.doc_count {
            self.norms = norms;
        }
        self
    }

    /// This view scoring term at a time from `decoded` ([`Decoded::build`] of the same
    /// section) instead of decoding postings. Ignored unless it covers every term.
    pub fn with_decoded(mut self, decoded: &'a Decoded) -> Self {
        if decoded.term_count() == self.term_count {
            self.decoded = Some(decoded);
        }
        self
    }

    /// The decoded postings given by [`with_decoded`](Self::with_decoded), if any.
    #[inline]
    pub(crate) fn decoded(&self) -> Option<&'a Decoded> {
        self.decoded
    }

    /// The length norms given by [`with_norms`](Self::with_norms), if any.
    #[inline]
    pub(crate) fn norms(&self) -> Option<&'a [f32]> {
        (self.norms.len() == self.doc_count).then_some(self.norms)
    }

    /// Number of documents (= passages of the index).
    pub fn doc_count(&self) -> usize {
        self.doc_count
    }

    /// Number of distinct terms.
    pub fn term_count(&self) -> usize {
        self.term_count
    }

    /// The analyzer the section was built with; queries must be analysed with it.
    pub fn spec(&self) -> &AnalyzerSpec {
        &self.spec
    }

    /// The BM25 parameters recorded at build time.
    pub fn bm25(&self) -> Bm25 {
        self.bm25
    }

    /// Average document length in terms.
    pub fn avgdl(&self) -> f32 {
        avgdl(self.doc_count as u64, self.total_len)
    }

    /// Size of the whole section, in bytes.
    pub fn section_bytes(&self) -> usize {
        self.section_bytes
    }

    /// Size of the postings, in bytes.
    pub fn postings_bytes(&self) -> usize {
        self.postings.len()
    }

    pub(crate) fn scorer(&self) -> &Scorer {
        &self.scorer
    }

    /// Ordinal of `term`, if the corpus has it.
    #[inline]
    pub(crate) fn lookup(&self, term: &[u8]) -> Option<u32> {
        self.fst
            .get(term)
            .and_then(|o| u32::try_from(o).ok())
            .filter(|&o| (o as usize) < self.term_count)
    }

    /// The dictionary [`lookup`](Self::lookup) reads, for caches of its answers.
    pub(crate) fn dict_id(&self) -> DictId {
        let bytes = self.fst.as_fst().as_bytes();
        let crc = bytes
            .last_chunk::<4>()
            .map_or(0, |c| u32::from_le_bytes(*c));
        DictId {
            addr: bytes.as_ptr() as usize,
            len: bytes.len(),
            crc,
        }
    }

    /// Length of document `doc` in terms (0 if out of range: only a corrupt file asks).
    #[inline]
    pub(crate) fn doc_len(&self, doc: u32) -> u32 {
        u32_at(self.doclens, doc as usize * 4).unwrap_or(0)
    }

    /// BM25 length norm of document `doc` ([`Scorer::norm`] of its length).
    #[inline]
    pub(crate) fn norm(&self, doc: u32) -> f32 {
        match self.norms.get(doc as usize) {
            Some(&n) => n,
            None => self.scorer.norm(self.doc_len(doc)),
        }
    }

    /// End of term `ord`'s postings: the next term's start, or the end of the postings.
    fn term_end(&self, ord: usize) -> u64 {
        match TermRecord::read(self.terms, ord + 1) {
            Some(next) if ord + 1 < self.term_count => next.offset,
            _ => self.postings.len() as u64,
        }
    }

    /// Term `ord`'s document frequency, idf and posting list. `None`
    /// only for a corrupt section.
    /// Document frequency of term `ord` (no idf, no bounds of its postings: a cheap read
    /// of its record).
    #[inline]
    pub(crate) fn df(&self, ord: u32) -> Option<u32> {
        TermRecord::read(self.terms, ord as usize).map(|t| t.df)
    }

    pub(crate) fn term(&self, ord: u32) -> Option<TermView<'a>> {
        let ord = ord as usize;
        let t = TermRecord::read(self.terms, ord)?;
        let (start, end) = (
            usize::try_from(t.offset).ok()?,
            usize::try_from(self.term_end(ord)).ok()?,
        );
        let bytes = self.postings.get(start..end)?;
        let dir_len = block_count(t.df).checked_mul(BLOCK_ENTRY)?;
        let (dir, data) = (bytes.get(..dir_len)?, bytes.get(dir_len..)?);
        Some(TermView {
            df: t.df,
            idf: idf(self.doc_count as u64, u64::from(t.df)),
            dir,
            data,
        })
    }
}

/// One term's statistics and raw posting blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermView<'a> {
    pub df: u32,
    pub idf: f32,
    dir: &'a [u8],
    data: &'a [u8],
}

/// "No more documents".
pub(crate) const END: u32 = u32::MAX;

/// A forward-only cursor over one posting list, decoding one block at a time into its own
/// buffers (reused: a cursor allocates nothing after it is created).
#[derive(Clone, Debug)]
pub(crate) struct Postings<'a> {
    dir: &'a [u8],
    data: &'a [u8],
    df: u32,
    blocks: usize,
    doc_count: u32,
    /// Index of the block in `docs`/`tfs` (or the next to decode when `len == 0`).
    block: usize,
    docs: [u32; BLOCK],
    tfs: [u32; BLOCK],
    /// The current block's packed `tf − 1` values, unpacked into `tfs` on first use.
    tf_bytes: &'a [u8],
    tf_width: u32,
    tf_ready: bool,
    len: usize,
    pos: usize,
    /// Every document yielded so far is ≤ `floor`, the next one will be > it (or END).
    floor: Option<u32>,
    doc: u32,
}

impl<'a> Postings<'a> {
    pub fn new() -> Self {
        Postings {
            dir: &[],
            data: &[],
            df: 0,
            blocks: 0,
            doc_count: 0,
            block: 0,
            docs: [0; BLOCK],
            tfs: [0; BLOCK],
            tf_bytes: &[],
            tf_width: 0,
            tf_ready: true,
            len: 0,
            pos: 0,
            floor: None,
            doc: END,
        }
    }

    /// Points the cursor at the start of `t`'s list (first document in `doc()`).
    pub fn reset(&mut self, t: &TermView<'a>, doc_count: usize) {
        self.dir = t.dir;
        self.data = t.data;
        self.df = t.df;
        self.blocks = block_count(t.df);
        self.doc_count = doc_count as u32;
        self.block = 0;
        self.len = 0;
        self.pos = 0;
        self.floor = None;
        self.doc = END;
        self.load(0);
    }

    /// The current document, or [`END`].
    #[inline]
    pub fn doc(&self) -> u32 {
        self.doc
    }

    /// The current document's term frequency.
    #[inline]
    pub fn tf(&mut self) -> u32 {
        if !self.tf_ready {
            self.tf_ready = true;
            unpack(self.tf_bytes, self.tf_width, &mut self.tfs[..self.len]);
        }
        self.tfs.get(self.pos).map_or(0, |&t| t.saturating_add(1))
    }

    /// Largest block maximum among the blocks that may hold documents in `w0..w1` (0 if
    /// none), from the directory alone. `hint` is a block index at or before the first such
    /// block; it is moved forward, so successive windows scan each entry about once.
    pub fn window_max(&self, hint: &mut usize, w0: u32, w1: u32) -> f32 {
        let entry = |b: usize| BlockEntry::read(self.dir, b);
        while *hint < self.blocks && entry(*hint).is_some_and(|e| e.last_doc < w0) {
            *hint += 1;
        }
        let mut max = 0.0f32;
        for b in *hint..self.blocks {
            // Block b starts after block b − 1's last document.
            if b > 0 && entry(b - 1).is_none_or(|p| p.last_doc >= w1.saturating_sub(1)) {
                break;
            }
            let Some(e) = entry(b) else { break };
            max = max.max(e.max_score);
            if e.last_doc >= w1.saturating_sub(1) {
                break;
            }
        }
        max
    }

    /// Calls `f(doc, tf)` for the current document and every following one below `end`,
    /// block by block (the tight loop of term-at-a-time scoring); leaves the cursor on the
    /// first document ≥ `end`, or [`END`].
    #[inline]
    pub fn for_each_below(&mut self, end: u32, mut f: impl FnMut(u32, u32)) {
        while self.doc < end {
            if !self.tf_ready {
                self.tf_ready = true;
                unpack(self.tf_bytes, self.tf_width, &mut self.tfs[..self.len]);
            }
            let (start, len) = (self.pos, self.len);
            let mut taken = 0;
            for (&d, &t) in self.docs[start..len].iter().zip(&self.tfs[start..len]) {
                if d >= end {
                    break;
                }
                f(d, t.saturating_add(1));
                taken += 1;
            }
            self.pos = start + taken;
            if self.pos < self.len {
                self.doc = self.docs[self.pos];
                return;
            }
            self.load(self.block + 1);
        }
    }

    /// Calls `f(docs, tfs)` for the runs of the rest of the list below `end`, a block (or
    /// the part of one below `end`) at a time, as [`for_each_block`](Self::for_each_block);
    /// leaves the cursor on the first document ≥ `end`, or [`END`].
    #[inline]
    pub fn for_each_run_below(&mut self, end: u32, mut f: impl FnMut(&[u32], &[u32])) {
        while self.doc < end {
            if !self.tf_ready {
                self.tf_ready = true;
                unpack(self.tf_bytes, self.tf_width, &mut self.tfs[..self.len]);
            }
            let (start, len) = (self.pos, self.len.min(BLOCK));
            let docs = &self.docs[start..len];
            // Ascending ids: the run below `end` is a prefix (at least the current one);
            // usually the whole rest of the block.
            let take = match docs.last() {
                Some(&last) if last < end => docs.len(),
                _ => docs.partition_point(|&d| d < end),
            };
            f(&docs[..take], &self.tfs[start..start + take]);
            self.pos = start + take;
            if self.pos < self.len {
                self.doc = self.docs[self.pos];
                return;
            }
            self.load(self.block + 1);
        }
    }

    /// Calls `f(docs, tfs)` for each block of the rest of the list, whole (documents
    /// ascending, `tfs[i]` the frequency of `docs[i]` minus one): term at a time over a
    /// whole list, with no end test per document. Leaves the cursor at [`END`].
    #[inline]
    pub fn for_each_block(&mut self, f: impl FnMut(&[u32], &[u32])) {
        self.for_each_run_below(END, f);
    }

    /// Moves to the first document ≥ `target` (skipping whole blocks by their last id).
    #[inline]
    pub fn advance(&mut self, target: u32) {
        if self.doc >= target {
            return;
        }
        // Skip blocks that end before target without decoding them.
        let mut b = self.block;
        let last = |b: usize| BlockEntry::read(self.dir, b).map_or(END, |e| e.last_doc);
        if last(b) < target {
            b += 1;
            while b < self.blocks && last(b) < target {
                b += 1;
            }
            self.load(b);
        }
        while self.doc < target {
            // A block's ids ascend (`decode`): the first one ≥ target by binary search,
            // not a step per document (a probe lands ~64 documents into a block).
            let rest = &self.docs[self.pos..self.len];
            let skip = rest.partition_point(|&d| d < target);
            if skip < rest.len() {
                self.pos += skip;
                self.doc = self.docs[self.pos];
                return;
            }
            self.load(self.block + 1);
        }
    }

    /// Decodes block `b` (or the first non-empty one after it) and points at its first
    /// document; END when none is left.
    fn load(&mut self, mut b: usize) {
        loop {
            self.pos = 0;
            self.len = 0;
            if b >= self.blocks {
                self.block = self.blocks;
                self.doc = END;
                return;
            }
            self.block = b;
            self.decode(b);
            if self.len > 0 {
                self.doc = self.docs[0];
                return;
            }
            b += 1;
        }
    }

    fn decode(&mut self, b: usize) {
        self.tf_ready = true;
        let start = match b {
            0 => Some(0),
            _ => BlockEntry::read(self.dir, b - 1).map(|e| e.end as usize),
        };
        let end = BlockEntry::read(self.dir, b).map(|e| e.end as usize);
        let Some(bytes) = start.zip(end).and_then(|(s, e)| self.data.get(s..e)) else {
            return;
        };
        let count = (self.df as usize).saturating_sub(b * BLOCK).min(BLOCK);
        let (Some(&doc_width), Some(&tf_width)) = (bytes.first(), bytes.get(1)) else {
            return;
        };
        let (doc_width, tf_width) = (u32::from(doc_width), u32::from(tf_width));
        let docs_len = packed_len(count, doc_width);
        if bytes.len() < 2 + docs_len + packed_len(count, tf_width) {
            return;
        }
        // From each packed run to the end of the term's data: `unpack` reads in place
        // when 8 spare bytes follow (and masks them off), copies only near the end.
        let (Some(doc_bytes), Some(tf_bytes)) = (
            self.data.get(start.unwrap_or(0) + 2..),
            self.data.get(start.unwrap_or(0) + 2 + docs_len..),
        ) else {
            return;
        };
        // The gap base: the previous block's last id, but never below what was already
        // decoded, so the cursor moves strictly forward whatever the bytes say.
        let mut prev: Option<u32> = match b {
            0 => None,
            _ => BlockEntry::read(self.dir, b - 1).map(|e| e.last_doc),
        };
        if let Some(f) = self.floor {
            prev = Some(prev.map_or(f, |p| p.max(f)));
        }
        let mut next = match prev {
            None => 0,
            Some(p) => p.saturating_add(1),
        };
        // Each gap is below 2^width, so the last id is below `next + count · 2^width`: when
        // that fits a u32 the running sum cannot wrap, ids strictly increase, and they are
        // all below N exactly when the last one is (always, unless the list is corrupt).
        // That is the common, branch-free path; a corrupt block is decoded again with a
        // check per document.
        let docs = &mut self.docs[..count];
        let no_wrap = doc_width <= 32
            && u64::from(next) + ((count as u64) << doc_width) <= u64::from(u32::MAX);
        if no_wrap && unpack_docs(doc_bytes, doc_width, next, docs) <= self.doc_count {
            self.len = count;
        } else {
            unpack(doc_bytes, doc_width, &mut self.docs[..count]);
            for i in 0..count {
                // doc = previous + 1 + gap; past N (or 2^32) only in a corrupt list: stop.
                let doc = u64::from(next) + u64::from(self.docs[i]);
                if doc >= u64::from(self.doc_count) {
                    break;
                }
                self.docs[i] = doc as u32;
                next = doc as u32 + 1;
                self.len = i + 1;
            }
        }
        if self.len > 0 {
            self.floor = Some(self.docs[self.len - 1]);
            // Term frequencies are unpacked only if asked for: a probe that misses the
            // block's documents never needs them.
            self.tf_bytes = tf_bytes;
            self.tf_width = tf_width;
            self.tf_ready = false;
        }
    }
}
