//! The committed golden indexes must keep opening and searching the same way, and the
//! writer must keep producing the current one byte for byte: a format change cannot slip by.
//!
//! - `golden-v5.idx` (current format): dense part + lexical section (default analyzer,
//!   char 4-grams across words, numbers spelled out, BM25 1.2 / 0.75, word rules version
//!   2: Latin diacritics folded; analyzer version 4). Reproduced byte for byte, searched
//!   both ways.
//! - `golden-v4.idx` (format 4, analyzer version 3: digits as written): must still open
//!   and search both ways, its queries cut by its own rules.
//! - `golden-v3.idx` (format 3, analyzer version 2: n-grams within words): must still
//!   open and search both ways, its queries cut by its own rules.
//! - `golden-v2.idx` (format 2, analyzer version 1: no folding): must still open and
//!   search both ways, its queries cut by its own rules.
//! - `golden-v1.idx` (written by format v1, before the lexical section): must still open,
//!   verify and search dense, with no lexical section.
//!
//! Built with `HashEmbedder`, so no model is needed. After an intended format change,
//! bump the format version, add a golden file for it, and regenerate the current one with
//! `PRIMD_BLESS=1 cargo test --test golden`.

mod common;

use primd::dense::{Query, Searcher};
use primd::embed::{DIM, Embed, HashEmbedder};
use primd::hits::Hits;
use primd::index::{FORMAT_VERSION, Index, IndexMeta, PassageRecord, write_index};
use primd::lexical::{AnalyzerSpec, Bm25, DEFAULT_ANALYZER, LexicalSearcher, WordRules};

const GOLDEN_V1: &str = "golden-v1.idx";
const GOLDEN_V2: &str = "golden-v2.idx";
const GOLDEN_V3: &str = "golden-v3.idx";
const GOLDEN_V4: &str = "golden-v4.idx";
const GOLDEN: &str = "golden-v5.idx";

fn corpus() -> (Vec<PassageRecord>, Vec<f32>) {
    common::embed_corpus(&common::data("golden-corpus.jsonl"), &mut HashEmbedder)
}

fn meta() -> IndexMeta {
    IndexMeta {
        dim: DIM as u32,
        fingerprint: HashEmbedder.fingerprint(),
        chunk_words: 120,
        overlap_words: 20,
    }
}

#[test]
fn writer_reproduces_the_golden_file_byte_for_byte() {
    let (passages, vectors) = corpus();
    let golden = common::data(GOLDEN);
    if std::env::var_os("PRIMD_BLESS").is_some() {
        write_index(&golden, &meta(), &passages, &vectors).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.idx");
    write_index(&fresh, &meta(), &passages, &vectors).unwrap();
    assert!(
        std::fs::read(&fresh).unwrap() == std::fs::read(&golden).unwrap(),
        "the writer no longer produces {GOLDEN}: a format change needs a new FORMAT_VERSION \
         (now {FORMAT_VERSION}) and a new golden file"
    );
    assert_eq!(FORMAT_VERSION, 5, "{GOLDEN} is the golden file of format 5");
}

/// Opens, verifies and searches (dense) a golden file; the same answers in every version.
fn open_and_search_dense(name: &str) -> Index {
    let index = Index::open(&common::data(name)).unwrap();
    index.verify().unwrap();
    index
        .check_fingerprint(&HashEmbedder.fingerprint())
        .unwrap();
    assert_eq!(index.meta(), &meta());
    let (passages, _) = corpus();
    assert_eq!(index.len(), passages.len());
    for (i, p) in passages.iter().enumerate() {
        let r = index.passage(i).unwrap();
        assert_eq!(
            (r.id, r.title, r.text, r.chunk),
            (p.id.as_str(), p.title.as_str(), p.text.as_str(), 0)
        );
    }
    let mut searcher = Searcher::new(&index).unwrap();
    let mut e = HashEmbedder;
    for (query, want) in [
        ("what is the capital of france", "paris"),
        ("set a timer for ten minutes", "timer"),
        ("turn off the lights", "lights"),
    ] {
        let mut v = [0.0; DIM];
        e.embed_into(query, &mut v).unwrap();
        let q = Query::new(&v);
        let (mut fast, mut exact) = (Hits::new(), Hits::new());
        searcher.search(&q, 3, 6, &mut fast);
        searcher.exact(&q, 3, &mut exact);
        assert_eq!(
            index.passage(fast[0].index as usize).unwrap().id,
            want,
            "{name}: {query}"
        );
        assert_eq!(
            fast, exact,
            "with every passage a candidate, rerank equals brute force"
        );
    }
    index
}

/// Opens a golden file with a lexical section and searches it lexically (misspelt
/// queries); returns the best passage for "creme brulee", the unicode passage's words
/// without their accents.
fn open_and_search_lexical(
    name: &str,
    rules: WordRules,
    across_words: bool,
    numbers: bool,
) -> Option<String> {
    let index = open_and_search_dense(name);
    let lex = index
        .lexical()
        .expect("the golden file has a lexical section");
    assert_eq!(
        lex.spec(),
        &AnalyzerSpec {
            rules,
            across_words,
            numbers,
            ..DEFAULT_ANALYZER
        }
    );
    assert_eq!(lex.bm25(), Bm25 { k1: 1.2, b: 0.75 });
    assert_eq!(lex.doc_count(), index.len());
    let mut searcher = LexicalSearcher::new();
    let mut hits = Hits::new();
    for (query, want) in [
        // misspelt as a recognizer would: char 4-grams still match
        ("what is the capitol of frants", "paris"),
        ("tokio population", "tokyo"),
        ("play jaz", "jazz"),
        ("does non ascii text survive", "unicode"),
        ("kitchen lights", "lights"),
    ] {
        searcher.search(&lex, query, "", 0.0, 3, &mut hits);
        let best = hits
            .first()
            .map(|h| index.passage(h.index as usize).unwrap().id);
        assert_eq!(best, Some(want), "{query}: {hits:?}");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }
    searcher.search(&lex, "zzzz qqqq", "", 0.0, 3, &mut hits);
    assert!(hits.is_empty());
    searcher.search(&lex, "creme brulee", "", 0.0, 3, &mut hits);
    hits.first()
        .map(|h| index.passage(h.index as usize).unwrap().id.to_string())
}

/// The `format_version` a golden file's header records (bytes 8..12).
fn format_version(name: &str) -> u32 {
    let bytes = std::fs::read(common::data(name)).unwrap();
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

#[test]
fn golden_index_opens_verifies_and_searches() {
    let best = open_and_search_lexical(GOLDEN, WordRules::V2, true, true);
    // Version-2 rules fold "Crème brûlée" to "creme brulee": the recognizer's spelling.
    assert_eq!(best.as_deref(), Some("unicode"));
}

#[test]
fn golden_v4_index_still_opens_and_searches_by_its_own_ngrams() {
    let best = open_and_search_lexical(GOLDEN_V4, WordRules::V2, true, false);
    assert_eq!(best.as_deref(), Some("unicode"));
    assert_eq!(format_version(GOLDEN_V4), 4);
}

#[test]
fn golden_v3_index_still_opens_and_searches_by_its_own_ngrams() {
    let best = open_and_search_lexical(GOLDEN_V3, WordRules::V2, false, false);
    assert_eq!(best.as_deref(), Some("unicode"));
    assert_eq!(format_version(GOLDEN_V3), 3);
}

#[test]
fn golden_v2_index_still_opens_and_searches_by_its_own_word_rules() {
    let best = open_and_search_lexical(GOLDEN_V2, WordRules::V1, false, false);
    // Analyzer version 1 kept the accents: no 4-gram of "creme brulee" is in the passage.
    assert_ne!(best.as_deref(), Some("unicode"));
    assert_eq!(format_version(GOLDEN_V2), 2);
}

#[test]
fn golden_v1_index_still_opens_and_searches_dense_only() {
    let index = open_and_search_dense(GOLDEN_V1);
    assert!(index.lexical().is_none());
    assert_eq!(format_version(GOLDEN_V1), 1);
}
