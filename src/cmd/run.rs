//! `primd run`: settings → model + index → the daemon; its end → the exit status.

use std::io::{BufRead, IsTerminal};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use primd::config::{self, Layer1};
use primd::daemon::{self, DaemonOptions};
use primd::embed::model_file;
use primd::hub::Inbox;
use primd::hub::listen;
use primd::index::Load;
use primd::index::live::{LiveIndex, Serve, Signals};
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
    cfg.conversation = args.conversation.apply(cfg.conversation)?;
    if args.input == "none" && args.listen.is_empty() && args.wyoming.wyoming.is_none() {
        anyhow::bail!(
            "--input none needs --listen or --wyoming (nothing else would feed the daemon)"
        );
    }
    // Bound first, before the model loads: an address in use (or not allowed) fails the
    // start at once; clients that connect meanwhile wait in the listen backlog.
    let listeners = args
        .listen
        .iter()
        .map(|a| listen::bind(a, args.allow_remote))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let wyoming = super::wyoming::bind(args)?;
    // Before the index is opened: SIGIO (a lease break) and SIGHUP would kill us.
    let signals = Signals::register().context("installing SIGHUP/SIGIO handlers")?;
    let serve = Serve {
        load: Load {
            in_ram: args.index_in_ram,
            populate: true,
        },
        lease: true,
    };
    let live = Arc::new(LiveIndex::open(&args.index, serve)?);
    let index = live.current();
    if args.verify {
        index.verify()?;
    }
    let retriever = cfg.resolve_retriever(&index)?;
    cfg.load_trigger(&index)?;
    let embedder = super::embedder_for(&index, &args.model.model, &cfg)?;
    let reader = super::load_reader(&args.model.model, &args.reader)?;
    let reader_note = match &reader {
        Some(r) => format!("reader {:?}", r.dir()),
        None => "no reader".to_string(),
    };
    if retriever.uses_lexical() {
        live.require_lexical(retriever.as_str());
    }
    signals.spawn(live.clone())?;
    let serving = !args.listen.is_empty() || args.wyoming.wyoming.is_some();
    let input: Option<Box<dyn BufRead + Send>> = if args.input == "none" {
        None
    } else if args.input == "-" && serving && std::io::stdin().is_terminal() {
        // A daemon serving sockets, started from a shell: reading the terminal would
        // take the shell's input (and stop the job when it runs in the background).
        primd::announce!(
            "stdin is a terminal: not reading it (serving the socket/Wyoming sessions only; \
             pipe a recognizer in, or pass --input FILE, to feed the session \"stt\")"
        );
        None
    } else if args.input == "-" {
        Some(Box::new(std::io::BufReader::new(std::io::stdin())))
    } else if args.input.starts_with("serial:") {
        let spec: SerialSpec = args.input.parse().map_err(anyhow::Error::msg)?;
        Some(Box::new(std::io::BufReader::new(SerialReader::new(spec))))
    } else {
        let file = std::fs::File::open(&args.input)
            .with_context(|| format!("opening input {:?}", args.input))?;
        Some(Box::new(std::io::BufReader::new(file)))
    };
    // Results go straight to file descriptor 1, one write(2) per line: no buffering of
    // std's stdout and no lock held across a blocked write.
    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stdout")?;
    let stdout = super::wyoming::SharedOut::new(std::fs::File::from(stdout));
    // The hub serves the socket API's and the Wyoming connections' sessions.
    let inbox = (!listeners.is_empty() || wyoming.is_some()).then(|| Inbox::new(live.clone()));
    if let (Some(w), Some(inbox)) = (wyoming, &inbox) {
        super::wyoming::start(w, args, &index, retriever.as_str(), &inbox.hub(), &stdout)?;
    }
    // Said once everything is up, after the listeners' lines.
    let ready = format!(
        "ready: {} passages from {:?}; {} model {:?}; {reader_note}; {retriever} retriever; streaming {}{}",
        index.len(),
        args.index,
        embedder.precision(),
        args.model.model.join(model_file(embedder.precision())),
        if cfg.stream.enabled { "on" } else { "off" },
        decoded_note(index.decoded_bytes())
    );
    let dopts = DaemonOptions {
        dialect: Some(args.dialect.0),
        emit_speculative: args.emit_speculative,
        pace: args.pace.unwrap_or(0.0),
        stop_grace: Duration::from_millis(args.stop_grace_ms),
        swap_wait: daemon::SWAP_WAIT,
        reader: daemon::ReaderHandoff::new(reader),
    };
    drop(index);
    // From here SIGINT/SIGTERM no longer kill the process: the daemon handles them.
    let signals = daemon::signals()?;
    let pid_file = args.pid_file.as_deref().map(PidFile::write).transpose()?;
    let stats = match inbox {
        None => {
            let input = input.expect("an input without --listen or --wyoming");
            primd::announce!("{ready}");
            daemon::run(
                &cfg,
                &dopts,
                embedder,
                live,
                input,
                Box::new(stdout),
                signals,
            )?
        }
        Some(inbox) => {
            let _serving = listen::serve_all(listeners, &inbox.hub())?;
            primd::announce!("{ready}");
            daemon::run_hub(
                &cfg,
                &dopts,
                embedder,
                live,
                input,
                Box::new(stdout),
                signals,
                inbox,
            )?
        }
    };
    if let Some(sig) = stats.forced {
        // A second signal: now, whatever the other threads are doing.
        drop(pid_file);
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

/// `--pid-file`: written (by rename, so a reader never sees half a number) once the
/// signal handlers are in place, removed when the daemon returns.
struct PidFile(std::path::PathBuf);

impl PidFile {
    fn write(path: &std::path::Path) -> anyhow::Result<PidFile> {
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, format!("{}\n", std::process::id()))
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing the pid file {path:?}"))?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The log's mention of lexical postings decoded into RAM at open (empty when none).
fn decoded_note(bytes: usize) -> String {
    if bytes == 0 {
        String::new()
    } else {
        format!(
            "; lexical postings decoded in RAM ({:.1} MiB)",
            bytes as f64 / (1 << 20) as f64
        )
    }
}
