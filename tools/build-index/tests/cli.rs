//! `build-index` as a user runs it: bad corpora fail with the line at fault, good ones
//! give byte-identical indexes every time.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models");
    assert!(dir.join("model.onnx").is_file(), "run models/fetch first");
    dir
}

fn build(input: &Path, output: &Path, extra: &[&str]) -> Output {
    // Under an emulator (cross-compiled tests), start the binary through it.
    let mut c = match std::env::var("PRIMD_TEST_RUNNER") {
        Ok(r) if !r.trim().is_empty() => {
            let mut words = r.split_whitespace();
            let mut c = Command::new(words.next().unwrap());
            c.args(words).arg(env!("CARGO_BIN_EXE_build-index"));
            c
        }
        _ => Command::new(env!("CARGO_BIN_EXE_build-index")),
    };
    c.arg("--quiet")
        .arg("--model")
        .arg(model_dir())
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(extra)
        .output()
        .unwrap()
}

fn fails_with(corpus: &str, extra: &[&str], needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.jsonl");
    std::fs::write(&input, corpus).unwrap();
    let out = build(&input, &dir.path().join("x.idx"), extra);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {corpus:?}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
    assert!(
        !dir.path().join("x.idx").exists(),
        "no index is left behind"
    );
}

#[test]
fn malformed_duplicate_and_empty_corpora_are_refused_with_their_lines() {
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \n",
        &[],
        &["line 2"],
    );
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\"}\n",
        &[],
        &["line 2", "text"],
    );
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"y\"}\n{\"id\": \"a\", \"text\": \"z\"}\n",
        &[],
        &["duplicate id \"a\"", "line 1", "line 3"],
    );
    fails_with("", &[], &["no documents"]);
    fails_with("\n\n", &[], &["no documents"]);
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n",
        &["--chunk-words", "10", "--overlap", "10"],
        &["--overlap"],
    );
}

#[test]
fn same_input_gives_a_byte_identical_index_from_jsonl_or_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("kitchen.txt"),
        "Turn off the kitchen lights by saying so.",
    )
    .unwrap();
    std::fs::write(
        docs.join("sub/paris.md"),
        "# Paris\n\nParis is the capital of France.",
    )
    .unwrap();
    let long: String = (0..300).map(|i| format!("word{i} ")).collect();
    std::fs::write(docs.join("long.txt"), long).unwrap();
    let (a, b) = (dir.path().join("a.idx"), dir.path().join("b.idx"));
    for (out, threads) in [(&a, "1"), (&b, "2")] {
        let o = build(
            &docs,
            out,
            &[
                "--threads",
                threads,
                "--chunk-words",
                "100",
                "--overlap",
                "10",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "thread count must not change the bytes"
    );
    let index = primd::index::Index::open(&a).unwrap();
    // long.txt: 300 words in 100-word windows with 10 shared → 4 chunks; plus 2 files.
    assert_eq!(index.len(), 6);
    let ids: Vec<_> = (0..index.len())
        .map(|i| index.passage(i).unwrap().id.to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "kitchen.txt",
            "long.txt",
            "long.txt",
            "long.txt",
            "long.txt",
            "sub/paris.md"
        ]
    );
    assert_eq!(
        index.passage(5).unwrap().title,
        "Paris",
        "a markdown heading is the title"
    );
}

#[test]
fn int8_by_default_and_fp32_on_request_recorded_in_the_index() {
    use primd::embed::{Precision, precision_of};
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    std::fs::write(
        &corpus,
        "{\"id\": \"a\", \"text\": \"Paris is the capital of France.\"}\n",
    )
    .unwrap();
    for (extra, want) in [
        (&[][..], Precision::Int8),
        (&["--int8"], Precision::Int8),
        (&["--fp32"], Precision::Fp32),
    ] {
        let out = dir.path().join("x.idx");
        let o = build(&corpus, &out, extra);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        assert!(stderr.contains(&format!("{want} model")), "{stderr}");
        let index = primd::index::Index::open(&out).unwrap();
        assert_eq!(
            precision_of(&model_dir(), &index.meta().fingerprint),
            Some(want),
            "{extra:?}"
        );
    }
}

#[test]
fn lexical_section_by_default_analyzer_on_request_or_none() {
    use primd::hits::Hits;
    use primd::lexical::{DEFAULT_ANALYZER, LexicalSearcher};
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    std::fs::write(
        &corpus,
        "{\"id\": \"paris\", \"text\": \"Paris is the capital of France.\"}\n\
         {\"id\": \"tokyo\", \"text\": \"Tokyo is the capital of Japan.\"}\n",
    )
    .unwrap();
    for (extra, want) in [
        (&[][..], Some(DEFAULT_ANALYZER.to_string())),
        (&["--analyzer", "words"][..], Some("words".to_string())),
        (
            &["--analyzer", "char3", "--bm25-k1", "0.9"][..],
            Some("char3".to_string()),
        ),
        (&["--no-lexical"][..], None),
    ] {
        let out = dir.path().join("x.idx");
        let o = build(&corpus, &out, extra);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        let index = primd::index::Index::open(&out).unwrap();
        match (index.lexical(), want) {
            (Some(lex), Some(want)) => {
                assert_eq!(lex.spec().to_string(), want, "{extra:?}");
                assert!(stderr.contains("lexical section"), "{stderr}");
                let mut hits = Hits::new();
                LexicalSearcher::new().search(&lex, "tokio japan", "", 0.0, 2, &mut hits);
                assert_eq!(index.passage(hits[0].index as usize).unwrap().id, "tokyo");
            }
            (None, None) => assert!(stderr.contains("no lexical section"), "{stderr}"),
            (got, want) => panic!("{extra:?}: {got:?} vs {want:?}"),
        }
    }
    // Bad lexical options are refused before anything is embedded or written.
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n",
        &["--analyzer", "char9"],
        &["--analyzer", "char9"],
    );
    fails_with(
        "{\"id\": \"a\", \"text\": \"x\"}\n",
        &["--bm25-b", "2"],
        &["BM25 b"],
    );
}

#[test]
fn batched_embedding_stores_exactly_the_vectors_of_one_at_a_time() {
    use primd::embed::{DIM, Embed, Embedder, EmbedderOptions, cosine};
    use primd::index::{passage_embed_text, quantize_i8};
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    // 19 passages of 1 to ~250 tokens: batches of several short ones, long ones alone.
    let mut lines = String::new();
    for i in 0..19 {
        let words: Vec<String> = (0..1 + i * i / 2)
            .map(|w| format!("w{}x{}", w % 37, i))
            .collect();
        let title = if i % 3 == 0 { "" } else { "Title" };
        lines.push_str(&format!(
            "{{\"id\": \"p{i}\", \"title\": \"{title}\", \"text\": \"{}\"}}\n",
            words.join(" ")
        ));
    }
    std::fs::write(&corpus, lines).unwrap();
    let out = dir.path().join("x.idx");
    let o = build(&corpus, &out, &["--chunk-words", "0", "--threads", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = primd::index::Index::open(&out).unwrap();
    assert_eq!(index.len(), 19);
    let mut e = Embedder::load(&model_dir(), &EmbedderOptions::default()).unwrap();
    for i in 0..index.len() {
        let p = index.passage(i).unwrap();
        let mut alone = [0.0; DIM];
        e.embed_into(&passage_embed_text(p.title, p.text), &mut alone)
            .unwrap();
        let mut q = [0i8; DIM];
        let scale = quantize_i8(&alone, &mut q);
        // Batching changes no arithmetic (each token's row is computed alone), so the
        // stored int8 vector is the very one of embedding the passage alone.
        let dequant = |v: &[i8], s: f32| v.iter().map(|&x| f32::from(x) * s).collect::<Vec<_>>();
        let cos = cosine(
            &dequant(&q, scale),
            &dequant(index.vector(i), index.scale(i)),
        );
        assert_eq!(
            (index.vector(i), index.scale(i)),
            (&q[..], scale),
            "passage {i}: cosine {cos} to one-at-a-time"
        );
    }
}

#[test]
fn passages_are_cut_to_what_the_encoder_reads_and_a_whole_document_that_is_not_is_named() {
    // 150 words (under the 180-word windows) of ~5 word pieces each: ~750 pieces, three
    // times what MiniLM reads. Cut by words alone this was one passage whose last two
    // thirds no embedding saw.
    let words = [
        "immunohistochemically",
        "electroencephalographic",
        "phosphatidylethanolamine",
        "thermoluminescence",
        "spectrophotometrically",
    ];
    let text: Vec<&str> = (0..150).map(|i| words[i % words.len()]).collect();
    let corpus = format!(
        "{{\"id\": \"assay\", \"title\": \"Methods\", \"text\": \"{}\"}}\n",
        text.join(" ")
    );
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.jsonl");
    std::fs::write(&input, corpus).unwrap();

    let out = dir.path().join("cut.idx");
    let o = build(&input, &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("longer than the model reads"), "{stderr}");
    let index = primd::index::Index::open(&out).unwrap();
    assert!(index.len() >= 3, "{} passages", index.len());
    let mut tokens = primd::embed::Embedder::load(&model_dir(), &Default::default()).unwrap();
    let mut covered = 0;
    for i in 0..index.len() {
        let p = index.passage(i).unwrap();
        assert!(
            p.word_start <= covered,
            "words {covered}..{} in no passage",
            p.word_start
        );
        covered = p.word_end;
        let n = primd::embed::Embed::count_tokens(
            &mut tokens,
            &primd::index::passage_embed_text(p.title, p.text),
        )
        .unwrap();
        assert!(n < primd::embed::MAX_TOKENS, "passage {i}: {n} word pieces");
    }
    assert_eq!(covered, 150, "every word is in a passage");

    let o = build(
        &input,
        &dir.path().join("whole.idx"),
        &["--chunk-words", "0"],
    );
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("1 of 1 passages are longer than the model reads"),
        "{stderr}"
    );
}
