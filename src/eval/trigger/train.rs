//! Training end to end: label the typed questions, fit the model, choose the thresholds
//! by replay, and report; and which retriever a trained trigger suits.

use std::sync::Arc;

use super::fit::fit;
use super::label::Labeller;
use super::replay::{Grid, replay_streams, replay_typed_all};
use super::{
    ClassBalance, FINAL_THRESHOLDS, HIT10_TOLERANCE, MAX_FINALS_EMBEDDED, SEED, THRESHOLDS,
    TrainReport, TypedPoint,
};
use crate::config::RunConfig;
use crate::embed::Embed;
use crate::eval::data::{Qrels, QueryRecord, Relevance, StreamRecord};
use crate::eval::progress::{Progress, run_parallel};
use crate::eval::streams;
use crate::index::Index;
use crate::retriever::Retriever;
use crate::stream::StreamConfig;
use crate::stream::normalize::Normalizer;
use crate::stream::trigger::{
    FEATURES, FIRST_LEXICAL, N_FEATURES, TrainingInfo, Trigger, TriggerModel,
};

/// Labels, fits and calibrates a trigger for `cfg.stream.retriever` on `index` from
/// `queries` (those whose id is in `exclude` are left out).
#[allow(clippy::too_many_arguments)]
pub fn train<E: Embed>(
    index: &Index,
    queries: &[QueryRecord],
    qrels: &Qrels,
    exclude: &[String],
    cfg: &RunConfig,
    workers: usize,
    progress: &Progress,
    command: &str,
    calibration: Option<&[StreamRecord]>,
    make_embedder: impl Fn() -> anyhow::Result<E> + Sync,
) -> anyhow::Result<(TriggerModel, TrainReport)> {
    let started = std::time::Instant::now();
    let relevance = Relevance::new(index)?;
    let retriever = cfg.stream.retriever;
    anyhow::ensure!(
        retriever.uses_dense(),
        "the lexical retriever does no dense work: there is nothing for a trigger to decide"
    );
    // Checked before the long labelling: streams that cannot judge a threshold.
    if let Some(recs) = calibration.filter(|r| !r.is_empty()) {
        anyhow::ensure!(
            !streams::judged(recs, &relevance, qrels).is_empty(),
            "none of the trigger streams has a relevant passage in the index"
        );
    }
    let mut normalizer = Normalizer::new(cfg.fillers.iter().map(String::as_str));
    let mut items: Vec<(Vec<String>, Vec<u32>)> = Vec::new();
    let mut left_out = 0;
    let mut norm = String::new();
    // The trigger streams' questions choose the thresholds: not trained on either.
    let calibrating = |id: &String| calibration.unwrap_or_default().iter().any(|s| &s.id == id);
    for q in queries {
        if exclude.contains(&q.id) || calibrating(&q.id) {
            left_out += 1;
            continue;
        }
        let rel = relevance.relevant(qrels, &q.id);
        normalizer.normalize_into(&q.text, &mut norm);
        if rel.is_empty() || norm.is_empty() {
            continue;
        }
        items.push((norm.split(' ').map(str::to_string).collect(), rel));
    }
    anyhow::ensure!(
        !items.is_empty(),
        "no typed question with a relevant passage to train on"
    );
    // Negative samples: a seeded choice of another question and of the prefix.
    let mut rng = crate::testing::Rng::new(SEED);
    let n = items.len();
    let negs: Vec<(usize, usize)> = (0..n)
        .map(|i| {
            let mut j = rng.index(n);
            if j == i {
                j = (j + 1) % n;
            }
            let len = items[i].0.len();
            let min = cfg.stream.min_tokens.max(1);
            let at = if len >= min {
                min + rng.index(len - min + 1)
            } else {
                0
            };
            (j, at)
        })
        .collect();
    let work: Vec<usize> = (0..n).collect();
    let is_rel = |rel: &[u32], p: u32| rel.binary_search(&relevance.doc(p)).is_ok();
    let labelled = run_parallel(
        "labelling typed prefixes",
        &work,
        workers,
        progress,
        || Labeller::new(index, make_embedder()?, cfg.stream.clone()),
        |lab, _, &i| {
            let (words, rel) = &items[i];
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let (j, at) = negs[i];
            let neg = if n > 1 {
                items[j].0.join(" ")
            } else {
                String::new()
            };
            Ok(lab.label_question(&words, &|p| is_rel(rel, p), &neg, at)?)
        },
    )?;
    let mut rows = Vec::new();
    let mut entered = 0;
    let mut caches = Vec::with_capacity(n);
    for (r, e, c) in labelled {
        rows.extend(r);
        entered += e;
        caches.push(c);
    }
    let labels = ClassBalance::of(&rows, entered);
    let lexical_on = retriever.uses_lexical() && index.lexical().is_some();
    let used: Vec<usize> = (0..N_FEATURES)
        .filter(|&s| lexical_on || (s < FIRST_LEXICAL))
        .collect();
    let (mean, scale, weights, bias) = fit(&rows, &used);
    let names: Vec<&str> = used.iter().map(|&s| FEATURES[s]).collect();
    let info = TrainingInfo {
        questions: n,
        rows: labels.rows,
        new_query: labels.new_query,
        no_query: labels.no_query,
        negative_samples: labels.negative_samples,
        retriever: retriever.to_string(),
        index: index
            .path()
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        passages: index.len(),
        command: command.to_string(),
    };
    let analyzer = lexical_on
        .then(|| index.lexical().map(|l| l.spec().id()))
        .flatten();
    let model = TriggerModel::new(
        &names,
        &mean,
        &scale,
        &weights,
        bias,
        (0.5, 0.5),
        &index.meta().fingerprint,
        analyzer,
        info,
    )
    .map_err(anyhow::Error::msg)?;

    // The threshold: replay the typed questions with each policy.
    let mut policies: Vec<StreamConfig> = Vec::new();
    let mut fixed = cfg.stream.clone();
    fixed.enabled = true;
    fixed.trigger = Trigger::Fixed;
    policies.push(fixed);
    let pairs: Vec<(f32, f32)> = THRESHOLDS
        .iter()
        .flat_map(|&t| FINAL_THRESHOLDS.iter().map(move |&f| (t, f)))
        .collect();
    for &t in &pairs {
        let mut s = cfg.stream.clone();
        s.enabled = true;
        s.trigger = Trigger::Learned(Arc::new(model.with_thresholds(t)));
        policies.push(s);
    }
    let grid = Grid {
        cfg,
        policies: &policies,
        pairs: &pairs,
        workers,
        progress,
    };
    let (typed, streamed, typed_questions, bound) = match calibration.filter(|r| !r.is_empty()) {
        Some(recs) => {
            let points = replay_streams(index, &grid, &relevance, qrels, recs, &make_embedder)?;
            // No more finals embedded after end of speech than the fixed rule: the
            // same share of finals waits for an embed, so the latency percentiles are
            // the fixed rule's.
            let bound = points[0].final_embedded;
            (Vec::new(), points, 0, bound)
        }
        None => {
            let sim_work: Vec<usize> = (0..n).step_by(2).collect();
            let points = replay_typed_all(
                index,
                &grid,
                &items,
                caches,
                &sim_work,
                &is_rel,
                &make_embedder,
            )?;
            (points, Vec::new(), sim_work.len(), MAX_FINALS_EMBEDDED)
        }
    };
    let points = if streamed.is_empty() {
        &typed
    } else {
        &streamed
    };
    let base = points[0].clone();
    let fast = |p: &&TypedPoint| p.final_embedded <= bound;
    let met = points[1..]
        .iter()
        .filter(fast)
        .filter(|p| p.hit10 >= base.hit10 - HIT10_TOLERANCE)
        .min_by(|a, b| a.cost().total_cmp(&b.cost()));
    let fallback = || {
        points[1..].iter().filter(fast).max_by(|a, b| {
            a.hit10
                .total_cmp(&b.hit10)
                .then(b.cost().total_cmp(&a.cost()))
        })
    };
    let conditions_met = met.is_some();
    let chosen = met
        .or_else(fallback)
        .and_then(|p| p.threshold)
        .unwrap_or((THRESHOLDS[0], FINAL_THRESHOLDS[0]));
    let model = model.with_thresholds(chosen);
    let agree = rows
        .iter()
        .filter(|r| model.new_query(&r.x) == r.new_query)
        .count();
    let report = TrainReport {
        questions: n,
        left_out_stream_questions: left_out,
        labels,
        train_accuracy: agree as f64 / rows.len().max(1) as f64,
        features: names.iter().map(|s| s.to_string()).collect(),
        weights,
        typed,
        typed_questions,
        streams: streamed,
        threshold: chosen,
        conditions_met,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((model, report))
}

/// The retriever a learned trigger can run with on this index (for the comparison).
pub fn suits(model: &TriggerModel, retriever: Retriever) -> bool {
    retriever.uses_dense() && (!model.uses_lexical() || retriever.uses_lexical())
}
