//! The committed golden indexes must keep opening and searching the same way, and the
//! writer must keep producing the current one byte for byte: a format change cannot slip by.
//!
//! - `golden-v6.idx` (current format): dense part + lexical section (default analyzer,
//!   char 4-grams across words, numbers spelled out, BM25 1.2 / 0.75, word rules version
//!   2: Latin diacritics folded; analyzer version 4) + sentence section (each passage's
//!   sentences, their word pieces and vectors). Reproduced byte for byte, searched both
//!   ways, its sentences read back.
//! - `golden-v5.idx` (format 5, no sentence section): must still open and search both
//!   ways; `context` falls back to whole passages.
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

use primd::context::{Context, ContextBuilder, Unit, sentence_table, to_json, word_pieces};
use primd::dense::{Query, Searcher};
use primd::embed::{DIM, Embed, HashEmbedder};
use primd::fusion::Scored;
use primd::hits::Hits;
use primd::index::{
    FORMAT_VERSION, Index, IndexMeta, PassageRecord, WriteOptions, write_index_with,
};
use primd::lexical::{AnalyzerSpec, Bm25, DEFAULT_ANALYZER, LexicalSearcher, WordRules};

const GOLDEN_V1: &str = "golden-v1.idx";
const GOLDEN_V2: &str = "golden-v2.idx";
const GOLDEN_V3: &str = "golden-v3.idx";
const GOLDEN_V4: &str = "golden-v4.idx";
const GOLDEN_V5: &str = "golden-v5.idx";
const GOLDEN: &str = "golden-v6.idx";

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

/// The current golden file's content: the default lexical section and the sentences.
fn write_golden(path: &std::path::Path) {
    let (passages, vectors) = corpus();
    let options = WriteOptions {
        sentences: Some(sentence_table(&mut HashEmbedder, &passages).unwrap()),
        ..WriteOptions::default()
    };
    write_index_with(path, &meta(), &passages, &vectors, &options).unwrap();
}

#[test]
fn writer_reproduces_the_golden_file_byte_for_byte() {
    let golden = common::data(GOLDEN);
    if std::env::var_os("PRIMD_BLESS").is_some() {
        write_golden(&golden);
    }
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.idx");
    write_golden(&fresh);
    assert!(
        std::fs::read(&fresh).unwrap() == std::fs::read(&golden).unwrap(),
        "the writer no longer produces {GOLDEN}: a format change needs a new FORMAT_VERSION \
         (now {FORMAT_VERSION}) and a new golden file"
    );
    assert_eq!(FORMAT_VERSION, 6, "{GOLDEN} is the golden file of format 6");
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

/// The context of "what is the capital of france" over the top passage (paris).
fn paris_context(index: &Index) -> (Context, String) {
    let paris = (0..index.len())
        .find(|&i| index.passage(i).unwrap().id == "paris")
        .unwrap();
    let hits = [Scored::new(paris as u32, Some(0.5), None)];
    let mut c = Context::default();
    let mut e = HashEmbedder;
    let mut count = |t: &str| word_pieces(&mut e, t);
    let question = "what is the capital of france";
    ContextBuilder::new().build(index, None, question, &hits, 8, &mut count, &mut c);
    let text = to_json(index, &c).unwrap().text;
    (c, text)
}

#[test]
fn golden_sentences_read_back() {
    let index = Index::open(&common::data(GOLDEN)).unwrap();
    let s = index.sentences().expect("the golden file has sentences");
    let (passages, _) = corpus();
    assert!(s.len() >= passages.len());
    for (i, p) in passages.iter().enumerate() {
        let ids = s.of_passage(i);
        assert!(!ids.is_empty() || p.text.trim().is_empty(), "{}", p.id);
        for k in ids {
            let sp = s.span(k);
            let text = &p.text[sp.start as usize..sp.end as usize];
            assert_eq!(sp.tokens as usize, word_pieces(&mut HashEmbedder, text));
        }
    }
    let (c, text) = paris_context(&index);
    assert_eq!(c.unit, Unit::Sentences);
    assert_eq!(c.tokens, 8);
    assert!(text.starts_with("Paris is the capital"), "{text}");
}

#[test]
fn golden_v5_index_still_opens_and_its_context_is_whole_passages() {
    let best = open_and_search_lexical(GOLDEN_V5, WordRules::V2, true, true);
    assert_eq!(best.as_deref(), Some("unicode"));
    assert_eq!(format_version(GOLDEN_V5), 5);
    let index = Index::open(&common::data(GOLDEN_V5)).unwrap();
    assert!(index.sentences().is_none());
    let (c, text) = paris_context(&index);
    assert_eq!(c.unit, Unit::Passages);
    assert_eq!(c.tokens, 8);
    assert!(text.starts_with("Paris is the capital"), "{text}");
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
