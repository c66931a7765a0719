//! `primd embed` as a user runs it: arguments, stdin, errors, exit codes.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

fn primd() -> Command {
    let mut c = common::command(env!("CARGO_BIN_EXE_primd"));
    c.env_remove("RUST_LOG");
    c
}

fn parse_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn prints_one_json_line_per_argument() {
    let out = primd()
        .args(["embed", "--model"])
        .arg(common::model_dir())
        .args(["what is the capital of france", "set a timer for"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = parse_lines(&out.stdout);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["text"], "what is the capital of france");
    assert_eq!(lines[0]["tokens"], 8);
    assert_eq!(lines[0]["embedding"].as_array().unwrap().len(), 384);
    assert_eq!(lines[1]["text"], "set a timer for");
}

#[test]
fn reads_stdin_line_by_line_and_survives_invalid_utf8() {
    let mut child = primd()
        .args(["embed", "--fp32", "--model"])
        .arg(common::model_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello there\n\xff\xfe broken bytes\n\nlast line without newline")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines = parse_lines(&out.stdout);
    let texts: Vec<_> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "hello there",
            "\u{fffd}\u{fffd} broken bytes",
            "",
            "last line without newline"
        ]
    );
}

#[test]
fn a_missing_model_directory_fails_with_its_name() {
    let out = primd()
        .args(["embed", "--model", "/nonexistent/primd-models", "hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/primd-models") && err.contains("models/fetch"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
