//! `primd run --wyoming`: the flags → a running Wyoming listener (`primd::wyoming`) on
//! the daemon's hub, and a printer that puts the Wyoming sessions' results on stdout
//! next to the STT pipe's.

use std::fs::File;
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use primd::hub::Hub;
use primd::index::Index;
use primd::wyoming::{self, HubBackend, Options};

use crate::cli::RunArgs;

/// `--wyoming`, bound (before the model loads), and `--wyoming-proxy`, checked.
pub struct Bound {
    listener: TcpListener,
    upstream: Option<String>,
}

pub fn bind(args: &RunArgs) -> anyhow::Result<Option<Bound>> {
    let w = &args.wyoming;
    let Some(spec) = &w.wyoming else {
        return Ok(None);
    };
    let upstream = w
        .wyoming_proxy
        .as_deref()
        .map(wyoming::parse_tcp)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let listener = wyoming::bind(spec, args.allow_remote)?;
    Ok(Some(Bound { listener, upstream }))
}

/// Serves the bound listener on `hub` (which the daemon must then serve:
/// `daemon::run_hub`), and prints the Wyoming sessions' results on stdout.
pub fn start(
    bound: Bound,
    args: &RunArgs,
    index: &Index,
    retriever: &str,
    hub: &Hub,
    stdout: &SharedOut,
) -> anyhow::Result<()> {
    let opts = Options {
        upstream: bound.upstream,
        index_name: args
            .index
            .file_name()
            .map_or_else(|| "index".into(), |n| n.to_string_lossy().into_owned()),
        passages: index.len(),
        retriever: retriever.to_string(),
    };
    print_results(hub, args.emit_speculative, stdout.clone())?;
    wyoming::start(bound.listener, opts, Arc::new(HubBackend(hub.clone())))?;
    Ok(())
}

/// Writes the results of the Wyoming sessions to stdout (the daemon writes the pipe's;
/// the socket API's go to their clients), from a hub client of its own: a stdout nobody
/// reads makes the hub drop this client (logged), never wait for it.
fn print_results(hub: &Hub, speculative: bool, mut out: SharedOut) -> anyhow::Result<()> {
    let mut client = hub.connect_internal("stdout (wyoming)")?;
    client.subscribe("*", speculative)?;
    std::thread::Builder::new()
        .name("primd-wyoming-stdout".into())
        .spawn(move || {
            let mut buf = Vec::with_capacity(64 * 1024);
            for d in client.results() {
                if !d.session.starts_with("wyoming-") {
                    continue;
                }
                buf.clear();
                if let Err(e) = d.encode(&mut buf) {
                    log::error!("result not written: {e:#}");
                    continue;
                }
                if out.write_all(&buf).is_err() {
                    return; // stdout closed: the other outputs go on
                }
            }
        })?;
    Ok(())
}

/// Standard output shared by the daemon's writer and the Wyoming printer: each
/// `write_all` (one result line) is written whole under the lock, so lines from the
/// two never interleave.
#[derive(Clone)]
pub struct SharedOut(Arc<Mutex<File>>);

impl SharedOut {
    pub fn new(f: File) -> Self {
        SharedOut(Arc::new(Mutex::new(f)))
    }

    fn file(&self) -> std::sync::MutexGuard<'_, File> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file().write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}
