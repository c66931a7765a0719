//! `Type=notify` as systemd sees it: the test owns the `NOTIFY_SOCKET` datagram socket
//! and a watchdog period, runs the real binary, and reads what arrives: `READY=1` once
//! the index is open, `WATCHDOG=1` while it runs, `STATUS=` with utterances answered,
//! and no `WATCHDOG=1` while the retriever loop is stuck (debug builds have a hook that
//! stalls it).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(120);

/// Next datagram, or None after `timeout`.
fn recv(sock: &UnixDatagram, timeout: Duration) -> Option<String> {
    sock.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 4096];
    match sock.recv(&mut buf) {
        Ok(n) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Datagrams until one contains `needle` (returned), failing after WAIT.
fn until(sock: &UnixDatagram, needle: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match recv(sock, left.max(Duration::from_millis(1))) {
            Some(m) if m.contains(needle) => return m,
            Some(_) => {}
            None => panic!("no {needle:?} within {WAIT:?}"),
        }
    }
}

#[test]
fn ready_after_the_index_is_open_then_watchdog_pings_that_stop_when_the_loop_stalls() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    let stall = dir.path().join("stall");
    let mut child = common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("run")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(&index)
        .env("RUST_LOG", "primd=info")
        .env("NOTIFY_SOCKET", &sock_path)
        // 400 ms: pings every 100 ms.
        .env("WATCHDOG_USEC", "400000")
        .env("PRIMD_TEST_STALL_FILE", &stall)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let log2 = log.clone();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let mut g = log2.lock().unwrap();
            g.push_str(&l);
            g.push('\n');
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();

    // The first message is READY=1, and it names the open index.
    let first = recv(&sock, WAIT).expect("READY=1");
    assert!(first.contains("READY=1"), "{first:?}");
    assert!(
        first.contains("STATUS=serving 6 passages from"),
        "{first:?}"
    );
    // Then the watchdog, again and again, while idle.
    for _ in 0..3 {
        until(&sock, "WATCHDOG=1");
    }
    // A question answered shows in the status.
    stdin
        .write_all(b"{\"final\": \"What is the capital of France?\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"paris\""), "{line}");
    until(&sock, "STATUS=1 utterances answered");

    if cfg!(debug_assertions) {
        // Stall the retriever loop: once it says so, no more pings.
        std::fs::write(&stall, b"").unwrap();
        let deadline = Instant::now() + WAIT;
        while !log.lock().unwrap().contains("retriever loop stalled") {
            assert!(Instant::now() < deadline, "{}", log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(10));
        }
        // Pings sent before the stall are already queued: drain them.
        while recv(&sock, Duration::from_millis(1)).is_some() {}
        // Twelve ping intervals (three watchdog periods): nothing.
        let silent = recv(&sock, Duration::from_millis(1200));
        assert!(silent.is_none(), "a ping from a stalled loop: {silent:?}");
        // Unstalled, it pings again.
        std::fs::remove_file(&stall).unwrap();
        until(&sock, "WATCHDOG=1");
    }

    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", log.lock().unwrap());
}

#[test]
fn without_notify_socket_nothing_is_sent_and_the_daemon_serves_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let mut child = common::spawn_run(env!("CARGO_BIN_EXE_primd"), &index, &[]);
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"final\": \"What is the capital of France?\"}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"paris\""), "{stdout}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("systemd"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
