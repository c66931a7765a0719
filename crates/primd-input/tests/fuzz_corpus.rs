//! The fuzz targets' saved corpora and crash regressions (`dialects`, `protocol`, `wyoming`), as
//! ordinary tests: `fuzz/` is not built by `cargo test`, its target bodies are
//! (`primd_input::fuzz`).

use primd_input::fuzz::{dialects, protocol, saved_inputs, wyoming};

#[test]
fn dialects_corpus_and_regressions_pass() {
    let inputs = saved_inputs("dialects");
    for (path, bytes) in &inputs {
        let run = std::panic::catch_unwind(|| dialects(bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the dialects target");
    }
    assert!(
        inputs
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("regressions")),
        "the known crash regressions are run"
    );
}

#[test]
fn protocol_corpus_passes() {
    for (path, bytes) in &saved_inputs("protocol") {
        let run = std::panic::catch_unwind(|| protocol(bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the protocol target");
    }
}

/// A few thousand deterministic mutations of the protocol seeds (bytes flipped, cut,
/// spliced, duplicated), run through the target's body on stable: the fuzzer's job in
/// small, for every `cargo test`.
#[test]
fn protocol_survives_mutations_of_its_seeds() {
    let seeds: Vec<Vec<u8>> = saved_inputs("protocol")
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let mut rng = primd_input::testing::Rng::new(0x9e37_79b9);
    let mut next = move || rng.next();
    for _ in 0..3000 {
        let mut data = seeds[next() as usize % seeds.len()].clone();
        for _ in 0..1 + next() % 8 {
            let at = next() as usize % data.len().max(1);
            match next() % 5 {
                0 if !data.is_empty() => data[at] = next() as u8,
                1 => data.truncate(at),
                2 => {
                    let bytes = b"\"{}[]:,\n\\\xff0-e";
                    data.insert(at.min(data.len()), bytes[next() as usize % bytes.len()]);
                }
                3 => {
                    let other = &seeds[next() as usize % seeds.len()];
                    let from = next() as usize % other.len();
                    data.extend_from_slice(&other[from..]);
                }
                _ => {
                    let end = (at + 1 + next() as usize % 32).min(data.len());
                    let piece = data[at.min(end)..end].to_vec();
                    data.splice(at.min(end)..at.min(end), piece);
                }
            }
        }
        let run = std::panic::catch_unwind(|| protocol(&data));
        assert!(
            run.is_ok(),
            "a mutation fails the protocol target: {data:?}"
        );
    }
}

#[test]
fn wyoming_corpus_and_regressions_pass() {
    let inputs = saved_inputs("wyoming");
    for (path, bytes) in &inputs {
        let run = std::panic::catch_unwind(|| wyoming(bytes));
        assert!(run.is_ok(), "fuzz input {path:?} fails the wyoming target");
    }
    assert!(inputs.len() >= 7, "the seeds are read");
}
