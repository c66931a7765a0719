//! `primd install-index NEW --to PATH`: publish a new index under a running daemon.
//!
//! Why a command: the daemon memory-maps its index, and the only safe way to replace a
//! mapped file is to write a complete new file beside it and `rename(2)` it over the
//! old name (the contract on `Index::open`); `cp` writes in place. This does it right
//! and checks first what the daemon would check (so a bad file never reaches it): the
//! cheap structure checks, the CRC, and that the model in `--model` made it (and, when
//! there is an index at PATH already, the same model as that one, which the daemon has
//! loaded). Then it fsyncs the file and the directory (a power cut leaves either the old
//! or the new index, never half of one) and sends SIGHUP to the daemon named by `--pid`
//! or `--pid-file` (`primd run --pid-file`); without either it only installs, and
//! a later `kill -HUP` or `systemctl reload primd` swaps it in.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use primd::embed::{model_file, precision_of};
use primd::index::Index;

use crate::cli::InstallIndexArgs;

pub fn run(args: &InstallIndexArgs) -> anyhow::Result<()> {
    let new = Index::open(&args.new).with_context(|| format!("checking {:?}", args.new))?;
    new.verify()?;
    let fp = new.meta().fingerprint;
    let Some(precision) = precision_of(&args.model, &fp) else {
        bail!(
            "{:?} was not built with a model in {:?} (its fingerprint matches neither {} nor {}): \
             the daemon would refuse it",
            args.new,
            args.model,
            model_file(primd::embed::Precision::Int8),
            model_file(primd::embed::Precision::Fp32),
        );
    };
    if let Ok(old) = Index::open(&args.to)
        && old.meta().fingerprint != fp
    {
        bail!(
            "{:?} was built with another model than the index at {:?} that the daemon serves \
             (it would refuse it): rebuild it with that model, or restart the daemon on it",
            args.new,
            args.to
        );
    }
    let pid = match (&args.pid, &args.pid_file) {
        (Some(p), _) => Some(*p),
        (None, Some(f)) => Some(read_pid(f)?),
        (None, None) => None,
    };
    install(&args.new, &args.to)?;
    eprintln!(
        "primd install-index: installed {:?} at {:?} ({} passages, {precision} model)",
        args.new,
        args.to,
        new.len()
    );
    if let Some(pid) = pid {
        // SAFETY: kill(2) with integer arguments only.
        if unsafe { libc::kill(pid, libc::SIGHUP) } == -1 {
            let e = std::io::Error::last_os_error();
            bail!("installed, but signalling pid {pid}: {e} (send SIGHUP to the daemon yourself)");
        }
        eprintln!(
            "primd install-index: sent SIGHUP to pid {pid}; it swaps the index in before its next \
             utterance (its log says so, or why not)"
        );
    } else {
        eprintln!(
            "primd install-index: no --pid/--pid-file: send SIGHUP to the daemon (or `systemctl \
             reload primd`) to serve it"
        );
    }
    Ok(())
}

fn read_pid(path: &Path) -> anyhow::Result<i32> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the pid file {path:?}"))?;
    let pid: i32 = text
        .trim()
        .parse()
        .with_context(|| format!("{path:?} does not hold a pid"))?;
    if pid <= 0 {
        bail!("{path:?} holds {pid}, not a process id");
    }
    Ok(pid)
}

/// Copies `new` to a temporary file beside `to`, fsyncs it, renames it over `to`, and
/// fsyncs the directory.
fn install(new: &Path, to: &Path) -> anyhow::Result<()> {
    let dir = match to.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = to
        .file_name()
        .with_context(|| format!("{to:?} names no file"))?;
    let tmp = dir.join(format!(
        ".{}.install-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut src = File::open(new)?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        std::io::copy(&mut src, &mut out)?;
        out.flush()?;
        out.sync_all()?;
        drop(out);
        std::fs::rename(&tmp, to)?;
        File::open(&dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("installing {new:?} at {to:?} (via {tmp:?})"));
    }
    Ok(())
}
