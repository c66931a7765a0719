//! `primd run --listen`: the real binary and model behind a Unix socket; address checks.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use common::BOUND;

fn spawn(index: &Path, extra: &[&str]) -> Child {
    let mut child = common::spawn_run(env!("CARGO_BIN_EXE_primd"), index, extra);
    drop(child.stdin.take()); // --input none: nothing reads it anyway
    child
}

/// Waits for the daemon's log line saying it listens (its readiness signal here).
fn wait_listening(child: &mut Child) -> std::thread::JoinHandle<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let rest = std::thread::spawn(move || {
        let mut log = String::new();
        let mut told = false;
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if !told && line.contains("listening on") {
                let _ = tx.send(());
                told = true;
            }
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    rx.recv_timeout(BOUND).expect("the daemon never listened");
    rest
}

#[test]
fn serves_two_clients_over_a_unix_socket_with_the_real_model() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let sock = dir.path().join("primd.sock");
    // A stale socket file (nobody listens on it) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let listen = format!("unix:{}", sock.display());
    let mut child = spawn(&index, &["--listen", &listen, "--input", "none"]);
    let log = wait_listening(&mut child);
    let (mut a, mut b) = (common::Conn::open(&sock), common::Conn::open(&sock));
    a.send(r#"{"session":"a","turn":1,"partial":"what is the capital of"}"#);
    b.send(r#"{"session":"b","turn":1,"partial":"turn off the kitchen"}"#);
    a.send(r#"{"session":"a","turn":1,"final":"What is the capital of France?"}"#);
    b.send(r#"{"session":"b","turn":1,"final":"Turn off the kitchen lights."}"#);
    let (va, vb) = (a.next(), b.next());
    assert_eq!(
        (va["session"].as_str(), va["turn"].as_u64()),
        (Some("a"), Some(1))
    );
    assert_eq!(va["results"][0]["id"], "paris");
    assert_eq!(vb["results"][0]["id"], "lights");
    a.send(r#"{"cmd":"stats","id":1}"#);
    let s = a.next();
    assert_eq!(
        (
            s["stats"]["utterances"].as_u64(),
            s["stats"]["clients"].as_u64()
        ),
        (Some(2), Some(2))
    );
    // A second daemon on the same socket is refused: somebody listens there.
    let second = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["run", "--index"])
        .arg(&index)
        .arg("--model")
        .arg(common::model_dir())
        .args(["--listen", &listen, "--input", "none"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("another process is listening"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    common::sigterm(&child);
    let status = child.wait().unwrap();
    let log = log.join().unwrap();
    assert!(status.success(), "{log}");
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn refuses_a_remote_address_without_allow_remote_and_bad_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("not-read.idx");
    for (listen, says) in [
        ("tcp:0.0.0.0:0", "--allow-remote"),
        ("udp:1", "unix:PATH or tcp:HOST:PORT"),
    ] {
        let out = common::command(env!("CARGO_BIN_EXE_primd"))
            .args(["run", "--index"])
            .arg(&index)
            .args(["--listen", listen, "--input", "none"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{listen}: {stderr}"
        );
    }
}
