//! `primd run` end to end: the real binary, the real model, a small index, piped input.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

fn spawn(index: &Path, extra: &[&str]) -> Child {
    common::spawn_run(env!("CARGO_BIN_EXE_primd"), index, extra)
}

/// Pipes STREAM into `primd run` and waits for it to exit.
fn run_stream(index: &Path, extra: &[&str]) -> Output {
    let mut child = spawn(index, extra);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(STREAM.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn finals(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "final")
        .collect()
}

const STREAM: &str = r#"{"partial": "what is", "t": 0.3}
{"partial": "what is the capital", "t": 0.6}
{"partial": "what is the capital of fr", "t": 0.9}
{"partial": "what is the capital of france", "t": 1.2}
{"final": "What is the capital of France?", "t": 1.4}
this is not json
{"foo": 1}
{"partial": "um turn", "t": 3.0}
{"partial": "um turn off the", "t": 3.3}
{"partial": "um turn off the kitchen lights", "t": 3.6}
{"final": "Um, turn off the kitchen lights.", "t": 3.9}
{"partial": "play some jazz", "t": 6.0}
{"partial": "play some jazz music in the living room", "t": 6.4}
"#;

#[test]
fn answers_each_utterance_and_survives_garbage_and_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    // Paced at 10x the stream's audio times, so partials arrive while "speaking".
    let out = run_stream(&index, &["--emit-speculative", "--pace", "10"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let speculative = String::from_utf8_lossy(&out.stdout)
        .matches("\"type\":\"speculative\"")
        .count();
    assert!(
        speculative >= 2,
        "speculative events while the user speaks: {speculative}"
    );
    let f = finals(&out.stdout);
    assert_eq!(
        f.len(),
        3,
        "two finals, and the open utterance when input ended: {stderr}"
    );
    let top: Vec<_> = f
        .iter()
        .map(|v| v["results"][0]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(top, ["paris", "lights", "jazz"]);
    assert!(
        f[0]["counts"]["speculative_searches"].as_u64().unwrap() >= 1,
        "{}",
        f[0]
    );
    assert!(
        stderr.contains("line 6") && stderr.contains("line 7"),
        "garbage reported by line: {stderr}"
    );
    for v in &f {
        assert!(
            ["reuse", "rerank", "full"].contains(&v["path"].as_str().unwrap()),
            "{v}"
        );
        assert!(v["ms"]["eou_to_result"].as_f64().unwrap() >= 0.0);
        assert!(v["counts"]["partials"].as_u64().unwrap() >= 2);
        assert!(v["results"].as_array().unwrap().len() <= 10);
    }
}

#[test]
fn streaming_off_is_the_baseline_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let out = run_stream(&index, &["--no-streaming"]);
    let f = finals(&out.stdout);
    assert_eq!(f.len(), 3);
    assert!(
        f.iter()
            .all(|v| v["path"] == "full" && v["counts"]["speculative_searches"] == 0)
    );
    assert_eq!(f[0]["results"][0]["id"], "paris");
}

#[test]
fn plain_dialect_and_silence_end_utterances() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut child = spawn(&index, &["--dialect", "plain", "--endpoint-ms", "300"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(b"tokyo is\ntokyo is the capital of japan\n\n")
        .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["results"][0]["id"], "tokyo",
        "an empty line ends a plain utterance"
    );
    // No empty line this time: 300 ms of silence ends it.
    stdin.write_all(b"turn off the kitchen lights\n").unwrap();
    stdin.flush().unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["results"][0]["id"], "lights");
    assert!(
        v["ms"]["eou_to_result"].as_f64().unwrap() >= 300.0,
        "measured from the last partial"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn sigterm_finishes_the_open_utterance_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut child = spawn(&index, &["--endpoint-ms", "60000"]);
    let mut stdin = child.stdin.take().unwrap();
    // Wait until the daemon says it is ready (its signal handler is installed by then).
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "daemon exited before it was ready"
        );
    }
    stdin
        .write_all(b"{\"partial\": \"play some jazz music\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let f = finals(&out.stdout);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["results"][0]["id"], "jazz");
    drop(stdin);
}

#[test]
fn each_retriever_answers_the_stream_and_speculative_events_show_the_fused_guess() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    for (retriever, paths) in [
        ("hybrid", &["reuse", "rerank", "full"][..]),
        ("dense", &["reuse", "rerank", "full"]),
        ("lexical", &["lexical"]),
    ] {
        let out = run_stream(
            &index,
            &[
                "--retriever",
                retriever,
                "--emit-speculative",
                "--pace",
                "10",
                "--revision-weight",
                "0.25",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{retriever}: {stderr}");
        assert!(
            stderr.contains(&format!("{retriever} retriever")),
            "{stderr}"
        );
        let f = finals(&out.stdout);
        let top: Vec<_> = f
            .iter()
            .map(|v| v["results"][0]["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(top, ["paris", "lights", "jazz"], "{retriever}");
        for v in &f {
            assert!(
                paths.contains(&v["path"].as_str().unwrap()),
                "{retriever}: {v}"
            );
            let lexical = v["counts"]["lexical_searches"].as_u64().unwrap();
            assert_eq!(lexical > 0, retriever != "dense", "{retriever}: {v}");
            let hit = &v["results"][0];
            assert_eq!(hit["bm25"].is_null(), retriever == "dense", "{hit}");
            assert_eq!(hit["dense"].is_null(), retriever == "lexical", "{hit}");
        }
        let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["type"] == "speculative")
            .collect();
        assert!(!events.is_empty(), "{retriever}");
        if retriever == "dense" {
            continue; // its events come with dense speculations only
        }
        // Lexical queries run on every partial: the last guess of the first utterance
        // ("what is the capital of france") is Paris.
        let last_first = events
            .iter()
            .rfind(|e| e["utterance"] == 1)
            .unwrap_or_else(|| panic!("{retriever}: {events:?}"));
        assert_eq!(last_first["candidates"][0]["id"], "paris", "{retriever}");
    }
}

#[test]
fn an_index_without_a_lexical_section_runs_dense_with_a_notice() {
    use primd::embed::{DIM, Embed, Embedder, EmbedderOptions};
    use primd::index::{IndexMeta, WriteOptions, write_index_with};
    let dir = tempfile::tempdir().unwrap();
    let mut e = Embedder::load(&common::model_dir(), &EmbedderOptions::default()).unwrap();
    let (passages, vectors) = common::embed_corpus(&common::data("golden-corpus.jsonl"), &mut e);
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: e.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let index = dir.path().join("dense-only.idx");
    let opts = WriteOptions { lexical: None };
    write_index_with(&index, &meta, &passages, &vectors, &opts).unwrap();

    let out = run_stream(&index, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("adds lexical search").count(), 1, "{stderr}");
    assert!(stderr.contains("dense retriever"), "{stderr}");
    let f = finals(&out.stdout);
    assert_eq!(f[0]["results"][0]["id"], "paris");
    assert!(f[0]["results"][0]["bm25"].is_null());

    // Refused before reading any input (a closed pipe is fine here).
    let mut child = spawn(&index, &["--retriever", "hybrid"]);
    let _ = child.stdin.take().unwrap().write_all(STREAM.as_bytes());
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no lexical section") && err.contains("hybrid"),
        "{err}"
    );
}
