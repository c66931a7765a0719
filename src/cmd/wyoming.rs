//! `primd run --wyoming`: the flags → a running Wyoming listener (`primd::wyoming`) on
//! the daemon's hub, and a printer that puts the Wyoming sessions' results on stdout
//! next to the STT pipe's.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};

use primd::hub::{Hub, Inbox, STT_SESSION};
use primd::index::Index;
use primd::index::live::LiveIndex;
use primd::wyoming::{self, HubBackend, Options};

use crate::cli::RunArgs;

/// Starts the listener when `--wyoming` is given; returns the hub's inbox, which the
/// daemon must then serve (`daemon::run_hub`).
pub fn start(
    args: &RunArgs,
    index: &Index,
    retriever: &str,
    live: &Arc<LiveIndex>,
    stdout: &SharedOut,
) -> anyhow::Result<Option<Inbox>> {
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
    let inbox = Inbox::new(live.clone());
    print_results(&inbox.hub(), args.emit_speculative, stdout.clone())?;
    wyoming::start(opts, Arc::new(HubBackend(inbox.hub())))?;
    Ok(Some(inbox))
}

/// Writes the results of every session but the pipe's (which the daemon writes) to
/// stdout, from a hub client of its own: a stdout nobody reads makes the hub drop this
/// client (logged), never wait for it.
fn print_results(hub: &Hub, speculative: bool, mut out: SharedOut) -> anyhow::Result<()> {
    let mut client = hub.connect("stdout")?;
    client.subscribe("*", speculative)?;
    std::thread::Builder::new()
        .name("primd-wyoming-stdout".into())
        .spawn(move || {
            let mut buf = Vec::with_capacity(64 * 1024);
            for d in client.results() {
                if d.session == STT_SESSION {
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
