//! The analyzer: text → terms, the same way for passages (at build time) and for partial
//! transcripts (at query time).
//!
//! Words are exactly those of the streaming normaliser (the word rules of [`crate::words`]:
//! lower case, letters/digits/inner apostrophes, everything else a separator), reused rather
//! than copied, so a partial and a passage can never be tokenised differently. No filler
//! removal here: a passage's "um" is text, and a query's fillers are rare in passages, so
//! they cost little. From analyzer version 4 a word that holds digits is then replaced by
//! its spoken words ([`super::numbers`]: "1881" as a recognizer may say it), on both sides.
//!
//! [`AnalyzerKind::CharNgrams`] joins the words with `_` and marks the text's start and end
//! with it (`_w1_w2_…_wk_`), then cuts that into overlapping windows of `n` characters
//! (chars, not bytes, so "während" and "模型" give whole characters); a marked text shorter
//! than `n` is one term. Recognizers misspell the names and rare words that decide spoken
//! questions, and a misspelling still shares most of its n-grams with the right word, where
//! whole-word matching loses it entirely. The windows that span a boundary (`e_ca` in "the
//! cat") carry which words stand next to each other, as a phrase query would: on the dev
//! set they moved hybrid hit@1 from 0.716 to 0.731 on typed questions and from 0.633 to
//! 0.693 on recognizer finals (docs/benchmarks.md, "Analyzer version 3"). Analyzer versions
//! 1 and 2 cut each marked word on its own (`_the_`, `_cat_`); their indexes keep doing so.
//!
//! The analyzer is recorded in the index (kind, `n`, and [`ANALYZER_VERSION`] for these
//! rules), and queries are analysed with the index's own analyzer.
//!
//! After warm-up (the longest text seen so far), analysing allocates nothing: the lowered
//! text, the character offsets and the term bytes live in [`Analyzer`]'s buffers.

use super::numbers::spell_words;
use super::{AnalyzerKind, AnalyzerSpec};
use crate::words::{WordRules, lower_words};

/// Version of the analysis rules (word split + n-gram cutting) that new indexes are built
/// with. Recorded in the lexical section; raise it when the rules change, and keep
/// analysing an older index's queries by its own version's rules ([`WordRules`]).
/// 1: lower case, letters/digits/inner apostrophes; 2: also Latin diacritics folded and
/// typographic apostrophes read as `'`; 3: the same words, and character n-grams run
/// across word boundaries; 4: also numbers spelled out as words ([`super::numbers`]).
pub const ANALYZER_VERSION: u32 = 4;

/// The oldest analysis rules a reader still applies.
pub const OLDEST_ANALYZER_VERSION: u32 = 1;

/// The rules of analyzer version `v`: its word rules, whether its n-grams run across
/// words, whether it spells numbers out; `None` if this primd does not know the version.
pub(crate) fn version_rules(v: u32) -> Option<(WordRules, bool, bool)> {
    match v {
        1 => Some((WordRules::V1, false, false)),
        2 => Some((WordRules::V2, false, false)),
        3 => Some((WordRules::V2, true, false)),
        4 => Some((WordRules::V2, true, true)),
        _ => None,
    }
}

/// The analyzer version to record for `spec` (`build-index` writes only the current one;
/// tests write older ones. No version has V1 words with n-grams across them, or numbers
/// spelled out with n-grams within words: `check_params` refuses that spec).
pub(crate) fn analyzer_version(spec: &AnalyzerSpec) -> u32 {
    match (spec.across_words, spec.numbers, spec.rules) {
        (true, true, _) => 4,
        (true, false, _) => 3,
        (false, _, WordRules::V1) => 1,
        (false, _, WordRules::V2) => 2,
    }
}

/// The word-boundary mark of character n-grams. Never inside a word (words are
/// letters, digits and apostrophes), so `_ab` can only be a word start.
pub const BOUNDARY: char = '_';

/// Reusable scratch for analysing text; one per thread.
#[derive(Clone, Debug, Default)]
pub struct Analyzer {
    lowered: String,
    /// The lowered words with their numbers spelled out (analyzer version 4).
    spelled: String,
    /// The words joined by [`BOUNDARY`] (n-grams across words).
    joined: String,
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
            spelled,
            joined,
            bounds,
            term,
        } = self;
        let lowered = if spec.numbers && lowered.bytes().any(|b| b.is_ascii_digit()) {
            spelled.clear();
            spell_words(lowered, spelled);
            spelled
        } else {
            lowered
        };
        let words = lowered.split(' ').filter(|w| !w.is_empty());
        match spec.kind {
            AnalyzerKind::Words => words.for_each(|w| f(w.as_bytes())),
            AnalyzerKind::CharNgrams { n } if spec.across_words => {
                // `ngrams` marks its text's start and end: `_w1_w2_…_wk_`.
                joined.clear();
                for w in words {
                    if !joined.is_empty() {
                        joined.push(BOUNDARY);
                    }
                    joined.push_str(w);
                }
                if !joined.is_empty() {
                    ngrams(joined, usize::from(n), bounds, term, &mut f);
                }
            }
            AnalyzerKind::CharNgrams { n } => {
                words.for_each(|w| ngrams(w, usize::from(n), bounds, term, &mut f))
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn capacities(&self) -> Vec<usize> {
        vec![
            self.lowered.capacity(),
            self.spelled.capacity(),
            self.joined.capacity(),
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

/// The n-grams of `_word_` (`word` may be several words joined by [`BOUNDARY`]). `n` is
/// 3..=5 for a valid spec; a smaller `n` still works (n = 0 is treated as 1), nothing here
/// can panic.
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
        let digits = AnalyzerSpec {
            numbers: false,
            ..WORDS
        };
        assert_eq!(
            terms(digits, "Um, who wrote the Declaration? It's 1776!"),
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
        // a marked text of exactly n chars is one term, a shorter one too
        assert_eq!(terms(grams(4), "an"), ["_an_"]);
        assert_eq!(terms(grams(5), "a I"), ["_a_i_"]);
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
        // n-gram count of a word of m chars: max(1, m + 3 - n)
        let mut a = Analyzer::new();
        assert_eq!(a.count(&grams(4), "retrieval"), 9 + 3 - 4);
        // degenerate n: no panic
        assert_eq!(terms(grams(1), "ab"), ["_", "a", "b", "_"]);
        assert_eq!(terms(grams(0), "ab"), ["_", "a", "b", "_"]);
    }

    /// The spec of an index built with analyzer version `v`, as its reader decodes it.
    fn version(v: u32, kind: AnalyzerKind) -> AnalyzerSpec {
        let (rules, across_words, numbers) = version_rules(v).unwrap();
        AnalyzerSpec {
            kind,
            rules,
            across_words,
            numbers,
        }
    }

    #[test]
    fn char_ngrams_run_across_words_from_version_3() {
        let c4 = AnalyzerKind::CharNgrams { n: 4 };
        assert_eq!(grams(4), version(ANALYZER_VERSION, c4));
        // the windows that span a boundary say which words stand next to each other
        let the_cat = ["_the", "the_", "he_c", "e_ca", "_cat", "cat_"];
        assert_eq!(terms(version(3, c4), "The cat"), the_cat);
        assert_eq!(terms(grams(4), "The cat"), the_cat);
        // whatever separates the words, one mark stands between them
        assert_eq!(terms(grams(4), "  the, -- CAT! "), the_cat);
        assert_eq!(terms(grams(4), "ab cd"), ["_ab_", "ab_c", "b_cd", "_cd_"]);
        assert_eq!(terms(grams(4), "a I"), ["_a_i", "a_i_"]);
        assert_eq!(terms(grams(3), "Ó o"), ["_o_", "o_o", "_o_"]);
        assert!(terms(grams(4), " ... ").is_empty());
        // count for k words of m1..mk chars, c = Σm + k + 1 marked: max(1, c + 1 - n)
        assert_eq!(Analyzer::new().count(&grams(4), "who wrote it"), 14 + 1 - 4);
        // words are unchanged by the n-gram rule
        let words3 = version(3, AnalyzerKind::Words);
        assert_eq!(terms(words3, "The cat"), ["the", "cat"]);
        // versions 1 and 2 cut each word on its own: their indexes keep their terms
        for v in [1, 2] {
            assert_eq!(
                terms(version(v, c4), "The cat"),
                ["_the", "the_", "_cat", "cat_"]
            );
            assert_eq!(terms(version(v, c4), "a I"), ["_a_", "_i_"]);
            assert_eq!(analyzer_version(&version(v, c4)), v);
        }
        assert_eq!(analyzer_version(&version(3, c4)), 3);
        assert_eq!(version_rules(5), None);
        assert_eq!(version_rules(0), None);
    }

    #[test]
    fn numbers_are_spelled_out_from_version_4_on_both_sides_alike() {
        let c4 = AnalyzerKind::CharNgrams { n: 4 };
        assert_eq!(grams(4), version(ANALYZER_VERSION, c4));
        assert_eq!(analyzer_version(&grams(4)), 4);
        // a passage's digits and a recognizer's words give the same terms
        let spoken = "tesla moved in one thousand eight hundred eighty one";
        let written = "Tesla moved in 1881.";
        let said = terms(grams(4), spoken);
        let both = terms(grams(4), written);
        assert_eq!(&both[..said.len()], &said[..], "the cardinal reading first");
        assert!(both.contains(&"eigh".to_string()) && both.contains(&"y_on".to_string()));
        // and the year reading after it, for a recognizer that says "eighteen eighty one"
        let year = terms(grams(4), "eighteen eighty one");
        assert!(year.iter().skip(1).all(|t| both.contains(t)), "{year:?}");
        // version 3 indexes keep their digits
        assert_eq!(
            terms(version(3, c4), "in 1881"),
            ["_in_", "in_1", "n_18", "_188", "1881", "881_"]
        );
        let words = version(4, AnalyzerKind::Words);
        assert_eq!(
            terms(words, "Super Bowl 50, the 19th"),
            ["super", "bowl", "fifty", "the", "nineteenth"]
        );
        // text without digits is analysed exactly as by version 3
        assert_eq!(
            terms(grams(4), "who wrote it"),
            terms(version(3, c4), "who wrote it")
        );
    }
}
