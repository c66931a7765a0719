//! A forward-only cursor over one term's posting list ([`Postings`]), decoding a block at a
//! time (`bitpack`, the `kernels`) from the raw blocks a [`TermView`] borrows.
//!
//! Whatever the bytes say, a cursor only moves forward and every document it yields is
//! `< doc_count` and larger than the one before, which is what the searchers' loops rely
//! on to terminate and to index their per-document arrays (`read`'s module doc: the
//! section is validated cheaply at open, the postings only as they are read).

use super::bitpack::{packed_len, unpack, unpack_docs};
use super::format::{BLOCK, BlockEntry, block_count};
use super::read::TermView;

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
