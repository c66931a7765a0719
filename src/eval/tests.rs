//! The replays on a hand-made index where the answers are known by construction.
//!
//! `HashEmbedder` gives each word a pseudo-random ±1 vector and a text the normalised
//! sum of its words', so distinct words are nearly orthogonal (cosine ≈ N(0, 1/384))
//! and a text's cosine to a passage is ≈ shared words / (√len · √len'). Passages and
//! queries below are chosen so every ranking the assertions depend on has a margin of
//! several noise standard deviations; the cosines are worked out next to each query.

use std::path::Path;

use super::data::{Partial, Qrels, QueryRecord, Relevance, StreamRecord};
use super::metrics::{HEADLINE_K, KS};
use super::prefix::{self, PrefixRecord};
use super::progress::Progress;
use super::streams::{self, replay_one};
use crate::config::{self, Layer1, RunConfig};
use crate::embed::{Embed, HashEmbedder};
use crate::index::Index;
use crate::retriever::HybridSearcher;
use crate::stream::normalize::Normalizer;
use crate::stream::{FinalPath, StreamingRetriever};

/// The daemon's default silence endpoint.
const ENDPOINT: std::time::Duration = std::time::Duration::from_millis(800);

const PASSAGES: &[(&str, &str)] = &[
    ("peru", "peru lima andes"),               // P0
    ("japan", "japan tokyo fuji"),             // P1
    ("decoy", "capital city"),                 // P2
    ("decoy-capital", "capital capital city"), // P3
    ("decoy-city", "city capital city"),       // P4
    ("ocean", "ocean whale"),                  // P5
    ("river", "river nile"),                   // P6
];

fn build_index(dir: &Path) -> Index {
    crate::testing::hash_index(dir, PASSAGES)
}

fn qrels(pairs: &[(&str, &str)]) -> Qrels {
    let mut q = Qrels::new();
    for (query, doc) in pairs {
        q.entry(query.to_string())
            .or_default()
            .insert(doc.to_string());
    }
    q
}

fn query(id: &str, text: &str) -> QueryRecord {
    QueryRecord {
        id: id.into(),
        text: text.into(),
    }
}

fn cfg(flags: Layer1) -> RunConfig {
    config::load(None, flags).unwrap()
}

fn record<'a>(recs: &'a [PrefixRecord], id: &str) -> &'a PrefixRecord {
    recs.iter().find(|r| r.id == id).unwrap()
}

#[test]
fn prefix_replay_finds_t_sc_t_suf_and_h_known_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let relevance = Relevance::new(&index).unwrap();
    let queries = [
        // Every prefix's top-1 is "japan" (tokyo .58, tokyo japan .82, … .87).
        query("stable", "Tokyo, Japan: Fuji volcano?"),
        // peru → P0 (.58); peru capital → P3 (.63; P2 .50, P0 .41); peru capital city →
        // P2 (.82; P3, P4 .77, P0 .33, 4th).
        query("early", "Peru capital city"),
        // capital → P3 (.89); then P2 (1.0, .82, .71) to the end; japan only comes 4th
        // (.29) at the full query.
        query("late", "Capital city of Japan?"),
        // capital → P3 (.89); capital peru → P3 (.63; P2 .50, P0 .41 3rd); capital peru
        // lima → P0 (.67); … andes → P0 (.87).
        query("flip", "capital peru lima andes"),
        query("unjudged", "ocean whale"),
        query("empty", "?! …"),
    ];
    let q = qrels(&[
        ("stable", "japan"),
        ("early", "peru"),
        ("late", "japan"),
        ("flip", "peru"),
        ("empty", "ocean"),
        ("unknown-doc", "not-in-index"),
    ]);
    let c = cfg(Layer1::default());
    let out = prefix::replay(
        &index,
        &relevance,
        &q,
        &queries,
        &c,
        &[crate::retriever::Retriever::Dense],
        2,
        &Progress::hidden(),
        || Ok(HashEmbedder),
    )
    .unwrap()
    .remove(0);
    assert_eq!((out.skipped_no_relevant, out.skipped_empty), (1, 1));
    assert_eq!(out.records.len(), 4);
    assert_eq!(out.prefixes, 4 + 3 + 4 + 4);
    // "capital" is shared by "late" and "flip": retrieved once.
    assert_eq!(out.unique_prefixes, out.prefixes - 1);

    let k = |k| KS.iter().position(|&x| x == k).unwrap();
    let r = record(&out.records, "stable");
    assert_eq!((r.n, r.t_sc), (4, 1));
    assert_eq!(r.t_suf, [Some(1); 4]);
    assert_eq!(r.favourable, [true; 4]);

    let r = record(&out.records, "early");
    assert_eq!((r.n, r.t_sc), (3, 3), "the top-1 changes at the last word");
    assert_eq!(r.t_suf[k(1)], Some(1), "first word retrieves it");
    assert_eq!(
        r.favourable,
        [false, false, true, true],
        "4th at the full query"
    );

    let r = record(&out.records, "late");
    assert_eq!((r.n, r.t_sc), (4, 2));
    assert_eq!((r.t_suf[k(1)], r.t_suf[k(3)]), (None, None));
    assert_eq!(r.favourable, [false, false, true, true]);
    assert_eq!(
        r.t_suf[k(10)],
        Some(1),
        "7 passages: everything is in the top-10"
    );

    let r = record(&out.records, "flip");
    assert_eq!((r.n, r.t_sc), (4, 3));
    assert_eq!((r.t_suf[k(1)], r.t_suf[k(3)]), (Some(3), Some(2)));
    assert_eq!(r.favourable, [true; 4]);

    // t* at top-3: stable 1 (favourable), flip 2 (favourable), early t_sc 3, late t_sc 2.
    // H at 3 w/s: stable 3 words = 1000 ms, flip and late 2 words = 667 ms, early 0.
    let s = prefix::summarize(&out);
    assert_eq!(HEADLINE_K, 3);
    let cell = s.cell(600.0, 3.0, 0.8).unwrap();
    assert_eq!(cell.all, 0.75);
    assert_eq!((cell.favourable, cell.fallback), (Some(1.0), Some(0.5)));
    let cell = s.cell(1000.0, 3.0, 0.8).unwrap();
    assert_eq!(cell.all, 0.25, "only 'stable' hides 800 ms of 1000");
    let cell = s.cell(1000.0, 2.0, 0.8).unwrap();
    assert_eq!(
        cell.all, 0.75,
        "slower speech hides more: 2 words = 1000 ms"
    );
    let suf3 = s.sufficiency.iter().find(|x| x.k == 3).unwrap();
    assert_eq!(suf3.favourable_fraction, 0.5);
    assert_eq!(suf3.phi_suf.mean, Some((0.25 + 0.5) / 2.0));
    assert_eq!(s.phi_sc.mean, Some((0.25 + 1.0 + 0.5 + 0.75) / 4.0));
    let what = s.by_type.iter().map(|t| (t.qtype.as_str(), t.count));
    assert_eq!(what.collect::<Vec<_>>(), vec![("other", 4)]);
}

fn utterance(audio_s: f64) -> StreamRecord {
    let p = |t, text: &str| Partial {
        t,
        text: text.into(),
    };
    StreamRecord {
        id: "stable".into(),
        text: "Tokyo Japan Fuji".into(),
        audio_s: Some(audio_s),
        partials: vec![
            p(0.5, "Tokyo"),
            p(1.0, "tokyo Japan"),
            p(1.5, "tokyo japan fuji"),
        ],
        final_text: "Tokyo, Japan, Fuji.".into(),
    }
}

#[test]
fn stream_replay_keeps_the_daemons_order_of_work() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let relevance = Relevance::new(&index).unwrap();
    let rel = relevance.relevant(&qrels(&[("stable", "japan")]), "stable");
    let c = cfg(Layer1 {
        trigger_interval: Some(1),
        min_tokens: Some(1),
        similarity_threshold: Some(0.99),
        ..Default::default()
    });
    let retriever = |enabled: bool| {
        let mut s = c.stream.clone();
        s.enabled = enabled;
        StreamingRetriever::new(
            s,
            HashEmbedder,
            HybridSearcher::new(&index).unwrap(),
            Normalizer::default(),
        )
    };
    let mut r = retriever(true);

    // The final comes at the same audio time as the last partial: that partial is
    // superseded, so the final must be embedded; its cosine to the last speculation
    // ("tokyo japan", .82) is under the reflector's 0.90: a full search.
    let a = replay_one(&mut r, &utterance(1.5), &rel, &relevance, ENDPOINT).unwrap();
    assert_eq!(a.superseded, 1);
    assert_eq!(a.counts.speculative_searches, 2);
    assert_eq!(a.path, FinalPath::Full);
    let first = a.first_relevant_s.unwrap();
    assert!(
        (0.5..0.6).contains(&first),
        "when the first scan finished: {first}"
    );
    assert!(a.hit1 && a.hit10);
    assert_eq!(
        a.overlap,
        Some(1.0),
        "7 passages: every one was a candidate"
    );

    // The final 0.5 s after the last partial: the partial is observed (a third
    // speculation) and the final reuses its embedding.
    let b = replay_one(&mut r, &utterance(2.0), &rel, &relevance, ENDPOINT).unwrap();
    assert_eq!((b.superseded, b.counts.speculative_searches), (0, 3));
    assert_eq!(b.path, FinalPath::Reuse);

    let mut base = retriever(false);
    let z = replay_one(&mut base, &utterance(1.5), &rel, &relevance, ENDPOINT).unwrap();
    assert_eq!(
        (z.path, z.counts.speculative_searches),
        (FinalPath::Full, 0)
    );
    assert_eq!((z.first_relevant_s, z.overlap), (None, None));
    assert!(z.hit1);

    let s = streams::summarize(&[a.clone(), b.clone()], &[z.clone(), z.clone()], 0);
    assert_eq!(s.streaming.fell_back_to_full, 1);
    assert_eq!((s.misfires, s.lost_relevant), (1, 0));
    assert_eq!(s.streaming.speculative_searches_per_utterance, 2.5);
    assert_eq!(s.streaming.paths.reuse, 0.5);

    // A streaming miss that the baseline had counts as a lost passage (a mis-fire).
    let mut miss = b;
    miss.hit10 = false;
    let s = streams::summarize(&[miss], &[z], 0);
    assert_eq!((s.lost_relevant, s.misfires, s.gained_relevant), (1, 1, 0));
}

#[test]
fn evaluate_runs_both_replays_and_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let queries = [query("stable", "tokyo japan fuji volcano")];
    let q = qrels(&[("stable", "japan")]);
    let streams = [utterance(2.0)];
    let c = cfg(Layer1::default());
    let opts = super::EvalOptions {
        workers: 2,
        sweep: true,
        progress: false,
        retrievers: vec![],
        learned_trigger: None,
        answers: None,
        reader: None,
        stream_reader: None,
    };
    let run = super::evaluate(&index, &queries, &q, Some(&streams), &c, &opts, || {
        Ok(HashEmbedder)
    })
    .unwrap();
    let r = &run.report;
    assert_eq!(r.retrievers.len(), 1, "the configured retriever");
    assert_eq!(r.retrievers[0].prefix.queries, 1);
    let st = r.retrievers[0].streams.as_ref().unwrap();
    assert_eq!((st.utterances, st.baseline.paths.full), (1, 1.0));
    let sw = r.sweep.as_ref().unwrap();
    assert_eq!(
        sw.len(),
        streams::SWEEP_TRIGGERS.len() * streams::SWEEP_THRESHOLDS.len()
    );
    assert!(sw.iter().any(|p| p.pareto));
    // trigger_interval 1 speculates at least as often as 5.
    let spec = |ti| {
        sw.iter()
            .filter(|p| p.trigger_interval == ti)
            .map(|p| p.speculative_searches_per_utterance)
            .fold(0.0, f64::max)
    };
    assert!(spec(1) > spec(5), "{} vs {}", spec(1), spec(5));
    let out = dir.path().join("report");
    super::report::write_dir(&run, &out).unwrap();
    for f in [
        "report.md",
        "report.json",
        "phi.svg",
        "streamable.svg",
        "latency_cdf.svg",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("73.9%") && md.contains("| streaming |"), "{md}");
}

/// `HashEmbedder` that takes at least 30 ms per embed: work the replay must queue behind.
struct Slow;

impl Embed for Slow {
    fn embed_into(
        &mut self,
        text: &str,
        out: &mut crate::embed::Embedding,
    ) -> Result<usize, crate::embed::EmbedError> {
        std::thread::sleep(std::time::Duration::from_millis(30));
        HashEmbedder.embed_into(text, out)
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, crate::embed::EmbedError> {
        HashEmbedder.count_tokens(text)
    }
    fn fingerprint(&self) -> crate::embed::Fingerprint {
        HashEmbedder.fingerprint()
    }
}

#[test]
fn stream_replay_queues_events_behind_work_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let relevance = Relevance::new(&index).unwrap();
    let rel = relevance.relevant(&qrels(&[("stable", "japan")]), "stable");
    let c = cfg(Layer1 {
        trigger_interval: Some(1),
        min_tokens: Some(1),
        similarity_threshold: Some(0.99),
        ..Default::default()
    });
    let mut r = StreamingRetriever::new(
        c.stream.clone(),
        Slow,
        HybridSearcher::new(&index).unwrap(),
        Normalizer::default(),
    );
    let p = |t, text: &str| Partial {
        t,
        text: text.into(),
    };
    let rec = StreamRecord {
        id: "stable".into(),
        text: String::new(),
        audio_s: Some(1.005),
        partials: vec![
            p(0.50, "tokyo"),                    // observed: busy until ≥ 0.53
            p(0.51, "tokyo japan"),              // 0.52 arrived before the retriever was free
            p(0.52, "tokyo japan fuji"),         // observed at ≥ 0.53
            p(1.00, "tokyo japan fuji volcano"), // observed; the final comes 5 ms later
        ],
        final_text: "Tokyo Japan Fuji volcano".into(),
    };
    let u = replay_one(&mut r, &rec, &rel, &relevance, ENDPOINT).unwrap();
    assert_eq!(u.superseded, 1);
    assert_eq!(
        u.counts.embeds, 3,
        "no idle embed: an event was always waiting"
    );
    assert_eq!(u.path, FinalPath::Reuse);
    assert!(
        u.waited_ms >= 25.0,
        "the final waited for the last embed: {}",
        u.waited_ms
    );
    assert!(u.latency_ms >= u.waited_ms);
}

/// `--trigger-streams`: the thresholds are chosen on the recorded streams (one point per
/// policy, fixed first), under the streams' own hit@10 and finals-embedded conditions,
/// and the questions those streams speak are not trained on.
#[test]
fn trigger_thresholds_chosen_on_recorded_streams_obey_their_conditions() {
    use super::trigger::{FINAL_THRESHOLDS, HIT10_TOLERANCE, THRESHOLDS, train};
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let queries = [
        query("q-peru", "peru lima andes"),
        query("q-japan", "japan tokyo fuji"),
        query("q-ocean", "ocean whale"),
        query("q-river", "river nile"),
        query("q-lima", "lima peru"),
    ];
    let qrels = qrels(&[
        ("q-peru", "peru"),
        ("q-japan", "japan"),
        ("q-ocean", "ocean"),
        ("q-river", "river"),
        ("q-lima", "peru"),
    ]);
    let p = |t, text: &str| Partial {
        t,
        text: text.into(),
    };
    let streams = [
        StreamRecord {
            id: "q-japan".into(),
            text: String::new(),
            audio_s: Some(2.0),
            partials: vec![
                p(0.5, "japan"),
                p(1.0, "japan tokyo"),
                p(1.5, "japan tokyo fuji"),
            ],
            final_text: "Japan, Tokyo, Fuji.".into(),
        },
        StreamRecord {
            id: "q-river".into(),
            text: String::new(),
            audio_s: Some(1.5),
            partials: vec![p(0.5, "river"), p(1.0, "river nile")],
            final_text: "River Nile".into(),
        },
    ];
    let cfg = cfg(Layer1 {
        min_tokens: Some(1),
        ..Layer1::default()
    });
    let (model, report) = train(
        &index,
        &queries,
        &qrels,
        &[],
        &cfg,
        1,
        &Progress::hidden(),
        "test",
        Some(&streams),
        || Ok(HashEmbedder),
    )
    .unwrap();
    assert_eq!(
        report.questions, 3,
        "the two streamed questions are left out"
    );
    assert!(
        report.typed.is_empty(),
        "no typed replay when streams choose"
    );
    let points = &report.streams;
    assert_eq!(points.len(), 1 + THRESHOLDS.len() * FINAL_THRESHOLDS.len());
    assert_eq!(points[0].threshold, None, "the fixed default comes first");
    let base = &points[0];
    assert!(base.hit10 > 0.0, "the fixed trigger finds these passages");
    let chosen = points
        .iter()
        .find(|p| p.threshold == Some(report.threshold))
        .expect("the chosen pair is one of those replayed");
    assert!(report.conditions_met);
    assert!(chosen.hit10 >= base.hit10 - HIT10_TOLERANCE);
    assert!(chosen.final_embedded <= base.final_embedded);
    let cheaper = points[1..].iter().filter(|p| {
        p.hit10 >= base.hit10 - HIT10_TOLERANCE
            && p.final_embedded <= base.final_embedded
            && p.cost() < chosen.cost()
    });
    assert_eq!(cheaper.count(), 0, "the cheapest pair meeting both is kept");
    assert_eq!(model.thresholds(), report.threshold);
}

/// Trigger streams that no qrel judges cannot choose a threshold: refused, saying so.
#[test]
fn trigger_streams_without_a_judged_utterance_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path());
    let queries = [query("q-peru", "peru lima andes")];
    let qrels = qrels(&[("q-peru", "peru")]);
    let unjudged = [StreamRecord {
        id: "nobody-judged-this".into(),
        text: String::new(),
        audio_s: Some(1.0),
        partials: vec![Partial {
            t: 0.5,
            text: "peru".into(),
        }],
        final_text: "Peru".into(),
    }];
    let err = super::trigger::train(
        &index,
        &queries,
        &qrels,
        &[],
        &cfg(Layer1::default()),
        1,
        &Progress::hidden(),
        "test",
        Some(&unjudged),
        || Ok(HashEmbedder),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("none of the trigger streams"),
        "{err}"
    );
}
