//! What a board must reproduce of a workstation: CI runs this file for
//! aarch64 under qemu-user (`.ci/run`), where tract's arm64 kernels and our NEON
//! kernels do the work, and natively on x86_64, where it guards the same references.
//!
//! Kept small on purpose: qemu emulates NEON floating point slowly (~25 s per embed),
//! so the full quality suite (tests/embedder.rs) stays a native test.

mod common;

use std::path::PathBuf;

use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, cosine};

/// Short reference sentences: tract's kernels on this architecture against
/// sentence-transformers (computed on x86 by tools/reference/make_reference.py).
#[test]
fn short_reference_sentences_match_sentence_transformers() {
    let refs: Vec<_> = common::references()
        .into_iter()
        .filter(|r| r.tokens <= 12)
        .take(6)
        .collect();
    assert_eq!(
        refs.len(),
        6,
        "tests/data/reference.jsonl lost its short sentences"
    );
    let mut e = Embedder::load(&common::model_dir(), &EmbedderOptions::default()).unwrap();
    let mut v = [0.0; DIM];
    for r in &refs {
        let tokens = e.embed_into(&r.text, &mut v).unwrap();
        assert_eq!(tokens, r.tokens, "{:?}", r.text);
        let c = cosine(&v, &r.embedding);
        assert!(c >= 0.9999, "cosine {c} for {:?}", r.text);
    }
}

/// The bundled demo, end to end through the `primd` binary, gives the top-10 recorded
/// on x86 (`demo/expected-top10.jsonl`) for every question. The index is the one a
/// user flashes: built on the workstation (CI passes it in `PRIMD_DEMO_INDEX`); when
/// unset, it is built here.
#[test]
fn demo_gives_the_same_top10_as_the_x86_reference() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let index = match std::env::var_os("PRIMD_DEMO_INDEX") {
        Some(p) => PathBuf::from(p),
        None => common::build_index_of(&root.join("demo/corpus.jsonl"), dir.path()),
    };
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("run")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(&index)
        .arg("--input")
        .arg(root.join("demo/stream.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<serde_json::Value> =
        std::fs::read_to_string(root.join("demo/expected-top10.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(got.len(), expected.len(), "stderr: {stderr}");
    for (g, x) in got.iter().zip(&expected) {
        assert_eq!(g["text"], x["final"]);
        let ids: Vec<&str> = g["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let want: Vec<&str> = x["top10"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(ids, want, "{}", x["final"]);
    }
}
