//! `primd eval`: settings → model + index + evaluation data → replays → report.

use std::io::Write;

use primd::config::{self, Layer1};
use primd::embed::{Embed, Embedder, EmbedderOptions};
use primd::eval::{self, EvalOptions, data, report};
use primd::index::Index;

use crate::cli::EvalArgs;

pub fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let flags = Layer1 {
        enabled: None,
        trigger_interval: args.trigger_interval,
        similarity_threshold: args.similarity_threshold,
        max_speculative_results: args.max_speculative_results,
        embedder_threads: args.embedder_threads,
        min_tokens: args.min_tokens,
        reflector_threshold: args.reflector_threshold,
        full_search_candidates: args.full_search_candidates,
        top_k: args.top_k,
        idle_embed: args.no_idle_embed.then_some(false),
        endpoint_ms: None,
        fillers: args.fillers.clone(),
        precision: if args.int8 {
            Some("int8".into())
        } else if args.fp32 {
            Some("fp32".into())
        } else {
            None
        },
    };
    let mut cfg = config::load(args.config.as_deref(), flags)?;
    // The evaluation compares streaming with the baseline itself.
    cfg.stream.enabled = true;
    let index = Index::open(&args.index)?;
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
    let opts = EmbedderOptions {
        precision: cfg.precision,
        threads: cfg.embedder_threads,
    };
    let embedder = Embedder::load(&args.model, &opts)?;
    index.check_fingerprint(&embedder.fingerprint())?;
    let eval_opts = EvalOptions {
        workers: args.workers as usize,
        sweep: args.sweep,
        progress: !args.quiet,
    };
    // Each worker forks its own embedder; the model is loaded once (an `Embedder` is
    // `Send` but not `Sync`, hence the lock, taken once per worker).
    let source = std::sync::Mutex::new(embedder);
    let run = eval::evaluate(
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
