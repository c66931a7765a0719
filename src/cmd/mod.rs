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

use std::path::{Path, PathBuf};

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
/// Where the reader is, if it is to run: `--reader DIR` (which must hold it), else the
/// model directory's `reader/` when `models/fetch` put it there; `None` with
/// `--no-reader` or when it was not fetched (primd then ranks sentences as before it,
/// and says so).
pub fn reader_dir(
    model_dir: &Path,
    args: &primd::flags::ReaderArgs,
) -> anyhow::Result<Option<PathBuf>> {
    use primd::embed::reader::{READER_DIR, READER_MODEL_FILE};
    if args.no_reader {
        log::info!("reader: off (--no-reader)");
        return Ok(None);
    }
    if let Some(dir) = &args.reader {
        if !dir.join(READER_MODEL_FILE).is_file() {
            bail!(
                "--reader {}: no {READER_MODEL_FILE} there (models/fetch puts the reader in models/{READER_DIR}/)",
                dir.display()
            );
        }
        return Ok(Some(dir.clone()));
    }
    let dir = model_dir.join(READER_DIR);
    if dir.join(READER_MODEL_FILE).is_file() {
        Ok(Some(dir))
    } else {
        log::info!(
            "reader: not found in {} (models/fetch fetches it): sentences ranked without it",
            dir.display()
        );
        Ok(None)
    }
}

/// The reader [`reader_dir`] finds, loaded (a file that is there but does not load is an
/// error: a damaged or foreign reader is refused, not silently skipped).
pub fn load_reader(
    model_dir: &Path,
    args: &primd::flags::ReaderArgs,
) -> anyhow::Result<Option<primd::embed::reader::Reader>> {
    let Some(dir) = reader_dir(model_dir, args)? else {
        return Ok(None);
    };
    let reader = primd::embed::reader::Reader::load(&dir)
        .map_err(|e| anyhow::anyhow!("{e} (--no-reader runs without it)"))?;
    log::info!("reader: {} ({} layers)", dir.display(), reader.depth());
    Ok(Some(reader))
}

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
