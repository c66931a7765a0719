//! Asking for one passage must not switch the "I don't know" guard off: `confidence`
//! and `evidence` come from the retriever's own ranking, whatever `k` the caller asks
//! for, through every entry point (`primd search --k`, `primd run --top-k`, `top_k` in
//! the config file, the socket API). On the committed demo index (a museum kiosk's 52
//! passages): a question it answers and one it has no answer to.
//!
//! Regression: with k = 1 the confidence saw a single score, no gap to measure, and
//! called every top-1 a clear winner ("what is the capital of France" → 0.98, "ok").

mod common;

use std::io::{BufRead, BufReader};

const ANSWERED: &str = "Can I bring my dog inside the museum?";
const ANSWERED_ID: &str = "dogs-and-assistance-animals";
const OFF_TOPIC: &str = "What is the capital of France?";

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (confidence, evidence, number of results, top-1 id) of a result line.
fn verdict(v: &serde_json::Value) -> (f64, String, usize, String) {
    (
        v["confidence"].as_f64().unwrap(),
        v["evidence"].as_str().unwrap().to_string(),
        v["results"].as_array().unwrap().len(),
        v["results"][0]["id"].as_str().unwrap_or("").to_string(),
    )
}

/// The two questions answered with `k` results: the answered one is "ok", the
/// off-topic one "low", and each confidence is the one of the default k (10).
fn assert_guarded(k: usize, answered: &serde_json::Value, off: &serde_json::Value, base: [f64; 2]) {
    let (ca, ea, na, top) = verdict(answered);
    let (co, eo, no, _) = verdict(off);
    assert_eq!((na, no), (k, k), "k = {k}: the results are cut to k");
    assert_eq!(top, ANSWERED_ID, "k = {k}");
    assert_eq!(ea, "ok", "k = {k}: the answered question ({ca})");
    assert_eq!(eo, "low", "k = {k}: the off-topic question ({co})");
    for (c, b) in [(ca, base[0]), (co, base[1])] {
        assert!(
            (c - b).abs() < 1e-5,
            "k = {k}: confidence {c} where k = 10 gives {b}"
        );
    }
}

#[test]
fn search_with_k_1_keeps_the_evidence_of_the_full_ranking() {
    let input = format!(
        "{{\"id\": \"a\", \"text\": \"{ANSWERED}\"}}\n{{\"id\": \"o\", \"text\": \"{OFF_TOPIC}\"}}\n"
    );
    let mut base = [0.0; 2];
    for k in [10, 3, 2, 1] {
        let out = common::on_demo(&["search", "--k", &k.to_string()], input.as_bytes());
        let got = json_lines(&out.stdout);
        assert_eq!(got.len(), 2);
        if k == 10 {
            base = [verdict(&got[0]).0, verdict(&got[1]).0];
        }
        assert_guarded(k, &got[0], &got[1], base);
    }
}

const STREAM: &str = r#"{"partial": "can I bring my dog", "t": 0.3}
{"final": "Can I bring my dog inside the museum?", "t": 0.9}
{"partial": "what is the capital", "t": 2.0}
{"final": "What is the capital of France?", "t": 2.6}
"#;

fn run_finals(extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    let out = common::on_demo(&args, STREAM.as_bytes());
    json_lines(&out.stdout)
        .into_iter()
        .filter(|v| v["type"] == "final")
        .collect()
}

#[test]
fn run_with_top_k_1_flag_or_config_keeps_the_evidence_of_the_full_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("primd.toml");
    std::fs::write(&config, "[layer1]\ntop_k = 1\n").unwrap();
    let config = config.to_str().unwrap();
    let base = run_finals(&[]);
    assert_eq!(base.len(), 2);
    let base = [verdict(&base[0]).0, verdict(&base[1]).0];
    for extra in [&["--top-k", "1"][..], &["--config", config]] {
        let f = run_finals(extra);
        assert_eq!(f.len(), 2, "{extra:?}");
        assert_guarded(1, &f[0], &f[1], base);
    }
}

/// The two questions as turns of a socket session of a daemon started with `extra`.
fn socket_finals(extra: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("primd.sock");
    let listen = format!("unix:{}", sock.display());
    let mut args = vec!["--listen", listen.as_str(), "--input", "none"];
    args.extend_from_slice(extra);
    let mut child = common::spawn_run(
        env!("CARGO_BIN_EXE_primd"),
        &common::data("demo-x86.idx"),
        &args,
    );
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    for line in lines.by_ref() {
        if line.unwrap().contains("listening on unix:") {
            break;
        }
    }
    let log = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let mut c = common::Conn::open(&sock);
    let mut got = Vec::new();
    for (turn, text) in [(1, ANSWERED), (2, OFF_TOPIC)] {
        c.send(&format!(
            r#"{{"session":"k1","turn":{turn},"final":"{text}"}}"#
        ));
        got.push(c.next());
    }
    common::sigterm(&child);
    let status = child.wait().unwrap();
    let log = log.join().unwrap();
    assert!(status.success(), "{log:?}");
    got
}

#[test]
fn a_socket_session_of_a_daemon_with_top_k_1_keeps_the_evidence_of_the_full_ranking() {
    let base = socket_finals(&[]);
    let base = [verdict(&base[0]).0, verdict(&base[1]).0];
    let f = socket_finals(&["--top-k", "1"]);
    assert_eq!(f[0]["turn"], 1);
    assert_guarded(1, &f[0], &f[1], base);
}
