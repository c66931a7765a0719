//! The bundled demo must keep working: the recorded stream of ten spoken questions,
//! piped through `primd run` over the museum corpus, gets each question's passage first.

mod common;

use std::path::PathBuf;

#[test]
fn demo_stream_answers_every_question_with_its_passage() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_index_of(&root.join("demo/corpus.jsonl"), dir.path());
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["run", "--pace", "20", "--model"])
        .arg(common::model_dir())
        .arg("--index")
        .arg(&index)
        .arg("--input")
        .arg(root.join("demo/stream.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let finals: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let questions = std::fs::read_to_string(root.join("demo/questions.jsonl")).unwrap();
    let expected: Vec<serde_json::Value> = questions
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        finals.len(),
        expected.len(),
        "one answer per question; stderr: {stderr}"
    );
    for (f, q) in finals.iter().zip(&expected) {
        assert_eq!(f["text"], q["final"]);
        assert_eq!(f["results"][0]["id"], q["expected_id"], "{}", f["text"]);
        // Every one of these has its answer in the corpus, clearly ahead: no flag.
        assert_eq!(f["evidence"], "ok", "{f}");
        let c = f["confidence"].as_f64().unwrap();
        assert!((0.5..=1.0).contains(&c), "{f}");
    }
    assert_eq!(
        stderr.matches("skipped").count(),
        3,
        "the three garbage lines: {stderr}"
    );
}
