//! Packs ranked sentences (or, for an index without sentences, whole passages) into the
//! budget.
//!
//! The rule, for sentences, best score first:
//! - a sentence that fits is taken; one that starts with a pronoun ("He", "it", "this")
//!   takes the sentence before it along when that one is not taken yet and both fit
//!   (alone it would not say who "he" is);
//! - one that does not fit is passed over for smaller ones further down, except the very
//!   best, which is cut at a word boundary to what is left (and marked `cut`): a budget
//!   smaller than the best sentence still gets its beginning;
//! - when all is done and at least [`FILL_MIN`] tokens are left, the best sentence not
//!   taken fills them, cut likewise.
//!
//! The taken ones are then ordered by their passage's rank and, inside a passage, by
//! position; neighbours merge into one span, except the best sentence, which is always a
//! span of its own (`best` points at it: a voice answer speaks that one sentence). The
//! token count of the result is exact: the stored counts of whole sentences plus the
//! counted pieces of a cut one.

use super::{Context, Span};
use crate::fusion::Scored;
use crate::index::{Index, SentenceSpan};

/// Tokens left at the end that are worth a cut sentence.
pub(crate) const FILL_MIN: u32 = 16;

/// Words that, first in a sentence, point back at the one before.
const PRONOUNS: &[&str] = &[
    "he", "she", "it", "its", "it's", "they", "their", "them", "this", "these", "those", "his",
    "her", "that", "such", "both", "we", "our",
];

/// A sentence of one of the top passages, while it is ranked and packed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cand {
    pub passage: u32,
    /// Its passage's position in the results.
    pub rank: usize,
    /// Its passage's retrieval score, min-max normalised over the ranked passages (1 for
    /// the best; 1 for all when they tie).
    pub retrieval: f32,
    /// Its id in the sentence section.
    pub sentence: u32,
    pub span: SentenceSpan,
    pub score: f32,
    /// The reader's logit (NaN: not read).
    pub logit: f32,
    /// Starts with a pronoun.
    pub pronoun: bool,
    pub chosen: bool,
    /// Chosen, and cut to `span.end`/`span.tokens`.
    pub cut: bool,
}

impl Cand {
    pub fn new(
        passage: u32,
        rank: usize,
        retrieval: f32,
        sentence: u32,
        span: SentenceSpan,
        text: &str,
    ) -> Self {
        let first = text.split_whitespace().next().unwrap_or("");
        let first = first.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let pronoun = PRONOUNS.iter().any(|p| first.eq_ignore_ascii_case(p));
        Cand {
            passage,
            rank,
            retrieval,
            sentence,
            span,
            score: 0.0,
            logit: f32::NAN,
            pronoun,
            chosen: false,
            cut: false,
        }
    }

    /// Its text (`""` if the record does not decode: `build` checked the span).
    pub fn text<'a>(&self, index: &'a Index) -> &'a str {
        index
            .passage(self.passage as usize)
            .ok()
            .and_then(|p| p.text.get(self.span.start as usize..self.span.end as usize))
            .unwrap_or("")
    }
}

/// The longest prefix of `text` that ends at a word boundary and has at most `budget`
/// word pieces: its byte length and pieces (0, 0 if even the first word is longer).
pub(crate) fn cut(text: &str, budget: u32, count: &mut dyn FnMut(&str) -> usize) -> (usize, u32) {
    let (mut end, mut tokens) = (0usize, 0u32);
    let mut rest = text;
    let mut at = 0usize;
    while let Some(i) = rest.find(|c: char| !c.is_whitespace()) {
        let word_start = at + i;
        let word_len = text[word_start..]
            .find(char::is_whitespace)
            .unwrap_or(text.len() - word_start);
        let word = &text[word_start..word_start + word_len];
        let n = count(word) as u32;
        if tokens.saturating_add(n) > budget {
            break;
        }
        tokens += n;
        end = word_start + word_len;
        at = end;
        rest = &text[at..];
    }
    (end, tokens)
}

/// Chooses among `cands` (scored) within `budget` and writes the spans to `out`. With
/// `stop`, a sentence scored below it is never taken (the best always is) and the budget
/// is a ceiling, not a target: nothing fills what is left. `lead` (a sentence of `cands`)
/// is taken as the best whatever its score: the answer passage's own best sentence.
pub(crate) fn sentences(
    index: &Index,
    cands: &mut [Cand],
    budget: u32,
    stop: Option<f32>,
    lead: Option<u32>,
    count: &mut dyn FnMut(&str) -> usize,
    out: &mut Context,
) {
    // Best first; the sort is stable on equal scores (earlier passage, earlier sentence).
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    if let Some(i) = lead.and_then(|l| cands.iter().position(|c| c.sentence == l)) {
        cands[..=i].rotate_right(1);
    }
    let best = cands.first().map(|c| c.sentence);
    let mut left = budget;
    for i in 0..cands.len() {
        if cands[i].chosen {
            continue;
        }
        let c = cands[i];
        if i > 0 && stop.is_some_and(|s| c.score < s) {
            break;
        }
        let pred = c
            .pronoun
            .then(|| {
                cands
                    .iter()
                    .position(|p| p.passage == c.passage && p.sentence + 1 == c.sentence)
            })
            .flatten()
            .filter(|&j| !cands[j].chosen);
        if let Some(j) = pred
            && c.span.tokens.saturating_add(cands[j].span.tokens) <= left
        {
            left -= c.span.tokens + cands[j].span.tokens;
            cands[i].chosen = true;
            cands[j].chosen = true;
        } else if c.span.tokens <= left {
            left -= c.span.tokens;
            cands[i].chosen = true;
        } else if i == 0 {
            left -= cut_into(index, &mut cands[i], left, count);
        }
    }
    if left >= FILL_MIN
        && stop.is_none()
        && let Some(c) = cands.iter_mut().find(|c| !c.chosen)
    {
        cut_into(index, c, left, count);
    }
    // Reading order: passage rank, then position.
    cands.sort_by_key(|c| (!c.chosen, c.rank, c.sentence));
    for c in cands.iter().take_while(|c| c.chosen) {
        let is_best = Some(c.sentence) == best;
        // The best sentence is a span of its own (what a voice answer speaks: one
        // sentence), so nothing merges into it and it merges into nothing.
        let alone = is_best || out.best.is_some_and(|b| b + 1 == out.spans.len());
        let merged = match out.spans.last_mut() {
            Some(s) if !alone && s.passage == c.passage && !s.cut && s.end <= c.span.start => {
                // Neighbours only (the text between is white space).
                let p = index.passage(c.passage as usize).ok();
                let gap = p
                    .and_then(|p| p.text.get(s.end as usize..c.span.start as usize))
                    .is_some_and(|g| g.trim().is_empty());
                if gap {
                    s.end = c.span.end;
                    s.tokens += c.span.tokens;
                    s.cut = c.cut;
                }
                gap
            }
            _ => false,
        };
        if !merged {
            let span = Span {
                passage: c.passage,
                start: c.span.start,
                end: c.span.end,
                tokens: c.span.tokens,
                cut: c.cut,
            };
            if out.spans.push(span).is_err() {
                break;
            }
        }
        if is_best {
            out.best = Some(out.spans.len() - 1);
        }
        out.tokens += c.span.tokens;
    }
}

/// Cuts `c` to at most `left` tokens; marks it chosen when anything is left of it.
/// Returns the tokens it takes.
fn cut_into(index: &Index, c: &mut Cand, left: u32, count: &mut dyn FnMut(&str) -> usize) -> u32 {
    let (len, tokens) = cut(c.text(index), left, count);
    if len == 0 {
        return 0;
    }
    c.span.end = c.span.start + len as u32;
    c.span.tokens = tokens;
    c.chosen = true;
    c.cut = true;
    tokens
}

/// An index without sentences: the top passages whole, in rank order, while they fit;
/// the first that does not is cut to what is left.
pub(crate) fn whole_passages(
    index: &Index,
    top: &[Scored],
    budget: u32,
    count: &mut dyn FnMut(&str) -> usize,
    out: &mut Context,
) {
    let mut left = budget;
    for h in top {
        let Ok(p) = index.passage(h.index as usize) else {
            continue;
        };
        let text = p.text.trim_end();
        let n = count(text) as u32;
        let (end, tokens, was_cut) = if n <= left {
            (text.len(), n, false)
        } else {
            let (end, tokens) = cut(text, left, count);
            (end, tokens, true)
        };
        if end > 0 {
            let span = Span {
                passage: h.index,
                start: 0,
                end: end as u32,
                tokens,
                cut: was_cut,
            };
            if out.spans.push(span).is_err() {
                break;
            }
            out.tokens += tokens;
            left -= tokens;
        }
        if was_cut || left == 0 {
            break;
        }
    }
    // The best passage there is (the top one, unless its record did not decode).
    out.best = (!out.spans.is_empty()).then_some(0);
}
