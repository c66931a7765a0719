//! The reader's part in `context`: which sentences it reads, how its logit is fused
//! with the cheap score, where the context stops, and the logits it remembers.
//!
//! The cheap score ([`super::rank`]) tells "about the question" well and "answers it"
//! poorly (its best sentence holds the answer for 0.60 of the dev questions, its top
//! five passages for 0.905); the reader tells them apart but costs a 12-layer encoder
//! per sentence. So the cheap score chooses the [`ReadSettings::sentences`] the reader
//! reads, and a read sentence's score becomes `logit + cheap_weight · cheap`; those it
//! did not read rank below every read one. Packing then stops where the fused score
//! drops more than [`ReadSettings::drop`] under the best one's: the budget is a ceiling.
//!
//! The reader's logits are remembered per question text ([`ReadCache`]): the streaming
//! retriever reads while the user speaks ([`ContextBuilder::prepare`](super::ContextBuilder::prepare)),
//! and at the end of speech a final whose words are the last partial's finds its
//! sentences read already; only sentences not read yet cost anything then. The cache is
//! fixed-size (no allocation per partial).

use heapless::Vec as FixedVec;
use xxhash_rust::xxh3::xxh3_64;

use super::pack::Cand;
use crate::embed::EmbedError;
use crate::embed::reader::Reader;
use crate::index::Index;

/// Most sentences the reader reads for one question.
pub const MAX_READ: usize = 32;
/// Most pairs read ahead per idle step: a partial or the final that arrives meanwhile
/// waits for at most that. Streams replay (`primd eval --streams`, 150 dev recordings,
/// 2026-12-07, EPYC, measure): 4 a step and 4 at the end of speech gave end of speech
/// p90 36 ms, 2 and 3 26 ms at the same hit@1 (0.787), 2 and 2 20 ms at 0.773.
pub const STEP: usize = 2;
/// Most pairs the end of speech reads itself: the final's best sentences (by the cheap
/// score) that reading ahead did not reach; the logits read for earlier partials stand
/// in for the rest.
pub const FINAL_PAIRS: usize = 3;
/// Sentences per reader batch (a batch's tokens are one GEMM's rows: a handful of pairs
/// reads the weights once for all of them, and keeps each step short).
const BATCH: usize = 4;

/// How the reader is used; the defaults were chosen on the dev questions
/// (docs/context.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadSettings {
    /// Sentences (best cheap score first) the reader reads per question.
    pub sentences: usize,
    /// Weight of the cheap score added to the reader's logit.
    pub cheap_weight: f32,
    /// The context stops at sentences whose fused score is more than this under the
    /// best one's.
    pub drop: f32,
    /// No sentence the reader scores below this is handed over but the best, and that
    /// one alone when all are below: an off-topic question (or one the recognizer
    /// garbled) gets one sentence, which `evidence` marks, rather than a budget of the
    /// least bad ones.
    pub floor: f32,
}

impl Default for ReadSettings {
    fn default() -> Self {
        ReadSettings {
            sentences: 16,
            cheap_weight: 1.0,
            drop: 12.0,
            floor: -8.0,
        }
    }
}

/// Logits the reader gave: for the question text it read last (fresh), and for the
/// texts before it (stale: an earlier partial of the same utterance, which the final
/// usually extends by a word or two).
#[derive(Debug, Default)]
pub struct ReadCache {
    /// Hash of the question the fresh logits were read against (0: none yet).
    question: u64,
    /// (sentence, logit, fresh).
    logits: FixedVec<(u32, f32, bool), MAX_READ>,
    /// Pairs read since the cache was made (measurement).
    pub pairs: u64,
}

impl ReadCache {
    /// Makes `question` the fresh one: logits read for another text become stale.
    fn switch(&mut self, question: &str) {
        let h = xxh3_64(question.as_bytes()).max(1);
        if h != self.question {
            self.question = h;
            self.logits.iter_mut().for_each(|e| e.2 = false);
        }
    }

    /// Forgets every logit (a new utterance: the last one's are about another question).
    pub fn clear(&mut self) {
        self.question = 0;
        self.logits.clear();
    }

    fn get(&self, sentence: u32) -> Option<(f32, bool)> {
        self.logits
            .iter()
            .find(|e| e.0 == sentence)
            .map(|e| (e.1, e.2))
    }

    /// Remembers a fresh logit, in place of the sentence's stale one, else of any stale
    /// one when full.
    fn put(&mut self, sentence: u32, logit: f32) {
        let slot = self
            .logits
            .iter()
            .position(|e| e.0 == sentence)
            .or_else(|| {
                self.logits
                    .is_full()
                    .then(|| self.logits.iter().position(|e| !e.2))
                    .flatten()
            });
        match slot {
            Some(i) => self.logits[i] = (sentence, logit, true),
            None => {
                let _ = self.logits.push((sentence, logit, true));
            }
        }
    }
}

/// Reads the first `n` of `cands` (sorted best cheap score first) against `question`,
/// taking the fresh logits `cache` holds and reading at most `budget` pairs more, the
/// sentences with no logit at all first, then (`refresh`) those with a stale one;
/// without `refresh` only unread ones among the first `budget`. A sentence left unread
/// keeps its stale logit or has none (`Cand::logit` NaN). Returns the pairs read.
pub(crate) fn read(
    reader: &mut Reader,
    cache: &mut ReadCache,
    index: &Index,
    question: &str,
    cands: &mut [Cand],
    budget: usize,
    refresh: bool,
) -> Result<usize, EmbedError> {
    cache.switch(question);
    let mut todo: FixedVec<usize, MAX_READ> = FixedVec::new();
    let mut stale: FixedVec<usize, MAX_READ> = FixedVec::new();
    for (i, c) in cands.iter_mut().enumerate().take(MAX_READ) {
        match cache.get(c.sentence) {
            Some((l, true)) => c.logit = l,
            Some((l, false)) => {
                c.logit = l;
                let _ = stale.push(i);
            }
            None => {
                c.logit = f32::NAN;
                // Without `refresh` (end of speech) only the first `budget` by the cheap
                // score are read: a sentence further down that reading ahead did not
                // reach waits for no one.
                if todo.len() < budget && (refresh || i < budget) {
                    let _ = todo.push(i);
                }
            }
        }
    }
    for &i in stale.iter().filter(|_| refresh) {
        if todo.len() < budget {
            let _ = todo.push(i);
        }
    }
    if !todo.is_empty() {
        // Cheap (a question's tokens), and the reader may have read another text since.
        reader.set_question(question)?;
    }
    for chunk in todo.chunks(BATCH) {
        let mut pairs: FixedVec<(&str, &str), BATCH> = FixedVec::new();
        for &i in chunk {
            let c = &cands[i];
            let title = index.passage(c.passage as usize).map_or("", |p| p.title);
            let _ = pairs.push((title, c.text(index)));
        }
        let mut out = [0.0f32; BATCH];
        reader.score_titled(&pairs, &mut out[..pairs.len()])?;
        for (&i, &l) in chunk.iter().zip(&out) {
            cands[i].logit = l;
            cache.put(cands[i].sentence, l);
        }
        cache.pairs += chunk.len() as u64;
    }
    Ok(todo.len())
}

/// How to pack after [`fuse`]: the fused score under which packing stops, and whether
/// the best sentence is below the reader's floor (then it alone is handed over).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stop {
    pub below: f32,
    pub empty: bool,
}

/// The fused scores of `cands` (the first `read` of them read, the rest not) and where
/// the context stops (`None`: nothing was read, the cheap order decides alone). A
/// sentence under the floor gets a score under the stop, so it is never taken.
pub(crate) fn fuse(cands: &mut [Cand], settings: &ReadSettings) -> Option<Stop> {
    let mut best = f32::NEG_INFINITY;
    let low = cands.iter().map(|c| c.score).fold(f32::INFINITY, f32::min);
    let mut best_logit = f32::NEG_INFINITY;
    for c in cands.iter_mut() {
        if c.logit.is_nan() {
            // Below every read sentence, in cheap order among themselves.
            c.score = -1e6 + c.score - low;
        } else {
            c.score = c.logit + settings.cheap_weight * c.score;
            if c.logit < settings.floor {
                c.score -= 1e5;
            }
            best = best.max(c.score);
            best_logit = best_logit.max(c.logit);
        }
    }
    best.is_finite().then_some(Stop {
        below: best - settings.drop,
        empty: best_logit < settings.floor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::SentenceSpan;

    fn cand(sentence: u32, cheap: f32, logit: f32) -> Cand {
        let span = SentenceSpan {
            start: 0,
            end: 1,
            tokens: 10,
        };
        let mut c = Cand::new(0, 0, 1.0, sentence, span, "x");
        c.score = cheap;
        c.logit = logit;
        c
    }

    #[test]
    fn read_sentences_rank_above_unread_ones_and_the_stop_follows_the_best() {
        let s = ReadSettings {
            sentences: 3,
            cheap_weight: 1.0,
            drop: 4.0,
            floor: -4.0,
        };
        // Sorted by the cheap score, as `read` receives them: the reader disagrees.
        let mut c = [
            cand(0, 0.9, -5.0),
            cand(1, 0.8, 6.0),
            cand(2, 0.7, 1.0),
            cand(3, 0.6, f32::NAN),
            cand(4, 0.5, f32::NAN),
        ];
        let stop = fuse(&mut c, &s).unwrap();
        assert!((c[1].score - 6.8).abs() < 1e-6 && (stop.below - 2.8).abs() < 1e-6);
        assert!(!stop.empty);
        // Under the floor (-5 < -4): under the stop too.
        assert!(c[0].score < stop.below);
        // Every read sentence above every unread one; unread ones keep their order.
        let lowest_read = c[..3].iter().map(|x| x.score).fold(f32::MAX, f32::min);
        assert!(c[3].score < lowest_read && c[4].score < c[3].score);
        // Nothing above the floor: the best sentence alone.
        let mut off = [cand(0, 0.9, -7.0), cand(1, 0.8, -9.0)];
        assert!(fuse(&mut off, &s).unwrap().empty);
        // Nothing read: no stop (the cheap order decides, as without a reader).
        let mut none = [cand(0, 0.9, f32::NAN), cand(1, 0.8, f32::NAN)];
        assert_eq!(fuse(&mut none, &s), None);
        assert!(none[0].score > none[1].score);
    }

    #[test]
    fn the_cache_keeps_earlier_texts_logits_as_stale_and_a_new_utterance_forgets_them() {
        let mut cache = ReadCache::default();
        cache.switch("when does it open");
        cache.put(7, 2.5);
        assert_eq!(cache.get(7), Some((2.5, true)));
        cache.switch("when does it open");
        assert_eq!(cache.get(7), Some((2.5, true)), "same text: fresh");
        cache.switch("when does it open on sundays");
        assert_eq!(cache.get(7), Some((2.5, false)), "another text: stale");
        cache.put(7, 3.0);
        assert_eq!(
            cache.get(7),
            Some((3.0, true)),
            "read again: fresh, one entry"
        );
        // Full of stale logits: a new one takes a stale place.
        cache.switch("another question");
        for s in 100..100 + MAX_READ as u32 {
            cache.put(s, 0.0);
        }
        cache.switch("and another");
        cache.put(999, 1.0);
        assert_eq!(cache.get(999), Some((1.0, true)));
        cache.clear();
        assert_eq!(cache.get(999), None);
    }
}
