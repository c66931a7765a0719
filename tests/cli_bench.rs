//! `primd bench` as a user runs it: the JSON schema of docs/bench.md, the kernels it
//! names are the ones the library runs, and it measures the index it is given. No
//! timing is asserted (noisy machines); only that each figure is there and coherent.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn bench(extra: &[&str]) -> Output {
    common::command(env!("CARGO_BIN_EXE_primd"))
        .arg("bench")
        .arg("--model")
        .arg(common::model_dir())
        .arg("--quick")
        .args(extra)
        .output()
        .unwrap()
}

fn bench_json(extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let out = bench(&args);
    assert!(
        out.status.success(),
        "primd bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// A duration or rate: finite and positive.
fn positive(v: &Value, key: &str) -> f64 {
    let x = num(v, key);
    assert!(x.is_finite() && x > 0.0, "{key} = {x} in {v}");
    x
}

#[test]
fn json_follows_the_schema_and_names_the_librarys_kernels() {
    let r = bench_json(&["--threads", "2"]);
    assert_eq!(r["schema"], "primd-bench/1");
    assert_eq!(r["primd_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(r["quick"], true);

    let cpu = &r["cpu"];
    assert_eq!(cpu["arch"], std::env::consts::ARCH);
    assert!(cpu["model"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(cpu["cores"].as_u64().is_some_and(|c| c >= 1));
    if cfg!(target_os = "linux") {
        assert!(cpu["load_avg"].as_f64().is_some_and(|l| l >= 0.0), "{cpu}");
    }
    let features = cpu["features"].as_object().unwrap();
    for f in [
        "neon",
        "dotprod",
        "i8mm",
        "fp16",
        "avx2",
        "fma",
        "avxvnni",
        "avx512vnni",
    ] {
        assert!(
            features[f].is_boolean(),
            "feature {f} missing: {features:?}"
        );
    }
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        features["avx2"],
        std::arch::is_x86_feature_detected!("avx2")
    );
    #[cfg(target_arch = "aarch64")]
    {
        assert_eq!(features["neon"], true);
        assert_eq!(
            features["dotprod"],
            std::arch::is_aarch64_feature_detected!("dotprod")
        );
    }

    // The binary and this test run on the same CPU with the same environment
    // (PRIMD_FORCE_SCALAR included), so they must pick the same kernels.
    let k = &r["kernels"];
    assert_eq!(k["scan"], primd::scan::kernel_name());
    assert_eq!(k["int8_matmul"], primd::qgemm::kernel_name());
    assert_eq!(k["lexical"], primd::lexical::kernel_name());
    assert_eq!(k["report"], primd::bench::kernel_report());
    assert!(k["tract_f32"].as_str().is_some_and(|s| !s.is_empty()));

    assert_eq!(r["model"]["precision"], "int8");
    positive(&r["model"], "load_ms");

    // One row per length and thread count, at exactly the lengths announced.
    let embed = r["embed"].as_array().unwrap();
    let mut cells: Vec<(u64, u64)> = embed
        .iter()
        .map(|e| {
            (
                e["threads"].as_u64().unwrap(),
                e["tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    cells.sort_unstable();
    assert_eq!(
        cells,
        [(1, 8), (1, 16), (1, 32), (2, 8), (2, 16), (2, 32)],
        "{embed:?}"
    );
    for e in embed {
        assert!(e["runs"].as_u64().unwrap() >= 3, "{e}");
        assert!(positive(e, "p50_ms") <= positive(e, "p95_ms"), "{e}");
    }

    let ix = &r["index"];
    assert_eq!(ix["synthetic"], true);
    assert!(ix["path"].is_null());
    assert_eq!(ix["passages"], 2000);
    assert_eq!(ix["lexical"], true);
    assert!(ix["cold"].is_boolean());
    assert!(ix["file_bytes"].as_u64().unwrap() > 2000 * 48);
    // A corpus this small is scored from postings decoded at open; the RAM is reported.
    assert!(ix["decoded_bytes"].as_u64().unwrap() > 2000 * 8, "{ix}");
    for key in ["page_in_ms", "page_in_mib_s", "open_ms"] {
        positive(ix, key);
    }

    let scan = &r["scan"];
    assert_eq!(scan["passages"], 2000);
    assert_eq!(
        scan["bytes"],
        2000 * 384 / 8,
        "one 384-bit code per passage"
    );
    for key in ["p50_ms", "gib_s", "read_p50_ms", "read_gib_s", "ratio"] {
        positive(scan, key);
    }
    let ratio = num(scan, "read_p50_ms") / num(scan, "p50_ms");
    assert!((num(scan, "ratio") - ratio).abs() <= 1e-9 * ratio);

    let step = &r["step"];
    assert_eq!(step["retriever"], "hybrid");
    assert_eq!(step["candidates"], primd::dense::DEFAULT_CANDIDATES);
    assert_eq!(
        step["lexical_candidates"],
        primd::retriever::DEFAULT_LEXICAL_CANDIDATES
    );
    assert!(step["queries"].as_u64().unwrap() >= 1);
    assert!(positive(step, "p50_ms") <= positive(step, "p95_ms"));
    for key in [
        "lexical_p50_ms",
        "scan_p50_ms",
        "fuse_p50_ms",
        "with_embed_p50_ms",
        "with_embed_p95_ms",
    ] {
        positive(step, key);
    }

    let mem = &r["memory"];
    if cfg!(target_os = "linux") {
        let after = mem["peak_rss_after_embed_kib"].as_u64().unwrap();
        let end = mem["peak_rss_kib"].as_u64().unwrap();
        assert!(after > 0 && after <= end, "{mem}");
        let now = mem["rss_end_kib"].as_u64().unwrap();
        assert!(now > 0 && now <= end, "{mem}");
    }
}

#[test]
fn measures_the_index_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let index = common::build_real_index(dir.path());
    let passages = std::fs::read_to_string(common::data("golden-corpus.jsonl"))
        .unwrap()
        .lines()
        .count();
    let r = bench_json(&["--threads", "1", "--index", index.to_str().unwrap()]);
    let ix = &r["index"];
    assert_eq!(ix["synthetic"], false);
    assert_eq!(ix["path"], index.to_str().unwrap());
    assert_eq!(ix["passages"], passages);
    assert_eq!(ix["file_bytes"], std::fs::metadata(&index).unwrap().len());
    assert_eq!(r["scan"]["bytes"], passages * 384 / 8);
    assert_eq!(r["step"]["retriever"], "hybrid");
    assert!(
        r["embed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["threads"] == 1)
    );
    assert!(index.is_file(), "the user's index is left in place");
}

#[test]
fn the_table_names_the_kernels() {
    let out = bench(&["--threads", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let kernels = table
        .lines()
        .find(|l| l.starts_with("kernels"))
        .unwrap_or_else(|| panic!("no kernels line in:\n{table}"));
    assert!(kernels.contains(primd::scan::kernel_name()), "{kernels}");
    assert!(kernels.contains(primd::qgemm::kernel_name()), "{kernels}");
    assert!(kernels.contains(primd::lexical::kernel_name()), "{kernels}");
    for row in ["embed", "page-in", "scan", "step", "peak RSS"] {
        assert!(table.contains(row), "no {row} in:\n{table}");
    }
}

#[test]
fn a_missing_index_is_a_clear_error() {
    let missing = Path::new("/nonexistent/primd-bench.idx");
    let out = bench(&["--index", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("primd: error") && err.contains("primd-bench.idx"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}
