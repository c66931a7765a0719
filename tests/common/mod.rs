//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};
use std::process::Command;

use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Precision};
use primd::index::{IndexMeta, PassageRecord, passage_embed_text, write_index};

/// The model directory written by `models/fetch` (override with PRIMD_MODEL_DIR).
///
/// Tests that need the real model fail, loudly, when it is missing: a skipped quality
/// test would be a test that cannot fail.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("PRIMD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models"));
    assert!(
        dir.join("model.onnx").is_file(),
        "{dir:?} has no model.onnx: run models/fetch first (README, 'Tests')"
    );
    dir
}

/// A command for one of the workspace's binaries (`env!("CARGO_BIN_EXE_...")`). When the
/// tests are cross-compiled and run under an emulator, `PRIMD_TEST_RUNNER` names it
/// (e.g. `qemu-aarch64-static`): without binfmt_misc the kernel cannot start a foreign
/// binary by itself.
pub fn command(bin: &str) -> Command {
    match std::env::var("PRIMD_TEST_RUNNER") {
        Ok(runner) if !runner.trim().is_empty() => {
            let mut words = runner.split_whitespace();
            let mut c = Command::new(words.next().unwrap());
            c.args(words).arg(bin);
            c
        }
        _ => Command::new(bin),
    }
}

/// `primd run` (the binary at `bin`) on `index` with the real model, all three pipes
/// captured, info logs on stderr.
pub fn spawn_run(bin: &str, index: &Path, extra: &[&str]) -> std::process::Child {
    use std::process::Stdio;
    command(bin)
        .arg("run")
        .arg("--model")
        .arg(model_dir())
        .arg("--index")
        .arg(index)
        .args(extra)
        .env("RUST_LOG", "primd=info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// One line of `tests/data/reference.jsonl` (the `primd embed` schema).
#[derive(serde::Deserialize)]
pub struct Reference {
    pub text: String,
    pub tokens: usize,
    pub embedding: Vec<f32>,
}

pub fn references() -> Vec<Reference> {
    let text = std::fs::read_to_string(data("reference.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The golden corpus, embedded with the real model (title + text, as build-index does).
pub fn build_real_index(dir: &Path) -> PathBuf {
    build_index_of(&data("golden-corpus.jsonl"), dir)
}

/// A JSONL corpus (`{"id", "title", "text"}`), one passage per line (no chunking),
/// embedded as build-index does: passages and their vectors, flattened.
pub fn embed_corpus(corpus: &Path, e: &mut impl Embed) -> (Vec<PassageRecord>, Vec<f32>) {
    let text = std::fs::read_to_string(corpus).unwrap();
    let (mut passages, mut vectors) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (title, body) = (v["title"].as_str().unwrap(), v["text"].as_str().unwrap());
        let mut emb = [0.0; DIM];
        e.embed_into(&passage_embed_text(title, body), &mut emb)
            .unwrap();
        vectors.extend_from_slice(&emb);
        passages.push(PassageRecord {
            id: v["id"].as_str().unwrap().into(),
            title: title.into(),
            text: body.into(),
            chunk: 0,
            word_start: 0,
            word_end: body.split_whitespace().count() as u32,
        });
    }
    (passages, vectors)
}

/// An index of `corpus` built with the real model at the default precision, in `dir`.
pub fn build_index_of(corpus: &Path, dir: &Path) -> PathBuf {
    build_index_with(corpus, dir, Precision::default())
}

/// An index of `corpus` built with the real model at `precision`, in `dir`.
pub fn build_index_with(corpus: &Path, dir: &Path, precision: Precision) -> PathBuf {
    let opts = EmbedderOptions {
        precision,
        threads: 1,
    };
    let mut e = Embedder::load(&model_dir(), &opts).unwrap();
    let (passages, vectors) = embed_corpus(corpus, &mut e);
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: e.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let path = dir.join("real.idx");
    write_index(&path, &meta, &passages, &vectors).unwrap();
    path
}

/// Long enough for any machine; only reached when the behaviour under test is broken.
pub const BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// Asks the daemon to stop the way systemd and a shell do (SIGTERM).
pub fn sigterm(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signalling primd");
}

/// Waits for the child to exit, at most [`BOUND`] (then kills it and fails).
pub fn wait_exit(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t0.elapsed() > BOUND {
            let _ = child.kill();
            panic!("primd did not exit: {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A client of the socket API (`docs/protocol.md`) on a Unix socket, greeted.
pub struct Conn(
    std::io::BufReader<std::os::unix::net::UnixStream>,
    std::os::unix::net::UnixStream,
);

impl Conn {
    pub fn open(path: &Path) -> Conn {
        let s = std::os::unix::net::UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        let mut c = Conn(std::io::BufReader::new(s.try_clone().unwrap()), s);
        assert_eq!(c.next()["type"], "hello");
        c
    }

    pub fn send(&mut self, line: &str) {
        use std::io::Write;
        self.1.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    pub fn next(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        let mut line = String::new();
        assert!(self.0.read_line(&mut line).unwrap() > 0, "closed");
        serde_json::from_str(&line).unwrap()
    }
}

/// `primd ARGS --model M --index tests/data/demo-x86.idx` (the committed museum demo
/// index) with `stdin` written to it; asserts it succeeded.
pub fn on_demo(args: &[&str], stdin: &[u8]) -> std::process::Output {
    on_index(&data("demo-x86.idx"), args, stdin)
}

/// `primd ARGS --model M --index INDEX` with `stdin` written to it; asserts it succeeded.
pub fn on_index(index: &Path, args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command(env!("CARGO_BIN_EXE_primd"))
        .args(args)
        .arg("--model")
        .arg(model_dir())
        .arg("--index")
        .arg(index)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The museum demo (`demo/corpus.jsonl`) as `build-index` makes it for `context`: the
/// real model, a lexical section and the passages' sentences (format v6), in `dir`.
pub fn build_demo_index(dir: &Path) -> PathBuf {
    use primd::index::{WriteOptions, write_index_with};
    let mut e = Embedder::load(&model_dir(), &EmbedderOptions::default()).unwrap();
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("demo/corpus.jsonl");
    let (passages, vectors) = embed_corpus(&corpus, &mut e);
    let sentences = primd::context::sentence_table(&mut e, &passages).unwrap();
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: e.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let opts = WriteOptions {
        sentences: Some(sentences),
        ..WriteOptions::default()
    };
    let path = dir.join("demo.idx");
    write_index_with(&path, &meta, &passages, &vectors, &opts).unwrap();
    path
}
