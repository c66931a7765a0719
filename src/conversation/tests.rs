//! A conversation over a small hand-made index with the deterministic fake embedder:
//! a follow-up finds its topic's passage, a switch keeps its own, state is bounded.

use super::*;
use crate::embed::{Embed, HashEmbedder};
use crate::fusion::Fusion;
use crate::index::Index;
use crate::retriever::Retriever;

pub(crate) const CORPUS: &[(&str, &str)] = &[
    (
        "museum",
        "the city museum was built in eighteen ninety and was designed by anna berg",
    ),
    (
        "bridge",
        "the old bridge was built in nineteen twenty and was designed by karl lind",
    ),
    (
        "zoo",
        "the zoo opens at nine and tickets for children cost five euros",
    ),
    (
        "pool",
        "the swimming pool opens at seven and tickets for adults cost four euros",
    ),
    ("harbour", "ferries leave the harbour every hour in summer"),
];

fn params() -> SearchParams {
    SearchParams {
        retriever: Retriever::Hybrid,
        k: 3,
        candidates: 5,
        lexical_candidates: 5,
        fusion: Fusion::default(),
    }
}

struct Rig<'i> {
    index: &'i Index,
    searcher: HybridSearcher<'i>,
    scratch: ContextSearch,
    cfg: ConversationConfig,
}

impl<'i> Rig<'i> {
    fn new(index: &'i Index) -> Self {
        Rig {
            index,
            searcher: HybridSearcher::new(index).unwrap(),
            scratch: ContextSearch::new(),
            cfg: ConversationConfig::default(),
        }
    }

    /// The top passage's id and how the conversation was used.
    fn ask(&mut self, conv: &mut Conversation, text: &str, enabled: bool) -> (String, Used) {
        let mut v = [0.0; DIM];
        HashEmbedder.embed_into(text, &mut v).unwrap();
        let mut hits = Ranked::new();
        let p = params();
        self.searcher
            .search(&p, Some(&Query::new(&v)), text, &mut hits);
        let used = turn(
            conv,
            &mut self.scratch,
            &mut self.searcher,
            &p,
            &self.cfg,
            enabled,
            text,
            Some(&v),
            &mut hits,
        );
        let top = hits
            .first()
            .map(|h| self.index.passage(h.index as usize).unwrap().id.to_string())
            .unwrap_or_default();
        (top, used)
    }
}

fn index(dir: &std::path::Path) -> Index {
    crate::testing::hash_index(dir, CORPUS)
}

#[test]
fn a_follow_up_finds_its_topics_passage_and_a_switch_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    // Alone, "who designed it" cannot tell the museum from the bridge.
    let mut alone = Conversation::new();
    let (top, used) = rig.ask(&mut alone, "who designed it", true);
    assert!(!used.used && used.turns == 0);
    assert_eq!(top, "bridge", "the premise: alone, the follow-up misses");

    let mut c = Conversation::new();
    let (top, used) = rig.ask(&mut c, "when was the city museum built", true);
    assert_eq!((top.as_str(), used.used, used.turns), ("museum", false, 0));
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((top.as_str(), used.used, used.turns), ("museum", true, 1));
    // A chain of follow-ups keeps the first turn's topic.
    let (top, _) = rig.ask(&mut c, "and who designed that", true);
    assert_eq!(top, "museum");
    // A switch names its own topic: unhurt.
    let (top, used) = rig.ask(&mut c, "when do ferries leave the harbour", true);
    assert_eq!((top.as_str(), used.used), ("harbour", false));
    assert_eq!(c.count(), 4);
    assert_eq!(c.remembered(), MAX_TURNS as u32);
}

/// What the reader judges a turn against: a follow-up that used its topic carries the
/// topic's words ("who designed it" alone has no answer anywhere), any other turn is
/// read as said.
#[test]
fn a_follow_up_is_read_as_its_conversation_resolved_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut c = Conversation::new();
    let mut out = String::new();
    let (_, used) = rig.ask(&mut c, "when was the city museum built", true);
    assert_eq!(
        resolved("when was the city museum built", &used, &mut out),
        "when was the city museum built"
    );
    let (_, used) = rig.ask(&mut c, "who designed it", true);
    let topic = used.topic.clone().expect("the context search's topic");
    assert_eq!(
        resolved("who designed it", &used, &mut out),
        format!("who designed it {topic}")
    );
    let (_, used) = rig.ask(&mut c, "when do ferries leave the harbour", true);
    assert_eq!(
        resolved("when do ferries leave the harbour", &used, &mut out),
        "when do ferries leave the harbour"
    );
}

#[test]
fn context_false_and_reset_retrieve_the_turn_alone() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut c = Conversation::new();
    rig.ask(&mut c, "when was the city museum built", true);
    let (top, used) = rig.ask(&mut c, "who designed it", false);
    assert_eq!((top.as_str(), used.used, used.turns), ("bridge", false, 0));
    c.reset();
    assert_eq!(c.count(), 0);
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((top.as_str(), used.used), ("bridge", false));
    // Switched off in the settings: the same.
    let mut c = Conversation::new();
    rig.cfg.enabled = false;
    rig.ask(&mut c, "when was the city museum built", true);
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((top.as_str(), used.used), ("bridge", false));
}

#[test]
fn conversations_do_not_leak_into_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut convs = Conversations::new(8);
    let a = serde_json::json!("a");
    let b = serde_json::json!(2);
    rig.ask(convs.get(&a), "when was the city museum built", true);
    rig.ask(convs.get(&b), "when was the old bridge built", true);
    let (top, _) = rig.ask(convs.get(&a), "who designed it", true);
    assert_eq!(top, "museum");
    let (top, _) = rig.ask(convs.get(&b), "who designed it", true);
    assert_eq!(top, "bridge");
    assert_eq!(convs.len(), 2);
}

#[test]
fn the_least_recently_used_conversation_is_evicted_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut convs = Conversations::new(3);
    let first = serde_json::json!("first");
    rig.ask(convs.get(&first), "when was the city museum built", true);
    for i in 0..1000 {
        let id = serde_json::json!(format!("c{i}"));
        rig.ask(convs.get(&id), "tickets for children", true);
        assert!(convs.len() <= 3);
    }
    // "first" was forgotten: its follow-up starts afresh.
    let (_, used) = rig.ask(convs.get(&first), "who designed it", true);
    assert_eq!(used.turns, 0);
}

#[test]
fn bad_turns_are_answered_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut c = Conversation::new();
    // Empty turns: answered, not remembered.
    let (_, used) = rig.ask(&mut c, "", true);
    assert!(!used.used);
    let (_, used) = rig.ask(&mut c, "   ", true);
    assert!(!used.used);
    assert_eq!(c.count(), 0);
    // A turn of 10,000 words: its text is kept cut, the topic bounded.
    let long = "museum ".repeat(10_000);
    rig.ask(&mut c, &long, true);
    rig.ask(&mut c, "and it", true);
    assert!(c.last().unwrap().text.len() <= TEXT_BYTES);
    assert!(c.topic().unwrap().0.len() <= TEXT_BYTES);
    // 10,000 turns: memory stays at MAX_TURNS turns, the topic bounded.
    let cap = c.topic.capacity();
    for i in 0..10_000 {
        let t = if i % 2 == 0 {
            "and there"
        } else {
            "what about it"
        };
        rig.ask(&mut c, t, true);
    }
    assert_eq!(c.count(), 10_002);
    assert_eq!(c.remembered(), MAX_TURNS as u32);
    assert!(c.topic().unwrap().0.len() <= TEXT_BYTES);
    assert_eq!(c.topic.capacity(), cap, "no growth");
}

#[test]
fn mixing_vectors_is_normalised_and_survives_opposite_vectors() {
    let mut a = [0.0; DIM];
    let mut b = [0.0; DIM];
    a[0] = 1.0;
    b[1] = 1.0;
    let mut out = [0.0; DIM];
    mix(&a, &b, 1.0, &mut out);
    let norm: f32 = out.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
    assert!((out[0] - out[1]).abs() < 1e-6);
    let neg = a.map(|x| -x);
    mix(&a, &neg, 1.0, &mut out);
    assert_eq!(out, a, "a zero sum falls back to the turn's own vector");
}

#[test]
fn the_decision_keeps_a_confident_turn_alone() {
    let lean = cues("who designed it");
    let own = cues("when was the city museum built");
    assert!(decide(Decision::Cues, &lean, Some(0.3), Some(0.6)));
    assert!(decide(Decision::Cues, &lean, Some(0.3), Some(0.1)));
    assert!(!decide(Decision::Cues, &lean, Some(0.95), Some(0.2)));
    assert!(!decide(Decision::Cues, &own, Some(0.1), Some(0.9)));
    assert!(decide(Decision::Always, &own, Some(0.9), Some(0.1)));
    assert!(decide(Decision::Evidence, &own, Some(0.1), Some(0.9)));
    assert!(!decide(Decision::Evidence, &lean, None, None));
    let short = cues("where are the toilets");
    assert!(!decide(Decision::Cues, &short, Some(0.9), Some(0.5)));
    assert!(!decide(Decision::Cues, &short, Some(0.02), Some(0.99)));
}

#[test]
fn the_topic_is_the_title_of_the_answers_passage_else_the_turns_words() {
    let mut conv = Conversation::new();
    let v = [0.0; DIM];
    let hits = Ranked::new();
    conv.record(
        "when was it built",
        Some(&v),
        &hits,
        None,
        false,
        0.3,
        " City museum ",
        TopicMove::Replace,
    );
    assert_eq!(conv.topic().unwrap().0, "City museum");
    // No title (a corpus of untitled passages): the turn's own words.
    conv.record(
        "who designed the old bridge",
        Some(&v),
        &hits,
        None,
        false,
        0.3,
        "",
        TopicMove::Replace,
    );
    assert_eq!(conv.topic().unwrap().0, "who designed the old bridge");
    // A follow-up that used the context carries the topic before it along.
    conv.record(
        "and its length",
        Some(&v),
        &hits,
        None,
        true,
        0.3,
        "",
        TopicMove::Replace,
    );
    assert_eq!(
        conv.topic().unwrap().0,
        "and its length who designed the old bridge"
    );
}

#[test]
fn a_repeated_final_keeps_its_topic_and_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut c = Conversation::new();
    rig.ask(&mut c, "when was the city museum built", true);
    let (first, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((first.as_str(), used.used), ("museum", true));
    let topic = c.topic().unwrap().0.to_string();
    // A recognizer that sends its final again, five times: the same answer each time,
    // searched with the same topic, and the topic does not drift.
    for i in 0..5 {
        let (top, again) = rig.ask(&mut c, "who designed it", true);
        assert_eq!(
            (top.as_str(), &again.topic),
            (first.as_str(), &used.topic),
            "{i}"
        );
        assert_eq!(c.topic().unwrap().0, topic, "{i}");
    }
    // A shorter second final, contained in the first: a repeat too.
    assert!(c.repeats("designed it"));
    assert!(!c.repeats("it"), "one word is not enough to call a repeat");
    assert!(!c.repeats("who built it"));
}

#[test]
fn a_low_turn_is_remembered_but_does_not_replace_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    // Every answer `low` (a threshold above any confidence): the first turn still makes
    // the topic (there was none), the interjection does not replace it.
    rig.cfg.low_evidence_threshold = 1.5;
    let mut c = Conversation::new();
    rig.ask(&mut c, "when was the city museum built", true);
    let topic = c.topic().unwrap().0.to_string();
    rig.ask(&mut c, "when do ferries leave the harbour", true);
    assert_eq!(c.count(), 2, "remembered");
    assert_eq!(
        c.topic().unwrap().0,
        topic,
        "the topic survived the interjection"
    );
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((top.as_str(), used.used), ("museum", true));
    // Answered turns (nothing `low`) move the topic on, as before.
    rig.cfg.low_evidence_threshold = 0.0;
    let mut c = Conversation::new();
    rig.ask(&mut c, "when was the city museum built", true);
    rig.ask(&mut c, "when do ferries leave the harbour", true);
    assert_ne!(c.topic().unwrap().0, topic);
}

#[test]
fn the_agent_sets_and_clears_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let mut rig = Rig::new(&index);
    let mut c = Conversation::new();
    rig.ask(&mut c, "when do ferries leave the harbour", true);
    // The agent answered about the museum: it says so.
    c.set_topic("  the city museum  ", None);
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!((top.as_str(), used.used), ("museum", true));
    assert_eq!(used.topic.as_deref(), Some("the city museum"));
    // Cleared: the same question (a repeat) stands alone.
    c.set_topic("", None);
    assert!(c.topic().is_none());
    let (top, used) = rig.ask(&mut c, "who designed it", true);
    assert_eq!(
        (top.as_str(), used.used, used.topic),
        ("bridge", false, None)
    );
    // A topic before any turn, and a long one: kept, cut.
    let mut c = Conversation::new();
    c.set_topic(&"museum ".repeat(1000), None);
    assert!(c.topic().unwrap().0.len() <= TEXT_BYTES);
    let (top, _) = rig.ask(&mut c, "who designed it", true);
    assert_eq!(top, "museum");
}

#[test]
fn a_turn_names_a_title_by_a_word_of_four_letters_or_more() {
    assert!(names_title("when did the normans reach italy", "Normans"));
    assert!(names_title("what do huguenots believe", "Huguenot"));
    assert!(names_title(
        "tell me about the dinosaur hall",
        "Dinosaur Hall"
    ));
    assert!(!names_title(
        "what is the capital of france",
        "Cycling and bike parking"
    ));
    assert!(
        !names_title("what is it", "It"),
        "short title words name nothing"
    );
    assert!(!names_title("anything", ""));
}
