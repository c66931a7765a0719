//! The committed golden index (format v1) must keep opening and searching the same way,
//! and the writer must keep producing it byte for byte: a format change cannot slip by.
//!
//! Built with `HashEmbedder`, so no model is needed. After an intended format change,
//! bump the format version and regenerate with `PRIMD_BLESS=1 cargo test --test golden`.

mod common;

use primd::embed::{DIM, Embed, HashEmbedder};
use primd::index::{FORMAT_VERSION, Index, IndexMeta, PassageRecord, write_index};
use primd::search::{Hits, Query, Searcher};

const GOLDEN: &str = "golden-v1.idx";

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
}

#[test]
fn golden_index_opens_verifies_and_searches() {
    let index = Index::open(&common::data(GOLDEN)).unwrap();
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
            "{query}"
        );
        assert_eq!(
            fast, exact,
            "with every passage a candidate, rerank equals brute force"
        );
    }
}
