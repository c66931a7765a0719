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
/// pieces (~190 English words), so 180 words use nearly the whole window. Measured on
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
pub fn chunk(docs: &[Document], chunk_words: u32, overlap: u32) -> Vec<PassageRecord> {
    let mut out = Vec::new();
    for d in docs {
        let spans = word_spans(&d.text);
        let n = spans.len() as u32;
        let windows: Vec<(u32, u32)> = if chunk_words == 0 || n <= chunk_words {
            vec![(0, n)]
        } else {
            let stride = chunk_words - overlap;
            let mut w = Vec::new();
            let mut start = 0;
            loop {
                let end = (start + chunk_words).min(n);
                w.push((start, end));
                if end == n {
                    break;
                }
                start += stride;
            }
            w
        };
        for (k, (start, end)) in windows.into_iter().enumerate() {
            let text = if n == 0 {
                String::new()
            } else {
                d.text[spans[start as usize].0..spans[end as usize - 1].1].to_string()
            };
            out.push(PassageRecord {
                id: d.id.clone(),
                title: d.title.clone(),
                text,
                chunk: k as u32,
                word_start: start,
                word_end: end,
            });
        }
    }
    out
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
        let short = chunk(&[doc("one two three")], 5, 1);
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
        let p = chunk(&[doc(&text)], 5, 2);
        let ranges: Vec<_> = p
            .iter()
            .map(|p| (p.chunk, p.word_start, p.word_end))
            .collect();
        assert_eq!(ranges, [(0, 0, 5), (1, 3, 8), (2, 6, 11), (3, 9, 12)]);
        assert_eq!(p[1].text, "w3  w4  w5  w6  w7", "original spacing kept");
        assert!(p.iter().all(|p| p.id == "d" && p.title == "T"));
    }

    #[test]
    fn empty_text_is_still_a_passage() {
        let p = chunk(&[doc("   ")], 5, 1);
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
