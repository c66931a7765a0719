//! What a board must reproduce of a workstation: CI runs this file for
//! aarch64 under qemu-user (`.ci/run`), where tract's arm64 kernels and our NEON
//! kernels do the work, and natively on x86_64, where it guards the same references.
//!
//! Kept small on purpose: qemu emulates NEON floating point slowly (~25 s per embed),
//! so the full quality suite (tests/embedder.rs) stays a native test.

mod common;

use std::path::PathBuf;

use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, Precision, cosine};

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
    let fp32 = EmbedderOptions {
        precision: Precision::Fp32,
        threads: 1,
    };
    let mut e = Embedder::load(&common::model_dir(), &fp32).unwrap();
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
/// user flashes: built on the workstation with the defaults, so int8 (CI passes it in
/// `PRIMD_DEMO_INDEX`); when unset, it is built here. On aarch64 this runs the int8
/// encoder on the NEON qgemm kernels.
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
        let results = g["results"].as_array().unwrap();
        let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["score"].as_f64().unwrap())
            .collect();
        let want: Vec<&str> = x["top10"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let want_scores: Vec<f64> = x["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        same_ranking(
            &ids,
            &scores,
            &want,
            &want_scores,
            x["final"].as_str().unwrap(),
        );
    }
}

/// Another architecture's floating point (tract's f32 kernels, then int8 activation
/// rounding that can flip on the last bit) moves a score by up to ~2.5e-3 here: the
/// same ten passages must come back, every score within `TOL` of x86's, and in x86's
/// order except between passages whose x86 scores are closer than `2 * TOL`.
fn same_ranking(ids: &[&str], scores: &[f64], want: &[&str], want_scores: &[f64], what: &str) {
    const TOL: f64 = 5e-3;
    assert_eq!(ids.len(), want.len(), "{what}");
    let (mut a, mut b) = (ids.to_vec(), want.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(
        a, b,
        "{what}: not the same ten passages: {ids:?} vs {want:?}"
    );
    for (i, (&s, &w)) in scores.iter().zip(want_scores).enumerate() {
        assert!((s - w).abs() < TOL, "{what}: score {i} is {s}, x86 {w}");
        let tied = |j: usize| (want_scores[j] - w).abs() < 2.0 * TOL;
        let may_swap = (0..want.len()).any(|j| j != i && tied(j) && ids[i] == want[j]);
        assert!(
            ids[i] == want[i] || may_swap,
            "{what}: rank {i} is {}, x86 has {} ({ids:?} vs {want:?})",
            ids[i],
            want[i]
        );
    }
}
