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
//!
//! On a packaged install `--to`, `--model` and `--pid-file` have defaults
//! ([`super::packaged`]); run as root, the installed file gets its directory's owner (the
//! daemon's read lease needs the index owned by its user). `--check` checks only: the
//! package's postinst runs it on the live index before restarting a running daemon.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use primd::embed::{model_file, precision_of};
use primd::index::Index;

use super::packaged;
use crate::cli::InstallIndexArgs;

pub fn run(args: &InstallIndexArgs) -> anyhow::Result<()> {
    let targets = packaged::targets(
        args.to.as_deref(),
        args.model.as_deref(),
        args.pid.is_some(),
        args.pid_file.as_deref(),
        args.check,
        Path::new(packaged::CONFIG).exists(),
        Path::exists,
    )?;
    let model = &targets.model;
    let new = Index::open(&args.new).with_context(|| format!("checking {:?}", args.new))?;
    new.verify()?;
    let fp = new.meta().fingerprint;
    let Some(precision) = precision_of(model, &fp) else {
        bail!(
            "{:?} was not built with a model in {:?} (its fingerprint matches neither {} nor {}): \
             the daemon would refuse it",
            args.new,
            model,
            model_file(primd::embed::Precision::Int8),
            model_file(primd::embed::Precision::Fp32),
        );
    };
    if let Some(to) = &targets.to
        && let Ok(old) = Index::open(to)
        && old.meta().fingerprint != fp
    {
        bail!(
            "{:?} was built with another model than the index at {:?} that the daemon serves \
             (it would refuse it): rebuild it with that model, or restart the daemon on it",
            args.new,
            to
        );
    }
    let Some(to) = targets.to.as_deref().filter(|_| !args.check) else {
        eprintln!(
            "primd install-index: {:?} is a good index ({} passages, {precision} model)",
            args.new,
            new.len()
        );
        return Ok(());
    };
    let pid = match (&args.pid, &targets.pid_file) {
        (Some(p), _) => Some(*p),
        (None, Some(f)) => Some(read_pid(f)?),
        (None, None) => None,
    };
    install(&args.new, to, copy_all)?;
    eprintln!(
        "primd install-index: installed {:?} at {:?} ({} passages, {precision} model)",
        args.new,
        to,
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
    } else if targets.packaged {
        eprintln!(
            "primd install-index: primd is not running (no {}): `systemctl start primd` serves it",
            packaged::PID_FILE
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

/// The copy step of [`install`]; a parameter so that tests can make it fail like a full
/// disk does (part written, then `ENOSPC`).
type CopyStep = fn(&mut File, &mut File) -> std::io::Result<u64>;

fn copy_all(src: &mut File, out: &mut File) -> std::io::Result<u64> {
    std::io::copy(src, out)
}

/// Copies `new` to a temporary file beside `to`, fsyncs it, renames it over `to`, and
/// fsyncs the directory. On any error (a full disk) the temporary file is removed and
/// `to` is untouched. Run as root, the file gets the directory's owner and group first.
fn install(new: &Path, to: &Path, copy: CopyStep) -> anyhow::Result<()> {
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
        copy(&mut src, &mut out)?;
        out.flush()?;
        if let Err(e) = give_to_dir_owner(&out, &dir) {
            eprintln!("primd install-index: warning: keeping the file's owner ({e})");
        }
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

/// As root, hands `file` to the owner of `dir` (on a packaged install, user primd owns
/// /var/lib/primd): the daemon's read lease needs its index owned by its own user.
fn give_to_dir_owner(file: &File, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, fchown};
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let d = std::fs::metadata(dir)?;
    fchown(file, Some(d.uid()), Some(d.gid()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes half of the source, then fails as a full disk does.
    fn disk_full(src: &mut File, out: &mut File) -> std::io::Result<u64> {
        use std::io::Read;
        let mut buf = Vec::new();
        src.read_to_end(&mut buf)?;
        out.write_all(&buf[..buf.len() / 2])?;
        Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
    }

    /// A directory with a new "index" (4096 bytes of 7) and a live one.
    fn new_and_live() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (new, live) = (dir.path().join("new.idx"), dir.path().join("corpus.idx"));
        std::fs::write(&new, vec![7u8; 4096]).unwrap();
        std::fs::write(&live, b"the old index").unwrap();
        (dir, new, live)
    }

    #[test]
    fn a_full_disk_leaves_the_old_index_and_no_temporary_file() {
        let (dir, new, live) = new_and_live();
        let e = install(&new, &live, disk_full).unwrap_err();
        assert!(
            format!("{e:#}").contains("No space left on device"),
            "{e:#}"
        );
        assert_eq!(std::fs::read(&live).unwrap(), b"the old index");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["corpus.idx", "new.idx"]);
    }

    #[test]
    fn install_replaces_the_live_file_whole() {
        let (dir, new, live) = new_and_live();
        install(&new, &live, copy_all).unwrap();
        assert_eq!(std::fs::read(&live).unwrap(), vec![7u8; 4096]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
