//! Numbers spelled out as words, on both sides of a lexical query (analyzer version 4).
//!
//! Why: recognizers write numbers their own way, and corpora theirs. The dev recordings'
//! recognizer wrote 14 of the 17 numbers in its questions as words ("one thousand eight
//! hundred eighty one" for 1881, "two thousand fifteen" for 2015) and digits for the
//! other three; a clean corpus (Wikipedia) writes digits, and Spoken-SQuAD's own corpus,
//! itself a recognizer's transcript, writes words only ("nineteen ninety"). Digits and
//! words share no character n-gram, so until now a number could only match when both
//! sides happened to write it alike. Spelling every ASCII number out, in passages and in
//! queries alike, makes them meet whichever way either side wrote it.
//!
//! A number has two readings in speech: the cardinal ("one thousand nine hundred ninety")
//! and, for a four-digit year, the year ("nineteen ninety"; "nineteen oh five"; "nineteen
//! hundred"; 2000-2009 only as "two thousand five"). Both are emitted, so a year matches
//! a recognizer that says either. On the dev set (Python screen, `tools/eval/
//! lexical_variants.py` rules): the year reading alone fits Spoken-SQuAD's corpus best,
//! but it is that corpus's habit, not a recognizer's; both readings gained over digits on
//! typed questions and on recognizer finals alike (2026-12-06; docs/benchmarks.md, quality).
//!
//! The rules, for a word of the normaliser (letters, digits, inner apostrophes):
//! - all digits: its readings ("0" to 999,999,999,999); a leading zero ("007") or more
//!   than 12 digits (a code, not a quantity) digit by digit;
//! - digits + `st`/`nd`/`rd`/`th`: the ordinal ("19th" → "nineteenth");
//! - digits + `s` or `'s`: the plural of each reading ("1980s" → "one thousand nine
//!   hundred eighties nineteen eighties");
//! - digits mixed with letters otherwise: the runs apart ("mp3" → "mp three");
//! - no ASCII digit: the word unchanged;
//! - and a number in groups of three digits ("1,655,114", words `1 655 114` once the
//!   normaliser has dropped the commas) is read as one ([`spell_words`]).
//!
//! Everything appends to a caller's `String`, so analysing allocates nothing once warm.

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const SCALES: [(u64, &str); 3] = [
    (1_000_000_000, "billion"),
    (1_000_000, "million"),
    (1_000, "thousand"),
];
/// Longest digit run read as a quantity.
const MAX_DIGITS: usize = 12;

/// Appends the words of `text` (normalised words separated by spaces) to `out`, numbers
/// spelled out ([`spell_word`]). A number written in groups of three digits ("1,655,114",
/// which the normaliser leaves as `1 655 114`) is read as one number: a word of one to
/// three digits (no leading zero) and the words of exactly three digits after it, up to
/// [`MAX_DIGITS`] in all.
pub(crate) fn spell_words(text: &str, out: &mut String) {
    let is_group = |w: &&str| w.len() == 3 && w.bytes().all(|b| b.is_ascii_digit());
    let mut words = text.split(' ').filter(|w| !w.is_empty()).peekable();
    while let Some(w) = words.next() {
        let starts_group = (1..=3).contains(&w.len())
            && w.bytes().all(|b| b.is_ascii_digit())
            && (w.len() == 1 || !w.starts_with('0'));
        if !(starts_group && words.peek().is_some_and(is_group)) {
            spell_word(w, out);
            continue;
        }
        let mut digits = [0u8; MAX_DIGITS];
        digits[..w.len()].copy_from_slice(w.as_bytes());
        let mut len = w.len();
        while len + 3 <= MAX_DIGITS
            && let Some(g) = words.next_if(is_group)
        {
            digits[len..len + 3].copy_from_slice(g.as_bytes());
            len += 3;
        }
        // ASCII digits only, so always UTF-8.
        readings(std::str::from_utf8(&digits[..len]).unwrap_or_default(), out);
    }
}

/// Appends the words of `word` to `out`, each preceded by a space unless `out` is empty:
/// spelled out when it holds ASCII digits, as it is otherwise.
pub(crate) fn spell_word(word: &str, out: &mut String) {
    if !word.bytes().any(|b| b.is_ascii_digit()) {
        push(out, word);
        return;
    }
    let w = word.trim_end_matches('\'');
    let digits = w.bytes().take_while(u8::is_ascii_digit).count();
    let (number, rest) = w.split_at(digits);
    if digits == w.len() {
        return readings(number, out);
    }
    if digits > 0 && digits <= MAX_DIGITS {
        if matches!(rest, "st" | "nd" | "rd" | "th") {
            let start = out.len();
            cardinal(parse(number), out);
            return ordinal(out, start);
        }
        if matches!(rest, "s" | "'s") {
            return plural_readings(number, out);
        }
    }
    // Letters and digits mixed: each run on its own, digit runs spelled out.
    let mut run_start = 0;
    let bytes = w.as_bytes();
    for i in 1..=bytes.len() {
        if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[i - 1].is_ascii_digit() {
            let run = &w[run_start..i];
            if run.bytes().all(|b| b.is_ascii_digit()) {
                readings(run, out);
            } else {
                push(out, run);
            }
            run_start = i;
        }
    }
}

/// The readings of a run of ASCII digits.
fn readings(digits: &str, out: &mut String) {
    if (digits.len() > 1 && digits.starts_with('0')) || digits.len() > MAX_DIGITS {
        for d in digits.bytes() {
            push(out, ONES[usize::from(d - b'0')]);
        }
        return;
    }
    let n = parse(digits);
    cardinal(n, out);
    if let Some((hi, lo)) = year(digits.len(), n) {
        year_reading(hi, lo, out);
    }
}

/// As [`readings`], the last word of each reading in the plural ("1980s", "50s").
fn plural_readings(digits: &str, out: &mut String) {
    let n = parse(digits);
    cardinal(n, out);
    plural(out);
    if let Some((hi, lo)) = year(digits.len(), n) {
        year_reading(hi, lo, out);
        plural(out);
    }
}

/// A four-digit number read as a year differently from its cardinal: (century, rest).
fn year(digits: usize, n: u64) -> Option<(u64, u64)> {
    (digits == 4 && (1100..=2099).contains(&n) && !(2000..=2009).contains(&n))
        .then_some((n / 100, n % 100))
}

/// "nineteen ninety", "nineteen oh five", "nineteen hundred", "twenty fifteen".
fn year_reading(hi: u64, lo: u64, out: &mut String) {
    cardinal(hi, out);
    match lo {
        0 => push(out, "hundred"),
        1..=9 => {
            push(out, "oh");
            push(out, ONES[lo as usize]);
        }
        _ => cardinal(lo, out),
    }
}

/// Value of at most [`MAX_DIGITS`] ASCII digits.
fn parse(digits: &str) -> u64 {
    digits.bytes().fold(0, |n, d| n * 10 + u64::from(d - b'0'))
}

/// English words of `n` < 10^12, no "and": 118 → "one hundred eighteen".
fn cardinal(n: u64, out: &mut String) {
    match n {
        0..20 => push(out, ONES[n as usize]),
        20..100 => {
            push(out, TENS[(n / 10) as usize]);
            if !n.is_multiple_of(10) {
                push(out, ONES[(n % 10) as usize]);
            }
        }
        100..1000 => {
            push(out, ONES[(n / 100) as usize]);
            push(out, "hundred");
            if !n.is_multiple_of(100) {
                cardinal(n % 100, out);
            }
        }
        _ => {
            let (scale, name) = SCALES
                .into_iter()
                .find(|&(s, _)| n >= s)
                .unwrap_or((1_000, "thousand"));
            cardinal(n / scale, out);
            push(out, name);
            if !n.is_multiple_of(scale) {
                cardinal(n % scale, out);
            }
        }
    }
}

/// Turns the last word written since `start` into its ordinal ("five" → "fifth").
fn ordinal(out: &mut String, start: usize) {
    let at = last_word(out, start);
    let irregular = match &out[at..] {
        "one" => Some("first"),
        "two" => Some("second"),
        "three" => Some("third"),
        "five" => Some("fifth"),
        "eight" => Some("eighth"),
        "nine" => Some("ninth"),
        "twelve" => Some("twelfth"),
        _ => None,
    };
    if let Some(w) = irregular {
        out.truncate(at);
        out.push_str(w);
    } else if out.ends_with('y') {
        out.pop();
        out.push_str("ieth");
    } else {
        out.push_str("th");
    }
}

/// Turns the last word of `out` into its plural ("ninety" → "nineties").
fn plural(out: &mut String) {
    if out.ends_with('y') {
        out.pop();
        out.push_str("ies");
    } else if out.ends_with('x') || out.ends_with('s') {
        out.push_str("es");
    } else {
        out.push('s');
    }
}

/// Byte offset of the last word in `out[start..]`.
fn last_word(out: &str, start: usize) -> usize {
    out[start..].rfind(' ').map_or(start, |i| start + i + 1)
}

fn push(out: &mut String, word: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(word);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spell(word: &str) -> String {
        let mut out = String::new();
        spell_word(word, &mut out);
        out
    }

    #[test]
    fn numbers_read_as_a_recognizer_writes_them() {
        for (word, want) in [
            ("0", "zero"),
            ("7", "seven"),
            ("19", "nineteen"),
            ("50", "fifty"),
            ("76", "seventy six"),
            ("118", "one hundred eighteen"),
            ("2007", "two thousand seven"),
            (
                "1881",
                "one thousand eight hundred eighty one eighteen eighty one",
            ),
            ("1905", "one thousand nine hundred five nineteen oh five"),
            ("1900", "one thousand nine hundred nineteen hundred"),
            ("2015", "two thousand fifteen twenty fifteen"),
            ("1000", "one thousand"),
            ("3000", "three thousand"),
            (
                "1655114",
                "one million six hundred fifty five thousand one hundred fourteen",
            ),
            (
                "999999999999",
                "nine hundred ninety nine billion nine hundred ninety nine million nine hundred ninety nine thousand nine hundred ninety nine",
            ),
            ("007", "zero zero seven"),
            (
                "1234567890123",
                "one two three four five six seven eight nine zero one two three",
            ),
        ] {
            assert_eq!(spell(word), want, "{word}");
        }
    }

    #[test]
    fn ordinals_plurals_mixed_words_and_plain_words() {
        for (word, want) in [
            ("1st", "first"),
            ("2nd", "second"),
            ("19th", "nineteenth"),
            ("20th", "twentieth"),
            ("21st", "twenty first"),
            ("100th", "one hundredth"),
            ("50s", "fifties"),
            (
                "1980s",
                "one thousand nine hundred eighties nineteen eighties",
            ),
            ("1900s", "one thousand nine hundreds nineteen hundreds"),
            ("6's", "sixes"),
            ("mp3", "mp three"),
            ("b52s", "b fifty two s"),
            ("covid19", "covid nineteen"),
            (
                "1980s'",
                "one thousand nine hundred eighties nineteen eighties",
            ),
            ("tokyo", "tokyo"),
            ("٣", "٣"),
        ] {
            assert_eq!(spell(word), want, "{word}");
        }
        let mut out = String::from("in");
        spell_word("1966", &mut out);
        assert_eq!(
            out,
            "in one thousand nine hundred sixty six nineteen sixty six"
        );
    }

    #[test]
    fn numbers_in_groups_of_three_digits_are_one_number() {
        let spell = |text: &str| {
            let mut out = String::new();
            spell_words(text, &mut out);
            out
        };
        // "200,000 residents", "1,655,114": the normaliser's words
        assert_eq!(
            spell("over 200 000 residents"),
            "over two hundred thousand residents"
        );
        assert_eq!(
            spell("patent 1 655 114 granted"),
            "patent one million six hundred fifty five thousand one hundred fourteen granted"
        );
        // not a group: four digits first, a leading zero, a group of two
        assert_eq!(
            spell("1990 200"),
            "one thousand nine hundred ninety nineteen ninety two hundred"
        );
        assert_eq!(spell("05 000"), "zero five zero zero zero");
        assert_eq!(spell("12 34"), "twelve thirty four");
        // at most twelve digits: the rest is read on its own
        assert_eq!(
            spell("1 000 000 000 000 5"),
            "one billion zero zero zero five"
        );
        assert_eq!(spell(""), "");
    }
}
