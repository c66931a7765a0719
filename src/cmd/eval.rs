//! `primd eval`: settings → model + index + evaluation data → replays → report.

use std::io::Write;

use primd::config;
use primd::eval::{self, EvalOptions, data, report};
use primd::hybrid::Retriever;
use primd::index::Index;

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
    if retrievers.is_empty() {
        retrievers.push(cfg.stream.retriever);
    }
    let mut queries = data::load_queries(&args.queries)?;
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
    let eval_opts = EvalOptions {
        workers: args.workers as usize,
        sweep: args.sweep,
        progress: !args.quiet,
        retrievers,
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
