//! `primd run --input serial:PATH` through a pseudo-terminal standing in for the cable:
//! answers arrive, the line hangs up in the middle of an utterance (the adapter is
//! pulled: the device path vanishes), the daemon keeps serving, reconnects when the
//! path comes back, and answers again.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::pty::{PtyMaster, grantpt, posix_openpt, ptsname_r, unlockpt};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The controlling side of a pseudo-terminal, linked at `link` the way udev links
/// `/dev/serial/by-id/...`. Dropping it hangs the line up and removes the link.
struct Cable {
    master: PtyMaster,
    link: PathBuf,
}

impl Cable {
    fn plug(link: &Path) -> Cable {
        // Close-on-exec: a child holding the master would keep the line up.
        let master =
            posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        // primd opens the slave by its path.
        let name = ptsname_r(&master).expect("ptsname_r");
        std::os::unix::fs::symlink(&name, link).unwrap();
        Cable {
            master,
            link: link.to_path_buf(),
        }
    }

    fn send(&mut self, lines: &str) {
        self.master.write_all(lines.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }
}

impl Drop for Cable {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.link);
    }
}

/// Lines of a child's pipe, read on a thread so the test can wait with a deadline.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle`, returning it (panics with what was seen).
fn wait_for(rx: &Receiver<String>, needle: &str, seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?}; seen:\n{}", seen.join("\n"));
}

fn final_text(line: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["type"], "final", "{line}");
    assert!(!v["results"].as_array().unwrap().is_empty(), "{line}");
    v["text"].as_str().unwrap().to_string()
}

#[test]
fn serial_line_survives_a_hang_up_mid_utterance_and_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let tty = dir.path().join("ttyUSB0");
    let mut cable = Cable::plug(&tty);

    let mut child = common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("run")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(&index)
        .arg("--input")
        .arg(format!("serial:{}@9600", tty.display()))
        .args(["--endpoint-ms", "1500", "--emit-speculative"])
        .env("RUST_LOG", "primd=info,primd::input::serial=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let (mut seen_out, mut seen_err) = (Vec::new(), Vec::new());
    wait_for(&err, "connected at 9600 baud", &mut seen_err);

    // A whole utterance.
    cable.send(concat!(
        "{\"partial\": \"what is the capital\"}\n",
        "{\"partial\": \"what is the capital of france\"}\n",
        "{\"final\": \"What is the capital of France?\"}\n",
    ));
    let first = wait_for(&out, "\"final\"", &mut seen_out);
    assert_eq!(final_text(&first), "What is the capital of France?");

    // The cable is pulled in the middle of the next one, and half a line is lost.
    cable.send("{\"partial\": \"turn off the kitchen lights\"}\n");
    // Once primd has read it (a hang-up flushes unread input, as a pulled cable loses
    // bytes in flight), the line dies in the middle of the next message.
    wait_for(&out, "\"speculative\"", &mut seen_out);
    cable.send("{\"partial\": \"turn of");
    drop(cable);
    wait_for(&err, "reconnecting", &mut seen_err);
    // The utterance that was cut ends on silence with what had been heard.
    let cut = wait_for(&out, "\"final\"", &mut seen_out);
    assert_eq!(final_text(&cut), "turn off the kitchen lights");

    // Plugged back in (a new pseudo-terminal under the same path) once primd has found
    // the path gone at least once (its debug line per failed open): served again.
    wait_for(&err, "DEBUG primd::input::serial", &mut seen_err);
    let mut cable = Cable::plug(&tty);
    wait_for(&err, "(reconnected)", &mut seen_err);
    cable.send(concat!(
        "{\"partial\": \"play some jazz\"}\n",
        "{\"final\": \"Play some jazz music.\"}\n",
    ));
    let again = wait_for(&out, "\"final\"", &mut seen_out);
    assert_eq!(final_text(&again), "Play some jazz music.");

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("signalling primd");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "exit {status:?}; stderr:\n{}",
        seen_err.join("\n")
    );
    drop(cable);
}
