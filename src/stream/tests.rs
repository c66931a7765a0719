//! State-machine tests of the streaming retriever with the deterministic fake embedder
//! over a small index built in a temp dir.

use super::*;
use crate::embed::HashEmbedder;
use crate::index::Index;
use crate::retriever::HybridSearcher;

const CORPUS: &[(&str, &str)] = &[
    ("timer", "set a timer for ten minutes in the kitchen"),
    ("paris", "paris is the capital of france"),
    ("tokyo", "tokyo is the capital of japan"),
    ("lights", "turn off the kitchen lights"),
    ("jazz", "play some jazz music in the living room"),
    ("weather", "what is the weather like in berlin tomorrow"),
];

fn index(dir: &std::path::Path) -> Index {
    crate::testing::hash_index(dir, CORPUS)
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
        HybridSearcher::new(index).unwrap(),
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
fn idle_time_leaves_partials_below_min_tokens_alone_and_their_final_is_still_answered() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            min_tokens: 3,
            ..cfg()
        },
    );
    // The recognizer's first words: too little to search with, and rarely the final.
    r.observe("play some").unwrap();
    assert!(
        !r.idle().unwrap(),
        "a two-word partial is not embedded while idle"
    );
    assert_eq!(r.counts().embeds, 0);
    r.reset();

    // A final that short is embedded after end of speech instead, and answered.
    r.observe("turn lights").unwrap();
    assert!(!r.idle().unwrap());
    let out = r.finalize("turn lights").unwrap();
    assert!(!out.reused_embedding);
    assert_eq!(out.counts.embeds, 1, "the final's own embed");
    assert_eq!(top_id(&index, &out), "lights");
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

// ---- lexical and hybrid retrievers (the test index has a lexical section) ----

fn hybrid_cfg(retriever: Retriever) -> StreamConfig {
    StreamConfig { retriever, ..cfg() }
}

fn ids(index: &Index, hits: &[crate::fusion::Scored]) -> Vec<String> {
    hits.iter()
        .map(|h| index.passage(h.index as usize).unwrap().id.to_string())
        .collect()
}

fn lexical_ids(index: &Index, r: &StreamingRetriever<'_, HashEmbedder>) -> Vec<String> {
    r.lexical_candidates()
        .iter()
        .map(|h| index.passage(h.index as usize).unwrap().id.to_string())
        .collect()
}

#[test]
fn the_test_index_has_a_lexical_section() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    assert!(index.lexical().is_some());
    assert_eq!(
        Retriever::resolve(None, &index).unwrap(),
        Retriever::Hybrid,
        "hybrid by default"
    );
}

#[test]
fn a_recognizers_plain_spelling_finds_the_accented_passage() {
    // A clean corpus keeps accents and typographic apostrophes; an English recognizer
    // writes neither. The partial is normalised by the index's word rules (version 2
    // folds both), so its lexical query still matches every n-gram of the names.
    let dir = tempfile::tempdir().unwrap();
    let index = crate::testing::hash_index(
        dir.path(),
        &[
            ("chopin", "Frédéric Chopin’s études were written in Łódź"),
            ("timer", "set a timer for ten minutes in the kitchen"),
            ("lights", "turn off the kitchen lights"),
        ],
    );
    let mut r = retriever(&index, hybrid_cfg(Retriever::Lexical));
    r.observe("who wrote frederic chopin's etudes").unwrap();
    let first = lexical_ids(&index, &r);
    assert_eq!(first.first().map(String::as_str), Some("chopin"));
    let out = r
        .finalize("Who wrote Frederic Chopin's etudes in Lodz?")
        .unwrap();
    assert_eq!(top_id(&index, &out), "chopin");
    // Every n-gram of the folded query is in the passage: its BM25 is that of the
    // passage's own (accented, curly) spelling.
    let mut lex = crate::lexical::LexicalSearcher::new();
    let mut plain = crate::hits::Hits::new();
    let mut accented = crate::hits::Hits::new();
    let section = index.lexical().unwrap();
    lex.search(&section, "frederic chopin's", "", 0.0, 3, &mut plain);
    lex.search(&section, "Frédéric Chopin’s", "", 0.0, 3, &mut accented);
    assert_eq!(plain, accented);
}

#[test]
fn a_repeated_partial_costs_no_query_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, hybrid_cfg(Retriever::Hybrid));
    let state = |r: &StreamingRetriever<'_, HashEmbedder>| {
        let c = r.counts();
        (lexical_ids(&index, r), c.lexical_searches, c.embeds)
    };
    let first = r.observe("tokyo is the capital").unwrap();
    assert_eq!(first, Observed::Speculated);
    let before = state(&r);
    // The recognizer says the same again, with other case and punctuation.
    for repeat in ["Tokyo is the capital.", "tokyo, is the capital"] {
        assert_eq!(r.observe(repeat).unwrap(), Observed::Waiting);
    }
    assert_eq!(
        state(&r),
        before,
        "no second query, no embed, same candidates"
    );
    assert_eq!(
        r.counts().partials,
        3,
        "the repeats still count as partials"
    );
    // A changed hypothesis is queried again, and the final still answers.
    r.observe("tokyo is the capital of").unwrap();
    assert_eq!(r.counts().lexical_searches, 2);
    let out = r.finalize("Tokyo is the capital of").unwrap();
    assert_eq!(top_id(&index, &out), "tokyo");
}

#[test]
fn hybrid_queries_every_partial_lexically_and_speculates_densely_on_the_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, hybrid_cfg(Retriever::Hybrid));
    // One word: no trigger, no embed, but a lexical query.
    assert_eq!(r.observe("Tokyo").unwrap(), Observed::Waiting);
    assert_eq!((r.counts().embeds, r.counts().lexical_searches), (0, 1));
    assert_eq!(
        lexical_ids(&index, &r).first().map(String::as_str),
        Some("tokyo")
    );
    assert!(r.candidates().is_empty(), "no dense speculation yet");
    // The best guess without any embedding: lexical alone.
    let guess = r.speculative_guess(3);
    assert_eq!(ids(&index, guess)[0], "tokyo");
    assert_eq!(guess[0].dense, None);

    assert_eq!(
        r.observe("tokyo is the capital").unwrap(),
        Observed::Speculated
    );
    assert_eq!(r.counts().lexical_searches, 2);
    // The speculative candidates are the union of both sides.
    let spec: Vec<u32> = r.speculative_candidates().collect();
    for h in r.lexical_candidates() {
        assert!(spec.contains(&h.index));
    }
    for c in r.candidates() {
        assert!(spec.contains(&c.index));
    }
    let guess = r.speculative_guess(3);
    assert_eq!(ids(&index, guess)[0], "tokyo");
    assert!(guess[0].dense.is_some() && guess[0].bm25.is_some());

    let out = r.finalize("Tokyo is the capital.").unwrap();
    assert_eq!(out.path, FinalPath::Reuse);
    assert!(out.reused_embedding);
    assert_eq!(top_id(&index, &out), "tokyo");
    let top = out.hits[0];
    assert!(top.dense.is_some() && top.bm25.is_some(), "{top:?}");
    assert!(
        out.hits.iter().all(|h| h.dense.is_some()),
        "every hit reranked"
    );
    // Convex fusion: scores in [0, 1], best first.
    assert!(
        out.hits
            .iter()
            .all(|h| (-1e-6..=1.0 + 1e-6).contains(&h.score))
    );
    assert!(out.hits.windows(2).all(|w| w[0].score >= w[1].score));
}

#[test]
fn the_lexical_side_rescues_a_stale_speculation_the_reflector_kept() {
    // As in the reflector test: one stale dense candidate, a permissive reflector. Dense
    // alone can only rerank that candidate; hybrid also has the final's lexical top-C.
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let stale = |kind| StreamConfig {
        retriever: kind,
        idle_embed: false,
        reflector_threshold: -2.0,
        max_speculative_results: 1,
        ..cfg()
    };
    for (kind, expected) in [(Retriever::Dense, "weather"), (Retriever::Hybrid, "paris")] {
        let mut r = retriever(&index, stale(kind));
        r.observe("what is the weather like").unwrap();
        let out = r.finalize("paris is the capital of which country").unwrap();
        assert_eq!(out.path, FinalPath::Rerank, "{kind}");
        assert_eq!(top_id(&index, &out), expected, "{kind}");
    }
    // A stale speculation judged so by the reflector: a full scan + lexical, fused.
    let mut r = retriever(
        &index,
        StreamConfig {
            idle_embed: false,
            max_speculative_results: 1,
            ..hybrid_cfg(Retriever::Hybrid)
        },
    );
    r.observe("what is the weather like").unwrap();
    let out = r.finalize("paris is the capital of which country").unwrap();
    assert_eq!(out.path, FinalPath::Full);
    assert_eq!(top_id(&index, &out), "paris");
    assert!(out.timings.lexical_ms >= 0.0 && out.hits[0].bm25.is_some());
}

#[test]
fn a_final_that_repeats_the_newest_partial_reuses_its_lexical_hits() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    // With revision terms, so that the reused query must carry the same extra words.
    let cfg = || StreamConfig {
        revision_weight: 0.5,
        ..hybrid_cfg(Retriever::Hybrid)
    };
    let spoken = [
        "tokio is",
        "tokyo is the capital",
        "tokyo is the capital of japan",
    ];
    let mut a = retriever(&index, cfg());
    for p in spoken {
        a.observe(p).unwrap();
    }
    let reused = a.finalize("Tokyo is the capital of Japan.").unwrap();
    assert_eq!(
        reused.timings.lexical_ms, 0.0,
        "no lexical query after end of speech"
    );

    // The same utterance with one more partial whose words the final already has: the
    // final's query is run again, and gives the same fused list to the bit.
    let mut b = retriever(&index, cfg());
    for p in spoken.into_iter().chain(["tokyo is the"]) {
        b.observe(p).unwrap();
    }
    let fresh = b.finalize("Tokyo is the capital of Japan.").unwrap();
    assert!(fresh.hits.iter().any(|h| h.bm25.is_some()));
    assert_eq!(reused.hits, fresh.hits);
    assert_eq!(top_id(&index, &reused), "tokyo");
}

#[test]
fn the_lexical_retriever_never_embeds() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, hybrid_cfg(Retriever::Lexical));
    for p in ["turn", "turn off the", "turn off the kitchen lights"] {
        assert_eq!(r.observe(p).unwrap(), Observed::Waiting);
    }
    assert!(!r.idle().unwrap(), "nothing to embed");
    assert_eq!(ids(&index, r.speculative_guess(1)), ["lights"]);
    let out = r.finalize("turn off the kitchen lights").unwrap();
    assert_eq!(out.path, FinalPath::Lexical);
    assert_eq!((out.counts.embeds, out.counts.lexical_searches), (0, 3));
    assert_eq!(top_id(&index, &out), "lights");
    assert!(out.hits.len() <= 3, "top_k");
    assert!(
        out.hits
            .iter()
            .all(|h| h.dense.is_none() && h.bm25 == Some(h.score))
    );
    // A final with no known term: no results, no panic.
    let out = r.finalize("zzzz qqqq").unwrap();
    assert!(out.hits.is_empty());
}

#[test]
fn the_baseline_with_hybrid_searches_the_final_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(
        &index,
        StreamConfig {
            enabled: false,
            ..hybrid_cfg(Retriever::Hybrid)
        },
    );
    r.observe("turn off the kitchen").unwrap();
    assert_eq!(
        r.counts().lexical_searches,
        0,
        "baseline: nothing before the final"
    );
    let out = r.finalize("turn off the kitchen lights").unwrap();
    assert_eq!((out.path, out.counts.embeds), (FinalPath::Full, 1));
    assert_eq!(top_id(&index, &out), "lights");
    assert!(out.hits[0].bm25.is_some() && out.hits[0].dense.is_some());
}

#[test]
fn words_only_earlier_partials_had_count_with_revision_weight() {
    // The recognizer had "paris" in a partial and dropped it from the final.
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let run = |w: f32| {
        let mut r = retriever(
            &index,
            StreamConfig {
                revision_weight: w,
                ..hybrid_cfg(Retriever::Lexical)
            },
        );
        r.observe("paris capital").unwrap();
        r.finalize("which capital").unwrap()
    };
    let bm25 = |out: &Outcome, id: &str| {
        out.hits
            .iter()
            .find(|h| index.passage(h.index as usize).unwrap().id == id)
            .and_then(|h| h.bm25)
            .unwrap_or(0.0)
    };
    let without = run(0.0);
    assert!(
        bm25(&without, "paris") <= bm25(&without, "tokyo") + 1e-4,
        "only 'capital' counts: {:?}",
        without.hits
    );
    let with = run(1.0);
    assert_eq!(top_id(&index, &with), "paris");
    assert!(bm25(&with, "paris") > bm25(&with, "tokyo") + 1e-3);
}

#[test]
fn speculative_guess_of_the_dense_retriever_reranks_its_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, cfg());
    assert!(r.speculative_guess(3).is_empty(), "nothing embedded yet");
    r.observe("turn off the kitchen lights").unwrap();
    let guess = r.speculative_guess(3);
    assert_eq!(ids(&index, guess)[0], "lights");
    assert!(
        guess
            .iter()
            .all(|h| h.bm25.is_none() && h.dense == Some(h.score))
    );
    assert_eq!(r.counts().lexical_searches, 0, "dense: no lexical query");
}

/// An embedder that allocates nothing (the fake lower-cases through a `String`).
pub(crate) struct NoAlloc;

impl Embed for NoAlloc {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        out.fill(0.0);
        for (i, b) in text.bytes().enumerate() {
            out[(b as usize * 7 + i) % DIM] += 1.0;
        }
        out[0] += 1.0;
        crate::embed::l2_normalize(out);
        Ok(text.len())
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        Ok(text.len())
    }
    fn fingerprint(&self) -> crate::embed::Fingerprint {
        HashEmbedder.fingerprint()
    }
}

#[test]
fn no_allocation_per_partial_after_warm_up() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    for kind in Retriever::ALL {
        let mut r = StreamingRetriever::new(
            StreamConfig {
                retriever: kind,
                trigger_interval: 1,
                similarity_threshold: 2.0,
                revision_weight: 0.5,
                ..cfg()
            },
            NoAlloc,
            HybridSearcher::new(&index).unwrap(),
            Normalizer::default(),
        );
        let partials = [
            "set a",
            "set a timer",
            "santa timer for",
            "set a timer for ten",
            "set a timer for ten minutes in the kitchen",
        ];
        let utterance = |r: &mut StreamingRetriever<'_, NoAlloc>| {
            for p in partials {
                r.observe(p).unwrap();
                let _ = r.speculative_guess(5);
                r.idle().unwrap();
            }
            r.finalize("set a timer for ten minutes").unwrap()
        };
        utterance(&mut r); // warm-up: buffers reach their size
        let before = alloc_count::count();
        let out = utterance(&mut r);
        let after = alloc_count::count();
        assert_eq!(after - before, 0, "{kind}: allocations in one utterance");
        assert!(!out.hits.is_empty(), "{kind}");
    }
}

#[test]
fn context_allocates_nothing_per_final_after_warm_up() {
    let dir = tempfile::tempdir().unwrap();
    let corpus: &[(&str, &str)] = &[
        (
            "timer",
            "Kitchen timers ring loudly. You can set a timer for ten minutes in the kitchen. \
             It stops by itself after an hour of ringing.",
        ),
        (
            "paris",
            "Paris is the capital of France. It has many museums and old bridges.",
        ),
        (
            "jazz",
            "Play some jazz music in the living room. The speakers are in the corner.",
        ),
    ];
    for sentences in [true, false] {
        let index = crate::testing::hash_index_with(dir.path(), corpus, sentences);
        for kind in Retriever::ALL {
            let mut r = StreamingRetriever::new(
                StreamConfig {
                    retriever: kind,
                    trigger_interval: 1,
                    context_tokens: 12,
                    ..cfg()
                },
                NoAlloc,
                HybridSearcher::new(&index).unwrap(),
                Normalizer::default(),
            );
            let utterance = |r: &mut StreamingRetriever<'_, NoAlloc>| {
                for p in ["set a", "set a timer", "set a timer for ten minutes"] {
                    r.observe(p).unwrap();
                }
                r.finalize("set a timer for ten minutes").unwrap()
            };
            utterance(&mut r); // warm-up
            let before = alloc_count::count();
            let out = utterance(&mut r);
            let after = alloc_count::count();
            assert_eq!(
                after - before,
                0,
                "{kind}, sentences {sentences}: allocations"
            );
            assert!(
                !out.context.spans.is_empty(),
                "{kind}, sentences {sentences}"
            );
            assert!(out.context.tokens <= 12);
            let unit = if sentences { "sentences" } else { "passages" };
            assert_eq!(out.context.unit.as_str(), unit);
        }
    }
}

#[test]
fn switching_lanes_allocates_nothing_after_each_lane_s_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = StreamingRetriever::new(
        StreamConfig {
            retriever: Retriever::Hybrid,
            trigger_interval: 1,
            similarity_threshold: 2.0,
            ..cfg()
        },
        NoAlloc,
        HybridSearcher::new(&index).unwrap(),
        Normalizer::default(),
    );
    let a = ["set a", "set a timer", "set a timer for ten minutes"];
    let b = [
        "what is",
        "what is the capital",
        "what is the capital of france",
    ];
    // Two conversations interleaved, partial by partial, each with its own state.
    let both = |r: &mut StreamingRetriever<'_, NoAlloc>| {
        for (pa, pb) in a.iter().zip(b) {
            r.switch(0);
            r.observe(pa).unwrap();
            r.switch(3);
            r.observe(pb).unwrap();
            let _ = r.speculative_guess(5);
        }
        r.switch(0);
        let oa = r.finalize("set a timer for ten minutes").unwrap();
        r.switch(3);
        let ob = r.finalize("what is the capital of france").unwrap();
        (oa, ob)
    };
    both(&mut r); // warm-up: each lane's state is made once
    let before = alloc_count::count();
    let (oa, ob) = both(&mut r);
    assert_eq!(
        alloc_count::count() - before,
        0,
        "allocations switching lanes"
    );
    assert_eq!(oa.path, FinalPath::Reuse, "lane 0 kept its own embedding");
    assert_eq!(ob.path, FinalPath::Reuse, "lane 3 kept its own embedding");
    assert_ne!(oa.hits[0].index, ob.hits[0].index);
}

/// Counts this thread's heap allocations (for the tests above, and the hub's).
pub(crate) mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNT: Cell<u64> = const { Cell::new(0) };
    }

    pub struct Counting;

    fn bump() {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }

    // SAFETY: forwards to the system allocator; only counts.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            bump();
            // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is `System`'s.
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            bump();
            // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is `System`'s.
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
            bump();
            // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is `System`'s.
            unsafe { System.realloc(p, l, size) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is `System`'s.
            unsafe { System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    pub fn count() -> u64 {
        COUNT.with(|c| c.get())
    }
}

/// A learned trigger by hand: NEW_QUERY once two words are new since the last query.
pub(crate) fn two_new_words_model(index: &Index) -> std::sync::Arc<trigger::TriggerModel> {
    let m = trigger::TriggerModel::new(
        &["new_words"],
        &[0.0],
        &[1.0],
        &[4.0],
        -6.0,
        (0.5, 0.5),
        &index.meta().fingerprint,
        None,
        trigger::TrainingInfo::default(),
    )
    .unwrap();
    m.check(index, Retriever::Dense, std::path::Path::new("t.json"))
        .unwrap();
    std::sync::Arc::new(m)
}

#[test]
fn a_learned_trigger_decides_the_dense_work_and_the_final_can_keep_the_last_query() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let learned = StreamConfig {
        similarity_threshold: 2.0,
        trigger: Trigger::Learned(two_new_words_model(&index)),
        ..cfg()
    };
    let mut r = retriever(&index, learned.clone());
    assert_eq!(r.observe("set").unwrap(), Observed::Waiting, "one new word");
    assert!(
        !r.idle().unwrap(),
        "no idle embedding with a learned trigger"
    );
    assert_eq!(r.observe("set a").unwrap(), Observed::Speculated);
    assert_eq!(r.observe("set a timer").unwrap(), Observed::Waiting);
    assert_eq!(
        r.observe("set a timer for ten").unwrap(),
        Observed::Speculated
    );
    assert_eq!(
        r.observe("set a timer for ten").unwrap(),
        Observed::Waiting,
        "nothing new"
    );
    // One word more at the end: NO_QUERY, the last query's embedding answers.
    let out = r.finalize("set a timer for ten minutes").unwrap();
    assert_eq!((out.path, out.reused_embedding), (FinalPath::Reuse, true));
    assert_eq!((out.counts.embeds, out.counts.speculative_searches), (2, 2));
    assert_eq!(top_id(&index, &out), "timer");

    // A final with two new words is NEW_QUERY: embedded after end of speech.
    let mut r = retriever(&index, learned);
    r.observe("paris is").unwrap();
    let out = r.finalize("paris is the capital").unwrap();
    assert!(!out.reused_embedding);
    assert_eq!(out.counts.embeds, 2);
    assert_eq!(top_id(&index, &out), "paris");
}

#[test]
fn a_learned_trigger_with_lexical_features_runs_on_the_hybrid_retriever() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let made_for = |analyzer: Option<String>| {
        trigger::TriggerModel::new(
            &["new_words", "lexical_top1_changed"],
            &[0.0, 0.0],
            &[1.0, 1.0],
            &[0.0, 8.0],
            -4.0,
            (0.5, 0.5),
            &index.meta().fingerprint,
            analyzer,
            trigger::TrainingInfo::default(),
        )
        .unwrap()
    };
    let path = std::path::Path::new("t.json");
    // trained on an index of within-word n-grams (analyzer versions 1-2): other idfs
    let e = made_for(Some("char4".into()))
        .check(&index, Retriever::Hybrid, path)
        .unwrap_err();
    assert!(e.to_string().contains("char4+across"), "{e}");
    let m = made_for(index.lexical().map(|l| l.spec().id()));
    m.check(&index, Retriever::Hybrid, path).unwrap();
    assert!(
        m.check(&index, Retriever::Dense, path).is_err(),
        "lexical features need the lexical side"
    );
    let mut r = retriever(
        &index,
        StreamConfig {
            similarity_threshold: 2.0,
            trigger: Trigger::Learned(std::sync::Arc::new(m)),
            ..hybrid_cfg(Retriever::Hybrid)
        },
    );
    // The first lexical top-1 is new (nothing remembered): query.
    assert_eq!(r.observe("tokyo").unwrap(), Observed::Speculated);
    // Same lexical top-1: no query, however many words.
    assert_eq!(
        r.observe("tokyo is the capital of").unwrap(),
        Observed::Waiting
    );
    // The lexical top-1 moves to another passage: query.
    assert_eq!(
        r.observe("tokyo is the capital of france paris").unwrap(),
        Observed::Speculated
    );
}

#[test]
fn a_trigger_model_for_another_embedder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let m = trigger::TriggerModel::new(
        &["new_words"],
        &[0.0],
        &[1.0],
        &[1.0],
        0.0,
        (0.5, 0.5),
        &[9; 32],
        None,
        trigger::TrainingInfo::default(),
    )
    .unwrap();
    let path = dir.path().join("trigger.json");
    m.save(&path).unwrap();
    let e = trigger::load_for(
        trigger::TriggerKind::Learned,
        Some(&path),
        &index,
        Retriever::Hybrid,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("embedding model") && e.contains("--train-trigger"),
        "{e}"
    );
    let e = trigger::load_for(
        trigger::TriggerKind::Learned,
        None,
        &index,
        Retriever::Hybrid,
    )
    .unwrap_err();
    assert!(matches!(e, trigger::TriggerError::NoModel));
    assert_eq!(
        trigger::load_for(
            trigger::TriggerKind::Fixed,
            Some(&path),
            &index,
            Retriever::Hybrid
        )
        .unwrap(),
        Trigger::Fixed
    );
}
