//! Tests of the lexical module as a whole: BM25 against hand arithmetic, the fast path
//! against the exhaustive one and an independent naive BM25 on random corpora, bad input,
//! and corrupt sections.

use std::collections::HashMap;

use super::format::{LEX_HEADER, OFF_DOC_COUNT, OFF_SUBS, SUB_FST, SUB_POSTINGS, SUB_TERMS};
use super::*;
use crate::hits::Hits;
use crate::index::test_support::XorShift;
use crate::index::{PassageRecord, passage_embed_text};

const WORDS: AnalyzerSpec = AnalyzerSpec::new(AnalyzerKind::Words);

fn char_ngrams(n: u8) -> AnalyzerSpec {
    AnalyzerSpec::new(AnalyzerKind::CharNgrams { n })
}

fn passage(i: usize, title: &str, text: &str) -> PassageRecord {
    PassageRecord {
        id: format!("p{i}"),
        title: title.into(),
        text: text.into(),
        chunk: 0,
        word_start: 0,
        word_end: 0,
    }
}

fn passages(docs: &[(&str, &str)]) -> Vec<PassageRecord> {
    docs.iter()
        .enumerate()
        .map(|(i, (t, x))| passage(i, t, x))
        .collect()
}

/// The section of `ps` as an index writes it (each passage's title and text as the
/// embedder reads them).
fn build(ps: &[PassageRecord], spec: &AnalyzerSpec, bm25: Bm25) -> Result<Vec<u8>, String> {
    let texts = ps.iter().map(|p| passage_embed_text(&p.title, &p.text));
    super::build(texts, spec, bm25)
}

fn search(bytes: &[u8], query: &str, extra: &str, w: f32, k: usize) -> Vec<(u32, f32)> {
    let lex = Lexical::open(bytes).unwrap();
    let mut s = LexicalSearcher::with_window(64);
    let mut out = Hits::new();
    s.search(&lex, query, extra, w, k, &mut out);
    let fast: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
    s.search_exhaustive(&lex, query, extra, w, k, &mut out);
    let exact: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
    assert_same_top(&fast, &exact, query);
    fast
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1.0)
}

/// Same length, same scores rank by rank (within float tolerance), and the same documents
/// wherever the scores are not tied.
fn assert_same_top(fast: &[(u32, f32)], exact: &[(u32, f32)], what: &str) {
    assert_eq!(fast.len(), exact.len(), "{what}: {fast:?} vs {exact:?}");
    for (i, (f, e)) in fast.iter().zip(exact).enumerate() {
        assert!(
            close(f.1.into(), e.1.into()),
            "{what}: rank {i}: {f:?} vs {e:?}"
        );
        let tied = |j: usize| {
            exact
                .get(j)
                .is_some_and(|x| x.0 != e.0 && close(x.1.into(), e.1.into()))
        };
        if f.0 != e.0 {
            assert!(
                tied(i.wrapping_sub(1)) || tied(i + 1) || exact.iter().any(|x| x.0 == f.0),
                "{what}: rank {i}: {f:?} vs {e:?}"
            );
        }
    }
}

#[test]
fn bm25_equals_hand_arithmetic_words() {
    // N = 3 documents; lengths in words: d0 = 3, d1 = 2, d2 = 2 (title counts).
    let bytes = build(
        &passages(&[("", "cat cat dog"), ("", "Dog, bird!"), ("Fish", "cat")]),
        &WORDS,
        Bm25::default(),
    )
    .unwrap();
    // avgdl = 7 / 3; k1 = 1.2, b = 0.75.
    // norm(dl) = k1 · (1 − b + b · dl / avgdl):
    //   norm(3) = 1.2 · (0.25 + 0.75 · 9/7) = 1.4571429
    //   norm(2) = 1.2 · (0.25 + 0.75 · 6/7) = 1.0714286
    let avgdl = 7.0f64 / 3.0;
    let norm = |dl: f64| 1.2 * (1.0 - 0.75 + 0.75 * dl / avgdl);
    // idf(df) = ln(1 + (N − df + 0.5) / (df + 0.5)):
    //   "cat", "dog": df = 2 → ln(1 + 1.5 / 2.5) = ln 1.6 = 0.4700036
    //   "bird", "fish": df = 1 → ln(1 + 2.5 / 1.5) = ln 2.6667 = 0.9808293
    let idf2 = (1.0f64 + 1.5 / 2.5).ln();
    let idf1 = (1.0f64 + 2.5 / 1.5).ln();
    // score = idf · tf · (k1 + 1) / (tf + norm(dl))
    let s = |idf: f64, tf: f64, dl: f64| idf * tf * 2.2 / (tf + norm(dl));
    let cat_d0 = s(idf2, 2.0, 3.0); // 0.4700036 · 4.4 / 3.4571429 = 0.5981864
    let cat_d2 = s(idf2, 1.0, 2.0); // 0.4700036 · 2.2 / 2.0714286 = 0.4991763
    let dog_d0 = s(idf2, 1.0, 3.0); // 0.4700036 · 2.2 / 2.4571429 = 0.4208172
    let dog_d1 = s(idf2, 1.0, 2.0); // = cat_d2 = 0.4991763
    assert!(close(cat_d0, 0.5981864) && close(dog_d0, 0.4208172));

    let got = search(&bytes, "cat", "", 0.0, 10);
    assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 2]);
    assert!(close(got[0].1.into(), cat_d0) && close(got[1].1.into(), cat_d2));

    // Two terms add up; d1 and d2 tie at 0.4991763: the lower passage first.
    let got = search(&bytes, "Cat? DOG.", "", 0.0, 10);
    assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(close(got[0].1.into(), cat_d0 + dog_d0)); // 1.0190036
    assert!(close(got[1].1.into(), dog_d1) && close(got[2].1.into(), cat_d2));

    // A repeated query word counts twice (query term frequency).
    let got = search(&bytes, "bird bird", "", 0.0, 10);
    assert!(close(got[0].1.into(), 2.0 * s(idf1, 1.0, 2.0))); // 2 · 1.0417083

    // Extra terms at weight 0.5; weight 0 ignores them.
    let got = search(&bytes, "bird", "fish", 0.5, 10);
    assert_eq!(got.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2]);
    assert!(close(got[0].1.into(), s(idf1, 1.0, 2.0))); // 1.0417083
    assert!(close(got[1].1.into(), 0.5 * s(idf1, 1.0, 2.0))); // 0.5208542
    assert_eq!(search(&bytes, "bird", "fish", 0.0, 10).len(), 1);
    assert_eq!(search(&bytes, "bird", "fish", -1.0, 10).len(), 1);
    assert_eq!(search(&bytes, "bird", "fish", f32::NAN, 10).len(), 1);

    // k limits; unknown terms, empty queries and k = 0 give nothing.
    assert_eq!(
        search(&bytes, "cat dog", "", 0.0, 1),
        [(0, got_score(&bytes))]
    );
    assert!(search(&bytes, "zebra", "", 0.0, 10).is_empty());
    assert!(search(&bytes, "", "", 0.0, 10).is_empty());
    assert!(search(&bytes, " ?! ", "cat", 0.0, 10).is_empty());
    assert!(search(&bytes, "cat", "", 0.0, 0).is_empty());

    let lex = Lexical::open(&bytes).unwrap();
    assert_eq!((lex.doc_count(), lex.term_count()), (3, 4));
    assert_eq!(lex.spec(), &WORDS);
    assert_eq!(lex.bm25(), Bm25 { k1: 1.2, b: 0.75 });
    assert!((lex.avgdl() - 7.0 / 3.0).abs() < 1e-6);
}

fn got_score(bytes: &[u8]) -> f32 {
    search(bytes, "cat dog", "", 0.0, 10)[0].1
}

#[test]
fn bm25_equals_hand_arithmetic_char_ngrams() {
    // char 4-grams: "abc" → _abc, abc_ ; "abd" → _abd, abd_ (N = 2, dl = 2 each, avgdl 2).
    let bytes = build(
        &passages(&[("", "abc"), ("", "abd")]),
        &char_ngrams(4),
        Bm25::default(),
    )
    .unwrap();
    // norm = 1.2 · (0.25 + 0.75 · 2/2) = 1.2; each term df = 1: idf = ln(1 + 1.5/1.5) = ln 2;
    // per term: ln 2 · 1 · 2.2 / (1 + 1.2) = ln 2; "abc" matches both of d0's terms: 2 ln 2.
    let got = search(&bytes, "ABC", "", 0.0, 10);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 0);
    assert!(close(got[0].1.into(), 2.0 * 2f64.ln())); // 1.3862944
    // "abx" shares only _ab·: no 4-gram in common with either ("_abx", "abx_").
    assert!(search(&bytes, "abx", "", 0.0, 10).is_empty());
    // a misspelling sharing the leading gram: "abcx" → _abc (d0), abcx, bcx_ → ln 2
    let got = search(&bytes, "abcx", "", 0.0, 10);
    assert_eq!(got.len(), 1);
    assert!(close(got[0].1.into(), 2f64.ln()));
}

#[test]
fn words_side_by_side_rank_above_the_same_words_apart() {
    // The same words in another order: equal within-word n-grams, so versions 1-2 tie
    // them; the windows across a boundary ("w_yo", "ew_y") favour the passage where "new"
    // and "york" stand together, as a phrase query would.
    let ps = passages(&[
        ("", "york bridge new opened"),
        ("", "new york bridge opened"),
        ("", "a quiet day at sea"),
    ]);
    let got = search(
        &build(&ps, &char_ngrams(4), Bm25::default()).unwrap(),
        "New York?",
        "",
        0.0,
        10,
    );
    assert_eq!(
        got.iter().map(|h| h.0).collect::<Vec<_>>(),
        [1, 0],
        "{got:?}"
    );
    assert!(got[0].1 > got[1].1 * 1.2, "{got:?}");
    let within = AnalyzerSpec {
        across_words: false,
        numbers: false,
        ..char_ngrams(4)
    };
    let got = search(
        &build(&ps, &within, Bm25::default()).unwrap(),
        "New York?",
        "",
        0.0,
        10,
    );
    assert_eq!(got.len(), 2);
    assert!(close(got[0].1.into(), got[1].1.into()), "{got:?}");
}

#[test]
fn same_input_same_bytes_and_params_recorded() {
    let ps = passages(&[("T", "one two three"), ("", "two three four five")]);
    for spec in [WORDS, char_ngrams(3), char_ngrams(4), char_ngrams(5)] {
        let bm25 = Bm25 { k1: 0.9, b: 0.4 };
        let a = build(&ps, &spec, bm25).unwrap();
        assert_eq!(a, build(&ps, &spec, bm25).unwrap());
        let lex = Lexical::open(&a).unwrap();
        assert_eq!((lex.spec(), lex.bm25()), (&spec, bm25));
        assert_eq!(spec.to_string().parse::<AnalyzerSpec>().unwrap(), spec);
    }
    assert_eq!(DEFAULT_ANALYZER.to_string(), "char4");
    for bad in ["char2", "char6", "chars", "", "WORDS"] {
        assert!(bad.parse::<AnalyzerSpec>().is_err(), "{bad}");
    }
    for (spec, bm25) in [
        (char_ngrams(2), Bm25::default()),
        (char_ngrams(6), Bm25::default()),
        (WORDS, Bm25 { k1: -1.0, b: 0.5 }),
        (
            WORDS,
            Bm25 {
                k1: f32::NAN,
                b: 0.5,
            },
        ),
        (WORDS, Bm25 { k1: 1.2, b: 1.5 }),
    ] {
        assert!(build(&ps, &spec, bm25).is_err(), "{spec:?} {bm25:?}");
    }
    assert!(build(&[], &WORDS, Bm25::default()).is_err());
}

/// A naive BM25 straight from the definition, in f64, over analysed passages: independent
/// of the section format, so it checks the postings' encoding and decoding too.
fn naive_scores(
    ps: &[PassageRecord],
    spec: &AnalyzerSpec,
    query: &str,
    extra: &str,
    w: f32,
) -> HashMap<u32, f64> {
    let mut a = Analyzer::new();
    let docs: Vec<Vec<Vec<u8>>> = ps
        .iter()
        .map(|p| {
            // title and text as one text, as the embedder reads a passage
            let mut t = Vec::new();
            let text = crate::index::passage_embed_text(&p.title, &p.text);
            a.analyze(spec, &text, |x| t.push(x.to_vec()));
            t
        })
        .collect();
    let n = docs.len() as f64;
    let total: usize = docs.iter().map(Vec::len).sum();
    let avgdl = if total == 0 { 1.0 } else { total as f64 / n };
    let mut qtf: HashMap<Vec<u8>, f64> = HashMap::new();
    a.analyze(spec, query, |x| *qtf.entry(x.to_vec()).or_default() += 1.0);
    if w > 0.0 {
        a.analyze(spec, extra, |x| {
            *qtf.entry(x.to_vec()).or_default() += f64::from(w)
        });
    }
    let mut scores = HashMap::new();
    for (term, q) in &qtf {
        let df = docs.iter().filter(|d| d.contains(term)).count() as f64;
        if df == 0.0 {
            continue;
        }
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        for (i, d) in docs.iter().enumerate() {
            let tf = d.iter().filter(|t| *t == term).count() as f64;
            if tf > 0.0 {
                let norm = 1.2 * (1.0 - 0.75 + 0.75 * d.len() as f64 / avgdl);
                *scores.entry(i as u32).or_default() += q * idf * tf * 2.2 / (tf + norm);
            }
        }
    }
    scores
}

fn random_corpus(rng: &mut XorShift, n: usize, vocab: &[String]) -> Vec<PassageRecord> {
    (0..n)
        .map(|i| {
            let len = rng.below(40) as usize; // some empty
            // Skewed word choice: common words get long multi-block posting lists.
            let text: Vec<&str> = (0..len)
                .map(|_| {
                    let r = rng.below(vocab.len() as u64) as usize;
                    let r2 = rng.below(vocab.len() as u64) as usize;
                    vocab[r.min(r2) * r.min(r2) / vocab.len()].as_str()
                })
                .collect();
            passage(i, if i % 7 == 0 { "Title" } else { "" }, &text.join(" "))
        })
        .collect()
}

fn random_section(rng: &mut XorShift, n: usize, vocab: &[String], spec: AnalyzerSpec) -> Vec<u8> {
    build(&random_corpus(rng, n, vocab), &spec, Bm25::default()).unwrap()
}

fn vocabulary(rng: &mut XorShift, n: usize) -> Vec<String> {
    let alphabet: Vec<char> = "abcdeéfghijklmnoprstuмоскваü".chars().collect();
    (0..n)
        .map(|_| {
            let len = 1 + rng.below(8) as usize;
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect()
        })
        .collect()
}

#[test]
fn fast_path_equals_exhaustive_and_naive_on_random_corpora() {
    let mut rng = XorShift::new(0x1e81ca1);
    let mut out = Hits::new();
    let (mut seeded, mut switched) = (0, 0);
    let orphan = build(
        &passages(&[("", "an unrelated section"), ("", "of two passages")]),
        &WORDS,
        Bm25::default(),
    )
    .unwrap();
    for round in 0..12 {
        // MaxScore windows from 64 documents (many windows) to the default (one).
        let mut searcher = LexicalSearcher::with_window([64, 200, 1000, 0][round / 3 % 4]);
        let size = 20 + rng.below(300) as usize;
        let vocab = vocabulary(&mut rng, size);
        let n = 1 + rng.below(if round % 3 == 0 { 1500 } else { 200 }) as usize;
        let ps = random_corpus(&mut rng, n, &vocab);
        let spec = [WORDS, char_ngrams(3), char_ngrams(4), char_ngrams(5)][round % 4];
        let bytes = build(&ps, &spec, Bm25::default()).unwrap();
        let lex = Lexical::open(&bytes).unwrap();
        // As an open `Index` serves it: length norms precomputed (a slice of the wrong
        // length is ignored, not trusted).
        let norms = lex.doc_norms();
        let served = Lexical::open(&bytes).unwrap().with_norms(&norms);
        let short = Lexical::open(&bytes).unwrap().with_norms(&norms[1..]);
        // And with its postings decoded at open (a decoding of another section, with
        // another term count, is ignored).
        let decoded = Decoded::build(&served, usize::MAX).unwrap();
        let fast_view = served.clone().with_decoded(&decoded);
        let other = Decoded::build(&Lexical::open(&orphan).unwrap(), usize::MAX).unwrap();
        let ignored = served.clone().with_decoded(&other);
        assert!(fast_view.decoded().is_some() && ignored.decoded().is_none());
        for _ in 0..15 {
            let qlen = 1 + rng.below(12) as usize;
            let words: Vec<&str> = (0..qlen)
                .map(|_| vocab[rng.below(vocab.len() as u64) as usize].as_str())
                .collect();
            let query = words.join(" ");
            let extra = vocab[rng.below(vocab.len() as u64) as usize].clone();
            let w = [0.0f32, 0.25, 1.0][rng.below(3) as usize];
            let k = [1usize, 3, 10, 100][rng.below(4) as usize];
            searcher.search(&lex, &query, &extra, w, k, &mut out);
            seeded += searcher.stats().seeded;
            switched += u32::from(searcher.stats().switched_at.is_some());
            let fast: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
            searcher.search_exhaustive(&lex, &query, &extra, w, k, &mut out);
            let exact: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
            let what = format!("round {round} ({spec}, {n} docs) query {query:?} k {k}");
            assert_same_top(&fast, &exact, &what);
            // Precomputed norms are the same arithmetic: identical hits, bit for bit.
            for (view, name) in [
                (&served, "precomputed norms"),
                (&short, "ignored norms"),
                (&fast_view, "decoded postings"),
                (&ignored, "ignored decoding"),
            ] {
                searcher.search(view, &query, &extra, w, k, &mut out);
                let got: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
                assert_eq!(got, fast, "{what}: {name}, fast path");
                searcher.search_exhaustive(view, &query, &extra, w, k, &mut out);
                let got: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
                assert_eq!(got, exact, "{what}: {name}, exhaustive");
            }
            // Against the naive definition: every hit's score, and the k-th best score.
            let naive = naive_scores(&ps, &spec, &query, &extra, w);
            for &(d, s) in &fast {
                let want = naive.get(&d).copied().unwrap_or(f64::NAN);
                assert!(close(s.into(), want), "{what}: doc {d}: {s} vs {want}");
            }
            let mut best: Vec<f64> = naive.values().copied().collect();
            best.sort_by(|a, b| b.total_cmp(a));
            best.truncate(k);
            assert_eq!(best.len(), fast.len(), "{what}");
            for (b, f) in best.iter().zip(&fast) {
                assert!(close(*b, f.1.into()), "{what}: {b} vs {}", f.1);
            }
        }
    }
    // θ seeded from partial scores (the one-window path) was exercised, and so were
    // queries that went on term at a time after a window that pruned too little.
    assert!(seeded > 0);
    assert!(switched > 0);
}

#[test]
fn long_queries_non_latin_text_and_empty_documents() {
    let ps = passages(&[
        ("Москва", "Москва — столица России."),
        ("東京", "東京は日本の首都です。"),
        ("Ελλάδα", "Η Αθήνα είναι η πρωτεύουσα."),
        ("", "plain english text about tokyo"),
    ]);
    for spec in [WORDS, char_ngrams(3), char_ngrams(4)] {
        let bytes = build(&ps, &spec, Bm25::default()).unwrap();
        assert_eq!(search(&bytes, "москва", "", 0.0, 5)[0].0, 0, "{spec}");
        assert_eq!(search(&bytes, "ΑΘΉΝΑ", "", 0.0, 5)[0].0, 2, "{spec}");
        assert_eq!(search(&bytes, "Tokyo", "", 0.0, 5)[0].0, 3, "{spec}");
        // CJK runs are "words" (no spaces): the title matches as a whole / by n-grams.
        assert_eq!(search(&bytes, "東京", "", 0.0, 5)[0].0, 1, "{spec}");
        // A 10,000-word query: answered, not refused, same as the exhaustive scorer.
        let mut rng = XorShift::new(3);
        let pool = [
            "москва",
            "tokyo",
            "東京",
            "zebra",
            "столица",
            "text",
            "η",
            "x'y",
        ];
        let long: Vec<&str> = (0..10_000).map(|_| pool[rng.below(8) as usize]).collect();
        let hits = search(&bytes, &long.join(" "), &long[..500].join(" "), 0.3, 10);
        assert!(!hits.is_empty() && hits.len() <= 4);
    }

    // All documents empty (or without a single letter): the build works, nothing matches.
    let empty = passages(&[("", ""), ("", "  ... !!"), ("", "")]);
    for spec in [WORDS, char_ngrams(4)] {
        let bytes = build(&empty, &spec, Bm25::default()).unwrap();
        let lex = Lexical::open(&bytes).unwrap();
        assert_eq!((lex.doc_count(), lex.term_count()), (3, 0));
        assert!(search(&bytes, "anything at all", "", 0.0, 10).is_empty());
    }
}

#[test]
fn posting_lists_span_many_blocks() {
    // 1000 documents with "common", every 3rd with "third": lists of 8 and 3 blocks.
    let ps: Vec<PassageRecord> = (0..1000)
        .map(|i| {
            let text = match (i % 3, i % 250) {
                (_, 0) => "common rare common",
                (0, _) => "common third",
                _ => "common",
            };
            passage(i, "", text)
        })
        .collect();
    let bytes = build(&ps, &WORDS, Bm25::default()).unwrap();
    let got = search(&bytes, "rare common third", "", 0.0, 4);
    // The four "rare" documents tie (same text): in passage order.
    let docs: Vec<u32> = got.iter().map(|h| h.0).collect();
    assert_eq!(docs, [0, 250, 500, 750]);
    let all = search(&bytes, "common", "", 0.0, 1000);
    assert_eq!(all.len(), 1000);
    let third = search(&bytes, "third", "", 0.0, 1000);
    assert_eq!(third.len(), 332); // multiples of 3 below 1000, less 0 and 750
    assert!(third.iter().all(|h| h.0 % 3 == 0));
}

#[test]
fn a_query_that_prunes_stays_on_maxscore_and_one_that_does_not_switches() {
    // 3,000 documents: "common" in all, "rare" in four, "mid" in every other one.
    let ps: Vec<PassageRecord> = (0..3000)
        .map(|i| {
            let text = match (i % 700, i % 2) {
                (0, _) => "rare common",
                (_, 0) => "mid common words",
                _ => "common words here",
            };
            passage(i, "", text)
        })
        .collect();
    let bytes = build(&ps, &WORDS, Bm25::default()).unwrap();
    let lex = Lexical::open(&bytes).unwrap();
    let mut s = LexicalSearcher::with_window(64);
    let mut out = Hits::new();
    let mut exact = Hits::new();
    for (query, k, switches) in [("rare common", 1, false), ("mid common", 100, true)] {
        s.search(&lex, query, "", 0.0, k, &mut out);
        let stats = s.stats();
        // 47 windows: the first stays on MaxScore to the end, the second goes on term at
        // a time after its second window.
        let windows = if switches { 2 } else { 47 };
        assert_eq!(stats.windows, windows, "{query}: {stats:?}");
        assert_eq!(stats.switched_at.is_some(), switches, "{query}: {stats:?}");
        s.search_exhaustive(&lex, query, "", 0.0, k, &mut exact);
        let got: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
        let want: Vec<(u32, f32)> = exact.iter().map(|h| (h.index, h.score)).collect();
        assert_same_top(&got, &want, query);
    }
    // The first: the best "rare" document (four tie: the first), found without scoring
    // "common" past the first window.
    s.search(&lex, "rare common", "", 0.0, 1, &mut out);
    let docs: Vec<u32> = out.iter().map(|h| h.index).collect();
    assert_eq!(docs, [0]);
    assert!(s.stats().scored < 200, "{:?}", s.stats());
}

#[test]
fn warm_searcher_allocates_nothing() {
    // Capacities after a first (warm-up) search do not grow on the same query again.
    let mut rng = XorShift::new(9);
    let vocab = vocabulary(&mut rng, 200);
    let ps = random_corpus(&mut rng, 500, &vocab);
    let bytes = build(&ps, &char_ngrams(4), Bm25::default()).unwrap();
    let lex = Lexical::open(&bytes).unwrap();
    // Small windows, so MaxScore runs over many windows of the 500 documents, and every
    // query in two phases (which runs MaxScore on its rarest terms).
    let mut s = LexicalSearcher::with_window(64).with_exact_postings(1);
    let mut out = Hits::new();
    // A number too, so that spelling it out is warm as well.
    let q = vocab[..12].join(" ") + " in 1881";
    s.search(&lex, &q, &vocab[20], 0.5, 10, &mut out);
    s.search_exhaustive(&lex, &q, &vocab[20], 0.5, 10, &mut out);
    let before = s.capacities();
    assert!(before.iter().all(|&c| c > 0), "{before:?}");
    for _ in 0..3 {
        s.search(&lex, &q, &vocab[20], 0.5, 10, &mut out);
        s.search_exhaustive(&lex, &q, &vocab[20], 0.5, 10, &mut out);
        assert_eq!(s.capacities(), before);
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn sub(b: &[u8], i: usize) -> (usize, usize) {
    let at = OFF_SUBS + 16 * i;
    let off = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let len = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
    (off as usize, len as usize)
}

/// Hits as (passage, score bits): equal only if equal bit for bit.
fn bits(hits: &Hits) -> Vec<(u32, u32)> {
    hits.iter().map(|h| (h.index, h.score.to_bits())).collect()
}

/// Opens and, if accepted, searches with both scorers: must never panic.
fn open_and_search(b: &[u8], queries: &[&str]) -> bool {
    let Ok(lex) = Lexical::open(b) else {
        return false;
    };
    // As an open index serves it, too: garbage postings decode to garbage sums, never
    // to a panic or an id past the corpus, and to the same sums as the compressed path.
    let norms = lex.doc_norms();
    let served = lex.clone().with_norms(&norms);
    let decoded = Decoded::for_serving(&served).expect("a small section is decoded");
    let fast = served.clone().with_decoded(&decoded);
    let mut s = LexicalSearcher::new();
    let (mut out, mut fast_out) = (Hits::new(), Hits::new());
    for q in queries {
        for (view, out) in [(&served, &mut out), (&fast, &mut fast_out)] {
            s.search(view, q, "extra words", 0.5, 10, out);
            assert!(out.iter().all(|h| (h.index as usize) < lex.doc_count()));
        }
        assert_eq!(bits(&out), bits(&fast_out), "{q}");
        for (view, out) in [(&served, &mut out), (&fast, &mut fast_out)] {
            s.search_exhaustive(view, q, "", 0.0, 1000, out);
            assert!(out.iter().all(|h| (h.index as usize) < lex.doc_count()));
        }
        assert_eq!(bits(&out), bits(&fast_out), "{q}");
    }
    true
}

#[test]
fn corrupt_sections_are_refused_or_harmless() {
    let mut rng = XorShift::new(77);
    let vocab = vocabulary(&mut rng, 60);
    let ps = random_corpus(&mut rng, 400, &vocab);
    let orig = build(&ps, &char_ngrams(4), Bm25::default()).unwrap();
    let queries: Vec<String> = (0..4).map(|i| vocab[i * 5..i * 5 + 6].join(" ")).collect();
    let queries: Vec<&str> = queries.iter().map(String::as_str).collect();
    assert!(open_and_search(&orig, &queries));

    // Every truncation is refused (the sub-section table points past the end, or the
    // postings' last term no longer fits).
    let step = (orig.len() / 3000).max(1);
    for cut in (0..orig.len())
        .step_by(step)
        .chain(LEX_HEADER - 1..LEX_HEADER + 2)
    {
        let cut_bytes = &orig[..cut];
        if cut >= sub(&orig, SUB_POSTINGS).0 + sub(&orig, SUB_POSTINGS).1 {
            continue; // only padding was cut
        }
        assert!(Lexical::open(cut_bytes).is_err(), "cut at {cut}");
    }

    // Header fields.
    let (fst_off, fst_len) = sub(&orig, SUB_FST);
    let cases: Vec<(usize, u64)> = vec![
        (0, 0),                                      // magic
        (8, 2),                                      // layout version
        (12, 99),                                    // analyzer version
        (OFF_DOC_COUNT, 0),                          // no documents
        (OFF_DOC_COUNT, 401),                        // doc lengths no longer fit
        (OFF_DOC_COUNT, u64::MAX),                   // absurd
        (OFF_SUBS + 16 * SUB_FST, 1),                // misaligned
        (OFF_SUBS + 16 * SUB_FST + 8, u64::MAX),     // overflowing
        (OFF_SUBS + 16 * SUB_TERMS, 0),              // overlaps the header
        (OFF_SUBS + 16 * SUB_POSTINGS + 8, 1 << 40), // past the end
    ];
    for (at, v) in cases {
        let mut b = orig.clone();
        if at == 12 {
            b[12..16].copy_from_slice(&(v as u32).to_le_bytes());
        } else if at == 8 {
            b[8..12].copy_from_slice(&(v as u32).to_le_bytes());
        } else {
            put_u64(&mut b, at, v);
        }
        assert!(Lexical::open(&b).is_err(), "field {at} = {v}");
    }
    // Analyzer kind / n and BM25 parameters.
    for (at, v) in [(16usize, 7u8), (17, 9), (17, 2)] {
        let mut b = orig.clone();
        b[at] = v;
        assert!(Lexical::open(&b).is_err(), "byte {at} = {v}");
    }
    for k1 in [f32::NAN, -1.0, f32::INFINITY] {
        let mut b = orig.clone();
        b[24..28].copy_from_slice(&k1.to_le_bytes());
        assert!(Lexical::open(&b).is_err(), "k1 {k1}");
    }
    // A flipped bit anywhere in the term dictionary fails its checksum.
    for i in 0..fst_len {
        let mut b = orig.clone();
        b[fst_off + i] ^= 1 << (i % 8);
        assert!(Lexical::open(&b).is_err(), "fst byte {i}");
    }
    // Term records out of order or past the postings.
    let (terms_off, terms_len) = sub(&orig, SUB_TERMS);
    for (rec, v) in [(1usize, u64::MAX), (0, 1 << 30), (2, 0)] {
        let mut b = orig.clone();
        put_u64(&mut b, terms_off + 16 * rec, v);
        assert!(Lexical::open(&b).is_err(), "term record {rec} offset {v}");
    }
    let mut b = orig.clone();
    b[terms_off + 8..terms_off + 12].copy_from_slice(&0u32.to_le_bytes()); // df 0
    assert!(Lexical::open(&b).is_err());
    assert!(terms_len > 0);

    // Random mutations: refused, or accepted and searched without a panic.
    let (post_off, post_len) = sub(&orig, SUB_POSTINGS);
    let mut opened = 0;
    for i in 0..1500 {
        let mut b = orig.clone();
        match i % 4 {
            // postings bytes: opens (not checked at open), garbage at worst
            0 | 1 => {
                for _ in 0..1 + rng.below(8) {
                    let at = post_off + rng.below(post_len as u64) as usize;
                    b[at] = rng.next() as u8;
                }
            }
            // anywhere
            2 => {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(b.len() as u64) as usize;
                    b[at] ^= 1 + rng.below(255) as u8;
                }
            }
            // a random u64 in the header or the term records
            _ => {
                let at = if rng.below(2) == 0 {
                    8 * rng.below(LEX_HEADER as u64 / 8) as usize
                } else {
                    terms_off + 4 * rng.below(terms_len as u64 / 4 - 1) as usize
                };
                let v = [
                    rng.next(),
                    rng.below(b.len() as u64),
                    u64::MAX - rng.below(64),
                ][rng.below(3) as usize];
                put_u64(&mut b, at, v);
            }
        }
        if open_and_search(&b, &queries) {
            opened += 1;
        }
    }
    assert!(opened > 300, "only {opened} mutants opened");
}

#[test]
fn the_term_cache_answers_as_the_dictionary_and_forgets_a_swapped_one() {
    let mut rng = XorShift::new(0xcac4e);
    let vocab = vocabulary(&mut rng, 3000);
    let a = random_section(&mut rng, 300, &vocab, WORDS);
    let b = random_section(&mut rng, 200, &vocab[..1500], WORDS);
    let (la, lb) = (Lexical::open(&a).unwrap(), Lexical::open(&b).unwrap());
    assert_ne!(la.dict_id(), lb.dict_id());
    // More distinct terms than the cache has slots (collisions), terms the corpus lacks,
    // and terms too long to cache.
    let long = "x".repeat(40);
    let mut terms: Vec<&str> = vocab.iter().map(String::as_str).collect();
    terms.extend(["", "zzzzqqq", long.as_str(), "ééééééééé", "москваmосква"]);
    let mut cache = super::cache::TermCache::default();
    let mut found = 0;
    for round in 0..2 {
        // Each dictionary twice in a row (answers from the cache), then the other one
        // (an index swapped under a running searcher).
        for lex in [&la, &la, &lb, &lb] {
            for t in &terms {
                let want = lex.lookup(t.as_bytes());
                found += usize::from(want.is_some());
                assert_eq!(
                    cache.lookup(lex, t.as_bytes()),
                    want,
                    "{t:?}, round {round}"
                );
            }
        }
    }
    assert!(
        found > 1000,
        "the test corpora know too few of its terms: {found}"
    );
}

#[test]
fn one_searcher_serving_two_indexes_in_turn_answers_like_fresh_ones() {
    let mut rng = XorShift::new(0x5a9);
    let vocab = vocabulary(&mut rng, 400);
    let a = random_section(&mut rng, 500, &vocab, char_ngrams(4));
    let b = random_section(&mut rng, 300, &vocab[100..], char_ngrams(4));
    let queries: Vec<String> = (0..20)
        .map(|_| {
            let words: Vec<&str> = (0..1 + rng.below(8))
                .map(|_| vocab[rng.below(vocab.len() as u64) as usize].as_str())
                .collect();
            words.join(" ")
        })
        .collect();
    let hits = |s: &mut LexicalSearcher, lex: &Lexical<'_>, q: &str| {
        let mut out = Hits::new();
        s.search(lex, q, "", 0.0, 10, &mut out);
        out.iter()
            .map(|h| (h.index, h.score.to_bits()))
            .collect::<Vec<_>>()
    };
    let mut shared = LexicalSearcher::new();
    for round in 0..2 {
        for bytes in [&a, &b] {
            let lex = Lexical::open(bytes).unwrap();
            for q in &queries {
                let fresh = hits(&mut LexicalSearcher::new(), &lex, q);
                assert_eq!(hits(&mut shared, &lex, q), fresh, "{q:?}, round {round}");
            }
        }
    }
}

#[test]
fn postings_are_decoded_only_for_a_small_corpus_within_the_budget() {
    let mut rng = XorShift::new(0xdec0);
    let vocab = vocabulary(&mut rng, 50);
    let small = build(
        &random_corpus(&mut rng, 300, &vocab),
        &WORDS,
        Bm25::default(),
    )
    .unwrap();
    let lex = Lexical::open(&small).unwrap();
    let decoded = Decoded::for_serving(&lex).expect("300 passages are decoded");
    // 8 bytes a posting, except for the terms in at least half the passages: a row of 4
    // bytes a passage (never more than their postings would take), and their ordinal.
    let (n, terms) = (lex.doc_count() as u64, lex.term_count() as u64);
    let dfs: Vec<u64> = (0..terms as u32)
        .map(|o| u64::from(lex.term(o).unwrap().df))
        .collect();
    let dense = dfs.iter().filter(|&&df| 2 * df >= n).count() as u64;
    let sparse: u64 = dfs.iter().filter(|&&df| 2 * df < n).sum();
    assert!(
        dense > 0 && sparse > 0,
        "{dense} dense terms, {sparse} postings"
    );
    assert_eq!(
        decoded.bytes() as u64,
        sparse * 8 + dense * (4 * n + 4) + 4 * (terms + 1)
    );
    assert!(decoded.bytes() as u64 <= dfs.iter().sum::<u64>() * 8 + 4 * (terms + 1));
    // One byte short of what it needs: left compressed (and still searched).
    assert!(Decoded::build(&lex, decoded.bytes() - 1).is_none());
    assert!(Decoded::build(&lex, decoded.bytes()).is_some());
    // More passages than one MaxScore window: MaxScore reads the file, nothing decoded.
    let large: Vec<PassageRecord> = (0..4097).map(|i| passage(i, "", "word")).collect();
    let large = build(&large, &WORDS, Bm25::default()).unwrap();
    assert!(Decoded::for_serving(&Lexical::open(&large).unwrap()).is_none());
}

/// A large query in two phases (rarest terms select, every term rescores), forced on
/// small corpora by a low postings limit: every score returned is the passage's exact
/// BM25 score, best first; a passage named by a word only it contains still comes first
/// among a query's many common words; and a warm searcher allocates nothing more.
#[test]
fn two_phase_queries_return_exact_scores_and_keep_the_rare_terms_passage_first() {
    let mut rng = XorShift::new(0x2fa5e);
    let mut out = Hits::new();
    let mut two_phase = 0;
    for round in 0..6 {
        let mut searcher = LexicalSearcher::with_window(64).with_exact_postings(1);
        let size = 40 + rng.below(200) as usize;
        let vocab = vocabulary(&mut rng, size);
        let n = 300 + rng.below(1200) as usize;
        let mut ps = random_corpus(&mut rng, n, &vocab);
        // A passage with a word no other has, among common ones.
        let named = rng.below(n as u64) as usize;
        ps[named].text = format!("{} quetzalcoatl {}", vocab[0], vocab[1]);
        let spec = [WORDS, char_ngrams(3), char_ngrams(4)][round % 3];
        let bytes = build(&ps, &spec, Bm25::default()).unwrap();
        let lex = Lexical::open(&bytes).unwrap();
        let mut queries: Vec<(String, String, f32, usize)> = (0..12)
            .map(|_| {
                let qlen = 3 + rng.below(20) as usize;
                let words: Vec<&str> = (0..qlen)
                    .map(|_| vocab[rng.below(vocab.len() as u64) as usize].as_str())
                    .collect();
                let extra = vocab[rng.below(vocab.len() as u64) as usize].clone();
                let w = [0.0f32, 0.25, 1.0][rng.below(3) as usize];
                let k = [1usize, 10, 100, 300][rng.below(4) as usize];
                (words.join(" "), extra, w, k)
            })
            .collect();
        let planted = format!(
            "{} quetzalcoatl {} {} {}",
            vocab[0], vocab[1], vocab[2], vocab[3]
        );
        queries.push((planted.clone(), String::new(), 0.0, 10));
        let mut capacities = None;
        for pass in 0..2 {
            for (query, extra, w, k) in &queries {
                let what = format!("round {round} ({spec}, {n} docs) query {query:?} k {k}");
                searcher.search(&lex, query, extra, *w, *k, &mut out);
                let got: Vec<(u32, f32)> = out.iter().map(|h| (h.index, h.score)).collect();
                if got.is_empty() || pass == 1 {
                    continue;
                }
                assert!(searcher.stats().rescored > 0, "{what}: not in two phases");
                two_phase += 1;
                assert!(got.len() <= *k, "{what}");
                let naive = naive_scores(&ps, &spec, query, extra, *w);
                for &(d, s) in &got {
                    let want = naive.get(&d).copied().unwrap_or(f64::NAN);
                    assert!(close(s.into(), want), "{what}: doc {d}: {s} vs {want}");
                }
                for pair in got.windows(2) {
                    let ((d0, s0), (d1, s1)) = (pair[0], pair[1]);
                    assert!(s0 > s1 || (s0 == s1 && d0 < d1), "{what}: order {pair:?}");
                }
                if *query == planted {
                    searcher.search_exhaustive(&lex, query, "", 0.0, 1, &mut out);
                    assert_eq!(out[0].index, named as u32, "{what}: premise");
                    assert_eq!(got[0].0, named as u32, "{what}");
                }
            }
            // The second pass (same queries) allocates nothing more.
            let now = searcher.capacities();
            if pass == 1 {
                assert_eq!(capacities.as_ref(), Some(&now), "round {round}");
            }
            capacities = Some(now);
        }
    }
    assert!(two_phase > 60, "{two_phase}");
}

/// A query up to the postings limit is scored exactly; one posting over it takes two
/// phases, with the same top-1 on a query whose rarest term decides it.
#[test]
fn the_postings_limit_decides_which_queries_take_two_phases() {
    let docs: Vec<String> = (0..400)
        .map(|i| match i % 3 {
            0 => "the cat sat on the mat".to_string(),
            1 => "the dog ate the bone".to_string(),
            _ => format!("the bird sang song number {i}"),
        })
        .collect();
    let docs: Vec<(&str, &str)> = docs.iter().map(|t| ("", t.as_str())).collect();
    // Digits as they are: the one term "200" decides the query.
    let digits = AnalyzerSpec {
        numbers: false,
        ..WORDS
    };
    let bytes = build(&passages(&docs), &digits, Bm25::default()).unwrap();
    let lex = Lexical::open(&bytes).unwrap();
    let query = "the dog sang song number 200";
    let mut exact = Hits::new();
    let mut s = LexicalSearcher::with_window(64);
    s.search(&lex, query, "", 0.0, 10, &mut exact);
    let postings = s.stats().postings;
    assert_eq!(s.stats().rescored, 0);
    let mut out = Hits::new();
    let mut at = LexicalSearcher::with_window(64).with_exact_postings(postings);
    at.search(&lex, query, "", 0.0, 10, &mut out);
    assert_eq!((at.stats().rescored, out.as_slice()), (0, exact.as_slice()));
    let mut over = LexicalSearcher::with_window(64).with_exact_postings(postings - 1);
    over.search(&lex, query, "", 0.0, 10, &mut out);
    assert!(over.stats().rescored > 0 && over.stats().selecting_terms > 0);
    assert!(over.stats().selecting_terms < over.stats().terms);
    assert_eq!(out[0].index, exact[0].index);
    assert_eq!(out[0].index, 200);
    assert!(close(out[0].score.into(), exact[0].score.into()));
}

/// A passage that writes a year in digits is found by a recognizer that says it in words,
/// either way it says it, and the other way round (analyzer version 4); an index of
/// version 3 could not match them.
#[test]
fn numbers_match_whether_written_in_digits_or_said_in_words() {
    let ps = passages(&[
        ("Tesla", "In 1884 Tesla moved to New York City."),
        (
            "Edison",
            "Edison opened his Pearl Street station in the year 1882.",
        ),
        (
            "Westinghouse",
            "Westinghouse bought the patents in eighteen eighty eight.",
        ),
    ]);
    let v3 = AnalyzerSpec {
        numbers: false,
        ..char_ngrams(4)
    };
    let top = |spec: &AnalyzerSpec, query: &str| {
        let got = search(
            &build(&ps, spec, Bm25::default()).unwrap(),
            query,
            "",
            0.0,
            3,
        );
        got.first().map(|h| h.0)
    };
    for (query, want) in [
        (
            "when did he move in one thousand eight hundred eighty four",
            0,
        ),
        ("the year eighteen eighty four", 0),
        ("a station opened in eighteen eighty two", 1),
        ("patents bought in 1888", 2),
    ] {
        assert_eq!(top(&char_ngrams(4), query), Some(want), "{query}");
    }
    assert_ne!(
        top(&v3, "the year eighteen eighty four"),
        Some(0),
        "digits and words share no n-gram"
    );
}
