//! Reading a corpus and cutting it into passages.
//!
//! Nothing is dropped silently: a malformed JSONL line is an error naming its line
//! number, a duplicate id names both places, and blank lines (the only thing skipped)
//! are counted in a log line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use primd::index::PassageRecord;
use serde::Deserialize;

/// Window length in words for documents longer than it. MiniLM truncates at 256 word
/// pieces (~190 words of English prose), so 180 words use nearly the whole window; text
/// that takes more pieces a word gets shorter windows ([`chunk`]). Measured on
/// Spoken-SQuAD (README, "Search quality"): exact hit@10 0.834 with 120-word windows,
/// 0.845 with 180, 0.849 with no splitting (which loses the tails of long documents).
pub const DEFAULT_CHUNK_WORDS: u32 = 180;
/// Words shared by consecutive windows, so an answer straddling a cut is whole in one.
pub const DEFAULT_OVERLAP: u32 = 20;

#[derive(Debug)]
pub struct Document {
    pub id: String,
    pub title: String,
    pub text: String,
    /// Where it came from, for error messages: "line 12" or the file's path.
    pub origin: String,
}

/// One corpus line: `{"id", "title", "text"}`, or a BEIR corpus line as published
/// (`{"_id", "title", "text", "metadata"}`; the metadata is not indexed). Any other field
/// is refused, not dropped: text in a "body" field would otherwise never be searched.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDoc {
    #[serde(alias = "_id")]
    id: serde_json::Value,
    #[serde(default)]
    title: Option<String>,
    text: String,
    #[serde(default, rename = "metadata")]
    _metadata: serde::de::IgnoredAny,
}

/// Reads a JSONL file or a folder of `.txt` / `.md` files.
pub fn read(path: &Path) -> anyhow::Result<Vec<Document>> {
    let docs = if path.is_dir() {
        read_folder(path)?
    } else {
        let bytes = std::fs::read(path).with_context(|| format!("reading {path:?}"))?;
        read_jsonl(path, &bytes)?
    };
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for d in &docs {
        if let Some(first) = seen.insert(&d.id, &d.origin) {
            bail!(
                "{path:?}: duplicate id {:?} ({first} and {}): ids must be unique",
                d.id,
                d.origin
            );
        }
    }
    Ok(docs)
}

fn read_jsonl(path: &Path, bytes: &[u8]) -> anyhow::Result<Vec<Document>> {
    let mut docs = Vec::new();
    let mut blank = 0;
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let lineno = n + 1;
        let line = std::str::from_utf8(line)
            .with_context(|| format!("{path:?} line {lineno}: not valid UTF-8"))?;
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        let doc: JsonDoc = serde_json::from_str(line).with_context(|| {
            format!("{path:?} line {lineno}: expected {{\"id\", \"title\", \"text\"}}")
        })?;
        let id = match doc.id {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            other => {
                bail!("{path:?} line {lineno}: \"id\" must be a string or number, not {other}")
            }
        };
        if id.is_empty() {
            bail!("{path:?} line {lineno}: empty \"id\"");
        }
        docs.push(Document {
            id,
            title: doc.title.unwrap_or_default(),
            text: doc.text,
            origin: format!("line {lineno}"),
        });
    }
    if blank > 1 {
        // One blank "line" is the final newline; more are worth a word.
        log::info!("{path:?}: skipped {} blank lines", blank - 1);
    }
    Ok(docs)
}

fn read_folder(root: &Path) -> anyhow::Result<Vec<Document>> {
    let mut files = Vec::new();
    collect(root, &mut files)?;
    files.sort(); // deterministic order → byte-identical index
    let mut docs = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {file:?}"))?;
        let text =
            String::from_utf8(bytes).with_context(|| format!("{file:?}: not valid UTF-8"))?;
        let rel = file.strip_prefix(root).unwrap_or(&file);
        let id = rel.to_string_lossy().into_owned();
        let is_md = file.extension().is_some_and(|e| e == "md");
        let heading = is_md
            .then(|| {
                text.lines()
                    .find_map(|l| l.strip_prefix("# "))
                    .map(|t| t.trim().to_string())
            })
            .flatten();
        let title = heading.unwrap_or_else(|| {
            file.file_stem()
                .map(|s| s.to_string_lossy().replace(['_', '-'], " "))
                .unwrap_or_default()
        });
        docs.push(Document {
            id,
            title,
            text,
            origin: format!("{file:?}"),
        });
    }
    Ok(docs)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading folder {dir:?}"))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "txt" || e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// Cuts documents into passages of at most `chunk_words` words, consecutive windows
/// sharing `overlap` words (0 = one passage per document). A chunk's text is the
/// original text from its first word to its last, whitespace and punctuation kept.
///
/// Each window is also cut short where `fits(title, text)` says the encoder would no
/// longer read the passage whole (MiniLM reads 256 word pieces): 180 words of English
/// prose are ~230 word pieces, but 180 words of technical or scientific prose are
/// 300-400 and of a script the vocabulary spells letter by letter far more, and the
/// encoder never sees a passage's tail (up to a quarter of each window in the source
/// papers of `../shared/seeds`), so the dense retriever could not find what only the
/// tail says. A window that fits is cut exactly as by words alone (Spoken-SQuAD's index
/// is unchanged). Where not even one word fits (a title that long, or a run of text
/// without spaces, such as Chinese, that the tokenizer cuts into hundreds of pieces)
/// the window is read truncated anyway and keeps its word length. A window cut short
/// shares `overlap` words in proportion to its length. `fits` must be monotone: a
/// window that does not fit does not fit with more words.
///
/// Returns the passages and how many of them the encoder will not read whole (documents
/// kept whole by `chunk_words` 0, and the windows above).
pub fn chunk(
    docs: &[Document],
    chunk_words: u32,
    overlap: u32,
    mut fits: impl FnMut(&str, &str) -> bool,
) -> (Vec<PassageRecord>, usize) {
    let mut out = Vec::new();
    let mut truncated = 0;
    for d in docs {
        let spans = word_spans(&d.text);
        let n = spans.len() as u32;
        let mut whole =
            |start: u32, end: u32| fits(&d.title, window_text(&d.text, &spans, start, end));
        // (start, end, whether the encoder reads it whole)
        let mut windows: Vec<(u32, u32, bool)> = Vec::new();
        if chunk_words == 0 || n == 0 {
            windows.push((0, n, n == 0 || whole(0, n)));
        } else {
            let mut start = 0;
            loop {
                let words_end = (start + chunk_words).min(n);
                let (end, read_whole) = if whole(start, words_end) {
                    (words_end, true)
                } else if !whole(start, start + 1) {
                    (words_end, false)
                } else {
                    // The most words that fit: start + 1 does, words_end does not.
                    let (mut lo, mut hi) = (start + 1, words_end);
                    while hi - lo > 1 {
                        let mid = lo + (hi - lo) / 2;
                        if whole(start, mid) {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    (lo, true)
                };
                windows.push((start, end, read_whole));
                if end == n {
                    break;
                }
                // A window cut short by `fits` shares proportionally fewer words, so the
                // windows still advance by most of their length.
                let shared = u64::from(overlap) * u64::from(end - start) / u64::from(chunk_words);
                start = (end - shared as u32).max(start + 1);
            }
        }
        for (k, (start, end, read_whole)) in windows.into_iter().enumerate() {
            truncated += usize::from(!read_whole);
            out.push(PassageRecord {
                id: d.id.clone(),
                title: d.title.clone(),
                text: window_text(&d.text, &spans, start, end).to_string(),
                chunk: k as u32,
                word_start: start,
                word_end: end,
            });
        }
    }
    (out, truncated)
}

/// The original text of words `start..end` (empty for no words).
fn window_text<'t>(text: &'t str, spans: &[(usize, usize)], start: u32, end: u32) -> &'t str {
    if start >= end {
        return "";
    }
    &text[spans[start as usize].0..spans[end as usize - 1].1]
}

/// Byte ranges of whitespace-separated words.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document {
        Document {
            id: "d".into(),
            title: "T".into(),
            text: text.into(),
            origin: "test".into(),
        }
    }

    #[test]
    fn short_documents_are_one_passage_and_long_ones_overlapping_windows() {
        let (short, _) = chunk(&[doc("one two three")], 5, 1, any);
        assert_eq!(short.len(), 1);
        assert_eq!(
            (
                short[0].text.as_str(),
                short[0].word_start,
                short[0].word_end
            ),
            ("one two three", 0, 3)
        );

        let text = (0..12)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join("  ");
        let (p, cut) = chunk(&[doc(&text)], 5, 2, any);
        assert_eq!(cut, 0);
        let ranges: Vec<_> = p
            .iter()
            .map(|p| (p.chunk, p.word_start, p.word_end))
            .collect();
        assert_eq!(ranges, [(0, 0, 5), (1, 3, 8), (2, 6, 11), (3, 9, 12)]);
        assert_eq!(p[1].text, "w3  w4  w5  w6  w7", "original spacing kept");
        assert!(p.iter().all(|p| p.id == "d" && p.title == "T"));
    }

    /// An encoder that reads anything whole.
    fn any(_: &str, _: &str) -> bool {
        true
    }

    /// An encoder that reads at most `limit` "word pieces", a piece per 3 bytes of each
    /// word of title and text (rounded up): long words cost more, as in WordPiece.
    fn pieces(limit: usize) -> impl FnMut(&str, &str) -> bool {
        move |title, text| {
            let n: usize = title
                .split_whitespace()
                .chain(text.split_whitespace())
                .map(|w| w.len().div_ceil(3))
                .sum();
            n <= limit
        }
    }

    #[test]
    fn windows_the_encoder_cannot_read_whole_are_cut_short_and_every_word_is_read() {
        // Words of 1-4 pieces ("w0" is one, "wwwwwwwwww3" four), title "T" one piece.
        let words: Vec<String> = (0..40)
            .map(|i| format!("{}{i}", "w".repeat(1 + (i * 7) % 10)))
            .collect();
        let text = words.join(" ");
        let limit = 20;
        let (p, cut) = chunk(&[doc(&text)], 12, 4, pieces(limit));
        assert_eq!(cut, 0, "every window fits");
        let mut fits = pieces(limit);
        for w in &p {
            assert!(fits(&w.title, &w.text), "window {w:?} is over the limit");
            assert!(w.word_end - w.word_start <= 12);
        }
        // Every word is in a window, windows in order, each starting after the last.
        assert_eq!((p[0].word_start, p.last().unwrap().word_end), (0, 40));
        for pair in p.windows(2) {
            assert!(pair[1].word_start > pair[0].word_start);
            assert!(pair[1].word_start <= pair[0].word_end, "no word skipped");
        }
        // Cut short means as many words as fit: one more would not.
        for w in &p[..p.len() - 1] {
            let longer = words[w.word_start as usize..=w.word_end as usize].join(" ");
            assert!(
                w.word_end - w.word_start == 12 || !fits(&w.title, &longer),
                "window {w:?} could have held one more word"
            );
        }
        // And with room for everything, the word windows are what they were.
        let (by_words, _) = chunk(&[doc(&text)], 12, 4, any);
        let (roomy, _) = chunk(&[doc(&text)], 12, 4, pieces(10_000));
        let ranges = |p: &[PassageRecord]| -> Vec<(u32, u32)> {
            p.iter().map(|p| (p.word_start, p.word_end)).collect()
        };
        assert_eq!(ranges(&roomy), ranges(&by_words));
        assert!(p.len() > by_words.len());
    }

    #[test]
    fn an_overlong_title_keeps_word_windows_and_whole_documents_are_counted_as_cut() {
        let mut d = doc("a b c d e f g h");
        d.title = "x".repeat(300);
        let (p, cut) = chunk(std::slice::from_ref(&d), 4, 1, pieces(20));
        let ranges: Vec<_> = p.iter().map(|p| (p.word_start, p.word_end)).collect();
        assert_eq!(ranges, [(0, 4), (3, 7), (6, 8)], "the word windows");
        assert_eq!(cut, 3, "none is read whole");

        let long = doc(&vec!["word"; 50].join(" "));
        let (whole, cut) = chunk(&[long], 0, 0, pieces(20));
        assert_eq!((whole.len(), cut), (1, 1), "--chunk-words 0 never splits");
    }

    #[test]
    fn empty_text_is_still_a_passage() {
        let (p, _) = chunk(&[doc("   ")], 5, 1, any);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].text, "");
    }

    #[test]
    fn beir_corpus_lines_are_read_as_published() {
        let docs = read_jsonl(
            Path::new("corpus.jsonl"),
            b"{\"_id\": \"4983\", \"title\": \"Microstructural development\", \"text\": \"Alterations of the architecture\", \"metadata\": {}}\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(
            (
                docs[0].id.as_str(),
                docs[0].title.as_str(),
                docs[0].text.as_str()
            ),
            (
                "4983",
                "Microstructural development",
                "Alterations of the architecture"
            )
        );
    }

    #[test]
    fn jsonl_errors_name_the_line() {
        let path = Path::new("corpus.jsonl");
        let ok = read_jsonl(
            path,
            b"{\"id\": 1, \"text\": \"a\"}\n\n{\"id\": \"x\", \"title\": \"t\", \"text\": \"b\"}\n",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].id, "1");
        for (input, needle) in [
            (
                &b"{\"id\": \"a\", \"text\": \"a\"}\n{\"id\": \"b\"}\n"[..],
                "line 2",
            ),
            (b"{\"id\": \"a\", \"text\": \"a\"}\nnot json\n", "line 2"),
            (b"{\"id\": [1], \"text\": \"a\"}\n", "line 1"),
            (b"{\"id\": \"a\", \"text\": \"\xff\"}\n", "UTF-8"),
            (b"{\"id\": \"a\", \"text\": \"a\", \"body\": 1}\n", "line 1"),
        ] {
            let err = format!("{:#}", read_jsonl(path, input).unwrap_err());
            assert!(err.contains(needle), "{err}");
        }
    }
}
