//! What a partial transcript is reduced to before it is embedded or compared.
//!
//! Recognizers differ in casing and punctuation, add punctuation only in finals, and
//! users say "um". Normalising partials and finals the same way means a final that only
//! differs from the last partial by "Um," or a question mark is recognised as the same
//! text, so its embedding can be reused instead of recomputed after end of speech.
//!
//! Normalised form: lower case, letters/digits/apostrophes kept, every other character a
//! separator, single spaces, filler words and phrases removed. Words of the normalised
//! form are the "tokens" that `trigger_interval` and `min_tokens` count: they are what
//! the recognizer emits and what the user perceives, and counting them needs no model.
//!
//! Word rules, by version ([`WordRules`]; the lexical analyzer's version, recorded in
//! each index, since a query must be cut as its corpus was): version 2 also folds Latin
//! diacritics ("Frédéric Chopin" and "Łódź" as "frederic chopin" and "lodz") and reads
//! typographic apostrophes as `'` ("don’t" as "don't"). An English recognizer writes
//! names without their accents, and a clean corpus (Wikipedia) keeps them: unfolded,
//! every character n-gram that holds the accented letter misses. The dense tokenizer
//! strips accents too (BERT uncased), so both retrievers see the same words.

use unicode_normalization::char::{decompose_canonical, is_combining_mark};

/// Fillers removed by default: hesitations, and "you know" as a phrase.
pub const DEFAULT_FILLERS: &[&str] = &[
    "um", "umm", "uh", "uhm", "erm", "er", "ah", "hmm", "mm", "you know",
];

/// How text is cut into lower-cased words: the lexical analyzer's versions of the rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WordRules {
    /// Analyzer version 1: lower case; letters, digits and apostrophes (ASCII `'`)
    /// inside a word belong to it, every other character separates.
    V1,
    /// Version 2 (the default): as V1, and Latin letters with diacritics folded to their
    /// base letters (`é` → `e`, `ß` → `ss`, `ł` → `l`), combining marks dropped inside a
    /// word, `’` `‘` `ʼ` read as `'`. Other scripts are left as they are.
    #[default]
    V2,
}

/// Normaliser with its filler list and a scratch buffer (so it allocates nothing once
/// warmed up to the longest text it has seen).
#[derive(Clone, Debug)]
pub struct Normalizer {
    /// Each filler as its normalised words.
    fillers: Vec<Vec<String>>,
    rules: WordRules,
    scratch: String,
}

impl Default for Normalizer {
    fn default() -> Self {
        Normalizer::new(DEFAULT_FILLERS.iter().copied())
    }
}

impl Normalizer {
    pub fn new<'a>(fillers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut fillers: Vec<Vec<String>> = fillers
            .into_iter()
            .map(|f| {
                let mut s = String::new();
                lower_words(f, WordRules::default(), &mut s);
                s.split(' ')
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .filter(|f: &Vec<String>| !f.is_empty())
            .collect();
        // Longest phrases first, so "you know" wins over a filler "you".
        fillers.sort_by_key(|f| std::cmp::Reverse(f.len()));
        Normalizer {
            fillers,
            rules: WordRules::default(),
            scratch: String::new(),
        }
    }

    /// Cuts words by `rules` from now on: those of the index a query goes to (its
    /// lexical section's analyzer version), so a query's words are its corpus's.
    pub fn set_rules(&mut self, rules: WordRules) {
        self.rules = rules;
    }

    /// Writes the normalised form of `text` into `out` (cleared first).
    pub fn normalize_into(&mut self, text: &str, out: &mut String) {
        out.clear();
        self.scratch.clear();
        lower_words(text, self.rules, &mut self.scratch);
        let mut rest = self.scratch.as_str();
        while !rest.is_empty() {
            if let Some(after) = self.fillers.iter().find_map(|f| strip_phrase(rest, f)) {
                rest = after;
                continue;
            }
            let (word, after) = rest.split_once(' ').unwrap_or((rest, ""));
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
            rest = after;
        }
    }
}

/// If `text` starts with the words of `phrase`, the text after them.
fn strip_phrase<'t>(text: &'t str, phrase: &[String]) -> Option<&'t str> {
    let mut rest = text;
    for w in phrase {
        let (word, after) = rest.split_once(' ').unwrap_or((rest, ""));
        if word != w {
            return None;
        }
        rest = after;
    }
    Some(rest)
}

/// Lower-cased words of `text` by `rules`, single-space separated, appended to `out`.
/// Also the word split of the lexical analyzer (`lexical::analyze`), so a partial and a
/// passage are tokenised alike. ASCII text takes the same path under every version.
pub(crate) fn lower_words(text: &str, rules: WordRules, out: &mut String) {
    let fold = rules == WordRules::V2;
    let mut in_word = false;
    for c in text.chars() {
        let c = if fold && matches!(c, '\u{2019}' | '\u{2018}' | '\u{02BC}') {
            '\''
        } else {
            c
        };
        if c.is_alphanumeric() || (c == '\'' && in_word) {
            if !in_word && !out.is_empty() {
                out.push(' ');
            }
            in_word = true;
            if fold && !c.is_ascii() {
                fold_latin(c, out);
            } else {
                out.extend(c.to_lowercase());
            }
        } else if fold && in_word && is_combining_mark(c) {
            // A combining accent inside a word ("e\u{301}") does not end it: after a Latin
            // letter it is folded away, after any other it stays part of the word.
            if !out.ends_with(|p: char| p.is_ascii() || is_latin(p)) {
                out.push(c);
            }
        } else {
            in_word = false;
        }
    }
}

/// The Latin blocks beyond ASCII whose letters [`fold_latin`] folds: Latin-1 Supplement,
/// Latin Extended-A and -B, Latin Extended Additional.
fn is_latin(c: char) -> bool {
    matches!(c, '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}')
}

/// Appends `c` lower-cased, a Latin letter with its diacritics folded away: the base
/// letter of its canonical decomposition, or the usual spelling of a letter that has none
/// (ß, æ, œ, þ, ø, ł, đ, ð, ı). Letters of other scripts are only lower-cased.
fn fold_latin(c: char, out: &mut String) {
    match c {
        'ß' | 'ẞ' => out.push_str("ss"),
        'æ' | 'Æ' => out.push_str("ae"),
        'œ' | 'Œ' => out.push_str("oe"),
        'þ' | 'Þ' => out.push_str("th"),
        'ø' | 'Ø' => out.push('o'),
        'ł' | 'Ł' => out.push('l'),
        'đ' | 'Đ' | 'ð' | 'Ð' => out.push('d'),
        'ı' => out.push('i'),
        c if is_latin(c) => decompose_canonical(c, |d| {
            if !is_combining_mark(d) {
                out.extend(d.to_lowercase());
            }
        }),
        c => out.extend(c.to_lowercase()),
    }
}

/// Number of words in a normalised text.
pub fn word_count(norm: &str) -> usize {
    norm.split(' ').filter(|w| !w.is_empty()).count()
}

/// Number of leading words two normalised texts share.
pub fn common_prefix_words(a: &str, b: &str) -> usize {
    a.split(' ')
        .zip(b.split(' '))
        .take_while(|(x, y)| !x.is_empty() && x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(text: &str) -> String {
        let mut out = String::new();
        Normalizer::default().normalize_into(text, &mut out);
        out
    }

    #[test]
    fn case_punctuation_and_fillers_go() {
        assert_eq!(
            norm("Um, so, uh, who wrote the Declaration?"),
            "so who wrote the declaration"
        );
        assert_eq!(
            norm("what's  the\tweather, you know, in BERLIN!"),
            "what's the weather in berlin"
        );
        assert_eq!(norm("  ...  "), "");
        assert_eq!(norm("um uh hmm"), "");
        assert_eq!(norm("Café crème 20 minutes"), "cafe creme 20 minutes");
        assert_eq!(
            norm("umbrella under the erm bridge"),
            "umbrella under the bridge",
            "whole words only"
        );
    }

    fn words(rules: WordRules, text: &str) -> String {
        let mut out = String::new();
        lower_words(text, rules, &mut out);
        out
    }

    #[test]
    fn version_2_folds_latin_diacritics_and_typographic_apostrophes() {
        let v2 = |t| words(WordRules::V2, t);
        assert_eq!(
            v2("Frédéric Chopin’s ŁÓDŹ, Æsir, Straße and İstanbul"),
            "frederic chopin's lodz aesir strasse and istanbul"
        );
        // decomposed accents (a letter, then a combining mark) fold the same way
        assert_eq!(v2("re\u{301}sume\u{301} Cafe\u{301}"), "resume cafe");
        assert_eq!(v2("Ngô Đình Diệm"), "ngo dinh diem");
        // other scripts keep their letters and marks, and words stay whole
        assert_eq!(v2("Москва Ёлка 模型 हिन्दी"), "москва ёлка 模型 हिन्दी");
        // ASCII is the same under both versions
        let ascii = "What's the weather, you know, in BERLIN? 20 km/h";
        assert_eq!(v2(ascii), words(WordRules::V1, ascii));
    }

    #[test]
    fn version_1_keeps_what_older_indexes_were_built_with() {
        let v1 = |t| words(WordRules::V1, t);
        assert_eq!(v1("Frédéric Chopin’s"), "frédéric chopin s");
        assert_eq!(v1("re\u{301}sume\u{301}"), "re sume");
        // the normaliser cuts by the rules it is given
        let mut n = Normalizer::default();
        n.set_rules(WordRules::V1);
        let mut out = String::new();
        n.normalize_into("Um, Crème brûlée?", &mut out);
        assert_eq!(out, "crème brûlée");
    }

    #[test]
    fn custom_fillers_and_word_counts() {
        let mut n = Normalizer::new(["like", "I mean"]);
        let mut out = String::new();
        n.normalize_into("I mean, like, set a timer um", &mut out);
        assert_eq!(out, "set a timer um");
        assert_eq!(word_count(&out), 4);
        assert_eq!(word_count(""), 0);
        assert_eq!(common_prefix_words("set a timer for", "set a time"), 2);
        assert_eq!(
            common_prefix_words("santa timer 41", "set a timer for 20"),
            0
        );
        assert_eq!(common_prefix_words("", "set"), 0);
    }
}
