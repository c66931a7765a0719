//! One function per `primd` command. Each takes its parsed arguments and returns a
//! `Result`; `main` does the printing of errors.

mod bench;
mod embed;
mod eval;
mod install_index;
mod packaged;
mod run;
mod search;
mod wyoming;

use std::path::Path;

use anyhow::bail;
use primd::config::RunConfig;
use primd::embed::{Embed, Embedder, EmbedderOptions, Precision, model_file, precision_of};
use primd::index::Index;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Embed(args) => embed::run(&args),
        Command::Search(args) => search::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::InstallIndex(args) => install_index::run(&args),
        Command::Bench(args) => bench::run(&args),
    }
}

/// True when `e` (or a cause) is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Loads the embedder that made `index`. With no precision asked for, it is the one whose
/// model file in `dir` matches the index's fingerprint, so an index built with `--fp32`
/// needs no flag (the default, int8, when none matches: the fingerprint check then says
/// what is wrong). A precision asked for that contradicts the index is refused by name.
pub fn embedder_for(index: &Index, dir: &Path, cfg: &RunConfig) -> anyhow::Result<Embedder> {
    let (asked, threads) = (cfg.precision, cfg.embedder_threads);
    let made_by = precision_of(dir, &index.meta().fingerprint);
    let precision = match (asked, made_by) {
        (Some(asked), Some(made_by)) if asked != made_by => bail!(
            "index {} was built with the {made_by} model ({}), not {asked} ({}): drop --{asked} \
             (or the precision setting), or rebuild the index with --{asked}",
            index.path().display(),
            model_file(made_by),
            model_file(asked),
        ),
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => Precision::default(),
    };
    log::info!(
        "{precision} model {:?} for index {:?}{}",
        dir.join(model_file(precision)),
        index.path(),
        if asked.is_none() && made_by.is_some() {
            " (the precision the index was built with)"
        } else {
            ""
        }
    );
    log::info!("kernels: {}", primd::bench::kernel_report());
    let embedder = Embedder::load(dir, &EmbedderOptions { precision, threads })?;
    index.check_fingerprint(&embedder.fingerprint())?;
    Ok(embedder)
}
