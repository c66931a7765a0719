//! `primd run --wyoming`: the flags → a running Wyoming listener (`primd::wyoming`), and
//! the daemon input it feeds.

use std::io::BufRead;
use std::sync::Arc;

use primd::index::Index;
use primd::input::DialectKind;
use primd::wyoming::{self, Backend, Options, PipeBackend};

use crate::cli::RunArgs;

/// Starts the listener when `--wyoming` is given. The Wyoming sessions feed the
/// daemon's one transcript stream (a pipe read as `jsonl`, in place of `--input`):
/// returns that input and its dialect.
pub fn start(
    args: &RunArgs,
    index: &Index,
    retriever: &str,
) -> anyhow::Result<Option<(Box<dyn BufRead + Send>, DialectKind)>> {
    let w = &args.wyoming;
    let Some(spec) = &w.wyoming else {
        return Ok(None);
    };
    let listen = wyoming::listen_addr(spec, w.allow_remote)?;
    let upstream = w
        .wyoming_proxy
        .as_deref()
        .map(wyoming::parse_tcp)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let opts = Options {
        listen,
        upstream,
        index_name: args
            .index
            .file_name()
            .map_or_else(|| "index".into(), |n| n.to_string_lossy().into_owned()),
        passages: index.len(),
        retriever: retriever.to_string(),
    };
    let (reader, writer) = std::io::pipe()?;
    let backend: &'static PipeBackend = Box::leak(Box::new(PipeBackend::new(Box::new(writer))));
    let backend: Arc<dyn Backend> = Arc::new(backend);
    wyoming::start(opts, backend)?;
    Ok(Some((
        Box::new(std::io::BufReader::new(reader)),
        DialectKind::Jsonl,
    )))
}
