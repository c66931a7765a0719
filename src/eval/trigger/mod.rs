//! `primd eval --train-trigger FILE`: labels, trains and calibrates the learned
//! NO_QUERY/NEW_QUERY trigger ([`crate::stream::trigger`]) on typed questions.
//!
//! The files follow the steps: `label`, `fit`, `replay` (choosing the thresholds),
//! `train` (the steps end to end, and the report).
//!
//! **Labels** (seed 003 §12-13, with the production retriever as the pseudo-query
//! engine): every word prefix of a typed question (from `min_tokens` words on) is a
//! partial. At each, two result lists are compared, both as the final would compute
//! them if the utterance ended there (this prefix's lexical hits, fused with a dense
//! side): *now* — this prefix embedded and scanned — and *keep* — the previous useful
//! query's embedding and candidates (none before the first). The prefix is NEW_QUERY
//! when querying now changes what the agent would get: the relevant passage enters the
//! top-10, or at least [`CHANGED`] of the ten passages differ; NO_QUERY otherwise. Why
//! this rule: hit@10 is what the product promises, so gaining the relevant passage is
//! the paper's "more relevant evidence"; and three of ten passages replaced is a list
//! an agent would read differently (the paper's "meaningfully different"), a qrel-free
//! signal that also covers questions whose answer is never found. Smaller reorderings
//! within the same ten are what the final's own lexical query and rerank already fix.
//! A NEW_QUERY prefix becomes the previous useful query of the next ones.
//!
//! **Negative samples**: per question, one prefix is labelled again with its previous
//! query swapped for another (seeded, unrelated) question, so the model sees stale
//! queries and must ask for a new one, not learn to stay quiet.
//!
//! **Model**: logistic regression on standardised features, fitted by Newton's method
//! with a small ridge (exact, deterministic: no shuffling, no seed dependence beyond the
//! negative samples' fixed seed).
//!
//! **Thresholds** (one for partials, one for the final, whose NEW_QUERY costs an embed
//! after end of speech): every second question is replayed through the real
//! [`StreamingRetriever`] (prefixes as partials, the whole question as the final; the
//! fixed trigger with idle embedding after every partial, as the daemon has between
//! spoken partials), once with the fixed default and once per pair of [`THRESHOLDS`] ×
//! [`FINAL_THRESHOLDS`]; the pair kept is the cheapest (embeds + speculative searches)
//! whose hit@10 is within [`HIT10_TOLERANCE`] of the fixed default's and which embeds
//! at most [`MAX_FINALS_EMBEDDED`] of the finals after end of speech (so the median
//! final needs no embed: the latency stays sub-millisecond). The questions behind the
//! evaluation's recorded streams are left out of training.
//!
//! **Thresholds on recorded streams** (`--trigger-streams`): the same pairs replayed on
//! a recognizer's own recordings through the daemon's scheduler (`streams::replay`,
//! virtual clock), keeping the cheapest pair within [`HIT10_TOLERANCE`] of the fixed
//! default's hit@10 that makes no more finals wait for an embed after end of speech
//! than the fixed default does (so the latency percentiles stay the fixed rule's). Why
//! offer it: the features count words and partials, and how many words a partial adds
//! depends on the recognizer's cadence (typed prefixes add one word each; the dev
//! recordings about 1.1 every 0.5 s, with revisions), so thresholds chosen on typed
//! prefixes are conservative on real streams. The model's weights still come from the
//! typed questions only; the questions behind the trigger streams are not trained on.
//! `tools/eval/trigger_folds.py` judges it on streams it did not choose on.
//!
//! All features are used. (`partials_since_query` is nearly `new_words` on typed
//! prefixes, one word per partial, where real partials come with the audio; a model
//! without it, measured on 2026-12-01 with `primd eval --train-trigger` (tolerance 0.005 then), chose the same
//! thresholds and cost 0.82 of the fixed trigger's work on the streams but lost one
//! relevant passage; with it 0.91 and none.)

mod fit;
mod label;
mod replay;
mod train;

use serde::Serialize;

pub use self::fit::fit;
pub use self::label::{Labelled, Labeller, label};
pub use self::train::{suits, train};
use crate::stream::trigger::Features;

/// Passages of the top-10 that must change for NEW_QUERY (without the relevant one entering).
pub const CHANGED: usize = 3;
/// Typed hit@10 the learned trigger may lose against the fixed default when its
/// threshold is chosen: issue #18's "equal hit@10 (± 0.01)". (At 0.005 no pair met both
/// conditions on the dev questions and the most eager pair was taken by the fallback:
/// 2% fewer embeds + scans than the fixed rule on the recorded streams; at 0.01 the
/// pair chosen on the typed questions saves 22% there at the same hit@10.)
pub const HIT10_TOLERANCE: f64 = 0.01;
/// Partial thresholds tried.
pub const THRESHOLDS: [f32; 6] = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7];
/// Final thresholds tried.
pub const FINAL_THRESHOLDS: [f32; 5] = [0.05, 0.1, 0.15, 0.2, 0.3];
/// Share of typed finals a chosen policy may embed after end of speech: under half, so
/// the median final needs no embed. (Pessimistic: a typed final is never seen as a
/// partial first, where a recognizer's final often repeats its last partial.)
pub const MAX_FINALS_EMBEDDED: f64 = 0.5;
/// Seed of the negative samples' question choice.
pub const SEED: u64 = 0x7219_9e3f_5eed;

/// One labelled partial.
#[derive(Clone, Debug)]
pub struct Row {
    pub x: Features,
    pub new_query: bool,
    pub negative: bool,
}

/// Label counts.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClassBalance {
    pub rows: usize,
    pub new_query: usize,
    pub no_query: usize,
    pub new_query_share: f64,
    pub negative_samples: usize,
    /// NEW_QUERY among the negative samples.
    pub negative_new_query: usize,
    /// NEW_QUERY because the relevant passage entered the top-10 (the rest: ≥ CHANGED
    /// passages changed).
    pub relevant_entered: usize,
}

impl ClassBalance {
    pub fn of(rows: &[Row], relevant_entered: usize) -> Self {
        let new_query = rows.iter().filter(|r| r.new_query).count();
        ClassBalance {
            rows: rows.len(),
            new_query,
            no_query: rows.len() - new_query,
            new_query_share: new_query as f64 / rows.len().max(1) as f64,
            negative_samples: rows.iter().filter(|r| r.negative).count(),
            negative_new_query: rows.iter().filter(|r| r.negative && r.new_query).count(),
            relevant_entered,
        }
    }
}

/// One policy replayed on the typed questions.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TypedPoint {
    /// `None`: the fixed default; else (partial, final) thresholds.
    pub threshold: Option<(f32, f32)>,
    pub embeds_per_question: f64,
    pub speculative_searches_per_question: f64,
    pub hit1: f64,
    pub hit10: f64,
    /// Finals that had to be embedded after end of speech.
    pub final_embedded: f64,
}

impl TypedPoint {
    pub fn cost(&self) -> f64 {
        self.embeds_per_question + self.speculative_searches_per_question
    }
}

/// What training found (in the eval report).
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    pub questions: usize,
    /// Questions left out because a recorded stream speaks them (`--streams` or
    /// `--trigger-streams`).
    pub left_out_stream_questions: usize,
    pub labels: ClassBalance,
    /// Training accuracy at the chosen threshold (rows labelled the same).
    pub train_accuracy: f64,
    pub features: Vec<String>,
    pub weights: Vec<f32>,
    /// The fixed default, then each threshold tried, on the typed questions (when the
    /// thresholds were chosen there).
    pub typed: Vec<TypedPoint>,
    /// Every second kept question replayed for the thresholds (0: chosen on streams).
    pub typed_questions: usize,
    /// The same on the recorded streams of `--trigger-streams` (per utterance), when the
    /// thresholds were chosen there.
    pub streams: Vec<TypedPoint>,
    /// (partial, final).
    pub threshold: (f32, f32),
    /// False when no pair met both conditions (then: the best hit@10 among those
    /// within the finals bound).
    pub conditions_met: bool,
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashEmbedder;
    use crate::index::Index;
    use crate::ranking::Retriever;
    use crate::stream::StreamConfig;
    use crate::stream::trigger::N_FEATURES;

    const CORPUS: &[(&str, &str)] = &[
        ("a", "zulu alpha beta omega"),
        ("g", "gamma delta"),
        ("e", "epsilon"),
    ];

    fn index(dir: &std::path::Path) -> Index {
        crate::testing::hash_index(dir, CORPUS)
    }

    #[test]
    fn new_query_when_the_relevant_passage_enters_or_three_of_ten_change() {
        let now: Vec<u32> = (1..=10).collect();
        let rel = |p: u32| p == 99;
        let keep3: Vec<u32> = (1..=7).chain(11..=13).collect();
        let keep2: Vec<u32> = (1..=8).chain(11..=12).collect();
        assert_eq!(label(&now, &keep3, rel), (true, false));
        assert_eq!(label(&now, &keep2, rel), (false, false));
        assert_eq!(label(&now, &now, rel), (false, false));
        let rel5 = |p: u32| p == 5;
        let no5: Vec<u32> = (1..=4).chain(6..=11).collect();
        assert_eq!(
            label(&now, &no5, rel5),
            (true, true),
            "the relevant one entered"
        );
        assert_eq!(
            label(&no5, &now, rel5),
            (false, false),
            "it left: keeping was better"
        );
        assert_eq!(label(&now, &[], rel), (true, false), "nothing before");
    }

    #[test]
    fn prefixes_of_a_hand_made_index_get_the_known_labels() {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path());
        let stream = StreamConfig {
            retriever: Retriever::Dense,
            top_k: 1,
            max_speculative_results: 3,
            min_tokens: 1,
            ..StreamConfig::default()
        };
        let mut lab = Labeller::new(&index, HashEmbedder, stream).unwrap();
        let g = 1; // passage "gamma delta"
        let (rows, entered, embeds) = lab
            .label_question(&["zulu", "gamma", "delta"], &|p| p == g, "epsilon", 3)
            .unwrap();
        let labels: Vec<(bool, bool)> = rows.iter().map(|r| (r.new_query, r.negative)).collect();
        // "zulu" finds the zulu passage (not relevant, one of one changed: NO_QUERY);
        // "zulu gamma" brings the relevant one in (NEW_QUERY); "zulu gamma delta" finds
        // it again (NO_QUERY); against a stale "epsilon" query it is NEW_QUERY.
        assert_eq!(
            labels,
            [(false, false), (true, false), (false, false), (true, true)]
        );
        assert_eq!(entered, 2);
        assert_eq!(embeds.len(), 3);
        // The features saw what the trigger sees: words new since the last query.
        assert_eq!(rows[1].x[0], 2.0, "no query before: both words are new");
        assert_eq!(rows[2].x[0], 1.0, "one word since the NEW_QUERY prefix");
        assert_eq!(rows[3].x[0], 3.0, "nothing in common with the stale query");
        assert_eq!(rows[3].x[1], 1.0, "the stale query's word is dropped");
    }

    #[test]
    fn the_fit_is_deterministic_and_orders_by_the_signal() {
        let rows: Vec<Row> = (0..200)
            .map(|i| {
                let mut x = [0.0; N_FEATURES];
                x[0] = (i % 7) as f32;
                x[2] = (i % 3) as f32; // noise
                Row {
                    x,
                    new_query: i % 7 >= 3 || i % 29 == 0,
                    negative: false,
                }
            })
            .collect();
        let used = [0, 2];
        let a = fit(&rows, &used);
        assert_eq!(a, fit(&rows, &used), "same rows, same weights");
        assert!(a.2[0] > 1.0, "new words push towards NEW_QUERY: {:?}", a.2);
        assert!(
            a.2[1].abs() < a.2[0].abs() / 4.0,
            "noise weighs little: {:?}",
            a.2
        );
    }
}
