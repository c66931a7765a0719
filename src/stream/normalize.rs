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
//! The words themselves are cut by the word rules ([`crate::words`]), which the lexical
//! analyzer shares, so a partial and a passage are tokenised alike.

use crate::words::{WordRules, lower_words};

/// Fillers removed by default: hesitations, and "you know" as a phrase.
pub const DEFAULT_FILLERS: &[&str] = &[
    "um", "umm", "uh", "uhm", "erm", "er", "ah", "hmm", "mm", "you know",
];

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

    #[test]
    fn the_normaliser_cuts_by_the_rules_it_is_given() {
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
