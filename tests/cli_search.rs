//! `primd search` as a user runs it, on an index built with the real model.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use common::build_real_index;
use primd::embed::Precision;

fn search(index: &Path, extra: &[&str], stdin: &[u8]) -> Output {
    let mut child = common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("search")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(index)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child may exit before reading (a refused index): a closed pipe is fine here.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn answers_stdin_queries_and_skips_malformed_lines() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    let input = b"{\"id\": \"q1\", \"text\": \"what is the capital of france\"}\n\
                  this line is not json\n\
                  {\"id\": 2, \"text\": \"please switch off the lights in the kitchen\"}\n\
                  {\"_id\": \"q3\", \"text\": \"capital of france\", \"metadata\": {}}\n";
    for extra in [
        &["--k", "3"][..],
        &["--k", "3", "--exact"],
        &["--k", "3", "--candidates", "2"],
    ] {
        let out = search(&index, extra, input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = lines(&out);
        assert_eq!(
            got.len(),
            3,
            "the malformed line is skipped, the others answered"
        );
        assert_eq!(got[0]["id"], "q1");
        assert_eq!(got[0]["results"][0]["id"], "paris");
        assert_eq!(got[0]["results"].as_array().unwrap().len(), 3);
        assert_eq!(got[1]["id"], 2);
        assert_eq!(got[1]["results"][0]["id"], "lights");
        assert_eq!(got[2]["id"], "q3", "a BEIR query line, as published");
        assert_eq!(got[2]["results"][0]["id"], "paris");
        assert!(got[0]["ms"]["embed"].as_f64().unwrap() > 0.0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("line 2"), "{stderr}");
    }
}

#[test]
fn the_index_decides_the_precision_unless_told_otherwise() {
    // Indexes built before int8 became the default are fp32: they must keep working
    // with no flag (primd loads model.onnx for them), and a contradicting flag is named.
    let dir = tempfile::tempdir().unwrap();
    let corpus = common::data("golden-corpus.jsonl");
    let fp32 = common::build_index_with(&corpus, dir.path(), Precision::Fp32);
    let query = b"{\"id\": 1, \"text\": \"what is the capital of france\"}\n";
    for extra in [&[][..], &["--fp32"]] {
        let out = search(&fp32, extra, query);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {stderr}");
        assert_eq!(lines(&out)[0]["results"][0]["id"], "paris", "{extra:?}");
    }
    let out = search(&fp32, &["--int8"], query);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("built with the fp32 model") && err.contains("--int8"),
        "{err}"
    );
}

#[test]
fn an_index_from_another_model_is_refused() {
    // The golden index was built with the test fake, not with this model.
    let out = search(&common::data("golden-v1.idx"), &[], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("golden-v1.idx") && err.contains("rebuild"),
        "{err}"
    );
}

#[test]
fn verify_catches_a_flipped_byte_that_open_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[300] ^= 0x40; // inside the codes section, past the 256-byte header
    std::fs::write(&index, &bytes).unwrap();
    let query = b"{\"id\": 1, \"text\": \"tokyo\"}\n";
    assert!(
        search(&index, &[], query).status.success(),
        "cheap checks cannot see it"
    );
    let out = search(&index, &["--verify"], query);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("checksum") || err.contains("CRC"), "{err}");
}

#[test]
fn hybrid_by_default_with_each_retrievers_scores() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    let input = b"{\"id\": 1, \"text\": \"what is the capital of france\"}\n";
    let run = |extra: &[&str]| {
        let out = search(&index, extra, input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {stderr}");
        lines(&out).remove(0)
    };
    let top = |v: &serde_json::Value| v["results"][0].clone();

    // Default: hybrid, each hit with its cosine and (when in the lexical top-C) BM25.
    let v = run(&["--k", "3"]);
    let t = top(&v);
    assert_eq!(t["id"], "paris");
    assert!(
        t["dense"].as_f64().unwrap() > 0.0 && t["bm25"].as_f64().unwrap() > 0.0,
        "{t}"
    );
    let score = t["score"].as_f64().unwrap();
    assert!(
        (0.0..=1.0 + 1e-6).contains(&score),
        "convex fusion score: {t}"
    );
    assert!(v["ms"]["lexical"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        run(&["--k", "3", "--retriever", "hybrid"])["results"],
        v["results"],
        "hybrid is the default"
    );

    // Dense: score is the cosine, no BM25.
    let t = top(&run(&["--k", "3", "--retriever", "dense"]));
    assert_eq!(t["id"], "paris");
    assert!(t["bm25"].is_null() && t["score"] == t["dense"], "{t}");

    // Lexical: score is BM25, no cosine; no model needed at all.
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args([
            "search",
            "--model",
            "/nonexistent",
            "--retriever",
            "lexical",
            "--k",
            "3",
        ])
        .arg("--index")
        .arg(&index)
        .arg("what is the capital of france")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = top(&lines(&out)[0]);
    assert_eq!(t["id"], "paris");
    assert!(t["dense"].is_null() && t["score"] == t["bm25"], "{t}");

    // RRF and the convex weight's ends.
    for extra in [
        &["--fusion", "rrf"][..],
        &["--lexical-weight", "0"],
        &["--lexical-weight", "1"],
        &["--lexical-candidates", "2"],
    ] {
        let mut args = vec!["--k", "3"];
        args.extend_from_slice(extra);
        assert_eq!(top(&run(&args))["id"], "paris", "{extra:?}");
    }
}

#[test]
fn bad_retriever_settings_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    let q = b"{\"id\": 1, \"text\": \"tokyo\"}\n";
    for (extra, key) in [
        // Enumerations are refused by clap, with the accepted names.
        (&["--retriever", "bm25"][..], "'bm25' for '--retriever"),
        (&["--fusion", "sum"], "possible values: convex, rrf"),
        (&["--lexical-weight", "1.5"], "layer1.lexical_weight"),
        (&["--lexical-candidates", "0"], "layer1.lexical_candidates"),
        (&["--exact", "--retriever", "hybrid"], "--exact"),
    ] {
        let out = search(&index, extra, q);
        assert!(!out.status.success(), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{extra:?}: {err}");
    }
}

#[test]
fn an_index_without_a_lexical_section_runs_dense_or_refuses_lexical_search() {
    // golden-v1.idx: format v1, no lexical section (built with the test fake).
    let v1 = common::data("golden-v1.idx");
    for r in ["lexical", "hybrid"] {
        let out = search(&v1, &["--retriever", r], b"");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no lexical section") && err.contains("rebuild") && err.contains(r),
            "{err}"
        );
    }
    // By default it is dense, with a one-line notice (then the fake's fingerprint is
    // refused, as always for this file).
    let out = search(&v1, &[], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    let notices: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("adds lexical search"))
        .collect();
    assert_eq!(notices.len(), 1, "{err}");
}

/// A question the corpus has no answer to still gets ten passages, but flagged: the agent
/// can say it does not know instead of reading out the nearest passage. (The committed
/// demo index: a museum kiosk's corpus.)
#[test]
fn questions_without_an_answer_in_the_corpus_are_flagged_low_evidence() {
    let index = common::data("demo-x86.idx");
    let input = b"{\"id\": \"dog\", \"text\": \"Can I bring my dog inside the museum?\"}\n\
                  {\"id\": \"wifi\", \"text\": \"Is there free wifi here?\"}\n\
                  {\"id\": \"tungsten\", \"text\": \"what is the boiling point of tungsten\"}\n\
                  {\"id\": \"cup\", \"text\": \"who won the football world cup in nineteen ninety\"}\n";
    for retriever in ["hybrid", "dense"] {
        let out = search(&index, &["--retriever", retriever], input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = lines(&out);
        assert_eq!(got.len(), 4);
        for g in &got {
            let c = g["confidence"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&c), "{g}");
            let answerable = g["id"] == "dog" || g["id"] == "wifi";
            let want = if answerable { "ok" } else { "low" };
            assert_eq!(g["evidence"], want, "{retriever}: {} {c}", g["id"]);
            assert_eq!(g["results"].as_array().unwrap().len(), 10, "still answered");
        }
    }
    // The threshold is the user's: at 0 nothing is flagged.
    let out = search(&index, &["--low-evidence-threshold", "0"], input);
    assert!(lines(&out).iter().all(|g| g["evidence"] == "ok"));
}

/// A query with no words is answered as the daemon answers an empty final: no results,
/// no confidence, evidence "low", and a context with no spans and no `best`.
#[test]
fn a_query_with_no_words_gets_no_results_as_an_empty_final_does() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    let input = b"{\"id\": \"empty\", \"text\": \"\"}\n\
                  {\"id\": \"blank\", \"text\": \"   \\t \"}\n\
                  {\"id\": \"marks\", \"text\": \" ?! \"}\n\
                  {\"id\": \"q\", \"text\": \"what is the capital of france\"}\n";
    for extra in [&[][..], &["--exact"], &["--retriever", "lexical"]] {
        let out = search(&index, extra, input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {stderr}");
        let got = lines(&out);
        assert_eq!(got.len(), 4, "{extra:?}");
        for g in &got[..3] {
            assert_eq!(g["results"], serde_json::json!([]), "{extra:?}: {g}");
            assert!(g["confidence"].is_null(), "{g}");
            assert_eq!(g["evidence"], "low", "{g}");
            let c = &g["context"];
            assert_eq!(
                (c["text"].as_str(), c["tokens"].as_u64()),
                (Some(""), Some(0)),
                "{g}"
            );
            assert_eq!(c["spans"], serde_json::json!([]), "{g}");
            assert!(c["best"].is_null(), "no best into an empty list: {g}");
        }
        // The query after them is answered as ever, and its context has a best span.
        assert_eq!(got[3]["results"][0]["id"], "paris", "{extra:?}");
        let c = &got[3]["context"];
        let best = c["best"].as_u64().expect("a best span") as usize;
        assert!(best < c["spans"].as_array().unwrap().len(), "{c}");
    }
}

/// `--context-tokens -1` is named as a bad budget, not taken for a flag (clap's
/// "use '-- -1'" would make -1 a query).
#[test]
fn a_negative_context_budget_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    for bad in ["-1", "1000001", "x"] {
        let out = search(&index, &["--context-tokens", bad], b"");
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("context budget must be 0..=1000000") && !err.contains("-- -1"),
            "{bad}: {err}"
        );
    }
    let out = search(
        &index,
        &["--context-tokens", "0"],
        b"{\"id\": 1, \"text\": \"tokyo\"}\n",
    );
    assert!(out.status.success());
    assert!(lines(&out)[0].get("context").is_none(), "0: no context");
}

/// Every numeric setting takes a sign and is refused by its range, by name (clap took
/// `-0.5` for a flag and suggested `-- -0.5`).
#[test]
fn a_negative_setting_is_refused_by_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_real_index(dir.path());
    for (flag, key) in [
        ("--low-evidence-threshold", "low_evidence_threshold"),
        ("--lexical-weight", "lexical_weight"),
        ("--lexical-candidates", "lexical_candidates"),
    ] {
        let out = search(&index, &[flag, "-1"], b"");
        assert!(!out.status.success(), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(key) && err.contains("outside") && !err.contains("-- -1"),
            "{flag}: {err}"
        );
    }
}
