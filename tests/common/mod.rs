//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

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
