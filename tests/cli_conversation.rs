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
