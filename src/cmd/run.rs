//! `primd run`: settings → model + index → the daemon.

use std::io::BufRead;
use std::sync::Arc;

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
        retriever: args.retriever,
        ..args.layer1.to_layer1(&args.model)
    };
    let mut cfg = config::load(args.config.as_deref(), flags)?;
    let index = Arc::new(Index::open(&args.index)?);
    if args.verify {
        index.verify()?;
    }
    let retriever = cfg.resolve_retriever(&index)?;
    let embedder = super::embedder_for(&index, &args.model.model, &cfg)?;
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
    log::info!(
        "serving {} passages from {:?}; {retriever} retriever; streaming {}",
        index.len(),
        args.index,
        if cfg.stream.enabled { "on" } else { "off" }
    );
    let dopts = DaemonOptions {
        dialect: Some(args.dialect.0),
        emit_speculative: args.emit_speculative,
        pace: args.pace.unwrap_or(0.0),
    };
    daemon::run(
        &cfg,
        &dopts,
        embedder,
        index,
        input,
        Box::new(std::io::stdout()),
    )?;
    Ok(())
}
