//! The word rules: how text is cut into lower-cased words, by version.
//!
//! The ground floor of text handling, shared by the streaming normaliser
//! (`stream::normalize`: a partial's words, what the trigger counts) and the lexical
//! analyzer (`lexical::analyze`: a query's and a passage's words before n-grams), so a
//! partial and a passage are tokenised alike. It uses nothing else of primd.
//!
//! Versions ([`WordRules`]; the lexical analyzer's version, recorded in each index, since
//! a query must be cut as its corpus was): version 2 also folds Latin diacritics
//! ("Frédéric Chopin" and "Łódź" as "frederic chopin" and "lodz") and reads typographic
//! apostrophes as `'` ("don’t" as "don't"). An English recognizer writes names without
//! their accents, and a clean corpus (Wikipedia) keeps them: unfolded, every character
//! n-gram that holds the accented letter misses. The dense tokenizer strips accents too
//! (BERT uncased), so both retrievers see the same words.

use unicode_normalization::char::{decompose_canonical, is_combining_mark};

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

/// Lower-cased words of `text` by `rules`, single-space separated, appended to `out`.
/// The word split of the streaming normaliser and of the lexical analyzer alike. ASCII
/// text takes the same path under every version.
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
