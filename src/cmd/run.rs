//! `primd run`: settings → model + index → the daemon; its end → the exit status.

use std::io::BufRead;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use primd::config::{self, Layer1};
use primd::daemon::{self, DaemonOptions};
use primd::index::Index;
use primd::input::{SerialReader, SerialSpec};

use crate::cli::RunArgs;

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let flags = Layer1 {
        enabled: args.no_streaming.then_some(false),
        endpoint_ms: args.endpoint_ms,
        retriever: args.retriever.clone(),
        ..args.layer1.to_layer1()
    };
    let mut cfg = config::load(args.config.as_deref(), flags)?;
    let index = Arc::new(Index::open(&args.index)?);
    if args.verify {
        index.verify()?;
    }
    let retriever = cfg.resolve_retriever(&index)?;
    let embedder = super::embedder_for(&index, &args.model, cfg.precision, cfg.embedder_threads)?;
    let input: Box<dyn BufRead + Send> = if args.input == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else if args.input.starts_with("serial:") {
        let spec: SerialSpec = args.input.parse().map_err(anyhow::Error::msg)?;
        Box::new(std::io::BufReader::new(SerialReader::new(spec)))
    } else {
        let file = std::fs::File::open(&args.input)
            .with_context(|| format!("opening input {:?}", args.input))?;
        Box::new(std::io::BufReader::new(file))
    };
    // Results go straight to file descriptor 1, one write(2) per line: no buffering of
    // std's stdout and no lock held across a blocked write.
    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stdout")?;
    log::info!(
        "serving {} passages from {:?}; {retriever} retriever; streaming {}",
        index.len(),
        args.index,
        if cfg.stream.enabled { "on" } else { "off" }
    );
    let dopts = DaemonOptions {
        dialect: Some(args.dialect),
        emit_speculative: args.emit_speculative,
        pace: args.pace.unwrap_or(0.0),
        stop_grace: Duration::from_millis(args.stop_grace_ms),
    };
    // From here SIGINT/SIGTERM no longer kill the process: the daemon handles them.
    let signals = daemon::signals()?;
    let stats = daemon::run(
        &cfg,
        &dopts,
        embedder,
        index,
        input,
        Box::new(std::fs::File::from(stdout)),
        signals,
    )?;
    if let Some(sig) = stats.forced {
        // A second signal: now, whatever the other threads are doing.
        std::process::exit(128 + sig);
    }
    if stats.timed_out {
        anyhow::bail!(
            "stopped with the output blocked: {} results not written",
            stats.unwritten
        );
    }
    Ok(())
}
