//! Term at a time: every posting of every query term added into per-document
//! accumulators, then the top-k taken from the sums. The exhaustive path (and the plan of
//! a corpus of one window), from decoded contributions when the index holds them
//! ([`Decoded`](crate::lexical::Decoded)) or through the posting kernels; and MaxScore's
//! hand-over, which scores the rest of a large corpus a cache-sized chunk at a time.

use super::LexicalSearcher;
use crate::hits::Hits;
use crate::lexical::decoded::Contributions;
use crate::lexical::format::BLOCK;
use crate::lexical::kernels;
use crate::lexical::postings::Postings;
use crate::lexical::read::Lexical;

/// Documents per chunk when MaxScore goes on term at a time: 64 KiB of accumulators,
/// which stay in the L2 cache of any board while every term adds into them. (Tests cut
/// their small corpora into many chunks.)
const TAAT_CHUNK: u32 = if cfg!(test) { 256 } else { 16_384 };

impl LexicalSearcher {
    pub(super) fn term_at_a_time(&mut self, lex: &Lexical<'_>, k: usize, out: &mut Hits) {
        let n = lex.doc_count();
        if self.acc.len() < n {
            self.acc.resize(n, 0.0);
        }
        let acc = &mut self.acc[..n];
        if let Some(decoded) = lex.decoded() {
            for q in &self.terms {
                match decoded.contributions(q.ord) {
                    Contributions::Sparse(docs, contribs) => {
                        kernels::add(docs, contribs, q.weight, acc)
                    }
                    Contributions::Dense(row) => kernels::add_row(row, q.weight, acc),
                }
            }
        } else {
            self.score_postings(lex, n);
        }
        self.stats.scored = self.stats.postings;
        self.top.reset(k.min(out.capacity()));
        self.top.take_from(&mut self.acc[..n], 0, f32::NEG_INFINITY);
        self.top.drain_into(out);
    }

    /// Term at a time from the section's compressed postings into `self.acc[..n]`.
    pub(super) fn score_postings(&mut self, lex: &Lexical<'_>, n: usize) {
        let scorer = *lex.scorer();
        let norms = norms_of(lex, &mut self.norms);
        let mut p = Postings::new();
        let acc = &mut self.acc[..n];
        for q in &self.terms {
            let Some(t) = lex.term(q.ord) else { continue };
            p.reset(&t, n);
            let term = q.scoring(scorer);
            p.for_each_block(|docs, tfs| kernels::score(docs, tfs, norms, acc, term));
        }
    }

    /// Term at a time from document `from` to the end, into the top-k MaxScore has built
    /// from the documents before it (θ its current threshold): every cursor from `from`
    /// on, through the SIMD kernels, a chunk of documents at a time.
    pub(super) fn rest_term_at_a_time(
        &mut self,
        lex: &Lexical<'_>,
        cursors: &mut [Postings<'_>],
        from: u32,
        theta: f32,
    ) {
        let n = lex.doc_count();
        let chunk = (TAAT_CHUNK as usize).min(n);
        if self.acc.len() < chunk {
            self.acc.resize(chunk, 0.0);
        }
        let scorer = *lex.scorer();
        let norms = norms_of(lex, &mut self.norms);
        let mut scored = 0u64;
        let mut theta = theta;
        // A block's ids made relative to the chunk's first document.
        let mut local = [0u32; BLOCK];
        // A chunk of documents at a time, every term, into accumulators for that chunk
        // only, which stay in the L2 cache from one chunk to the next; one per document
        // (4 MiB for 1M passages) had each chunk's come from memory and go back (1M
        // passages: ~10% faster; 2026-12-04, AMD EPYC, `cargo bench --profile measure --bench
        // lexical`; docs/benchmarks.md, lexical).
        let mut c0 = from;
        while (c0 as usize) < n {
            let c1 = c0.saturating_add(TAAT_CHUNK).min(n as u32);
            // (A norm table shorter than the corpus, only from a corrupt file, scores
            // nothing rather than panicking.)
            let (acc, norms) = (
                &mut self.acc[..(c1 - c0) as usize],
                norms.get(c0 as usize..c1 as usize).unwrap_or(&[]),
            );
            warm(norms);
            for (q, c) in self.terms.iter().zip(cursors.iter_mut()) {
                let term = q.scoring(scorer);
                c.advance(c0);
                c.for_each_run_below(c1, |docs, tfs| {
                    scored += docs.len() as u64;
                    // Ids are in c0..c1 (the cursor's contract); one that is not wraps
                    // past the chunk, and the kernel skips it.
                    let local = &mut local[..docs.len().min(BLOCK)];
                    for (l, &d) in local.iter_mut().zip(docs) {
                        *l = d.wrapping_sub(c0);
                    }
                    kernels::score(local, tfs, norms, acc, term);
                });
            }
            self.top.take_from(acc, c0, theta);
            theta = self.top.threshold();
            c0 = c1;
        }
        self.stats.scored += scored;
    }
}

/// The length norms of every document: the index's precomputed ones, or computed into
/// `spare` for a view opened without them.
fn norms_of<'a>(lex: &Lexical<'a>, spare: &'a mut Vec<f32>) -> &'a [f32] {
    match lex.norms() {
        Some(norms) => norms,
        None => {
            let n = lex.doc_count();
            spare.clear();
            spare.extend((0..n as u32).map(|d| lex.norm(d)));
            &spare[..]
        }
    }
}

/// Reads one length norm per cache line of `norms`, in order, so that the chunk's norms
/// are in cache before its postings look them up in random order: a sequential sweep
/// the hardware prefetcher streams, instead of a wait for memory at each line's first
/// lookup (1M passages: the hand-over ~15% faster, 100k unchanged; 2026-12-04, AMD EPYC,
/// `cargo bench --profile measure --bench lexical`; docs/benchmarks.md, lexical).
fn warm(norms: &[f32]) {
    let line = 64 / std::mem::size_of::<f32>();
    let seen = norms.iter().step_by(line).fold(0, |x, n| x ^ n.to_bits());
    std::hint::black_box(seen);
}
