//! Conversations in the streaming retriever (what `primd run` does per lane): a
//! follow-up spoken after its topic, a switch, the pipe's silence gap, the per-turn
//! opt-out, lanes kept apart, and no allocation per partial or turn with context on.

use super::tests::CORPUS;
use super::*;
use crate::embed::HashEmbedder;
use crate::index::Index;
use crate::retriever::Retriever;
use crate::stream::normalize::Normalizer;
use crate::stream::tests::{NoAlloc, alloc_count};
use crate::stream::{StreamConfig, StreamingRetriever};

fn index(dir: &std::path::Path) -> Index {
    crate::testing::hash_index(dir, CORPUS)
}

fn retriever<E: crate::embed::Embed>(index: &Index, e: E, on: bool) -> StreamingRetriever<'_, E> {
    let mut r = StreamingRetriever::new(
        StreamConfig {
            retriever: Retriever::Hybrid,
            min_tokens: 1,
            top_k: 3,
            max_speculative_results: 5,
            full_search_candidates: 5,
            lexical_candidates: 5,
            ..StreamConfig::default()
        },
        e,
        HybridSearcher::new(index).unwrap(),
        Normalizer::default(),
    );
    r.set_conversation(ConversationConfig {
        enabled: on,
        ..ConversationConfig::default()
    });
    r
}

/// Speaks `text` word by word, then ends the turn; the top passage and the
/// conversation use.
fn say<E: crate::embed::Embed>(
    r: &mut StreamingRetriever<'_, E>,
    index: &Index,
    text: &str,
) -> (String, Option<Used>) {
    let words: Vec<&str> = text.split(' ').collect();
    for n in 1..=words.len() {
        r.observe(&words[..n].join(" ")).unwrap();
        r.idle().unwrap();
    }
    let o = r.finalize(text).unwrap();
    let top = index
        .passage(o.hits[0].index as usize)
        .unwrap()
        .id
        .to_string();
    (top, o.conversation)
}

#[test]
fn a_spoken_follow_up_finds_its_topic_and_a_switch_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut off = retriever(&index, HashEmbedder, false);
    say(&mut off, &index, "when was the city museum built");
    let (top, used) = say(&mut off, &index, "who designed it");
    assert_eq!(
        (top.as_str(), used),
        ("bridge", None),
        "the premise: alone it misses"
    );

    let mut r = retriever(&index, HashEmbedder, true);
    let (top, used) = say(&mut r, &index, "when was the city museum built");
    assert_eq!(top, "museum");
    assert_eq!(
        used,
        Some(Used {
            used: false,
            turns: 0,
            topic: None,
            tried: None,
        })
    );
    let (top, used) = say(&mut r, &index, "who designed it");
    assert_eq!(top, "museum");
    let used = used.unwrap();
    assert_eq!((used.used, used.turns), (true, 1));
    // The result names the topic it used: the turn before (the passages have no title).
    assert_eq!(
        used.topic.as_deref(),
        Some("when was the city museum built")
    );
    let (top, used) = say(&mut r, &index, "when do ferries leave the harbour");
    assert_eq!(top, "harbour");
    assert!(!used.unwrap().used);
}

#[test]
fn forget_context_off_and_lanes_apart() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, HashEmbedder, true);
    // Lane 0 talks about the museum, lane 2 about the bridge.
    r.switch(0);
    say(&mut r, &index, "when was the city museum built");
    r.switch(2);
    say(&mut r, &index, "when was the old bridge built");
    r.switch(0);
    assert_eq!(say(&mut r, &index, "who designed it").0, "museum");
    r.switch(2);
    assert_eq!(say(&mut r, &index, "who designed it").0, "bridge");
    // A turn with context off is retrieved alone, and the conversation goes on.
    r.switch(0);
    r.set_context(false);
    let (top, used) = say(&mut r, &index, "who designed it");
    assert_eq!(
        (top.as_str(), used),
        (
            "bridge",
            Some(Used {
                used: false,
                turns: 0,
                topic: None,
                tried: None,
            })
        )
    );
    let (_, used) = say(&mut r, &index, "who designed it");
    assert!(used.unwrap().turns > 0, "the opt-out lasted one turn");
    // Forgotten (a reset, a new session on the lane): alone again.
    r.forget();
    assert_eq!(r.conversation_turns(), 0);
    let (top, used) = say(&mut r, &index, "who designed it");
    assert_eq!((top.as_str(), used.unwrap().turns), ("bridge", 0));
}

#[test]
fn the_pipes_conversation_ends_after_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut r = retriever(&index, HashEmbedder, true);
    r.set_conversation(ConversationConfig {
        gap_ms: 50,
        ..ConversationConfig::default()
    });
    r.switch(0);
    say(&mut r, &index, "when was the city museum built");
    assert_eq!(say(&mut r, &index, "who designed it").0, "museum");
    std::thread::sleep(std::time::Duration::from_millis(120));
    let (top, used) = say(&mut r, &index, "who designed it");
    assert_eq!(
        (top.as_str(), used.unwrap().turns),
        ("bridge", 0),
        "a new visitor"
    );
    // Sessions' lanes have no gap: their conversation lasts as long as the session.
    r.switch(1);
    say(&mut r, &index, "when was the city museum built");
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(say(&mut r, &index, "who designed it").0, "museum");
}

#[test]
fn no_allocation_per_partial_or_turn_with_context_on() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    for kind in Retriever::ALL {
        let r = retriever(&index, NoAlloc, true);
        let mut cfg = r.config().clone();
        cfg.retriever = kind;
        let mut r = StreamingRetriever::new(
            cfg,
            NoAlloc,
            HybridSearcher::new(&index).unwrap(),
            Normalizer::default(),
        );
        r.set_conversation(ConversationConfig::default());
        let turn = |r: &mut StreamingRetriever<'_, NoAlloc>, parts: &[&str]| {
            for p in parts {
                r.observe(p).unwrap();
                let _ = r.speculative_guess(3);
                r.idle().unwrap();
            }
            r.finalize(parts[parts.len() - 1]).unwrap()
        };
        let first = [
            "when was",
            "when was the city",
            "when was the city museum built",
        ];
        let follow = ["who", "who designed", "who designed it"];
        // Warm-up: buffers reach their size (twice: a turn without a cue is searched
        // with the topic too once there is one).
        for _ in 0..2 {
            turn(&mut r, &first);
            turn(&mut r, &follow);
        }
        let before = alloc_count::count();
        turn(&mut r, &first);
        let o = turn(&mut r, &follow);
        assert_eq!(alloc_count::count() - before, 0, "{kind}: allocations");
        assert!(o.conversation.is_some_and(|u| u.turns > 0), "{kind}");
    }
}
