//! `primd run` on what real recognizers (and broken pipes) send: dialects detected and
//! read through the real binary, and a hostile stream that must not end the daemon.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Output};

fn spawn(index: &Path, extra: &[&str]) -> Child {
    common::spawn_run(env!("CARGO_BIN_EXE_primd"), index, extra)
}

fn run_bytes(index: &Path, extra: &[&str], input: &[u8]) -> Output {
    let mut child = spawn(index, extra);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Written from a thread: the daemon answers while we write, and a full stdout
    // pipe must not deadlock us.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn finals(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "final")
        .collect()
}

#[test]
fn a_hostile_stream_never_ends_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut s: Vec<u8> = Vec::new();
    s.extend(b"{\"partial\": \"what is the capital\"}\n"); // 1
    s.extend(std::iter::repeat_n(b'x', 100_000)); // 2: over-long
    s.extend(b"\n");
    s.extend(b"{\"partial\": \"what is the capital of fr\xff\xfe\"}\n"); // 3: invalid UTF-8
    s.extend(b"{\"partial\": \"what is the capital of france\n"); // 4: broken JSON
    s.extend(b"[1, 2, 3]\n"); // 5
    s.extend(b"\x00\x01\x02\x1b[2K\r\n"); // 6: binary noise
    s.extend(b"{\"final\": \"What is the capital of France?\"}\n"); // 7
    // A flood of partials: the daemon keeps only the newest of those waiting.
    for i in 0..5000 {
        s.extend(format!("{{\"partial\": \"turn off the kitchen lights {i}\"}}\n").as_bytes());
    }
    s.extend(b"{\"final\": \"Turn off the kitchen lights.\"}\n");
    s.extend(b"{\"partial\": \"play some jazz"); // cut off mid-line at end of input

    let out = run_bytes(&index, &["--dialect", "jsonl"], &s);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let f = finals(&out.stdout);
    assert_eq!(f.len(), 2, "{stderr}");
    assert_eq!(f[0]["results"][0]["id"], "paris");
    assert_eq!(f[1]["results"][0]["id"], "lights");
    // Every partial of the flood was either looked at or counted as superseded.
    assert_eq!(f[1]["counts"]["partials"], 5000, "{}", f[1]);
    assert!(
        f[1]["counts"]["stale_dropped"].as_u64().unwrap() > 0,
        "stale partials are dropped, not queued: {}",
        f[1]
    );
    for n in [2, 4, 5, 6, 5009] {
        assert!(
            stderr.contains(&format!("line {n}:")),
            "line {n} reported: {stderr}"
        );
    }
    assert!(
        !stderr.contains("line 3:"),
        "replaced UTF-8 is not an error"
    );
    assert!(stderr.contains("input lines rejected"), "{stderr}");
}

#[test]
fn auto_detects_whisper_cpp_terminal_redraws() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let input = std::fs::read(common::data("dialects/whisper-cpp.txt")).unwrap();
    let out = run_bytes(&index, &[], &input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("input dialect: whisper-cpp (auto-detected from line 1)"),
        "{stderr}"
    );
    let f = finals(&out.stdout);
    let texts: Vec<_> = f.iter().map(|v| v["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "What is the tallest mountain in Africa?",
            "Turn off the kitchen lights."
        ]
    );
    assert_eq!(f[1]["results"][0]["id"], "lights");
}

#[test]
fn a_redraw_without_any_terminator_is_read_at_once() {
    // whisper.cpp flushes its hypothesis and prints nothing more until the next step:
    // the daemon must see it then, not when a newline comes (here: never).
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut child = spawn(
        &index,
        &["--dialect", "whisper-cpp", "--endpoint-ms", "300"],
    );
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(b"[Start speaking]\n\x1b[2K\r      \x1b[2K\r Play some jazz music")
        .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["text"], "Play some jazz music", "{v}");
    assert_eq!(v["results"][0]["id"], "jazz");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_utterance_ended_by_silence_is_not_answered_again_by_a_late_end_marker() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut child = spawn(&index, &["--dialect", "plain", "--endpoint-ms", "300"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"turn off the kitchen lights\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap(); // answered on silence
    // The recognizer's end-of-utterance marker arrives after that.
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(finals(rest.as_bytes()).len(), 0, "answered twice: {rest}");
    assert_eq!(finals(line.as_bytes())[0]["results"][0]["id"], "lights");
}
