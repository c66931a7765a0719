//! Passage text → sentences, as byte ranges of the text.
//!
//! The answer to a question usually sits in one sentence, so sentences are the unit the
//! context is packed from. Two kinds of text arrive: written prose ("Dr. Smith moved to
//! the U.S. in 1990. He …") and recognizer transcripts, lower case, with few or no stops
//! ("super bowl fifty was an american football game … season. the american …"). The
//! rules, in order:
//! 1. a sentence ends after `.` `!` `?` (or `。` `！` `？`, which need no space after them)
//!    followed by white space, unless the word before a `.` is one letter ("J.", the
//!    recognizer's "p.") or a common abbreviation ("Dr.", "e.g."); a line break ends one too;
//! 2. a piece longer than [`MAX_WORDS`] words (a transcript without stops, a list) is cut
//!    in two where a clause ends (`;` `:` `,` then a conjunction such as "and", "which"),
//!    nearest the middle, else at the middle word, until every piece fits;
//! 3. a piece shorter than [`MIN_WORDS`] words joins the one before it (or after it, at
//!    the start), so no "sentence" is a stray "Yes." that answers nothing on its own.
//!
//! Ranges never start or end in white space and always fall on UTF-8 boundaries; the
//! text between two ranges is white space only. This runs at index build time only.

use std::ops::Range;

/// A sentence with more words is cut at a clause boundary (or its middle).
pub const MAX_WORDS: usize = 40;
/// A sentence with fewer words joins its neighbour.
pub const MIN_WORDS: usize = 4;

/// Words before a `.` that do not end a sentence (lower case, without the dot).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "st", "vs", "etc", "e.g", "i.e", "jr", "sr", "no", "inc",
    "ltd", "co", "corp", "mt", "ft", "gen", "col", "lt", "sgt", "rev", "fig", "approx", "u.s",
    "u.k", "cf", "al",
];

/// Words a clause often starts with: a long piece may be cut before one.
const CONJUNCTIONS: &[&str] = &[
    "and", "but", "which", "while", "because", "although", "where", "when", "who", "whose",
    "whereas", "though", "so", "or", "since", "after", "before", "until",
];

/// The sentences of `text`, in order, as byte ranges (empty for text without words).
pub fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut raw = Vec::new();
    stops(text, &mut raw);
    let mut cut = Vec::with_capacity(raw.len());
    for r in raw {
        split_long(text, r, &mut cut);
    }
    merge_short(text, cut)
}

/// Rule 1: pieces ended by stops and line breaks, trimmed.
fn stops(text: &str, out: &mut Vec<Range<usize>>) {
    let mut start = 0;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let next = iter.peek().map(|&(_, n)| n);
        let end = i + c.len_utf8();
        let ends = match c {
            '\n' | '\r' => true,
            '。' | '！' | '？' => true,
            '!' | '?' => next.is_none_or(char::is_whitespace),
            '.' => next.is_none_or(char::is_whitespace) && !abbreviation(&text[start..i]),
            _ => false,
        };
        if ends {
            push_trimmed(text, start..end, out);
            start = end;
        }
    }
    push_trimmed(text, start..text.len(), out);
}

/// Whether the last word of `before` (the text up to a `.`) is an initial or an
/// abbreviation, so the `.` does not end a sentence.
fn abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"')
        .next()
        .unwrap_or("");
    if word.chars().count() == 1 && word.chars().all(char::is_alphabetic) {
        return true;
    }
    let lower = word.to_lowercase();
    ABBREVIATIONS.contains(&lower.as_str())
}

fn push_trimmed(text: &str, r: Range<usize>, out: &mut Vec<Range<usize>>) {
    let piece = &text[r.clone()];
    let lead = piece.len() - piece.trim_start().len();
    let trail = piece.len() - piece.trim_end().len();
    if lead + trail < piece.len() {
        out.push(r.start + lead..r.end - trail);
    }
}

/// Byte ranges of the words of `text[r]` (split on white space).
fn words(text: &str, r: &Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text[r.clone()].char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push(r.start + s..r.start + i);
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(r.start + s..r.end);
    }
    out
}

/// Rule 2: cuts `r` until every piece has at most [`MAX_WORDS`] words.
fn split_long(text: &str, r: Range<usize>, out: &mut Vec<Range<usize>>) {
    let w = words(text, &r);
    if w.len() <= MAX_WORDS {
        out.push(r);
        return;
    }
    let n = w.len();
    let lo = MIN_WORDS * 3; // keep both halves a real clause
    let mid = n / 2;
    // A cut before word k; the best is a clause end nearest the middle.
    let rank = |k: usize| -> Option<usize> {
        let prev = &text[w[k - 1].clone()];
        let word = text[w[k].clone()].to_lowercase();
        if prev.ends_with([';', ':', ',', '—']) {
            Some(0)
        } else if CONJUNCTIONS.contains(&word.as_str()) {
            Some(1)
        } else {
            None
        }
    };
    let cut = (lo..=n.saturating_sub(lo))
        .filter_map(|k| rank(k).map(|q| (q, k.abs_diff(mid), k)))
        .min()
        .map_or(mid, |(_, _, k)| k);
    split_long(text, r.start..w[cut - 1].end, out);
    split_long(text, w[cut].start..r.end, out);
}

/// Rule 3: a piece of fewer than [`MIN_WORDS`] words joins the one before (the first one
/// joins the one after).
fn merge_short(text: &str, pieces: Vec<Range<usize>>) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::with_capacity(pieces.len());
    let count = |r: &Range<usize>| text[r.clone()].split_whitespace().count();
    let mut carry: Option<usize> = None; // start of a short first piece
    for r in pieces {
        let short = count(&r) < MIN_WORDS;
        match out.last_mut() {
            Some(last) if short => last.end = r.end,
            Some(_) => out.push(r),
            None if short && carry.is_none() => carry = Some(r.start),
            None => out.push(carry.take().unwrap_or(r.start)..r.end),
        }
    }
    if let Some(s) = carry {
        // The whole text was one short piece (or several that never reached MIN_WORDS).
        let end = text.trim_end().len();
        out.push(s..end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &str) -> Vec<&str> {
        sentences(t).into_iter().map(|r| &t[r]).collect()
    }

    #[test]
    fn prose_with_abbreviations_and_initials() {
        let t = "Dr. Smith moved to the U.S. in 1990 with J. R. Jones. He founded a firm there, \
                 e.g. a bakery! Did it work? Yes, it did for years.";
        assert_eq!(
            texts(t),
            [
                "Dr. Smith moved to the U.S. in 1990 with J. R. Jones.",
                "He founded a firm there, e.g. a bakery! Did it work?",
                "Yes, it did for years."
            ]
        );
    }

    #[test]
    fn transcript_with_lower_case_stops() {
        let t = "super bowl fifty was an american football game to determine the champion \
                 of the national football league nfl for the twenty fifteen season. the american \
                 football conference champion denver broncos defeated the carolina panthers.";
        let s = texts(t);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[1].starts_with("the american football conference"));
    }

    #[test]
    fn transcript_without_stops_is_cut_into_windows() {
        let words: Vec<String> = (0..130).map(|i| format!("w{i}")).collect();
        let mut t = words.join(" ");
        t.insert(t.find(" w60").unwrap(), ',');
        let s = sentences(&t);
        assert!(s.len() >= 4, "{s:?}");
        for r in &s {
            let n = t[r.clone()].split_whitespace().count();
            assert!((MIN_WORDS..=MAX_WORDS).contains(&n), "{n} words");
        }
        // the comma is a clause end: one cut falls right after it
        assert!(s.iter().any(|r| t[..r.end].ends_with("w59,")), "{s:?}");
        // the pieces cover every word, in order, separated by white space only
        for w in s.windows(2) {
            assert!(t[w[0].end..w[1].start].trim().is_empty());
        }
        assert_eq!(s[0].start, 0);
        assert_eq!(s.last().unwrap().end, t.len());
    }

    #[test]
    fn short_pieces_join_a_neighbour() {
        assert_eq!(
            texts("Yes. The answer is in this sentence. Ok."),
            ["Yes. The answer is in this sentence. Ok."]
        );
        assert_eq!(texts("Hi."), ["Hi."]);
        assert!(texts("").is_empty());
        assert!(texts(" \n\t ").is_empty());
    }

    #[test]
    fn non_latin_text_never_panics() {
        let t = "東京は日本の首都です。人口は約千四百万人です。大阪は西にあります。とても大きな都市です。";
        let s = sentences(t);
        assert!(!s.is_empty());
        for r in &s {
            assert!(t.is_char_boundary(r.start) && t.is_char_boundary(r.end));
        }
        let long = "слово ".repeat(5000);
        let s = sentences(&long);
        assert!(s.len() >= 5000 / MAX_WORDS);
        assert!(
            s.iter()
                .all(|r| long[r.clone()].split_whitespace().count() <= MAX_WORDS)
        );
    }
}
