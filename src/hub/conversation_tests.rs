//! Conversations through the socket and the pipe: a follow-up finds its topic's
//! passage, `"context": false` and `reset` retrieve alone, sessions keep apart, the
//! result says how the conversation was used (docs/conversations.md).

use super::*;

fn used(v: &serde_json::Value) -> (bool, u64) {
    let c = &v["conversation"];
    (c["used"].as_bool().unwrap(), c["turns"].as_u64().unwrap())
}

#[test]
fn a_socket_session_is_a_conversation() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    // Alone, "what is it the capital of" is Tokyo's passage.
    a.send(r#"{"session":"alone","turn":1,"final":"what is it the capital of"}"#);
    let v = a.next("alone");
    assert_eq!(v["results"][0]["id"], "tokyo", "the premise");
    assert_eq!(used(&v), (false, 0));

    a.send(r#"{"session":"k","turn":1,"final":"which city is on the river seine"}"#);
    let v = a.next("first turn");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("paris"), (false, 0))
    );
    a.send(r#"{"session":"k","turn":2,"partial":"what is the largest"}"#);
    a.send(r#"{"session":"k","turn":2,"final":"what is it the capital of"}"#);
    let v = a.next("follow-up");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("paris"), (true, 1))
    );
    // Opted out for one turn: alone.
    a.send(r#"{"session":"k","turn":3,"final":"what is it the capital of","context":false}"#);
    let v = a.next("context false");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("tokyo"), (false, 0))
    );
    // Reset: the next turn is alone too.
    let r = a.command(r#"{"cmd":"reset","session":"k","id":7}"#);
    assert_eq!((r["ok"].as_bool(), r["id"].as_u64()), (Some(true), Some(7)));
    a.send(r#"{"session":"k","turn":4,"final":"what is it the capital of"}"#);
    let v = a.next("after reset");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("tokyo"), (false, 0))
    );
    // Another session knows nothing of k's topic.
    a.send(r#"{"session":"k2","turn":1,"final":"what is it the capital of"}"#);
    assert_eq!(a.next("other session")["results"][0]["id"], "tokyo");
    // Resetting a session that is not this connection's is refused.
    let r = a.command(r#"{"cmd":"reset","session":"nobody","id":8}"#);
    assert_eq!(r["code"], "unknown_session");
    d.stop();
}

#[test]
fn a_closed_session_s_name_starts_a_new_conversation() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    a.send(r#"{"session":"k","turn":1,"final":"which city is on the river seine"}"#);
    a.next("first");
    let r = a.command(r#"{"cmd":"close","session":"k","id":1}"#);
    assert_eq!(r["ok"], true);
    a.send(r#"{"session":"k","turn":1,"final":"what is it the capital of"}"#);
    let v = a.next("same name, new session");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("tokyo"), (false, 0))
    );
    d.stop();
}

#[test]
fn the_pipe_is_one_conversation_and_reset_forgets_it() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    let mut d = daemon_with(Some(Box::new(std::io::BufReader::new(reader))));
    d.listen();
    let mut sub = d.connect();
    sub.command(r#"{"cmd":"subscribe","session":"stt"}"#);
    use std::io::Write;
    writer
        .write_all(b"{\"final\": \"which city is on the river seine\"}\n{\"final\": \"what is it the capital of\"}\n")
        .unwrap();
    assert_eq!(sub.next_final("first")["results"][0]["id"], "paris");
    let v = sub.next_final("follow-up on the pipe");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("paris"), (true, 1))
    );
    let r = sub.command(r#"{"cmd":"reset","session":"stt","id":2}"#);
    assert_eq!(r["ok"], true);
    writer
        .write_all(b"{\"final\": \"what is it the capital of\"}\n")
        .unwrap();
    let v = sub.next_final("after reset");
    assert_eq!(
        (v["results"][0]["id"].as_str(), used(&v)),
        (Some("tokyo"), (false, 0))
    );
    // The kiosk's controller sets the pipe's topic: the next follow-up leans on it.
    let r = sub.command(r#"{"cmd":"topic","session":"stt","passage":"paris","id":3}"#);
    assert_eq!(
        (r["ok"].as_bool(), r["topic"].as_str()),
        (Some(true), Some("Paris"))
    );
    writer
        .write_all(b"{\"final\": \"what is it the capital of\"}\n")
        .unwrap();
    let v = sub.next_final("after the controller's topic");
    assert_eq!(v["results"][0]["id"], "paris", "{v}");
    assert_eq!(v["conversation"]["topic"], "Paris");
    drop(writer);
    d.stop();
}

#[test]
fn a_turn_sets_its_own_context_budget_for_that_turn_only() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    let tokens = |v: &serde_json::Value| v["context"]["tokens"].as_u64();
    a.send(r#"{"session":"k","turn":1,"final":"which city is on the river seine"}"#);
    let default = tokens(&a.next("the daemon's budget")).expect("a context");
    assert!(
        default > 4,
        "the premise: a context longer than 4 ({default})"
    );
    a.send(
        r#"{"session":"k","turn":2,"final":"which city is on the river seine","context_tokens":4}"#,
    );
    let v = a.next("budget 4");
    assert!(tokens(&v).is_some_and(|t| t <= 4), "{v}");
    a.send(
        r#"{"session":"k","turn":3,"final":"which city is on the river seine","context_tokens":0}"#,
    );
    let v = a.next("budget 0");
    assert!(v.get("context").is_none(), "no context at 0: {v}");
    a.send(r#"{"session":"k","turn":4,"final":"which city is on the river seine"}"#);
    assert_eq!(tokens(&a.next("back to the daemon's")), Some(default));
    a.send(r#"{"session":"k","turn":5,"final":"x","context_tokens":-1}"#);
    assert_eq!(a.next("refused")["code"], "bad_message");
    d.stop();
}

#[test]
fn the_agent_sets_and_clears_a_sessions_topic() {
    let mut d = daemon();
    d.listen();
    let mut a = d.connect();
    // The agent just answered about Paris: it says so, by the passage it used.
    let r = a.command(r#"{"cmd":"topic","session":"k","passage":"paris","id":1}"#);
    assert_eq!(
        r["code"], "unknown_session",
        "a session opens with a turn: {r}"
    );
    a.send(r#"{"session":"k","turn":1,"final":"hello"}"#);
    a.next("opening turn");
    let r = a.command(r#"{"cmd":"topic","session":"k","passage":"paris","id":2}"#);
    assert_eq!(
        (r["ok"].as_bool(), r["topic"].as_str(), r["id"].as_u64()),
        (Some(true), Some("Paris"), Some(2)),
        "{r}"
    );
    a.send(r#"{"session":"k","turn":2,"final":"what is it the capital of"}"#);
    let v = a.next("follow-up after the agent's topic");
    assert_eq!(v["results"][0]["id"], "paris", "{v}");
    assert_eq!(v["conversation"]["used"], true, "{v}");
    assert_eq!(
        v["conversation"]["topic"], "Paris",
        "the result names its topic"
    );
    // A topic as text; then cleared: the follow-up stands alone (Tokyo, as alone).
    let r = a.command(r#"{"cmd":"topic","session":"k","text":"Tokyo"}"#);
    assert_eq!(r["topic"], "Tokyo");
    let r = a.command(r#"{"cmd":"topic","session":"k"}"#);
    assert_eq!(
        (r["ok"].as_bool(), r["topic"].is_null()),
        (Some(true), true)
    );
    a.send(r#"{"session":"k","turn":3,"final":"what is it the capital of"}"#);
    let v = a.next("after clearing");
    assert_eq!(v["results"][0]["id"], "tokyo", "{v}");
    assert_eq!(v["conversation"]["used"], false);
    assert!(v["conversation"]["topic"].is_null(), "{v}");
    // An unknown passage is refused; the session goes on.
    let r = a.command(r#"{"cmd":"topic","session":"k","passage":"atlantis"}"#);
    assert_eq!(r["code"], "unknown_passage", "{r}");
    d.stop();
}
