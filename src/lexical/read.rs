//! The lexical section reader: a validated, borrowed view ([`Lexical`]) over the mapped
//! bytes, with its term dictionary (an fst opened in place) and each term's raw posting
//! blocks ([`TermView`]); the cursor that decodes them is `postings`.
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

use super::AnalyzerSpec;
use super::analyze::{ANALYZER_VERSION, OLDEST_ANALYZER_VERSION, version_rules};
use super::bm25::{Bm25, Scorer, avgdl, idf};
use super::decoded::Decoded;
use super::format::{
    BLOCK_ENTRY, LEX_ALIGN, LEX_HEADER, LEX_MAGIC, LEX_VERSION, LexHeader, SUB_COUNT, SUB_DOCLENS,
    SUB_FST, SUB_NAMES, SUB_POSTINGS, SUB_TERMS, TERM_RECORD, TermRecord, block_count,
    check_params, decode_spec, u32_at,
};

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
    /// The term's block directory ([`BlockEntry`] each) and its blocks' bytes.
    pub(super) dir: &'a [u8],
    pub(super) data: &'a [u8],
}
