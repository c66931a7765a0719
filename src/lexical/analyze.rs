//! The analyzer: text → terms, the same way for passages (at build time) and for partial
//! transcripts (at query time).
//!
//! Words are exactly those of the streaming normaliser (`stream::normalize::lower_words`:
//! lower case, letters/digits/inner apostrophes, everything else a separator), reused rather
//! than copied, so a partial and a passage can never be tokenised differently. No filler
//! removal here: a passage's "um" is text, and a query's fillers are rare in passages, so
//! they cost little.
//!
//! [`AnalyzerKind::CharNgrams`] cuts each word, marked with `_` before and after, into
//! overlapping windows of `n` characters (chars, not bytes, so "während" and "模型" give
//! whole characters); a marked word shorter than `n` is one term. Recognizers misspell the
//! names and rare words that decide spoken questions, and a misspelling still shares most
//! of its n-grams with the right word, where whole-word matching loses it entirely.
//!
//! The analyzer is recorded in the index (kind, `n`, and [`ANALYZER_VERSION`] for these
//! rules), and queries are analysed with the index's own analyzer.
//!
//! After warm-up (the longest text seen so far), analysing allocates nothing: the lowered
//! text, the character offsets and the term bytes live in [`Analyzer`]'s buffers.

use super::{AnalyzerKind, AnalyzerSpec};
use crate::stream::normalize::{WordRules, lower_words};

/// Version of the analysis rules (word split + n-gram cutting) that new indexes are built
/// with. Recorded in the lexical section; raise it when the rules change, and keep
/// analysing an older index's queries by its own version's rules ([`WordRules`]).
/// 1: lower case, letters/digits/inner apostrophes; 2: also Latin diacritics folded and
/// typographic apostrophes read as `'`.
pub const ANALYZER_VERSION: u32 = 2;

/// The oldest analysis rules a reader still applies.
pub const OLDEST_ANALYZER_VERSION: u32 = 1;

/// The word rules of analyzer version `v`, if this primd knows it.
pub(crate) fn word_rules(v: u32) -> Option<WordRules> {
    match v {
        1 => Some(WordRules::V1),
        2 => Some(WordRules::V2),
        _ => None,
    }
}

/// The analyzer version whose word rules are `rules`.
pub(crate) fn analyzer_version(rules: WordRules) -> u32 {
    match rules {
        WordRules::V1 => 1,
        WordRules::V2 => 2,
    }
}

/// The word-boundary mark of character n-grams. Never inside a word (words are
/// letters, digits and apostrophes), so `_ab` can only be a word start.
pub const BOUNDARY: char = '_';

/// Reusable scratch for analysing text; one per thread.
#[derive(Clone, Debug, Default)]
pub struct Analyzer {
    lowered: String,
    /// Byte offset of each char of the current word, plus its length.
    bounds: Vec<usize>,
    term: Vec<u8>,
}

impl Analyzer {
    pub fn new() -> Self {
        Analyzer::default()
    }

    /// Calls `f` with each term of `text` (UTF-8 bytes), in text order, repeats included.
    pub fn analyze(&mut self, spec: &AnalyzerSpec, text: &str, mut f: impl FnMut(&[u8])) {
        self.lowered.clear();
        lower_words(text, spec.rules, &mut self.lowered);
        let Analyzer {
            lowered,
            bounds,
            term,
        } = self;
        for word in lowered.split(' ').filter(|w| !w.is_empty()) {
            match spec.kind {
                AnalyzerKind::Words => f(word.as_bytes()),
                AnalyzerKind::CharNgrams { n } => {
                    ngrams(word, usize::from(n), bounds, term, &mut f)
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn capacities(&self) -> Vec<usize> {
        vec![
            self.lowered.capacity(),
            self.bounds.capacity(),
            self.term.capacity(),
        ]
    }

    /// Number of terms of `text` (a document's length for BM25).
    pub fn count(&mut self, spec: &AnalyzerSpec, text: &str) -> usize {
        let mut n = 0;
        self.analyze(spec, text, |_| n += 1);
        n
    }
}

/// The n-grams of `_word_`. `n` is 3..=5 for a valid spec; a smaller `n` still works
/// (n = 0 is treated as 1), nothing here can panic.
fn ngrams(
    word: &str,
    n: usize,
    bounds: &mut Vec<usize>,
    term: &mut Vec<u8>,
    f: &mut impl FnMut(&[u8]),
) {
    let n = n.max(1);
    bounds.clear();
    bounds.extend(word.char_indices().map(|(i, _)| i));
    bounds.push(word.len());
    let m = bounds.len() - 1; // chars in the word
    let marked = m + 2;
    let mut mark = [0u8; 4];
    let mark = BOUNDARY.encode_utf8(&mut mark).as_bytes();
    // Marked position p: 0 is the leading mark, 1..=m the word's chars, m + 1 the trailing mark.
    let mut emit = |from: usize, to: usize| {
        term.clear();
        if from == 0 {
            term.extend_from_slice(mark);
        }
        let (a, b) = (from.max(1) - 1, to.min(m + 1) - 1);
        if a < b {
            term.extend_from_slice(&word.as_bytes()[bounds[a]..bounds[b]]);
        }
        if to == marked {
            term.extend_from_slice(mark);
        }
        f(term);
    };
    if marked <= n {
        emit(0, marked);
    } else {
        for start in 0..=marked - n {
            emit(start, start + n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(spec: AnalyzerSpec, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        Analyzer::new().analyze(&spec, text, |t| {
            out.push(String::from_utf8(t.to_vec()).unwrap())
        });
        out
    }

    const WORDS: AnalyzerSpec = AnalyzerSpec::new(AnalyzerKind::Words);

    fn grams(n: u8) -> AnalyzerSpec {
        AnalyzerSpec::new(AnalyzerKind::CharNgrams { n })
    }

    #[test]
    fn words_are_the_normalisers_words() {
        assert_eq!(
            terms(WORDS, "Um, who wrote the Declaration? It's 1776!"),
            ["um", "who", "wrote", "the", "declaration", "it's", "1776"]
        );
        assert!(terms(WORDS, "  ... --- ").is_empty());
        assert!(terms(grams(4), "").is_empty());
    }

    #[test]
    fn char_ngrams_with_boundary_marks() {
        assert_eq!(terms(grams(4), "Paris"), ["_par", "pari", "aris", "ris_"]);
        assert_eq!(
            terms(grams(3), "Paris"),
            ["_pa", "par", "ari", "ris", "is_"]
        );
        assert_eq!(terms(grams(5), "Paris"), ["_pari", "paris", "aris_"]);
        // a marked word of exactly n chars is one term, a shorter one too
        assert_eq!(terms(grams(4), "an"), ["_an_"]);
        assert_eq!(terms(grams(4), "a I"), ["_a_", "_i_"]);
        assert_eq!(terms(grams(5), "the"), ["_the_"]);
        assert_eq!(terms(grams(4), "the"), ["_the", "the_"]);
        // chars, not bytes
        let v1 = AnalyzerSpec {
            rules: WordRules::V1,
            ..grams(3)
        };
        assert_eq!(terms(v1, "Über"), ["_üb", "übe", "ber", "er_"]);
        // version-2 word rules fold the diacritic first
        assert_eq!(terms(grams(3), "Über"), ["_ub", "ube", "ber", "er_"]);
        assert_eq!(terms(grams(3), "模型"), ["_模型", "模型_"]);
        assert_eq!(terms(grams(4), "模型"), ["_模型_"]);
        assert_eq!(
            terms(grams(4), "Москва"),
            ["_мос", "моск", "оскв", "сква", "ква_"]
        );
        // within words only: no gram spans two words
        assert_eq!(terms(grams(4), "ab cd"), ["_ab_", "_cd_"]);
        // n-gram count of a word of m chars: max(1, m + 3 - n)
        let mut a = Analyzer::new();
        assert_eq!(a.count(&grams(4), "retrieval"), 9 + 3 - 4);
        // degenerate n: no panic
        assert_eq!(terms(grams(1), "ab"), ["_", "a", "b", "_"]);
        assert_eq!(terms(grams(0), "ab"), ["_", "a", "b", "_"]);
    }
}
