//! `primd search` carries a conversation within a `conversation` id, in input order: a
//! follow-up ("How much does it cost?") finds the passage of the topic the turn before
//! established, a switch keeps its own passage, and a line without the id (or with
//! `"context": false`) is retrieved alone. On the committed demo index with the real
//! model (the pipe and the socket: `src/conversation/stream_tests.rs`,
//! `src/hub/conversation_tests.rs`).

mod common;

fn top_and_used(out: &[u8]) -> Vec<(String, String, Option<bool>)> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v["results"][0]["id"].as_str().unwrap_or("").to_string(),
                v["conversation"]["used"].as_bool(),
            )
        })
        .collect()
}

#[test]
fn search_carries_a_conversation_within_its_id() {
    let input = [
        r#"{"id": "first", "text": "What time does the planetarium show start?", "conversation": "k"}"#,
        r#"{"id": "follow-up", "text": "How much does it cost?", "conversation": "k"}"#,
        r#"{"id": "switch", "text": "Can I bring my dog inside the museum?", "conversation": "k"}"#,
        r#"{"id": "other", "text": "How much does it cost?", "conversation": "someone else"}"#,
        r#"{"id": "alone", "text": "How much does it cost?"}"#,
        r#"{"id": "opted-out", "text": "How much does it cost?", "conversation": "k", "context": false}"#,
    ]
    .join("\n");
    let out = common::on_demo(&["search"], input.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = top_and_used(&out.stdout);
    let want: [(&str, &str, Option<bool>); 4] = [
        ("first", "planetarium-shows", Some(false)),
        ("follow-up", "planetarium-shows", Some(true)),
        ("switch", "dogs-and-assistance-animals", Some(false)),
        ("other", "", Some(false)),
    ];
    assert_eq!(got.len(), 6, "{got:?}");
    for ((id, top, used), (wid, wtop, wused)) in got.iter().zip(want) {
        assert_eq!(id, wid);
        assert_eq!(*used, wused, "{id}: {got:?}");
        if !wtop.is_empty() {
            assert_eq!(top, wtop, "{id}: {got:?}");
        }
    }
    // Asked alone, in another conversation or opted out, the follow-up has no topic: it
    // does not land on the planetarium.
    for (id, top, _) in &got[3..] {
        assert_ne!(top, "planetarium-shows", "{id}: {got:?}");
    }
    assert_eq!(
        got[4].2, None,
        "a line without an id says nothing of a conversation"
    );
}

/// Lines of `primd search` on the demo index (with `extra` flags), parsed.
fn search_lines(input: &[&str], extra: &[&str]) -> (Vec<serde_json::Value>, String) {
    let mut args = vec!["search"];
    args.extend_from_slice(extra);
    let out = common::on_demo(&args, input.join("\n").as_bytes());
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The same turns as finals through the pipe (`primd run --input -`): one conversation.
fn pipe_finals(turns: &[&str]) -> Vec<serde_json::Value> {
    use std::io::Write;
    let mut child = common::spawn_run(
        env!("CARGO_BIN_EXE_primd"),
        &common::data("demo-x86.idx"),
        &["--input", "-"],
    );
    let input: String = turns
        .iter()
        .map(|t| serde_json::json!({ "final": t }).to_string() + "\n")
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "final")
        .collect()
}

/// A turn's answer as a user sees it: the top passages, the context, how the conversation
/// was used, the evidence.
fn answer(v: &serde_json::Value) -> String {
    answer_with(v, &v["conversation"])
}

/// [`answer`] with the conversation's topic and use, not its count of turns.
fn answer_again(v: &serde_json::Value) -> String {
    let c = &v["conversation"];
    answer_with(v, &serde_json::json!([c["used"], c["topic"]]))
}

fn answer_with(v: &serde_json::Value, conversation: &serde_json::Value) -> String {
    let ids: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .take(3)
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    format!(
        "{ids:?} | {} | {} | {}",
        v["context"]["text"], conversation, v["evidence"]
    )
}

const VISIT: [&str; 7] = [
    "What time does the planetarium show start?",
    "How much does it cost?",
    "Um, how much does it cost?",
    "Can I bring my dog inside the museum?",
    "Where can they drink water?",
    "What is the capital of France?",
    "Is it suitable for young children?",
];

#[test]
fn search_and_the_pipe_give_the_same_answers_to_the_same_turns() {
    let input: Vec<String> = VISIT
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": i, "text": t, "conversation": "v"}).to_string())
        .collect();
    let input: Vec<&str> = input.iter().map(String::as_str).collect();
    let (search, stderr) = search_lines(&input, &[]);
    assert_eq!(search.len(), VISIT.len(), "{stderr}");
    let pipe = pipe_finals(&VISIT);
    assert_eq!(pipe.len(), VISIT.len());
    for (i, (s, p)) in search.iter().zip(&pipe).enumerate() {
        assert_eq!(answer(s), answer(p), "turn {i}: {:?}", VISIT[i]);
    }
    // Punctuation, case and fillers are not the question: the same answer.
    let (a, _) = search_lines(
        &[
            r#"{"id": 1, "text": "How much does it cost?"}"#,
            r#"{"id": 2, "text": "um how MUCH does it cost"}"#,
        ],
        &[],
    );
    assert_eq!(answer(&a[0]), answer(&a[1]));
}

#[test]
fn a_final_repeated_five_times_keeps_its_answer() {
    let mut input = vec![
        r#"{"id": "first", "text": "What time does the planetarium show start?", "conversation": "k"}"#,
    ];
    input.extend([r#"{"id": "again", "text": "How much does it cost?", "conversation": "k"}"#; 6]);
    let (lines, stderr) = search_lines(&input, &[]);
    assert_eq!(lines.len(), 7, "{stderr}");
    let first = answer_again(&lines[1]);
    assert!(first.contains("planetarium-shows"), "{first}");
    for (i, l) in lines[2..].iter().enumerate() {
        assert_eq!(answer_again(l), first, "repeat {}", i + 1);
    }
}

#[test]
fn an_off_topic_question_does_not_take_the_topic() {
    let (lines, stderr) = search_lines(
        &[
            r#"{"id": 1, "text": "Tell me about the Dinosaur Hall", "conversation": "k"}"#,
            r#"{"id": 2, "text": "What is the capital of France?", "conversation": "k"}"#,
            r#"{"id": 3, "text": "When is the talk there?", "conversation": "k"}"#,
        ],
        &[],
    );
    assert_eq!(lines.len(), 3, "{stderr}");
    assert_eq!(lines[0]["results"][0]["id"], "dinosaur-hall");
    assert_eq!(lines[1]["evidence"], "low", "the premise: {}", lines[1]);
    assert_eq!(
        lines[2]["results"][0]["id"], "dinosaur-hall",
        "{}",
        lines[2]
    );
    assert_eq!(lines[2]["conversation"]["topic"], "Dinosaur Hall");
}

#[test]
fn search_lines_no_context_budgets_and_bad_conversation_ids() {
    let input = [
        r#"{"id": "a", "text": "What time does the planetarium show start?", "conversation": "k"}"#,
        r#"{"id": "b", "text": "How much does it cost?", "conversation": "k", "context_tokens": 16}"#,
        r#"{"id": "c", "text": "How much does it cost?", "conversation": "k", "context_tokens": 0}"#,
        r#"{"id": "d", "text": "How much does it cost?", "conversation": [1]}"#,
        r#"{"id": "e", "text": "How much does it cost?", "context_tokens": 2000000}"#,
        r#"{"id": "f", "text": "How much does it cost?", "conversation": {"k": 1}}"#,
    ];
    let (lines, stderr) = search_lines(&input, &[]);
    let ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c"], "bad lines are skipped: {stderr}");
    assert!(
        stderr.contains("\"conversation\" must be a string or a number"),
        "{stderr}"
    );
    assert!(
        stderr.contains("\"context_tokens\" 2000000 is outside"),
        "{stderr}"
    );
    let tokens = lines[1]["context"]["tokens"].as_u64().unwrap();
    assert!((1..=16).contains(&tokens), "{}", lines[1]);
    assert!(lines[2].get("context").is_none(), "0: no context");
    assert!(lines[0]["context"]["tokens"].as_u64().unwrap() > 16);
    // --no-context: the field is absent, as the docs say.
    let (lines, _) = search_lines(&input[..2], &["--no-context"]);
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert!(l.get("conversation").is_none(), "{l}");
    }
}

#[test]
fn a_line_can_set_the_topic_as_the_agent_would() {
    let (lines, stderr) = search_lines(
        &[
            r#"{"id": 1, "text": "Can I bring my dog inside the museum?", "conversation": "k"}"#,
            r#"{"id": 2, "text": "How much does it cost?", "conversation": "k", "topic": "Planetarium shows"}"#,
        ],
        &[],
    );
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        lines[1]["results"][0]["id"], "planetarium-shows",
        "{}",
        lines[1]
    );
    assert_eq!(lines[1]["conversation"]["topic"], "Planetarium shows");
}
