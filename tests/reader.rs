//! The reader (`models/reader/`, a cross-encoder) against onnxruntime on the same file,
//! its answers on the museum demo, and its errors.

mod common;

use primd::embed::EmbedError;
use primd::embed::reader::Reader;

#[derive(serde::Deserialize)]
struct Pair {
    question: String,
    sentence: String,
    logit: f32,
}

fn pairs() -> Vec<Pair> {
    let text = std::fs::read_to_string(common::data("reader-reference.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn load() -> Reader {
    Reader::load(&common::model_dir().join("reader")).unwrap()
}

/// primd quantizes activations per token where onnxruntime uses one scale per tensor;
/// the logits (range about -11..8 on these pairs) agree within a small margin, and what
/// the reader is for, which sentence answers, agrees exactly.
#[test]
fn logits_match_onnxruntime_on_reference_pairs() {
    let refs = pairs();
    assert!(refs.len() >= 100);
    let mut r = load();
    assert_eq!(r.depth(), 12);
    let mut worst = (0.0f32, "");
    let mut sum = 0.0;
    let mut by_question: Vec<(&str, Vec<(f32, f32)>)> = Vec::new();
    for p in &refs {
        r.set_question(&p.question).unwrap();
        let mut out = [0.0];
        r.score(&[p.sentence.as_str()], &mut out).unwrap();
        let d = (out[0] - p.logit).abs();
        sum += d;
        if d > worst.0 {
            worst = (d, p.sentence.as_str());
        }
        match by_question.last_mut() {
            Some((q, v)) if *q == p.question => v.push((out[0], p.logit)),
            _ => by_question.push((&p.question, vec![(out[0], p.logit)])),
        }
    }
    let mean = sum / refs.len() as f32;
    eprintln!(
        "reader vs onnxruntime: mean |Δlogit| {mean:.3}, max {:.3}",
        worst.0
    );
    assert!(mean < 0.25, "mean |Δlogit| {mean}");
    assert!(worst.0 < 1.0, "|Δlogit| {} for {:?}", worst.0, worst.1);
    let argmax = |v: &[(f32, f32)], f: fn(&(f32, f32)) -> f32| {
        (0..v.len())
            .max_by(|&a, &b| f(&v[a]).total_cmp(&f(&v[b])))
            .unwrap()
    };
    for (q, v) in &by_question {
        assert_eq!(
            argmax(v, |x| x.0),
            argmax(v, |x| x.1),
            "best sentence for {q:?}"
        );
    }
}

/// A batch gives each pair the logit it gets alone (no pair sees another's tokens).
#[test]
fn a_batch_scores_each_pair_as_alone() {
    let refs = pairs();
    let mut r = load();
    let q = &refs[0].question;
    let batch: Vec<&str> = refs
        .iter()
        .filter(|p| &p.question == q)
        .map(|p| p.sentence.as_str())
        .collect();
    assert!(batch.len() >= 3);
    r.set_question(q).unwrap();
    let mut together = vec![0.0; batch.len()];
    r.score(&batch, &mut together).unwrap();
    for (s, t) in batch.iter().zip(&together) {
        let mut alone = [0.0];
        r.score(&[s], &mut alone).unwrap();
        assert!(
            (alone[0] - t).abs() < 1e-3,
            "{s:?}: {} alone, {t} in a batch",
            alone[0]
        );
    }
}

/// What the reader is for: of the planetarium's sentences, the one with the times.
#[test]
fn the_sentence_that_answers_scores_highest() {
    let mut r = load();
    r.set_question("When does the planetarium show start?")
        .unwrap();
    let s = [
        "The planetarium is on Level 3, under the silver dome.",
        "Shows start at 11:00, 12:30, 14:00 and 15:30 every open day.",
        "Each show lasts about 35 minutes.",
        "Pet dogs are not allowed inside the museum.",
    ];
    let mut out = [0.0; 4];
    r.score(&s, &mut out).unwrap();
    let best = (0..4).max_by(|&a, &b| out[a].total_cmp(&out[b])).unwrap();
    assert_eq!(best, 1, "logits {out:?}");
    assert!(out[1] > 0.0 && out[3] < 0.0, "logits {out:?}");
}

/// Long inputs are cut, not refused: a question and a sentence of thousands of words.
#[test]
fn long_texts_are_cut_to_the_pair_limit() {
    let mut r = load();
    let long = "the museum opens at ten ".repeat(500);
    r.set_question(&long).unwrap();
    let mut out = [f32::NAN; 2];
    r.score(&[&long, ""], &mut out).unwrap();
    assert!(out.iter().all(|x| x.is_finite()), "{out:?}");
}

#[test]
fn a_missing_or_foreign_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    match Reader::load(dir.path()) {
        Err(EmbedError::MissingFile { path }) => assert!(path.ends_with("model.onnx")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("loaded a reader from an empty directory"),
    }
    // The embedder's file with the reader's tokenizer: not a cross-encoder.
    let models = common::model_dir();
    std::fs::copy(
        models.join("model-int8.onnx"),
        dir.path().join("model.onnx"),
    )
    .unwrap();
    std::fs::copy(
        models.join("reader/tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    let err = Reader::load(dir.path()).err().expect("refused").to_string();
    assert!(err.contains("cross-encoder"), "{err}");
}

/// `primd search` on the demo index with `extra` flags: the one result line of `question`.
fn search(index: &std::path::Path, question: &str, extra: &[&str]) -> serde_json::Value {
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["search", "--index"])
        .arg(index)
        .arg("--model")
        .arg(common::model_dir())
        .args(extra)
        .arg(question)
        .env("RUST_LOG", "primd=info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.lines().next().expect("a result line")).unwrap()
}

/// The demo's questions a new user asked: with the reader the context holds the answer,
/// and stops where the reader's score drops instead of filling the budget with other
/// sentences; without it (`--no-reader`) it is filled as before.
#[test]
fn the_context_holds_the_answer_and_stops_where_the_score_drops() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_demo_index(dir.path());
    let r = search(&index, "Can I bring my dog?", &["--context-tokens", "32"]);
    let text = r["context"]["text"].as_str().unwrap();
    assert!(text.contains("not allowed"), "{text}");
    let r = search(&index, "Can I bring my dog?", &["--context-tokens", "256"]);
    let with = r["context"]["tokens"].as_u64().unwrap();
    let r0 = search(
        &index,
        "Can I bring my dog?",
        &["--context-tokens", "256", "--no-reader"],
    );
    let without = r0["context"]["tokens"].as_u64().unwrap();
    assert!(
        without > 200,
        "without the reader the budget is filled: {without}"
    );
    assert!(
        with < without / 2,
        "{with} tokens with the reader, {without} without"
    );
}

/// `primd search` over lines of a conversation (stdin): each result line.
fn converse(index: &std::path::Path, turns: &[&str]) -> Vec<serde_json::Value> {
    let input: String = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"id": i, "text": t, "conversation": "visitor"}).to_string() + "\n"
        })
        .collect();
    let out = common::on_index(index, &["search"], input.as_bytes());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The sentence a voice answer speaks: the context's `best` span.
fn spoken(corpus: &str, r: &serde_json::Value) -> String {
    let c = &r["context"];
    let span = &c["spans"][c["best"].as_u64().expect("a best span") as usize];
    let id = span["passage"].as_str().unwrap();
    let text = corpus
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|p| p["id"] == id)
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    let (a, b) = (
        span["start"].as_u64().unwrap() as usize,
        span["end"].as_u64().unwrap() as usize,
    );
    text.chars().skip(a).take(b - a).collect()
}

/// A follow-up is read as its conversation resolved it: "How much does it cost?" after
/// the planetarium speaks the planetarium's price, confidently, not general admission
/// (what the words alone ask for); and the flagship question keeps the opening hours
/// first, however well the adults-only evening's "the museum opens ..." reads.
#[test]
fn a_follow_up_is_answered_about_its_topic_and_the_opening_hours_stay_first() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_demo_index(dir.path());
    let corpus = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/corpus.jsonl"),
    )
    .unwrap();
    let r = converse(
        &index,
        &[
            "What time do the planetarium shows start?",
            "How much does it cost?",
            "Tell me about the Glow exhibition",
            "What does it cost?",
        ],
    );
    assert_eq!(r[1]["results"][0]["id"], "planetarium-shows", "{}", r[1]);
    assert_eq!(r[1]["evidence"], "ok", "{}", r[1]);
    let said = spoken(&corpus, &r[1]);
    assert!(said.contains("planetarium ticket costs"), "{said}");
    assert_eq!(r[3]["results"][0]["id"], "temporary-exhibition", "{}", r[3]);
    let said = spoken(&corpus, &r[3]);
    assert!(said.contains("£6"), "{said}");

    let r = search(&index, "When does the museum open?", &[]);
    assert_eq!(r["results"][0]["id"], "opening-hours", "{r}");
    let said = spoken(&corpus, &r);
    assert!(said.contains("open Tuesday to Sunday"), "{said}");
}
