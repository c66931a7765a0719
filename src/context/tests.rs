//! What an agent notices of `context`: the budget is kept exactly, offsets point at the
//! text, the answering sentence is found where it is, and no input makes it panic.

use super::*;
use crate::dense::Query;
use crate::embed::{DIM, HashEmbedder};
use crate::fusion::Scored;
use crate::testing::hash_index_with;

const CORPUS: &[(&str, &str)] = &[
    (
        "zorbia",
        "Zorbia is a small country with many rivers and old forests. The capital of Zorbia is \
         Quxville, founded by fishermen long ago. Its harbour trades wool and salt with \
         neighbours. Tourists visit the forests every summer for hiking.",
    ),
    (
        "asr",
        "the river flows north through the valley and the farmers grow barley along its banks \
         every spring the town holds a market where people sell cheese and bread the mayor of \
         the town is a woman called elena marsh who was elected in the spring of last year \
         the valley is known for its mild winters and long summers and many visitors come",
    ),
    (
        "pronoun",
        "Marie Dubois was born in Lyon in a family of weavers. She discovered the element \
         quentium while studying rare minerals. Later she taught chemistry in Paris for years.",
    ),
    ("empty", ""),
    (
        "tokyo",
        "東京は日本の首都です。人口は約千四百万人です。大阪は西にあります。",
    ),
];

fn counter() -> impl FnMut(&str) -> usize {
    let mut e = HashEmbedder;
    move |t| word_pieces(&mut e, t)
}

fn query(text: &str) -> Query {
    let mut v = [0.0; DIM];
    HashEmbedder.embed_into(text, &mut v).unwrap();
    Query::new(&v)
}

/// The context of `question` over the passages `ids` (as if retrieved in that order).
fn context(index: &Index, question: &str, ids: &[&str], budget: usize) -> Context {
    let hits: Vec<Scored> = ids
        .iter()
        .map(|id| {
            let i = (0..index.len())
                .find(|&i| index.passage(i).unwrap().id == *id)
                .unwrap();
            Scored::new(i as u32, Some(0.5), None)
        })
        .collect();
    let mut out = Context::default();
    let mut b = ContextBuilder::new();
    let q = query(question);
    b.build(
        index,
        Some(&q),
        question,
        &hits,
        budget,
        &mut counter(),
        &mut out,
    );
    out
}

fn text(index: &Index, c: &Context) -> String {
    to_json(index, c).unwrap().text
}

#[test]
fn the_answer_second_in_its_passage_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, true);
    let c = context(
        &index,
        "What is the capital of Zorbia?",
        &["zorbia", "pronoun"],
        16,
    );
    let t = text(&index, &c);
    assert!(t.contains("Quxville"), "{t:?}");
    assert!(!t.contains("Tourists"), "{t:?}");
    assert_eq!(c.unit, Unit::Sentences);
}

#[test]
fn the_budget_is_kept_exactly_and_offsets_point_at_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, true);
    let ids = ["zorbia", "asr", "pronoun", "empty", "tokyo"];
    let mut count = counter();
    for budget in [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 100_000] {
        let c = context(&index, "who is the mayor of the town", &ids, budget);
        assert!(c.tokens as usize <= budget, "{} > {budget}", c.tokens);
        let j = to_json(&index, &c).unwrap();
        // the tokens are the text's, counted again
        assert_eq!(
            count(&j.text),
            c.tokens as usize,
            "budget {budget}: {:?}",
            j.text
        );
        for (s, sj) in c.spans.iter().zip(&j.spans) {
            let p = index.passage(s.passage as usize).unwrap();
            let by_chars: String = p
                .text
                .chars()
                .skip(sj.start)
                .take(sj.end - sj.start)
                .collect();
            assert_eq!(by_chars, span_text(&index, s).unwrap());
            assert!(j.text.contains(&by_chars));
            assert_eq!(sj.passage, p.id);
        }
        if budget == 100_000 {
            // everything of the five passages fits: nothing cut, all sentences there
            assert!(c.spans.iter().all(|s| !s.cut));
            assert!(j.text.contains("elena marsh") && j.text.contains("大阪"));
        }
    }
}

#[test]
fn a_sentence_longer_than_the_budget_is_cut_at_a_word_boundary_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let long = (0..5000)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let corpus = [("long", long.as_str())];
    let index = hash_index_with(dir.path(), &corpus, true);
    // 5,000 words without a stop: windows of at most 40 words
    assert!(index.sentences().unwrap().len() >= 5000 / split::MAX_WORDS);
    let c = context(&index, "word17 word18", &["long"], 7);
    assert_eq!(c.tokens, 7);
    let j = to_json(&index, &c).unwrap();
    assert!(j.spans.iter().any(|s| s.cut), "{j:?}");
    // cut where a word ends
    for s in &c.spans {
        let p = index.passage(0).unwrap();
        assert!(p.text[s.end as usize..].starts_with(' ') || s.end as usize == p.text.len());
    }
    let json = serde_json::to_string(&j).unwrap();
    assert!(json.contains("\"cut\":true"), "{json}");
}

#[test]
fn a_transcript_without_punctuation_gives_the_window_that_answers() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, true);
    let c = context(&index, "who is the mayor of the town", &["asr"], 40);
    let t = text(&index, &c);
    assert!(t.contains("elena marsh"), "{t:?}");
    assert!(c.tokens <= 40);
    assert!(index.sentences().unwrap().of_passage(1).len() >= 2);
}

#[test]
fn a_sentence_starting_with_a_pronoun_brings_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, true);
    let c = context(&index, "who discovered quentium", &["pronoun"], 30);
    let t = text(&index, &c);
    assert!(t.contains("She discovered"), "{t:?}");
    assert!(t.contains("Marie Dubois"), "{t:?}");
    assert!(
        t.find("Marie").unwrap() < t.find("She").unwrap(),
        "reading order"
    );
}

#[test]
fn an_index_without_sentences_falls_back_to_whole_passages() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, false);
    assert!(index.sentences().is_none());
    let c = context(&index, "capital of Zorbia", &["zorbia", "pronoun"], 50);
    assert_eq!(c.unit, Unit::Passages);
    let j = to_json(&index, &c).unwrap();
    assert_eq!(j.unit, "passages");
    assert!(c.tokens <= 50 && c.tokens > 30, "{}", c.tokens);
    assert!(j.text.starts_with("Zorbia is a small country"));
    assert_eq!(counter()(&j.text), c.tokens as usize);
    assert!(j.spans.last().unwrap().cut);
}

#[test]
fn bad_input_is_answered_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    for with in [true, false] {
        let index = hash_index_with(dir.path(), CORPUS, with);
        let all = ["empty", "tokyo", "zorbia", "asr", "pronoun"];
        for budget in [0, 1, 100_000, usize::MAX] {
            for q in ["", "?", "首都", "capital of Zorbia"] {
                let c = context(&index, q, &all, budget);
                assert!(c.tokens as usize <= budget.min(MAX_CONTEXT_TOKENS));
                to_json(&index, &c).unwrap();
            }
        }
        assert!(context(&index, "capital", &all, 0).spans.is_empty());
        assert!(context(&index, "capital", &[], 50).spans.is_empty());
        let only_empty = context(&index, "capital", &["empty"], 50);
        assert_eq!(only_empty.tokens, 0);
        let t = text(&index, &context(&index, "首都", &["tokyo"], 100));
        assert!(t.contains("東京"), "{t:?}");
    }
}

#[test]
fn best_is_one_sentence_alone_and_absent_when_nothing_is_packed() {
    let dir = tempfile::tempdir().unwrap();
    let index = hash_index_with(dir.path(), CORPUS, true);
    let sentences = index.sentences().unwrap();
    let zorbia = (0..index.len())
        .find(|&i| index.passage(i).unwrap().id == "zorbia")
        .unwrap();
    let stored: Vec<(u32, u32)> = sentences
        .of_passage(zorbia)
        .map(|k| {
            let s = sentences.span(k);
            (s.start, s.end)
        })
        .collect();
    assert!(stored.len() >= 3, "{stored:?}");
    // A budget that takes the whole passage: its sentences are neighbours, yet the best
    // one is a span of its own, and `best` points at it in the JSON too.
    for question in ["What is the capital of Zorbia?", "what do tourists visit"] {
        let c = context(&index, question, &["zorbia"], 10_000);
        let b = c.best.expect("a best span");
        let s = c.spans[b];
        assert!(
            stored.contains(&(s.start, s.end)),
            "{question}: best span {}..{} is not one stored sentence {stored:?}",
            s.start,
            s.end
        );
        let j = to_json(&index, &c).unwrap();
        assert_eq!(j.best, Some(b));
        assert!(
            c.spans.len() >= 2,
            "the other sentences still merge: {:?}",
            c.spans
        );
    }
    // Nothing packed (no hits, or a budget of 0): no `best` into an empty list.
    for (ids, budget) in [(&[][..], 50), (&["zorbia"][..], 0)] {
        let c = context(&index, "capital", ids, budget);
        assert!(c.spans.is_empty());
        assert_eq!(c.best, None);
        assert_eq!(to_json(&index, &c).unwrap().best, None);
    }
}

fn ranked(n: u32) -> Vec<Scored> {
    (0..n)
        .map(|i| Scored {
            index: i,
            score: 1.0 - i as f32 * 0.1,
            dense: None,
            bm25: None,
        })
        .collect()
}

fn read(passage: u32, best: f32, top1: f32) -> Context {
    Context {
        reader: Some(ReaderScores {
            best,
            top1,
            passage: Some(passage),
        }),
        ..Context::default()
    }
}

/// The reader moves a passage whose sentence answers clearly better to the top, and a
/// passage the retriever ranked further down needs a clearer lead ("When does the museum
/// open?" must not give the adults-only evening, fourth, over the opening hours).
#[test]
fn the_reader_promotes_a_clearly_better_passage_more_readily_near_the_top() {
    let order = |h: &[Scored]| h.iter().map(|s| s.index).collect::<Vec<_>>();
    let mut hits = ranked(5);
    assert!(promote(&read(1, 6.0, 4.5), &mut hits), "second, 1.5 ahead");
    assert_eq!(order(&hits), [1, 0, 2, 3, 4]);
    let mut hits = ranked(5);
    assert!(!promote(&read(1, 6.0, 5.5), &mut hits), "second, 0.5 ahead");
    assert_eq!(order(&hits), [0, 1, 2, 3, 4]);
    let mut hits = ranked(5);
    assert!(!promote(&read(3, 7.3, 6.2), &mut hits), "fourth, 1.1 ahead");
    assert_eq!(order(&hits), [0, 1, 2, 3, 4]);
    let mut hits = ranked(5);
    assert!(promote(&read(3, 9.0, 6.2), &mut hits), "fourth, 2.8 ahead");
    assert_eq!(order(&hits), [3, 0, 1, 2, 4]);
    // The top-1 itself, or no reader: nothing moves, and the evidence is the retriever's.
    let mut hits = ranked(5);
    assert!(!promote(&read(0, 9.0, 9.0), &mut hits));
    assert_eq!(judge(&Context::default(), &mut hits, Some(0.4)), Some(0.4));
    assert_eq!(order(&hits), [0, 1, 2, 3, 4]);
}
