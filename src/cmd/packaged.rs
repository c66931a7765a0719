//! Where the Debian package puts things (docs/deploy.md), and `install-index`'s defaults
//! on such an install.
//!
//! Why here: `primd install-index NEW` on a board should need no paths, yet the same
//! command from a clone must keep asking for `--to` (guessing a system path there would
//! write where the user did not mean). The packaged config file is the sign: when it
//! exists and `--to` is not given, the packaged live index, model and pid file are used.
//! These paths are the ones in `deploy/primd.service` and `[package.metadata.deb]`.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// The package's conffile; its presence means "a packaged install".
pub const CONFIG: &str = "/etc/primd/primd.toml";
/// The live index the packaged unit serves (`--index`).
pub const INDEX: &str = "/var/lib/primd/corpus.idx";
/// The model package's directory (`--model`).
pub const MODEL: &str = "/usr/share/primd/minilm";
/// The packaged unit's `--pid-file` (exists only while the daemon runs).
pub const PID_FILE: &str = "/run/primd/primd.pid";
/// `--model`'s default outside a packaged install.
const CLONE_MODEL: &str = "models";

/// `install-index`'s paths after defaults.
#[derive(Debug, PartialEq)]
pub struct Targets {
    pub to: Option<PathBuf>,
    pub model: PathBuf,
    pub pid_file: Option<PathBuf>,
    /// The defaults of a packaged install were used.
    pub packaged: bool,
}

/// Fills in what the user left out. `packaged`: the packaged config exists;
/// `exists`: whether a path exists (the pid file is only a default while the daemon runs).
/// Explicit flags always win; without `--to` outside a packaged install, an error says
/// what to pass (`--check` needs no `--to`).
pub fn targets(
    to: Option<&Path>,
    model: Option<&Path>,
    pid_given: bool,
    pid_file: Option<&Path>,
    check: bool,
    packaged: bool,
    exists: impl Fn(&Path) -> bool,
) -> anyhow::Result<Targets> {
    let use_packaged = to.is_none() && packaged;
    if to.is_none() && !packaged && !check {
        bail!(
            "--to PATH is required (the index the daemon serves, its --index); only a packaged \
             install ({CONFIG} exists) has a default, {INDEX}"
        );
    }
    let to = to
        .map(Path::to_path_buf)
        .or_else(|| use_packaged.then(|| PathBuf::from(INDEX)));
    let default_model = if use_packaged { MODEL } else { CLONE_MODEL };
    let model = model.map_or_else(|| PathBuf::from(default_model), Path::to_path_buf);
    let pid_file = match pid_file {
        Some(f) => Some(f.to_path_buf()),
        None if use_packaged && !pid_given && !check && exists(Path::new(PID_FILE)) => {
            Some(PathBuf::from(PID_FILE))
        }
        None => None,
    };
    Ok(Targets {
        to,
        model,
        pid_file,
        packaged: use_packaged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &Path) -> bool {
        false
    }

    fn always(_: &Path) -> bool {
        true
    }

    #[test]
    fn explicit_flags_are_kept_even_on_a_packaged_install() {
        let t = targets(
            Some(Path::new("/opt/primd/index/corpus.idx")),
            Some(Path::new("/opt/primd/models")),
            false,
            Some(Path::new("/tmp/p.pid")),
            false,
            true,
            always,
        )
        .unwrap();
        assert_eq!(
            t.to.as_deref(),
            Some(Path::new("/opt/primd/index/corpus.idx"))
        );
        assert_eq!(t.model, Path::new("/opt/primd/models"));
        assert_eq!(t.pid_file.as_deref(), Some(Path::new("/tmp/p.pid")));
        assert!(!t.packaged);
        // --to alone on a packaged install: the clone's model default, no pid file.
        let t = targets(
            Some(Path::new("x.idx")),
            None,
            false,
            None,
            false,
            true,
            always,
        )
        .unwrap();
        assert_eq!(t.model, Path::new("models"));
        assert_eq!(t.pid_file, None);
    }

    #[test]
    fn without_to_a_packaged_install_uses_its_paths() {
        let t = targets(None, None, false, None, false, true, always).unwrap();
        assert_eq!(t.to.as_deref(), Some(Path::new(INDEX)));
        assert_eq!(t.model, Path::new(MODEL));
        assert_eq!(t.pid_file.as_deref(), Some(Path::new(PID_FILE)));
        assert!(t.packaged);
        // Daemon not running (no pid file): install only.
        let t = targets(None, None, false, None, false, true, never).unwrap();
        assert_eq!(t.pid_file, None);
        // --pid wins over the default pid file.
        let t = targets(None, None, true, None, false, true, always).unwrap();
        assert_eq!(t.pid_file, None);
    }

    #[test]
    fn without_to_outside_a_packaged_install_is_an_error_naming_the_flag() {
        let e = targets(None, None, false, None, false, false, always).unwrap_err();
        assert!(e.to_string().contains("--to PATH is required"), "{e}");
        // --check needs no --to.
        let t = targets(None, None, false, None, true, false, always).unwrap();
        assert_eq!(t.to, None);
        assert_eq!(t.model, Path::new("models"));
    }
}
