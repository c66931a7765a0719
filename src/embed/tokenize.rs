//! The WordPiece tokenizer of all-MiniLM-L6-v2, configured as sentence-transformers
//! uses it.
//!
//! `tokenizer.json` as shipped pads every input to 128 tokens and truncates at 128;
//! padding would make a 5-token query cost 128 tokens of compute, and sentence-transformers
//! truncates at 256. Both are overridden here.
//!
//! ASCII text without `[` (nearly every English partial a recognizer writes) takes a fast
//! path of our own, [`AsciiWordPiece`]: the `tokenizers` crate builds a normalized string
//! with per-character alignments, splits, and a `String` per token for every call (326
//! allocations for a 14-word query), and the daemon tokenizes every partial. For that
//! input the BERT pipeline is short to state exactly — drop control characters, `\t \n
//! \r` are spaces, lowercase, split on spaces, every punctuation character a word of its
//! own, greedy longest-match WordPiece with `##` continuations, a word over 100
//! characters or with an unmatched rest is `[UNK]`, `[CLS] … [SEP]`, at most 256 ids —
//! and it allocates nothing. Anything else (non-ASCII, a `[` that could start a special
//! token) goes through the crate. The fast path is switched on only when the file's
//! normalizer, pre-tokenizer and model are the ones this describes and it agrees with the
//! crate on probe texts at load; a test compares the two on thousands of random texts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tokenizers::models::ModelWrapper;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::{EmbedError, MAX_TOKENS};

pub(crate) struct WordPiece {
    inner: Tokenizer,
    fast: Option<AsciiWordPiece>,
    path: PathBuf,
}

impl WordPiece {
    pub(crate) fn load(path: &Path) -> Result<Self, EmbedError> {
        if !path.is_file() {
            return Err(EmbedError::MissingFile { path: path.into() });
        }
        let fail = |reason: String| EmbedError::Tokenizer {
            path: path.into(),
            reason,
        };
        let mut inner = Tokenizer::from_file(path).map_err(|e| fail(e.to_string()))?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| fail(e.to_string()))?;
        let mut wp = WordPiece {
            fast: AsciiWordPiece::new(&inner),
            inner,
            path: path.into(),
        };
        if !wp.fast_path_agrees() {
            log::info!("{path:?}: not the BERT pipeline primd's ASCII fast path reproduces");
            wp.fast = None;
        }
        Ok(wp)
    }

    /// The fast path and the crate give the same ids on probe texts (every rule of the
    /// fast path is exercised; a different post-processor or vocabulary shows here).
    fn fast_path_agrees(&self) -> bool {
        let Some(fast) = &self.fast else {
            return false;
        };
        let long = "word ".repeat(300);
        let probes = [
            "",
            "hello world",
            "What's the capital of France? (It's Paris!)",
            "  tabs\tand\nnew\rlines\x01\x7fcontrol ",
            "unaffable qzxqzxjjjw 1990 nineteen-ninety e.g. $5.00",
            &"x".repeat(101),
            &long,
        ];
        let mut a = Vec::new();
        probes
            .iter()
            .all(|t| fast.encode_into(t, &mut a) && self.crate_ids(t).is_ok_and(|b| a == b))
    }

    fn crate_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let mut ids = Vec::new();
        self.crate_encode_into(text, &mut ids)?;
        Ok(ids)
    }

    /// The crate's `encode_fast`: the same ids as `encode`, without the offsets, which
    /// nothing here reads.
    fn crate_encode_into(&self, text: &str, ids: &mut Vec<u32>) -> Result<(), EmbedError> {
        let enc = self
            .inner
            .encode_fast(text, true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        ids.clear();
        ids.extend_from_slice(enc.get_ids());
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Vocabulary size including added (special) tokens: every id it can emit is below it.
    pub(crate) fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text` with `[CLS]` and `[SEP]`, written into `ids` (cleared first).
    /// ASCII text: the fast path (no allocation once `ids` has grown); otherwise the
    /// crate.
    pub(crate) fn encode_into(&self, text: &str, ids: &mut Vec<u32>) -> Result<(), EmbedError> {
        match &self.fast {
            Some(fast) if fast.encode_into(text, ids) => Ok(()),
            _ => self.crate_encode_into(text, ids),
        }
    }
}

/// The BERT WordPiece pipeline for ASCII text (module doc), on the vocabulary of the
/// crate's tokenizer.
struct AsciiWordPiece {
    /// Word-initial pieces, and `##` continuations keyed without the `##`.
    first: HashMap<Box<str>, u32>,
    rest: HashMap<Box<str>, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
}

/// Longest word looked up; longer ones are `[UNK]` (`max_input_chars_per_word`).
const MAX_WORD: usize = 100;

impl AsciiWordPiece {
    /// `None` unless `tok` is configured as the pipeline this reproduces.
    fn new(tok: &Tokenizer) -> Option<Self> {
        let json = |v: Option<serde_json::Value>| v.unwrap_or_default();
        let norm = json(
            tok.get_normalizer()
                .and_then(|n| serde_json::to_value(n).ok()),
        );
        let pre = json(
            tok.get_pre_tokenizer()
                .and_then(|p| serde_json::to_value(p).ok()),
        );
        let bert_norm = norm["type"] == "BertNormalizer"
            && norm["clean_text"] == true
            && norm["lowercase"] == true
            && norm["strip_accents"] != false;
        let ModelWrapper::WordPiece(model) = tok.get_model() else {
            return None;
        };
        if !bert_norm
            || pre["type"] != "BertPreTokenizer"
            || model.continuing_subword_prefix != "##"
            || model.max_input_chars_per_word != MAX_WORD
        {
            return None;
        }
        let (mut first, mut rest) = (HashMap::new(), HashMap::new());
        for (piece, id) in tok.get_vocab(false) {
            match piece.strip_prefix("##") {
                Some(tail) if !tail.is_empty() => rest.insert(tail.into(), id),
                _ => first.insert(piece.into_boxed_str(), id),
            };
        }
        Some(AsciiWordPiece {
            unk: tok.token_to_id(&model.unk_token)?,
            cls: tok.token_to_id("[CLS]")?,
            sep: tok.token_to_id("[SEP]")?,
            first,
            rest,
        })
    }

    /// Writes the ids of `text` into `ids` and returns true, or returns false (and
    /// leaves `ids` to the caller) when `text` is not for this path.
    fn encode_into(&self, text: &str, ids: &mut Vec<u32>) -> bool {
        let bytes = text.as_bytes();
        if !bytes.is_ascii() || bytes.contains(&b'[') {
            return false;
        }
        ids.clear();
        ids.push(self.cls);
        let max = super::MAX_TOKENS - 2;
        let mut word = [0u8; MAX_WORD];
        let mut len = 0; // bytes of the current word (counted past MAX_WORD, stored up to it)
        let flush = |word: &[u8; MAX_WORD], len: &mut usize, ids: &mut Vec<u32>| {
            if *len > 0 {
                self.word_pieces(&word[..(*len).min(MAX_WORD)], *len > MAX_WORD, ids);
                *len = 0;
            }
        };
        for &b in bytes {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => flush(&word, &mut len, ids),
                // Control characters (and NUL) are dropped, joining what surrounds them.
                0..=0x1f | 0x7f => {}
                _ if b.is_ascii_punctuation() => {
                    flush(&word, &mut len, ids);
                    word[0] = b;
                    len = 1;
                    flush(&word, &mut len, ids);
                }
                _ => {
                    if len < MAX_WORD {
                        word[len] = b.to_ascii_lowercase();
                    }
                    len += 1;
                }
            }
            if ids.len() > max {
                break;
            }
        }
        flush(&word, &mut len, ids);
        ids.truncate(max + 1);
        ids.push(self.sep);
        true
    }

    /// Greedy longest-match WordPiece of one lowercased ASCII word, whole (the crate
    /// truncates after tokenizing: a word cut by the 256-token limit keeps the pieces it
    /// would have had, or `[UNK]`).
    fn word_pieces(&self, word: &[u8], too_long: bool, ids: &mut Vec<u32>) {
        let at = ids.len();
        // ASCII bytes: the word is a str once, and every byte offset a char boundary.
        if let (false, Ok(word)) = (too_long, std::str::from_utf8(word)) {
            let mut start = 0;
            while start < word.len() {
                let map = if start == 0 { &self.first } else { &self.rest };
                let found = (start + 1..=word.len())
                    .rev()
                    .find_map(|end| map.get(&word[start..end]).map(|&id| (id, end)));
                let Some((id, end)) = found else {
                    ids.truncate(at);
                    break;
                };
                ids.push(id);
                start = end;
            }
            if start == word.len() {
                return;
            }
        }
        ids.push(self.unk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// The real tokenizer (a missing one fails the test: run models/fetch first).
    fn load() -> Option<WordPiece> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tokenizer.json");
        assert!(
            path.is_file(),
            "{path:?} is missing: run models/fetch first"
        );
        Some(WordPiece::load(&path).unwrap())
    }

    /// A random partial transcript: real words, made-up ones (some over 100 letters),
    /// numbers, punctuation, capitals, runs of spaces, tabs, newlines and control bytes.
    fn text(rng: &mut Rng) -> String {
        const WORDS: &[&str] = &[
            "the",
            "capital",
            "of",
            "France",
            "unaffable",
            "Moonshine",
            "1990",
            "nineteen",
            "ninety",
            "e.g.",
            "don't",
            "1990s",
            "what's",
            "U.S.",
            "jjjwqz",
            "photosynthesis",
            "Nikola",
            "Tesla",
            "$5.00",
            "well-known",
            "x86_64",
            "AC/DC",
            "Beyoncé",
        ];
        // One text in four may hold a non-ASCII word (and so leave the fast path).
        let words = if rng.index(4) == 0 {
            WORDS
        } else {
            &WORDS[..WORDS.len() - 1]
        };
        let n = match rng.index(20) {
            0 => 200 + rng.index(200), // past the 256-token limit
            _ => rng.index(25),
        };
        let mut t = String::new();
        for _ in 0..n {
            match rng.index(10) {
                0..=4 => t.push_str(words[rng.index(words.len())]),
                5 => {
                    let len = if rng.index(30) == 0 {
                        95 + rng.index(15)
                    } else {
                        1 + rng.index(12)
                    };
                    t.extend((0..len).map(|_| (b'a' + rng.index(26) as u8) as char));
                }
                6 => t.push_str(&rng.next().to_string()),
                7 => t.push(b"!\"#$%&'()*+,-./:;<=>?@\\]^_`{|}~"[rng.index(31)] as char),
                8 => t.push([' ', '\t', '\n', '\r', '\x01', '\x7f', '\0'][rng.index(7)]),
                _ => t.push_str(&words[rng.index(words.len())].to_uppercase()),
            }
            if rng.index(3) > 0 {
                t.push(' ');
            }
        }
        t
    }

    #[test]
    fn the_ascii_fast_path_gives_the_crates_ids_on_random_texts() {
        let Some(wp) = load() else { return };
        let fast = wp
            .fast
            .as_ref()
            .expect("MiniLM's tokenizer.json takes the fast path");
        let mut rng = Rng::new(17);
        let (mut ids, mut fast_texts) = (Vec::new(), 0);
        for _ in 0..5000 {
            let t = text(&mut rng);
            let want = wp.crate_ids(&t).unwrap();
            if fast.encode_into(&t, &mut ids) {
                fast_texts += 1;
                assert_eq!(ids, want, "{t:?}");
            } else {
                assert!(
                    !t.is_ascii(),
                    "an ASCII text without '[' left the fast path: {t:?}"
                );
            }
            wp.encode_into(&t, &mut ids).unwrap();
            assert_eq!(ids, want, "{t:?}");
        }
        assert!(fast_texts > 3000, "{fast_texts} of 5000 texts were ASCII");
        // The 256-token limit falling inside a word of several pieces, at every offset.
        for k in 248..256 {
            let t = format!("{} unaffable photosynthesis jjjwqz", "word ".repeat(k));
            assert!(fast.encode_into(&t, &mut ids));
            assert_eq!(ids, wp.crate_ids(&t).unwrap(), "{k} words first");
        }
    }

    #[test]
    fn non_ascii_text_and_special_token_names_go_through_the_crate() {
        let Some(wp) = load() else { return };
        let fast = wp.fast.as_ref().unwrap();
        let mut ids = Vec::new();
        for t in ["Beyoncé sang", "[MASK] of France", "naïve 東京", "it’s"] {
            assert!(!fast.encode_into(t, &mut ids), "{t:?}");
            wp.encode_into(t, &mut ids).unwrap();
            assert_eq!(ids, wp.crate_ids(t).unwrap(), "{t:?}");
        }
        // "[MASK]" is one special token to the crate, never "[", "mask", "]".
        wp.encode_into("[MASK]", &mut ids).unwrap();
        assert_eq!(ids.len(), 3);
    }
}
