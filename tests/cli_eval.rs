//! `primd eval` end to end: the real binary and model on a tiny committed corpus
//! (tests/data/eval: 14 museum-kiosk passages, 9 questions, 4 recorded-style streams).

mod common;

use std::path::Path;
use std::process::Output;

fn eval(index: &Path, extra: &[&str]) -> Output {
    let d = common::data("eval");
    common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("eval")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--index")
        .arg(index)
        .arg("--queries")
        .arg(d.join("queries.jsonl"))
        .arg("--qrels")
        .arg(d.join("qrels.tsv"))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn eval_json_report_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_index_of(&common::data("eval/corpus.jsonl"), dir.path());
    let streams = common::data("eval/streams.jsonl");
    let out_dir = dir.path().join("report");
    let out = eval(
        &index,
        &[
            "--streams",
            streams.to_str().unwrap(),
            "--json",
            "--quiet",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let sections = v["retrievers"].as_array().unwrap();
    assert_eq!(sections.len(), 1, "the default retriever only");
    assert_eq!(
        sections[0]["retriever"], "hybrid",
        "the index has a lexical section"
    );
    let section = &sections[0];

    // 9 questions, one without a judgement.
    let p = &section["prefix"];
    assert_eq!(p["queries"], 8);
    assert_eq!(p["skipped_no_relevant"], 1);
    // "When does the museum open on Fridays" → 7 words, …: every prefix counted.
    assert_eq!(p["prefixes"], 7 + 8 + 6 + 6 + 6 + 7 + 5 + 9);
    let suf = p["sufficiency"].as_array().unwrap();
    let ks: Vec<u64> = suf.iter().map(|s| s["k"].as_u64().unwrap()).collect();
    assert_eq!(ks, [1, 3, 5, 10]);
    // These questions name their topic: the full question finds its passage.
    assert!(
        suf[3]["favourable_fraction"].as_f64().unwrap() >= 0.875,
        "{p}"
    );
    for s in suf {
        let fav = s["favourable_fraction"].as_f64().unwrap();
        let phi = &s["phi_suf"];
        if fav > 0.0 {
            let m = phi["mean"].as_f64().unwrap();
            assert!(m > 0.0 && m <= 1.0, "{s}");
        }
    }
    let phi_sc = p["phi_sc"]["mean"].as_f64().unwrap();
    assert!(phi_sc > 0.0 && phi_sc <= 1.0);
    assert_eq!(p["streamable"].as_array().unwrap().len(), 3 * 3 * 2);
    let types: Vec<&str> = p["by_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["qtype"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["who", "when", "where", "which", "how", "why", "other"]
    );

    let st = &section["streams"];
    assert_eq!(
        (
            st["utterances"].as_u64(),
            st["skipped_no_relevant"].as_u64()
        ),
        (Some(3), Some(1))
    );
    let (s, b) = (&st["streaming"], &st["baseline"]);
    assert_eq!(
        b["paths"]["full"], 1.0,
        "the baseline always searches the final"
    );
    assert_eq!(b["speculative_searches_per_utterance"], 0.0);
    assert!(
        s["speculative_searches_per_utterance"].as_f64().unwrap() >= 1.0,
        "{s}"
    );
    // Every final equals a partial that was observed (or embedded while idle).
    assert_eq!(
        s["paths"]["full"].as_f64().unwrap()
            + s["paths"]["reuse"].as_f64().unwrap()
            + s["paths"]["rerank"].as_f64().unwrap(),
        1.0
    );
    assert!(s["paths"]["reuse"].as_f64().unwrap() > 0.0, "{s}");
    // Streaming never loses what the baseline finds here, and finds these three.
    assert_eq!(st["lost_relevant"], 0);
    assert_eq!(b["hit10"], 1.0);
    assert_eq!(s["hit10"], 1.0);
    assert!(v["sweep"].is_null(), "no --sweep");

    for f in [
        "report.md",
        "report.json",
        "phi.svg",
        "streamable.svg",
        "latency_cdf.svg",
    ] {
        let body = std::fs::read_to_string(out_dir.join(f)).unwrap();
        assert!(!body.is_empty(), "{f}");
        if f.ends_with(".svg") {
            assert!(
                body.starts_with("<svg") && body.trim_end().ends_with("</svg>"),
                "{f}"
            );
        }
    }
    let recs = std::fs::read_to_string(out_dir.join("prefix_records.jsonl")).unwrap();
    assert_eq!(recs.lines().count(), 8);
    let q1: serde_json::Value = serde_json::from_str(recs.lines().next().unwrap()).unwrap();
    assert_eq!(
        (q1["id"].as_str(), q1["n"].as_u64(), q1["qtype"].as_str()),
        (Some("q1"), Some(7), Some("when"))
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("| streamable at L = 600 ms, δ = 3 w/s, θ = 0.8: all |"),
        "{md}"
    );
    // End-of-utterance latencies were measured (a search is never free: an unmeasured
    // one reads 0), and the report's table shows the JSON's figures.
    for (m, row) in [
        (s, "| streaming |"),
        (b, "| baseline (`enabled = false`) |"),
    ] {
        let l: Vec<f64> = ["p50", "p90", "p95", "p99"]
            .iter()
            .map(|p| m["latency_ms"][p].as_f64().unwrap())
            .collect();
        assert!(l.iter().all(|&x| x.is_finite() && x > 0.0), "{row} {l:?}");
        let cells = format!("| {:.3} | {:.3} | {:.3} | {:.3} |", l[0], l[1], l[2], l[3]);
        let line = md.lines().find(|x| x.starts_with(row)).unwrap();
        assert!(line.ends_with(&cells), "{line} vs {cells}");
    }

    // Without --json: the one-screen summary on stdout.
    let out = eval(&index, &["--quiet", "--limit", "2"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("primd eval: 2 queries"), "{text}");
    assert!(text.contains("streamable at L=600 ms"), "{text}");

    // Bad input: a clear error naming the file, nothing on stdout.
    let out = eval(&index, &["--streams", "/nonexistent/streams.jsonl"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/streams.jsonl"), "{err}");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": \"q1\", \"text\": \"ok\"}\nnot json\n").unwrap();
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args(["eval", "--index"])
        .arg(&index)
        .arg("--queries")
        .arg(&bad)
        .arg("--qrels")
        .arg(common::data("eval/qrels.tsv"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("line 2"), "{err}");
    // --sweep needs streams.
    let out = eval(&index, &["--sweep"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("required") && err.contains("--streams"),
        "{err}"
    );
    // An unknown retriever is named.
    let out = eval(&index, &["--retriever", "dense,bm25"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("'bm25' for '--retriever"),
        "{err}"
    );
}

#[test]
fn eval_measures_each_retriever_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_index_of(&common::data("eval/corpus.jsonl"), dir.path());
    let streams = common::data("eval/streams.jsonl");
    let out_dir = dir.path().join("report");
    let out = eval(
        &index,
        &[
            "--retriever",
            "dense,lexical,hybrid",
            "--streams",
            streams.to_str().unwrap(),
            "--json",
            "--quiet",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sections = v["retrievers"].as_array().unwrap();
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s["retriever"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dense", "lexical", "hybrid"]);
    for s in sections {
        let name = s["retriever"].as_str().unwrap();
        assert_eq!(s["prefix"]["queries"], 8, "{name}");
        assert_eq!(
            s["prefix"]["prefixes"],
            7 + 8 + 6 + 6 + 6 + 7 + 5 + 9,
            "{name}"
        );
        let st = &s["streams"];
        assert_eq!(st["utterances"], 3, "{name}");
        // These questions name their topic: every retriever finds them in the end.
        assert!(
            st["streaming"]["hit10"].as_f64().unwrap() >= 2.0 / 3.0,
            "{name}: {st}"
        );
        let lexical = st["streaming"]["lexical_searches_per_utterance"]
            .as_f64()
            .unwrap();
        assert_eq!(lexical > 0.0, name != "dense", "{name}");
        let embeds = st["streaming"]["embeds_per_utterance"].as_f64().unwrap();
        assert_eq!(
            embeds == 0.0,
            name == "lexical",
            "{name}: lexical never embeds"
        );
    }
    assert_eq!(
        sections[1]["streams"]["streaming"]["paths"]["lexical"], 1.0,
        "the lexical retriever's path"
    );
    for f in [
        "report.md",
        "phi.svg",
        "phi-lexical.svg",
        "phi-hybrid.svg",
        "streamable-hybrid.svg",
        "latency_cdf-lexical.svg",
    ] {
        assert!(out_dir.join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Retrievers side by side"), "{md}");
    assert!(md.contains("# Retriever: lexical"), "{md}");
    let recs = std::fs::read_to_string(out_dir.join("prefix_records.jsonl")).unwrap();
    assert_eq!(
        recs.lines().count(),
        3 * 8,
        "one record per retriever and query"
    );
    assert!(
        recs.lines()
            .any(|l| l.contains("\"retriever\":\"lexical\""))
    );
}
