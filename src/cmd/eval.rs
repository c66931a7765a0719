//! `primd eval`: settings → model + index + evaluation data → replays → report.

use std::io::Write;

use anyhow::Context;

use primd::config;
use primd::eval::{self, EvalOptions, data, report};
use primd::index::Index;
use primd::retriever::Retriever;

use crate::cli::EvalArgs;

pub fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let flags = args.layer1.to_layer1(&args.model);
    let mut cfg = config::load(args.config.as_deref(), flags)?;
    // The evaluation compares streaming with the baseline itself.
    cfg.stream.enabled = true;
    let index = Index::open(&args.index)?;
    let mut retrievers = Vec::new();
    for &r in args.retriever.iter().flatten() {
        let r = Retriever::resolve(Some(r), &index)?;
        if !retrievers.contains(&r) {
            retrievers.push(r);
        }
    }
    cfg.resolve_retriever(&index)?;
    cfg.load_trigger(&index)?;
    if retrievers.is_empty() {
        retrievers.push(cfg.stream.retriever);
    }
    if let Some(path) = &args.conversations {
        return conversations(args, &cfg, &index, retrievers[0], path);
    }
    let queries_path = args
        .queries
        .as_deref()
        .context("--queries FILE is required")?;
    let mut queries = data::load_queries(queries_path)?;
    let qrels = data::load_qrels(&args.qrels)?;
    let mut streams = args
        .streams
        .as_deref()
        .map(data::load_streams)
        .transpose()?;
    if let Some(n) = args.limit {
        queries.truncate(n);
        if let Some(s) = streams.as_mut() {
            s.truncate(n);
        }
    }
    let embedder = super::embedder_for(&index, &args.model.model, &cfg)?;
    let mut learned = cfg.stream.trigger.model().cloned().map(std::sync::Arc::new);
    let mut training = None;
    if let Some(out) = &args.train_trigger {
        // The questions the streams speak are evaluation data: never trained on.
        let exclude: Vec<String> = streams.iter().flatten().map(|s| s.id.clone()).collect();
        let calibration = args
            .trigger_streams
            .as_deref()
            .map(data::load_streams)
            .transpose()?;
        let source = std::sync::Mutex::new(embedder.fork()?);
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let (model, report) = eval::trigger::train(
            &index,
            &queries,
            &qrels,
            &exclude,
            &cfg,
            args.workers as usize,
            &eval::progress::Progress::new(!args.quiet),
            &command,
            calibration.as_deref(),
            || {
                let e = source
                    .lock()
                    .map_err(|_| anyhow::anyhow!("embedder lock poisoned"))?;
                Ok(e.fork()?)
            },
        )?;
        model
            .save(out)
            .with_context(|| format!("writing the trigger model {}", out.display()))?;
        if !args.quiet {
            eprintln!(
                "trigger model written to {} (thresholds {:.2} / {:.2}, {} rows, {:.1}% NEW_QUERY)",
                out.display(),
                report.threshold.0,
                report.threshold.1,
                report.labels.rows,
                report.labels.new_query_share * 100.0
            );
        }
        learned = Some(std::sync::Arc::new(model));
        training = Some(report);
    }
    let eval_opts = EvalOptions {
        learned_trigger: learned,
        workers: args.workers as usize,
        sweep: args.sweep,
        progress: !args.quiet,
        retrievers,
        answers: args
            .answers
            .as_deref()
            .map(eval::context::Answers::load)
            .transpose()?
            .map(std::sync::Arc::new),
        reader: match args.answers {
            Some(_) => super::reader_dir(&args.model.model, &args.reader)?.map(|dir| {
                eval::context::ReaderEval {
                    dir,
                    settings: primd::context::ReadSettings::default(),
                    sweep: args.reader_sweep,
                }
            }),
            None => None,
        },
        // The stream replays run as the daemon does: with the reader when it is there.
        stream_reader: match &streams {
            Some(_) => {
                super::reader_dir(&args.model.model, &args.reader)?.map(|dir| (dir, cfg.reader))
            }
            None => None,
        },
    };
    // Each worker forks its own embedder; the model is loaded once (an `Embedder` is
    // `Send` but not `Sync`, hence the lock, taken once per worker).
    let precision = embedder.precision();
    let source = std::sync::Mutex::new(embedder);
    let mut run = eval::evaluate(
        &index,
        &queries,
        &qrels,
        streams.as_deref(),
        &cfg,
        &eval_opts,
        || {
            let e = source
                .lock()
                .map_err(|_| anyhow::anyhow!("embedder lock poisoned"))?;
            Ok(e.fork()?)
        },
    )?;
    run.report.model = Some(precision.to_string());
    run.report.trigger_training = training;
    if let Some(dir) = &args.out {
        report::write_dir(&run, dir)?;
    }
    let summary = report::summary_text(&run.report);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut stdout, &run.report)?;
        writeln!(stdout)?;
        if !args.quiet {
            eprint!("{summary}");
        }
    } else {
        stdout.write_all(summary.as_bytes())?;
    }
    if let Some(dir) = &args.out
        && !args.quiet
    {
        eprintln!("report written to {}", dir.join("report.md").display());
    }
    stdout.flush()?;
    Ok(())
}

/// `--conversations`: each turn with and without the conversation's context.
fn conversations(
    args: &EvalArgs,
    cfg: &config::RunConfig,
    index: &Index,
    retriever: Retriever,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    use primd::eval::conversations as conv;
    let mut conversation = args.conversation.apply(cfg.conversation)?;
    conversation.low_evidence_threshold = cfg.stream.low_evidence_threshold;
    let mut turns = conv::load(path)?;
    // The turns as the daemon and `primd search` read them.
    let mut normalizer =
        primd::stream::normalize::Normalizer::new(cfg.fillers.iter().map(String::as_str));
    normalizer.set_rules(index.word_rules());
    let mut norm = String::new();
    for (t, _) in &mut turns {
        normalizer.normalize_into(&t.text, &mut norm);
        t.text.clone_from(&norm);
    }
    if let Some(n) = args.limit {
        turns.truncate(n);
    }
    let qrels = data::load_qrels(&args.qrels)?;
    let mut embedder = super::embedder_for(index, &args.model.model, cfg)?;
    let params = primd::retriever::SearchParams {
        retriever,
        k: cfg.stream.top_k,
        candidates: cfg.stream.full_search_candidates,
        lexical_candidates: cfg.stream.lexical_candidates,
        fusion: cfg.stream.fusion,
    };
    // As the daemon runs: with the reader when it is there (`--no-reader`: without).
    let mut reading = super::load_reader(&args.model.model, &args.reader)?.map(|r| conv::Reading {
        builder: primd::context::ContextBuilder::with_reader(r, cfg.reader),
        budget: cfg.stream.context_tokens,
    });
    let rows = conv::evaluate(
        index,
        &mut embedder,
        &params,
        &conversation,
        &turns,
        &qrels,
        reading.as_mut(),
    )?;
    if args.json {
        println!("{}", serde_json::to_string(&rows)?);
    } else {
        print!("{}", conv::table(&rows));
    }
    Ok(())
}
