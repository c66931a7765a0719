//! `primd run` as a daemon started from a shell: what it says at the default log level,
//! that it leaves a terminal on stdin alone when it serves sockets, and that an idle
//! daemon stops at SIGTERM without waiting out its stop grace.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt};

use common::BOUND;

/// `primd run` on the demo index with `extra` flags, `stdin` as given, and the
/// logger's default filter (no RUST_LOG): what a user sees.
fn spawn(extra: &[&str], stdin: Stdio) -> Child {
    spawn_logging(extra, stdin, None)
}

/// [`spawn`] with `RUST_LOG` set to `filter` (None: unset).
fn spawn_logging(extra: &[&str], stdin: Stdio, filter: Option<&str>) -> Child {
    let mut c = common::command(env!("CARGO_BIN_EXE_primd"));
    c.arg("run")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(common::data("demo-x86.idx"))
        .args(extra)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match filter {
        Some(f) => c.env("RUST_LOG", f),
        None => c.env_remove("RUST_LOG"),
    };
    c.spawn().unwrap()
}

/// Kills the daemon if a test fails before stopping it.
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The child's stderr lines, read on a thread; the channel closes when it exits.
fn log_lines(child: &mut Child) -> Receiver<String> {
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Lines up to and including the first containing `needle`.
fn until(rx: &Receiver<String>, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(BOUND) {
            Ok(line) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return seen;
                }
            }
            Err(_) => panic!("no log line {needle:?}; got {seen:#?}"),
        }
    }
}

/// SIGTERM, then the exit status and the rest of the log.
fn stop(mut guard: KillOnDrop, rx: &Receiver<String>) -> (std::process::ExitStatus, Vec<String>) {
    let mut child = guard.0.take().unwrap();
    common::sigterm(&child);
    let rest: Vec<String> = rx.iter().collect(); // until the child closes stderr
    (child.wait().unwrap(), rest)
}

/// The message part of an env_logger line (`[time LEVEL target] message`).
fn message(line: &str) -> &str {
    line.split_once("] ").map_or(line, |(_, m)| m)
}

#[test]
fn at_the_default_log_level_a_daemon_names_its_listeners_and_says_it_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("primd.sock");
    let listen = format!("unix:{}", sock.display());
    let args = [
        "--listen",
        &listen,
        "--wyoming",
        "tcp:127.0.0.1:0",
        "--input",
        "none",
    ];
    let mut child = spawn(&args, Stdio::null());
    let rx = log_lines(&mut child);
    let child = KillOnDrop(Some(child));
    let mut log = until(&rx, "ready:");
    let (status, rest) = stop(child, &rx);
    assert!(status.success(), "{status:?} {rest:#?}");
    log.extend(rest);
    // The test index predates sentences (format 5): the one notice saying so is not
    // counted here (tests/golden.rs covers the fallback to whole passages).
    let said: Vec<&str> = log
        .iter()
        .map(|l| message(l))
        .filter(|m| !(m.starts_with("notice: ") && m.contains("has no sentences")))
        .collect();
    assert_eq!(
        said.len(),
        3,
        "one line per listener, one ready line: {log:#?}"
    );
    assert!(
        said[0].starts_with("wyoming: listening on 127.0.0.1:"),
        "{said:?}"
    );
    assert_eq!(said[1], format!("listening on {listen}"));
    let ready = said[2];
    for part in [
        "ready: 52 passages from ",
        "demo-x86.idx",
        "int8 model ",
        "model-int8.onnx",
        "hybrid retriever",
    ] {
        assert!(ready.contains(part), "{part:?} not in {ready:?}");
    }
}

/// Opens a pseudo-terminal: (its controlling side, the terminal side for a child's stdin).
fn terminal() -> (nix::pty::PtyMaster, std::fs::File) {
    let master =
        posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname_r(&master).expect("ptsname_r");
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags_noctty()
        .open(name)
        .unwrap();
    (master, tty)
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for std::fs::OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(nix::libc::O_NOCTTY)
    }
}

/// Regression: with `--listen` and the shell's terminal on stdin (the documented
/// `primd run --listen … &`), primd read the terminal, and a background job that reads
/// its terminal is stopped by the shell ("Stopped (tty input)"): the client then never
/// got its hello. Now the terminal is left alone, and the log says so.
#[test]
fn serving_a_socket_with_a_terminal_on_stdin_leaves_the_terminal_alone() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("unix:{}", dir.path().join("primd.sock").display());
    let sock = dir.path().join("primd.sock");
    let (mut master, tty) = terminal();
    // A line typed before primd starts: still waiting in the terminal when it exits.
    let typed = "{\"final\": \"can I bring my dog\"}\n";
    master.write_all(typed.as_bytes()).unwrap();
    let stdin = Stdio::from(tty.try_clone().unwrap());
    let mut child = spawn_logging(&["--listen", &listen], stdin, Some("primd=info"));
    let rx = log_lines(&mut child);
    let child = KillOnDrop(Some(child));
    let mut log = until(&rx, "listening on unix:");
    // One question over the socket, answered: the retriever (and a reader of stdin,
    // had there been one) is running.
    let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    c.set_read_timeout(Some(BOUND)).unwrap();
    c.write_all(b"{\"session\":\"t\",\"turn\":1,\"final\":\"is there free wifi\"}\n")
        .unwrap();
    let mut replies = BufReader::new(c.try_clone().unwrap()).lines();
    assert!(replies.next().unwrap().unwrap().contains("\"hello\""));
    assert!(replies.next().unwrap().unwrap().contains("\"final\""));
    let (status, rest) = stop(child, &rx);
    assert!(status.success(), "{status:?} {rest:#?}");
    log.extend(rest);
    // Nobody read the line: it is still there for the next reader of the terminal.
    fcntl(tty.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    let mut left = String::new();
    let _ = (&tty).read_to_string(&mut left); // WouldBlock once the queue is empty
    assert_eq!(left, typed, "primd read the terminal: {log:#?}");
    assert!(
        log.iter()
            .any(|l| message(l).starts_with("stdin is a terminal: not reading it")),
        "{log:#?}"
    );
    drop(master);
}

/// `--listen` with a pipe on stdin: the pipe is still read (the session "stt"), so
/// `your-stt | primd run --listen …` works as before.
#[test]
fn serving_a_socket_with_a_pipe_on_stdin_still_reads_the_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("unix:{}", dir.path().join("primd.sock").display());
    let mut child = common::spawn_run(
        env!("CARGO_BIN_EXE_primd"),
        &common::data("demo-x86.idx"),
        &["--listen", &listen],
    );
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"final\": \"Can I bring my dog inside the museum?\"}\n")
            .unwrap();
    } // closed: the pipe ends, the daemon serves on
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["results"][0]["id"], "dogs-and-assistance-animals");
    common::sigterm(&child);
    assert!(child.wait().unwrap().success());
}

/// An idle daemon stops at SIGTERM without waiting for anything: nothing is open, so
/// nothing may hold it up, however long the stop grace (the time a blocked output gets
/// to take the last results). With a grace longer than [`BOUND`], a stop that waited
/// for it fails here.
#[test]
fn an_idle_daemon_stops_at_sigterm_without_waiting_out_the_stop_grace() {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("unix:{}", dir.path().join("primd.sock").display());
    let grace = (BOUND.as_millis() * 10).to_string();
    for extra in [
        &["--stop-grace-ms", &grace][..],
        &[
            "--stop-grace-ms",
            &grace,
            "--listen",
            &listen,
            "--input",
            "none",
        ],
    ] {
        let mut child = spawn(extra, Stdio::piped());
        let stdin = child.stdin.take(); // held open: the input never ends
        let rx = log_lines(&mut child);
        let mut guard = KillOnDrop(Some(child));
        until(&rx, "ready:");
        let child = guard.0.as_mut().unwrap();
        common::sigterm(child);
        let status = common::wait_exit(child, &format!("{extra:?} at SIGTERM"));
        assert!(status.success(), "{extra:?}: {status:?}");
        drop(stdin);
    }
}

/// `--input none` works with `--wyoming` as with `--listen`, and the help says so.
#[test]
fn the_input_help_names_none_for_wyoming_too() {
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let input = help
        .split("--input <SOURCE>")
        .nth(1)
        .and_then(|h| h.split("\n\n").next())
        .unwrap_or("");
    assert!(
        input.contains("--listen or --wyoming also `none`"),
        "{input}"
    );
}
