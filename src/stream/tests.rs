//! State-machine tests of the streaming retriever with the deterministic fake embedder
//! over a small index built in a temp dir.

use super::*;
use crate::embed::HashEmbedder;
use crate::index::{Index, IndexMeta, PassageRecord, write_index};

const CORPUS: &[(&str, &str)] = &[
    ("timer", "set a timer for ten minutes in the kitchen"),
    ("paris", "paris is the capital of france"),
    ("tokyo", "tokyo is the capital of japan"),
    ("lights", "turn off the kitchen lights"),
    ("jazz", "play some jazz music in the living room"),
    ("weather", "what is the weather like in berlin tomorrow"),
];

fn index(dir: &std::path::Path) -> Index {
    let mut e = HashEmbedder;
    let mut vectors = Vec::new();
    let passages: Vec<_> = CORPUS
        .iter()
        .map(|(id, text)| {
            let mut v = [0.0; DIM];
            e.embed_into(text, &mut v).unwrap();
            vectors.extend_from_slice(&v);
            PassageRecord {
                id: (*id).into(),
                title: String::new(),
                text: (*text).into(),
                chunk: 0,
                word_start: 0,
                word_end: 0,
            }
        })
        .collect();
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: e.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let path = dir.join("t.idx");
    write_index(&path, &meta, &passages, &vectors).unwrap();
    Index::open(&path).unwrap()
}

fn cfg() -> StreamConfig {
    StreamConfig {
        min_tokens: 1,
        max_speculative_results: 4,
        top_k: 3,
        ..StreamConfig::default()
    }
}

fn retriever(index: &Index, cfg: StreamConfig) -> StreamingRetriever<'_, HashEmbedder> {
    StreamingRetriever::new(
        cfg,
        HashEmbedder,
        Searcher::new(index).unwrap(),
        Normalizer::default(),
    )
}

fn top_id(index: &Index, out: &Outcome) -> String {
    index
        .passage(out.hits[0].index as usize)
        .unwrap()
        .id
        .to_string()
}

#[test]
fn triggers_every_interval_of_new_words_and_not_on_fillers() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            similarity_threshold: 2.0,
            ..cfg()
        },
    );
    assert_eq!(
        r.observe("um uh").unwrap(),
        Observed::Waiting,
        "fillers are not words"
    );
    assert_eq!(r.observe("set a").unwrap(), Observed::Waiting);
    assert_eq!(
        r.observe("Set a timer,").unwrap(),
        Observed::Speculated,
        "3 new words"
    );
    assert_eq!(r.candidates().len(), 4, "max_speculative_results");
    assert_eq!(
        r.observe("set a timer for").unwrap(),
        Observed::Waiting,
        "1 new word"
    );
    assert_eq!(
        r.observe("set a timer for um ten").unwrap(),
        Observed::Waiting,
        "2 new words"
    );
    assert_eq!(
        r.observe("set a timer for ten minutes").unwrap(),
        Observed::Speculated
    );
    let c = r.counts();
    assert_eq!(
        (c.partials, c.embeds, c.speculative_searches, c.gate_skips),
        (6, 2, 2, 0)
    );
}

#[test]
fn min_tokens_holds_back_short_partials() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            min_tokens: 4,
            trigger_interval: 1,
            ..cfg()
        },
    );
    assert_eq!(r.observe("set a timer").unwrap(), Observed::Waiting);
    assert_eq!(r.observe("set a timer for").unwrap(), Observed::Speculated);
}

#[test]
fn the_gate_skips_searches_for_near_identical_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            similarity_threshold: -2.0,
            trigger_interval: 1,
            ..cfg()
        },
    );
    assert_eq!(
        r.observe("set a timer").unwrap(),
        Observed::Speculated,
        "nothing to compare with yet"
    );
    assert_eq!(r.observe("set a timer for").unwrap(), Observed::GateSkip);
    assert_eq!(
        r.observe("set a timer for ten").unwrap(),
        Observed::GateSkip
    );
    let c = r.counts();
    assert_eq!((c.embeds, c.speculative_searches, c.gate_skips), (3, 1, 2));
}

#[test]
fn a_revision_is_a_new_hypothesis_not_an_append() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            similarity_threshold: 2.0,
            trigger_interval: 3,
            ..cfg()
        },
    );
    assert_eq!(r.observe("santa timer 41").unwrap(), Observed::Speculated);
    // Same number of words as before plus one: an append-only counter would wait for two more.
    assert_eq!(
        r.observe("set a timer for").unwrap(),
        Observed::Speculated,
        "4 words differ"
    );
    let out = r.finalize("set a timer for").unwrap();
    assert_eq!(top_id(&index, &out), "timer");
}

#[test]
fn final_equal_to_an_embedded_partial_reuses_its_embedding() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, cfg());
    r.observe("turn off the kitchen lights").unwrap();
    let embeds_before = r.counts().embeds;
    let out = r.finalize("Turn off the kitchen lights, um.").unwrap();
    assert_eq!(out.path, FinalPath::Reuse);
    assert_eq!(
        out.counts.embeds, embeds_before,
        "no embed after end of speech"
    );
    assert_eq!(out.timings.embed_ms, 0.0);
    assert_eq!(top_id(&index, &out), "lights");
}

#[test]
fn idle_time_embeds_the_newest_partial_so_the_final_can_reuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    // The fake's cosine of "play some jazz" to "... music" is 3/√12 ≈ 0.87.
    let cfg = || StreamConfig {
        reflector_threshold: 0.8,
        ..cfg()
    };
    let mut r = retriever(&index, cfg());
    r.observe("play some jazz").unwrap(); // speculates
    assert_eq!(
        r.observe("play some jazz music").unwrap(),
        Observed::Waiting
    );
    assert!(r.idle().unwrap(), "newest partial embedded while idle");
    assert!(!r.idle().unwrap(), "only once");
    let out = r.finalize("play some jazz music").unwrap();
    assert_eq!(out.path, FinalPath::Reuse);

    let mut r = retriever(
        &index,
        StreamConfig {
            idle_embed: false,
            ..cfg()
        },
    );
    r.observe("play some jazz").unwrap();
    r.observe("play some jazz music").unwrap();
    assert!(!r.idle().unwrap());
    assert_eq!(
        r.finalize("play some jazz music").unwrap().path,
        FinalPath::Rerank
    );
}

#[test]
fn the_reflector_falls_back_to_a_full_search_when_speculation_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    // The user changed topic after the last speculation.
    let mut r = retriever(
        &index,
        StreamConfig {
            idle_embed: false,
            max_speculative_results: 1,
            ..cfg()
        },
    );
    r.observe("what is the weather like").unwrap();
    let out = r.finalize("paris is the capital of which country").unwrap();
    assert_eq!(
        out.path,
        FinalPath::Full,
        "cosine {:?}",
        out.speculation_cosine
    );
    assert!(out.speculation_cosine.unwrap() < 0.9);
    assert_eq!(
        top_id(&index, &out),
        "paris",
        "the full search finds what one stale candidate could not"
    );

    // No speculation at all: full search too.
    let out = r.finalize("turn off the kitchen lights").unwrap();
    assert_eq!((out.path, out.speculation_cosine), (FinalPath::Full, None));

    // A permissive reflector keeps the (stale) candidates.
    let mut r = retriever(
        &index,
        StreamConfig {
            idle_embed: false,
            reflector_threshold: -2.0,
            max_speculative_results: 1,
            ..cfg()
        },
    );
    r.observe("what is the weather like").unwrap();
    let out = r.finalize("paris is the capital of which country").unwrap();
    assert_eq!(out.path, FinalPath::Rerank);
    assert_eq!(top_id(&index, &out), "weather");
}

#[test]
fn utterances_do_not_leak_into_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, cfg());
    r.observe("set a timer for ten").unwrap();
    r.finalize("set a timer for ten minutes").unwrap();
    assert_eq!(r.counts(), Counts::default());
    assert!(r.candidates().is_empty());
    // Two words: a stale trigger text would make these look like 0 new words, or reuse.
    assert_eq!(r.observe("set a").unwrap(), Observed::Waiting);
    let out = r.finalize("set a timer for ten minutes").unwrap();
    assert_eq!(out.path, FinalPath::Full);
    assert_eq!(out.counts.partials, 1);
}

#[test]
fn disabled_streaming_is_the_wait_then_search_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            enabled: false,
            ..cfg()
        },
    );
    for p in ["turn", "turn off the", "turn off the kitchen lights"] {
        assert_eq!(r.observe(p).unwrap(), Observed::Waiting);
    }
    assert!(!r.idle().unwrap());
    let out = r.finalize("turn off the kitchen lights").unwrap();
    assert_eq!(
        (out.path, out.counts.embeds, out.counts.partials),
        (FinalPath::Full, 1, 3)
    );
    assert_eq!(top_id(&index, &out), "lights");
}

#[test]
fn empty_finals_fall_back_to_the_newest_partial() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, cfg());
    r.observe("play some jazz music").unwrap();
    let out = r.finalize("").unwrap();
    assert_eq!(
        (out.path, top_id(&index, &out).as_str()),
        (FinalPath::Reuse, "jazz")
    );
    let out = r.finalize("um").unwrap();
    assert_eq!(out.path, FinalPath::Empty);
    assert!(out.hits.is_empty());
}
